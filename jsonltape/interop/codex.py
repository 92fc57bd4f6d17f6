"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl``) to jsonltape.

Mapping (each source line is kept verbatim on the event it produced, else as ``import/raw``):

* ``session_meta``: header metadata (session id, ``forked_from_id``, cwd, originator, CLI
  version, git) and a ``request/header`` with the provider and the base instructions as the
  system prompt; ``turn_context`` updates the model and reasoning effort in a new one.
* ``response_item`` (what the model saw and said): ``message`` with role user → user
  message, developer/system → a ``user/message`` with role ``system``; the items of one model
  response (``reasoning``, assistant ``message``, ``function_call``, ``custom_tool_call``,
  ``local_shell_call``, ``web_search_call``) are merged into one ``assistant/message``, closed
  closed by the response's usage: its ``token_usage_record`` (0.15x, one per response) or the
  ``token_count`` event after it (``last_token_usage``). Once per response: when the usage
  arrives after the tool output already closed the message, that message is revised in place
  to carry it; repeated token counts (same totals) and records of a response that has its
  usage stay raw. Each call gets a ``tool/call``.
  ``function_call_output`` / ``custom_tool_call_output`` → ``tool/result`` by ``call_id``; an
  output that is a list of content items becomes its text (non-blank text items joined by
  newlines, as Codex shows it) with the list kept as ``data.output``; a non-zero exit code
  (``exec_command_end``, ``metadata.exit_code``, an ``Exit code: N`` / ``Process exited with
  code N`` header line) or ``success: false`` marks it ``is_error``.
* The title is the first user prompt: a user ``message`` item that Codex did not inject
  (AGENTS.md / user instructions, environment context, …), else ``event_msg user_message``.
* ``event_msg``: ``task_started`` / ``task_complete`` / ``turn_aborted`` start and end turns;
  the rest (``user_message``, ``agent_message``, ``agent_reasoning``: copies of response items
  for the UI; exec and patch events; rate limits) stays raw.
* ``compacted``: a compaction of the whole surface. With ``replacement_history`` (the items
  Codex resumes from) those items take the surface's place, each mapped as the response item it
  is; without it the summary is ``message``.
* ``event_msg thread_rolled_back`` ``{num_turns}`` (``/undo``, ``thread/rollback``): Codex drops
  the last ``num_turns`` user turns from the history it resumes (``drop_last_n_user_turns``):
  the messages from the first prompt of those turns on are retracted (``surface/retract``,
  reason ``rollback``).
* ``tool_search_call`` (a client-run search for tools) is a tool call of its response (name
  ``tool_search``, its ``arguments``), ``tool_search_output`` its result (the ``tools`` found);
  ``image_generation_call`` is kept as a part of its own type in the response's message;
  ``ghost_snapshot`` (an undo snapshot the model never sees) stays raw.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ._agent import Agent, Home
from ._base import Group, Mapper, Out
from ._parts import (
    data_url,
    json_arguments,
    parts_of,
    reasoning_part,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import parse_time

__all__ = ["AGENTS", "CodexMapper"]

_KNOWN_RAW = frozenset(
    {
        "session_meta",
        "turn_context",
        "world_state",
        "token_usage_record",
        "inter_agent_communication",
        "inter_agent_communication_metadata",
        "rollout_reference",
        "fork_reference",
        "response_item/ghost_snapshot",
        "event_msg/",
    }
)
_ASSISTANT_ITEMS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "image_generation_call",
        # the encrypted summary the compact endpoint returns (``ResponseItem::Compaction``,
        # alias ``compaction_summary``): a part of its own type
        "compaction",
        "compaction_summary",
    }
)
#: How Codex marks the user-role messages it injects itself (codex-rs/protocol/src/
#: instruction_markers.rs: AGENTS.md and user instructions, environment context, collaboration
#: mode, skills, user shell commands; core's turn-aborted and subagent notices): not prompts.
_INJECTED_PREFIXES = (
    "# AGENTS.md instructions for ",
    "<user_instructions>",
    "<environment_context>",
    "<collaboration_mode>",
    "<skill",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagent_notification>",
)
#: Older Codex put the prompt after this heading (``USER_MESSAGE_BEGIN``, protocol.rs).
_USER_MESSAGE_BEGIN = "## My request for Codex:"
#: The exit code in the header Codex writes before a command's output: ``Exit code: N`` (shell
#: tools) or ``Process exited with code N`` (unified exec), each on a line of its own.
_EXIT_LINE = re.compile(r"^(?:Exit code: |Process exited with code )(-?\d+)\s*$", re.M)


