"""Kimi CLI sessions (``~/.kimi/sessions/<md5 of the work dir>/<session>/wire.jsonl``) to
jsonltape.

The wire file is the session's append-only event log, written by Kimi CLI's wire recorder
(MoonshotAI/kimi-cli src/kimi_cli/wire/file.py, ``WireFile``; the types in wire/types.py): a
first line ``{"type": "metadata", "protocol_version": "1.10"}`` (absent before protocol 1.2),
then one ``{"timestamp": <unix seconds>, "message": {"type": <class name>, "payload": {...}}}``
per message the agent's loop sent (``KimiSoul``, soul/kimisoul.py), merged as the recorder
merges them (adjacent text fragments in one ``ContentPart``, a call's argument fragments into its
``ToolCall``). A session's sub-agents have wire files of their own
(``<session>/subagents/<agent id>/wire.jsonl``), imported as sessions of their own whose
``meta.import.sidechain_of`` is the session; their events nested in the parent's wire
(``SubagentEvent``) stay raw there, so nothing is counted twice.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* ``TurnBegin`` ``{user_input}``: a prompt (``user/message``, text and ``image_url`` parts)
  starting a turn, once the turn's first ``StepBegin`` shows it reached the model; a turn
  with no step (a slash command Kimi CLI ran itself, a prompt a hook blocked) keeps it raw.
  ``SteerInput``: a ``user/message`` of the running turn. ``TurnEnd``: ``turn/end``,
  ``completed``, or ``error`` after a ``StepInterrupted``.
* The ``ContentPart`` s (``think`` → reasoning, never signed: the wire does not say which
  provider answered; ``text``; ``image_url``/``audio_url``/``video_url`` → blob or uri) and
  ``ToolCall`` s (with their ``ToolCallPart`` fragments) of one step (``StepBegin`` to the next
  step, ``StepInterrupted`` or ``TurnEnd``): one ``assistant/message``, a ``tool/call`` per
  call. The step's ``StatusUpdate`` gives its ``usage`` (``token_usage``: ``input_other`` →
  ``input_tokens``, ``output`` → ``output_tokens``, ``input_cache_read`` →
  ``cache_read_input_tokens``, ``input_cache_creation`` → ``cache_creation_input_tokens``) and
  ``message_id`` (the provider's response id: the message's id, and ``import.ids``); when a
  tool result came first, the message is revised in place to carry them. ``StepRetry``: the
  fragments of the failed attempt are dropped (kept raw).
* ``ToolResult`` ``{tool_call_id, return_value}``: a ``tool/result`` holding what Kimi CLI
  sends the model (``tool_result_to_message``: ``<system>ERROR: message</system>`` or
  ``<system>message</system>`` before the output), ``is_error`` as given.
* ``CompactionBegin`` / ``CompactionEnd``: ``compaction/start`` and a ``compaction/end`` with
  error ``SUMMARY_MISSING``: the summary Kimi CLI continues from is written to its
  ``context.jsonl`` (rewritten and rotated on every compaction), not to the wire; the surface
  keeps the messages.
* The title is the one Kimi CLI shows: ``custom_title`` of the session's ``state.json`` (set
  from the first prompt after the first turn, or by a rename), read beside the wire; else the
  first prompt. The model is not recorded anywhere in the session.
* Everything else (``StatusUpdate`` without usage, approvals, hooks, notifications,
  ``SubagentEvent``, plan and MCP events) stays raw.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ._agent import Agent, Home
from ._base import Group, Mapper, Out
from ._inputs import FileInput
from ._parts import (
    data_url,
    json_arguments,
    parts_of,
    reasoning_part,
    renamed_usage,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import SourceLine, parse_time

__all__ = ["AGENTS", "KimiMapper", "wire_input"]

_TOKENS = (
    ("input_other", "input_tokens"),
    ("output", "output_tokens"),
    ("input_cache_read", "cache_read_input_tokens"),
    ("input_cache_creation", "cache_creation_input_tokens"),
)
#: Wire messages that map to nothing on purpose (UI and control events).
_RAW = frozenset(
    {
        "StatusUpdate",
        "StepBegin",
        "SubagentEvent",
        "ApprovalRequest",
        "ApprovalResponse",
        "ApprovalRequestResolved",
        "QuestionRequest",
        "ToolCallRequest",
        "HookRequest",
        "HookTriggered",
        "HookResolved",
        "Notification",
        "PlanDisplay",
        "BtwBegin",
        "BtwEnd",
        "MCPLoadingBegin",
        "MCPLoadingEnd",
        "CompactionBegin",
        "CompactionEnd",
        "StepInterrupted",
        "StepRetry",
        "ContentPart",
        "TurnBegin",
        "TurnEnd",
    }
)
_MODALITY = {"image_url": "image", "audio_url": "audio", "video_url": "video"}
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _media(b: dict[str, Any]) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind == "text" and isinstance(b.get("text"), str):
        return text_part(b["text"])
    media = b.get(kind) if isinstance(kind, str) and kind in _MODALITY else None
    if isinstance(media, dict) and isinstance(media.get("url"), str):
        return data_url(media["url"], _MODALITY[str(kind)])
    return None


def input_parts(value: Any) -> list[dict[str, Any]]:
    """A user input (``str | list[ContentPart]``) as parts."""
    return parts_of(value, _media)


def result_response(value: Any) -> tuple[Any, bool]:
    """What Kimi CLI sends the model for a tool's ``return_value``
    (soul/message.py ``tool_result_to_message``), and whether it is an error: the text parts
    joined by newlines, or the part list when it holds media."""
    rv = value if isinstance(value, dict) else {}
    is_error = rv.get("is_error") is True
    message = rv.get("message") if isinstance(rv.get("message"), str) else ""
    output = rv.get("output")
    items = [output] if isinstance(output, dict) else output
    parts = [
        p
        for p in parts_of(items, _media, empty_text=False)
        if p.get("type") != "text" or p["content"]
    ]
    head: list[dict[str, Any]] = []
    if is_error:
        head = [text_part(f"<system>ERROR: {message}</system>")]
    elif message:
        head = [text_part(f"<system>{message}</system>")]
    content = head + parts
    if not content:
        content = [text_part("<system>Tool output is empty.</system>")]
    elif not any(p["type"] == "text" for p in content):
        content.insert(0, text_part("<system>Tool returned non-text content.</system>"))
    if all(p["type"] == "text" for p in content):
        return text_of(content), is_error
    return content, is_error


class KimiMapper(Mapper):
    source = "kimi-cli"
    known_raw = _RAW | {"metadata"}

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        target = self.main.target
        target.agent = "kimi-cli"
        session, _, agent = name.removesuffix(".jsonl").partition(".subagent-")
        info: dict[str, Any] = {}
        if agent:
            info = {"sidechain_of": session, "agent_id": agent}
        elif session:
            info = {"session": session}
        target.meta["import"] = info
        #: the TurnBegin line waiting for its turn's first step (with its time)
        self._prompt: tuple[SourceLine, int] | None = None
        self._step: int | None = None  # the line of the running step's StepBegin
        self._step_group: Group | None = None  # the running step's message
        self._failed = False  # the turn's step was interrupted
        self._args: dict[str, str] = {}  # call id -> its argument text so far

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "metadata" and "protocol_version" in value:
            return None
        message = value.get("message")
        if isinstance(message, dict) and "payload" in message and "timestamp" in value:
            return None
        if "role" in value:
            return "this looks like a Kimi CLI context.jsonl: import the session's wire.jsonl"
        return "not a Kimi CLI wire record (no metadata line, no timestamp and message)"

    def handle(self, v: dict[str, Any]) -> None:
        if v.get("type") == "metadata":
            if isinstance(v.get("protocol_version"), str):
                self.main.target.meta["import"].setdefault("protocol", v["protocol_version"])
            self.raw_line("metadata", known=True)
            return
        self.time = parse_time(v.get("timestamp")) or self.time
        if self.main.target.created is None and self.time:
            self.main.target.created = self.time
        message = v.get("message")
        t = message.get("type") if isinstance(message, dict) else None
        p = message.get("payload") if isinstance(message, dict) else None
        if not isinstance(t, str) or not isinstance(p, dict):
            self.raw_line("(no type)", known=False)
            return
        if not self._wire(self.main, t, p) and not self._claimed:
            self.raw_line(t, known=t in _RAW)

    def _wire(self, out: Out, t: str, p: dict[str, Any]) -> bool:
        """Map one wire message; False when it maps to nothing (the line is kept raw)."""
        if t == "TurnBegin":
            if out.turn is not None:  # the previous turn never ended: it was cut off
                self.close_interrupted(out, "cut")
            self._hold_prompt()
            self._failed = False
            return True
        if t == "StepBegin":
            self._end_step(out)
            self._release_prompt(out)
            if out.turn is None:
                self.start_turn(out)
            self._step, self._step_group = self.n, None
            return False
        if t == "TurnEnd":
            self._end_step(out)
            if self._prompt is not None:
                self._drop_prompt()  # the turn never reached the model
            if out.turn is not None:
                error = {"code": "STEP_INTERRUPTED", "message": "a step failed"}
                if self._failed:
                    self.end_turn(out, "error", error, raw=True)
                else:
                    self.end_turn(out, "completed", raw=True)
            return self._claimed
        if t == "SteerInput":
            parts = input_parts(p.get("user_input"))
            if not parts:
                return False
            if out.turn is None:
                self.start_turn(out)
            self.message(out, "user/message", "user", parts, f"kimi-{self.n}")
            return True
        if t == "CompactionBegin":  # in a step (automatic) or a /compact turn
            self.start_compaction(out, "compact", None)
            return False
        if t == "CompactionEnd":
            self.end_compaction(
                out, "SUMMARY_MISSING", "Kimi CLI keeps the summary in context.jsonl, not the wire"
            )
            return False
        if self._step is not None:
            return self._in_step(out, t, p)
        return False

    def _in_step(self, out: Out, t: str, p: dict[str, Any]) -> bool:
        if t == "ContentPart":
            return self._content(out, p)
        if t == "ToolCall":
            call = p.get("id")
            function = p.get("function")
            if not isinstance(call, str) or not call or not isinstance(function, dict):
                raise ValueError("a ToolCall without an id and a function")
            g = self._group(out)
            args = function.get("arguments")
            self._args[call] = args if isinstance(args, str) else ""
            g.parts.append(tool_call_part(call, str(function.get("name")), json_arguments(args)))
            return True
        if t == "ToolCallPart":
            open_ = out.group
            calls = [q for q in open_.parts if q["type"] == "tool_call"] if open_ else []
            fragment = p.get("arguments_part")
            if open_ is None or not calls or not isinstance(fragment, str):
                return False
            self.add_line(open_)
            last = calls[-1]
            self._args[last["id"]] = text = self._args.get(last["id"], "") + fragment
            last["arguments"] = json_arguments(text)
            return True
        if t == "StatusUpdate":
            usage = renamed_usage(p.get("token_usage"), _TOKENS, ints_only=True)
            step = out.group if out.group is not None else self._step_group
            if not usage or step is None:
                return False
            response = p.get("message_id")
            if isinstance(response, str) and response and step.usage is None:
                step.msg_id = response
                step.ids.append(response)
            return self.late_usage(out, step, usage)
        if t == "ToolResult":
            call = p.get("tool_call_id")
            if not isinstance(call, str) or not call:
                raise ValueError("a ToolResult without a tool_call_id")
            response, is_error = result_response(p.get("return_value"))
            self.flush_group(out)
            self.tool_result(out, call, response, is_error=is_error, msg_id=f"{call}-result")
            return True
        if t == "StepInterrupted":
            self._end_step(out)
            self._failed = True
            return False
        if t == "StepRetry":
            self.drop_group(out, "ContentPart")  # the failed attempt's fragments
            return False
        return False

    # -- the step's message -------------------------------------------------------------

    def _group(self, out: Out) -> Group:
        """The running step's message, from the current line."""
        g = out.group
        if g is None:
            g = self._step_group = self.group_for(out, f"kimi-{self._step}")
        self.add_line(g)
        return g

    def _content(self, out: Out, p: dict[str, Any]) -> bool:
        kind = p.get("type")
        if kind == "think" and isinstance(p.get("think"), str):
            g = self._group(out)
            last = g.parts[-1] if g.parts else None
            if last is not None and last["type"] == "reasoning":
                last["content"] += p["think"]  # the recorder merges these; a raw stream may not
            else:
                g.parts.append(reasoning_part(p["think"]))
            return True
        if kind == "text" and isinstance(p.get("text"), str):
            g = self._group(out)
            last = g.parts[-1] if g.parts else None
            if last is not None and last["type"] == "text":
                last["content"] += p["text"]
            else:
                g.parts.append(text_part(p["text"]))
            return True
        part = _media(p)
        if part is None:
            return False
        self._group(out).parts.append(part)
        return True

    def _end_step(self, out: Out) -> None:
        self.flush_group(out)
        self._step = None

    # -- the prompt, held until the model gets it ------------------------------------------

    def _hold_prompt(self) -> None:
        if self.line is not None:
            self._prompt = (self.line, self.time)
            self._claimed = True  # its user/message (or its import/raw) carries the line

    def _release_prompt(self, out: Out) -> None:
        held, self._prompt = self._prompt, None
        if held is None:
            return
        line, time = held
        current = self.line, self.time, self._claimed
        try:
            self.line, self.time, self._claimed = line, time, False
            message = (line.value or {}).get("message") or {}
            parts = input_parts((message.get("payload") or {}).get("user_input"))
            self.start_turn(out)
            if parts:
                self.note_title(out, text_of(parts))
                self.message(out, "user/message", "user", parts, f"kimi-{line.n}")
            else:
                self.raw_line("TurnBegin", known=True)
        finally:
            self.line, self.time, self._claimed = current

    def _drop_prompt(self) -> None:
        held, self._prompt = self._prompt, None
        if held is None:
            return
        current = self.line, self.time, self._claimed
        try:
            self.line, self.time, self._claimed = held[0], held[1], False
            self.raw_line("TurnBegin", known=True)
        finally:
            self.line, self.time, self._claimed = current

    def eof(self, settled: bool) -> None:
        if settled:
            self._drop_prompt()  # the source ends before the turn reached the model
        super().eof(settled)