def content_parts(content: Any) -> list[dict[str, Any]]:
    return parts_of(content, _content_block)


def _content_block(b: dict[str, Any]) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(b.get("text"), str):
        return text_part(b["text"])
    if kind == "input_image" and isinstance(b.get("image_url"), str):
        return data_url(b["image_url"], "image")
    return None


def output_text(items: list[Any]) -> str | None:
    """A tool output given as content items, as Codex shows it
    (``function_call_output_content_items_to_text``): its non-blank text items joined by
    newlines; None when it has no text (images only)."""
    texts = [
        i["text"]
        for i in items
        if isinstance(i, dict)
        and i.get("type") in ("input_text", "output_text")
        and isinstance(i.get("text"), str)
        and i["text"].strip()
    ]
    return "\n".join(texts) if texts else None


def exit_code(output: Any) -> int | None:
    """The exit code a tool output reports: ``metadata.exit_code`` of a JSON object text
    (``{"output", "metadata": {"exit_code", "duration_seconds"}}``), else the ``Exit code: N`` /
    ``Process exited with code N`` line of the header before ``Output:`` (only the first line
    when there is no such header, so a command's own output is never read as its status)."""
    if not isinstance(output, str):
        return None
    if output.startswith("{"):
        meta = json_arguments(output)
        meta = meta.get("metadata") if isinstance(meta, dict) else None
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return code if isinstance(code, int) and not isinstance(code, bool) else None
    head, sep, _ = output.partition("\nOutput:")
    found = _EXIT_LINE.search(head if sep else output.partition("\n")[0])
    return int(found.group(1)) if found else None


def prompt_text(parts: list[dict[str, Any]]) -> str | None:
    """The user's prompt in a user message, or None if Codex injected the message."""
    text = text_of(parts).strip()
    if not text or text.startswith(_INJECTED_PREFIXES):
        return None
    _, sep, rest = text.partition(_USER_MESSAGE_BEGIN)
    return rest.strip() if sep else text


def _reasoning_text(p: dict[str, Any]) -> str:
    for field in ("content", "summary"):
        items = p.get(field)
        if isinstance(items, list):
            texts = [
                i["text"] for i in items if isinstance(i, dict) and isinstance(i.get("text"), str)
            ]
            if texts:
                return "\n\n".join(texts)
    return ""