def _state_title(session: Path) -> str | None:
    """``custom_title`` of a Kimi CLI session's ``state.json`` (rewritten atomically), or None
    when it has none or cannot be read."""
    try:
        fd = os.open(session / "state.json", _NOFOLLOW)
        with open(fd, "rb") as f:
            data = f.read(1 << 20)
        state = msgspec.json.decode(data)
    except (OSError, msgspec.DecodeError, RecursionError):
        return None
    title = state.get("custom_title") if isinstance(state, dict) else None
    return title if isinstance(title, str) and title.strip() else None


def wire_input(path: Path) -> FileInput:
    """A ``wire.jsonl`` as an input: named after its session (``<session>.jsonl``, or
    ``<session>.subagent-<agent>.jsonl`` for a sub-agent's), titled by its ``state.json``."""
    folder = path.parent
    if folder.parent.name == "subagents":
        session = folder.parent.parent.name
        return FileInput(path, f"{session}.subagent-{folder.name}.jsonl")
    return FileInput(path, f"{folder.name}.jsonl", lambda: _state_title(folder))


def _wire(path: Path) -> bool:
    return path.name == "wire.jsonl"


AGENTS = (
    Agent(
        "kimi-cli",
        "Kimi CLI",
        KimiMapper,
        (Home(("linux", "darwin", "win32"), "${KIMI_SHARE_DIR:-~/.kimi}/sessions"),),
        "wire.jsonl",
        _wire,
        reader=wire_input,
    ),
)