class CodexMapper(Mapper):
    source = "codex"
    known_raw = _KNOWN_RAW

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self._meta_seen = False
        self._last: Group | None = None  # the latest model response's message
        self._last_total: Any = None  # total_token_usage of the latest token_count
        self._exit: dict[str, int] = {}  # call id -> exit code of its exec_command_end
        #: the node of each user prompt (a turn's first message), for ``thread_rolled_back``
        self._prompts: list[int] = []

    def sniff(self, value: dict[str, Any]) -> str | None:
        if "payload" in value and isinstance(value.get("type"), str):
            return None
        if "uuid" in value or "sessionId" in value:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        if value.get("type") == "session":
            return "this looks like a pi session (use --from pi)"
        return "not a Codex rollout line (no type/payload)"

    def handle(self, v: dict[str, Any]) -> None:
        self.time = parse_time(v.get("timestamp")) or self.time
        t = v.get("type")
        p = v.get("payload")
        if not isinstance(p, dict):
            return
        out = self.main
        if t == "session_meta":
            self._session_meta(out, p)
        elif t == "response_item":
            self._item(out, p)
        elif t == "event_msg":
            self._event(out, p)
        elif t == "turn_context":
            effort = p.get("effort")
            model = p.get("model") if isinstance(p.get("model"), str) else None
            effort = effort if isinstance(effort, str) else None
            self.set_request(out, raw=True, model=model, params={"reasoning_effort": effort})
        elif t == "compacted":
            self._compacted(out, p)
        elif t == "token_usage_record":  # Codex 0.15x: one per model response
            usage, rid = p.get("usage"), p.get("response_id")
            if isinstance(usage, dict):
                self._usage(out, usage, rid if isinstance(rid, str) and rid else None)

    def _compacted(self, out: Out, p: dict[str, Any]) -> None:
        """A compaction. With ``replacement_history`` (Codex 0.10x on; remote compaction leaves
        ``message`` empty) Codex resumes from exactly those items (codex-rs
        ``reconstruct_history_from_rollout``: ``history.replace(replacement_history)``): they
        take the surface's place as the messages they are, each mapped as a response item
        (user, developer, assistant messages, images, calls; the encrypted ``compaction`` item
        a part of its own type). Without it, the summary is ``message``."""
        summary = p.get("message")
        history = p.get("replacement_history")
        if not isinstance(history, list):
            if self.start_compaction(out, "compacted", None):
                self.finish_compaction(out, str(summary or ""), f"codex-{self.n}")
            return
        if not isinstance(summary, str) or not summary.strip():
            texts = [
                text_of(content_parts(item.get("content")))
                for item in history
                if isinstance(item, dict)
            ]
            summary = "\n\n".join(t for t in texts if t)
        self._last = None  # the items are no model response: a later usage is not theirs

        def items() -> None:
            for k, item in enumerate(history):
                if isinstance(item, dict):
                    self._item(out, item, f"codex-{self.n}.{k}")

        self.replace_history(out, "compacted", summary, items)
        self._last = None

    def _session_meta(self, out: Out, p: dict[str, Any]) -> None:
        if self._meta_seen:
            return  # the first one is canonical; later copies (resume, fork) stay raw
        self._meta_seen = True
        target = out.target
        info = target.meta.setdefault("import", {})
        for src, dst in (
            ("id", "session"),
            ("forked_from_id", "forked_from"),
            ("originator", "originator"),
            ("source", "client"),
            ("git", "git"),
        ):
            if p.get(src) is not None:
                info[dst] = p[src]
        version = p.get("cli_version")
        if isinstance(version, str):
            info["version"] = version
            target.agent = f"codex/{version}"
        if isinstance(p.get("cwd"), str):
            target.cwd = p["cwd"]
        target.created = parse_time(p.get("timestamp")) or self.time or None
        base = p.get("base_instructions")
        system = base.get("text") if isinstance(base, dict) else base
        provider = p.get("model_provider")
        self.set_request(
            out,
            raw=True,
            provider=provider if isinstance(provider, str) else None,
            system=system if isinstance(system, str) and system else None,
        )

    # -- response items ---------------------------------------------------------------

    def _group(self, out: Out, msg_id: str) -> Group:
        """The open response's message, or a new one with id ``msg_id``."""
        g = out.group
        if g is None:
            g = self.group_for(out, msg_id)
            model = out.request.get("model")
            g.model = model if isinstance(model, str) else None  # the turn_context's model
            self._last = g
        return g

    def _usage(self, out: Out, usage: dict[str, Any], response_id: str | None = None) -> None:
        """The usage of the latest model response, given once (:meth:`late_usage`), with the
        response's own id in ``import.ids`` (usage reports): a response that has its usage
        leaves the line raw."""
        g = out.group if out.group is not None else self._last
        if g is not None:
            self.late_usage(out, g, usage, response_id)

    def _item(self, out: Out, p: dict[str, Any], msg_id: str | None = None) -> None:
        """A response item (``msg_id``: the id of what it maps to, default from its line)."""
        msg_id = msg_id or f"codex-{self.n}"
        kind = p.get("type")
        if kind == "message":
            role = p.get("role")
            parts = content_parts(p.get("content"))
            if role == "assistant":
                g = self._group(out, msg_id)
                self.add_line(g, p.get("id") if isinstance(p.get("id"), str) else None)
                g.parts.extend(parts)
                phase = p.get("phase")
                if isinstance(phase, str):
                    g.extra["phase"] = phase
                return
            msg_role = "user" if role == "user" else "system"
            vid = self.message(out, "user/message", msg_role, parts, msg_id)
            if role == "user":  # 0.154 writes no event_msg user_message: title from here
                prompt = prompt_text(parts)
                self.note_title(out, prompt)
                if prompt is not None:
                    self._prompts.append(vid)
        elif kind in _ASSISTANT_ITEMS:
            g = self._group(out, msg_id)
            self.add_line(g, p.get("id") if isinstance(p.get("id"), str) else None)
            g.parts.append(self._assistant_part(kind, p))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call = p.get("call_id")
            if not isinstance(call, str):
                raise ValueError("a tool output without a call_id")
            output = p.get("output")
            is_error = False
            if isinstance(output, dict) and "content" in output:
                is_error = output.get("success") is False
                output = output["content"]
            extra: dict[str, Any] | None = None
            if isinstance(output, list):  # content items: the text, the items kept beside it
                text = output_text(output)
                if text is not None:
                    extra = {"output": output}
                    output = text
            code = self._exit.pop(call, None)
            code = exit_code(output) if code is None else code
            is_error = is_error or (code is not None and code != 0)
            self.tool_result(out, call, output, is_error=is_error, msg_id=msg_id, extra=extra)
        elif kind == "tool_search_output":
            call = p.get("call_id")
            if not isinstance(call, str):
                raise ValueError("a tool_search_output without a call_id")
            extra = {"status": p["status"]} if isinstance(p.get("status"), str) else None
            self.tool_result(
                out, call, p.get("tools"), is_error=p.get("status") == "failed",
                msg_id=msg_id, extra=extra,
            )  # fmt: skip

    @staticmethod
    def _assistant_part(kind: Any, p: dict[str, Any]) -> dict[str, Any]:
        if kind == "reasoning":
            return reasoning_part(_reasoning_text(p))
        call_id = p.get("call_id") if isinstance(p.get("call_id"), str) else p.get("id")
        if not isinstance(call_id, str):
            return dict(p)  # a call without an id: kept as its own part
        if kind == "function_call":
            return tool_call_part(call_id, str(p.get("name")), json_arguments(p.get("arguments")))
        if kind == "custom_tool_call":
            return tool_call_part(call_id, str(p.get("name")), p.get("input"))
        if kind == "local_shell_call":
            return tool_call_part(call_id, "local_shell", p.get("action"))
        if kind == "tool_search_call":
            return tool_call_part(call_id, "tool_search", p.get("arguments"))
        return dict(p)  # web_search_call, image_generation_call: kept as their own part

    # -- events -------------------------------------------------------------------------

    def _event(self, out: Out, p: dict[str, Any]) -> None:
        kind = p.get("type")
        if kind == "task_started":
            if out.turn is not None:  # the previous turn never ended: it was cut off
                self.close_interrupted(out, "cut")
            self.start_turn(out, raw=True)
        elif kind == "task_complete":
            self.end_turn(out, "completed", raw=True)
        elif kind == "turn_aborted":
            self.end_turn(out, "aborted", raw=True)
        elif kind == "token_count":
            info = p.get("info")
            if not isinstance(info, dict):
                return
            total, self._last_total = self._last_total, info.get("total_token_usage")
            usage = info.get("last_token_usage")
            if isinstance(usage, dict) and (total is None or total != self._last_total):
                self._usage(out, usage)  # a repeat (same totals as the last one) stays raw
        elif kind == "exec_command_end":  # stays raw; its exit code marks the result
            call, code = p.get("call_id"), p.get("exit_code")
            if isinstance(call, str) and isinstance(code, int) and not isinstance(code, bool):
                self._exit[call] = code
        elif kind == "user_message":
            self.note_title(out, p.get("message"))
        elif kind == "thread_rolled_back":
            turns = p.get("num_turns")
            if type(turns) is not int or turns < 0:
                raise ValueError(f"thread_rolled_back: num_turns is not a count: {turns!r}")
            self._rollback(out, turns)

    def _rollback(self, out: Out, turns: int) -> None:
        """Retract the last ``turns`` user turns: from the first prompt of those on the surface
        (Codex's ``drop_last_n_user_turns``; all of them when there are fewer)."""
        if out.turn is not None:
            self.close_interrupted(out, "rollback")
        self.flush_group(out)
        prompts = [v for v in self._prompts if out.surface.is_current(v)]
        if turns == 0 or not prompts:
            return
        cut = prompts[max(len(prompts) - turns, 0)]
        nodes = out.surface.nodes
        after = nodes[nodes.index(cut) :]
        refused = self.refusal(out, after)
        if refused is not None:  # kept raw, and said: the surface rules refuse this cut
            self.problems.append((self.n, f"thread_rolled_back: not applied: {refused.message}"))
            return
        self._last = None  # a later usage never revises a rolled-back response
        self.retract(out, after, "rollback", "rollback")


def _rollout(path: Path) -> bool:
    return path.name.startswith("rollout-") and path.name.endswith(".jsonl")


def _compressed(path: Path) -> str | None:
    if path.name.startswith("rollout-") and path.name.endswith(".jsonl.zst"):
        return "compressed rollout (zstd) not supported; decompress it"
    return None


_CODEX_HOME = "${CODEX_HOME:-~/.codex}"
AGENTS = (
    Agent(
        "codex",
        "Codex CLI",
        CodexMapper,
        (
            Home(("linux", "darwin", "win32"), f"{_CODEX_HOME}/sessions"),
            Home(("linux", "darwin", "win32"), f"{_CODEX_HOME}/archived_sessions"),
        ),
        "rollout-*.jsonl",
        _rollout,
        skip=_compressed,
    ),
)
