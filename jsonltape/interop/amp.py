"""Amp threads (``~/.local/share/amp/threads/T-<id>.json``, or what ``amp threads export``
prints) to jsonltape.

Amp is closed source and publishes no format: this follows what independent readers of its
thread files agree on (see the spec, Appendix B). A thread is one JSON document, rewritten
whole on every change: ``{v, id, created, title?, messages, env?, meta?, usageLedger?, ...}``;
``messages`` ``[{role, messageId?, content, state?, usage?, meta?}]`` hold Anthropic Messages
content blocks, and a tool's result as Amp's own ``{type: "tool_result", toolUseID, run:
{status, result?, error?}}`` or as Anthropic's ``{tool_use_id, content}``.

A thread is read as records (:func:`thread_unit`; spec Appendix B.1): ``{"type": "thread",
id, created, env}`` (what never changes; ``v``, ``meta`` and the title change with every
save, and the title is the session's, :attr:`Unit.title`), then each message as stored, each
followed by the ``usageLedger`` events (older threads) that end at it, as ``{"type":
"ledger", "event": ...}``. Until the thread is settled, the records from its last message on
(and from an assistant message whose ``state.type`` is not ``complete``, or a tool result
still running) are held back: Amp may still rewrite them.

Mapping (each record is kept verbatim on the event it produced, else as ``import/raw``):

* the thread record: the header (``created``; cwd from the first ``env.initial.trees``
  ``uri``; ``meta.import.session`` = the thread id; the client's version as the agent);
* a user message: ``tool_result`` blocks → ``tool/result`` (Amp's ``run.result``, else
  ``run.error.message``; ``run.status`` other than ``done`` → ``is_error``; Anthropic's
  ``content`` text joined), other blocks → a ``user/message``; a message with no result is a
  prompt starting a turn; its time is ``meta.sentAt``;
* an assistant message: one ``assistant/message`` (``text``; ``thinking`` → reasoning,
  unsigned: which provider answered is not known; ``tool_use`` → tool_call), ``model`` and
  ``usage`` from its ``usage`` (``inputTokens``, ``outputTokens``, ``cacheCreationInputTokens``,
  ``cacheReadInputTokens`` → Anthropic's names, ``credits`` kept), its time
  ``usage.timestamp``; ``state.stopReason`` in ``import.stop_reason``. A message without usage
  takes a ledger event's ``tokens`` (``input``, ``output``) when one ends at it.
* Amp does not mark a turn's end: the next prompt (or a settled thread) ends it. Message ids
  are ``<thread id>:<messageId>`` (the message's index when it has none): Amp records no
  response id.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import msgspec

from ..errors import FormatError
from ._agent import Agent, Home
from ._base import Group, Mapper, Out
from ._parts import (
    anthropic_assistant_parts,
    anthropic_result,
    anthropic_split,
    renamed_usage,
)
from ._source import Unit, parse_time, too_deep

__all__ = ["AGENTS", "AmpMapper", "is_thread", "thread_unit"]

_encode = msgspec.json.Encoder().encode
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_TOKENS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheCreationInputTokens", "cache_creation_input_tokens"),
    ("cacheReadInputTokens", "cache_read_input_tokens"),
)
_LEDGER_TOKENS = (("input", "input_tokens"), ("output", "output_tokens"))
#: The states of a tool run after which Amp writes nothing more into it.
_FINISHED = frozenset({"done", "error", "cancelled", "rejected", "rejected-by-user"})


def is_thread(path: Path) -> bool:
    """A thread file: ``T-*.json``, or any ``*.json`` directly in a ``threads`` folder
    (Amp lists every one there), never Amp's ``*.json.amptmp`` leftovers."""
    name = path.name
    if not name.endswith(".json"):
        return False
    return name.startswith("T-") or path.parent.name.startswith("threads")


# -- the thread as records ---------------------------------------------------------------


def _settled_message(m: Any) -> bool:
    """Whether Amp is done writing the message: an assistant message whose ``state`` says
    it is complete (or has none), a user message whose tool runs all finished."""
    if not isinstance(m, dict):
        return True
    state = m.get("state")
    if m.get("role") == "assistant" and isinstance(state, dict):
        return state.get("type") in (None, "complete")
    content = m.get("content")
    for b in content if isinstance(content, list) else ():
        run = b.get("run") if isinstance(b, dict) else None
        status = run.get("status") if isinstance(run, dict) else None
        if isinstance(status, str) and status not in _FINISHED:
            return False
    return True


def render_thread(doc: dict[str, Any], settled: bool) -> tuple[bytes, int]:
    """A thread document as JSONL records and how many trailing bytes are held back."""
    head: dict[str, Any] = {"type": "thread"}
    for key in ("id", "created"):
        if key in doc:
            head[key] = doc[key]
    env = doc.get("env")
    if isinstance(env, dict) and "initial" in env:
        head["env"] = {"initial": env["initial"]}
    messages = doc["messages"]
    ledger = doc.get("usageLedger")
    events = ledger.get("events") if isinstance(ledger, dict) else None
    events = [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []
    lines = [_encode(head)]
    held_from: int | None = None
    placed: set[int] = set()
    for i, m in enumerate(messages):
        if held_from is None and (i == len(messages) - 1 or not _settled_message(m)):
            held_from = len(lines)
        lines.append(_encode(m))
        mid = m.get("messageId") if isinstance(m, dict) else None
        for k, e in enumerate(events):
            if k not in placed and mid is not None and e.get("toMessageId") == mid:
                placed.add(k)
                lines.append(_encode({"type": "ledger", "event": e}))
    rest = [e for k, e in enumerate(events) if k not in placed]
    if rest and held_from is None:
        held_from = len(lines)
    lines.extend(_encode({"type": "ledger", "event": e}) for e in rest)
    data = b"".join(line + b"\n" for line in lines)
    if settled or held_from is None:
        return data, 0
    return data, sum(len(line) + 1 for line in lines[held_from:])


def _read(path: Path) -> dict[str, Any]:
    """The thread document (one verdict for a file that is not one: a torn save included)."""
    try:
        fd = os.open(path, _NOFOLLOW)
        with open(fd, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise FormatError(f"cannot read the thread: {exc.strerror or exc}", path=path) from None
    deep = too_deep(data)
    if deep is not None:
        raise FormatError(f"{deep}; nothing of this thread is imported", path=path)
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise FormatError(
            f"not an Amp thread: malformed JSON ({exc}); a save still being written is "
            "imported once it is whole",
            path=path,
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise FormatError("not an Amp thread: not an object with a messages list", path=path)
    return doc


def thread_unit(path: Path) -> Unit:
    """A thread file as a :class:`Unit` of records, titled by the thread's ``title`` (read
    only when the thread is imported: an unchanged one is decided from its ``stat``)."""
    st = os.stat(path, follow_symlinks=False)
    read: list[dict[str, Any]] = []  # the document, read once for the title and the records

    def doc() -> dict[str, Any]:
        if not read:
            read.append(_read(path))
        return read[0]

    def render(settled: bool) -> tuple[bytes, int]:
        return render_thread(doc(), settled)

    def title() -> str | None:
        try:
            value = doc().get("title")
        except FormatError:
            return None  # the render gives the verdict
        return value if isinstance(value, str) else None

    return Unit(str(path), path.name, st.st_size, st.st_mtime_ns, render, title)


# -- the mapping ----------------------------------------------------------------------------


def _cwd(env: Any) -> str | None:
    initial = env.get("initial") if isinstance(env, dict) else None
    trees = initial.get("trees") if isinstance(initial, dict) else None
    first = trees[0] if isinstance(trees, list) and trees else None
    uri = first.get("uri") if isinstance(first, dict) else None
    if not isinstance(uri, str):
        return None
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" and parsed.path else None


def _run_result(run: Any) -> tuple[Any, bool, str | None]:
    """An Amp tool run: what it answered, whether that is an error, its status."""
    run = run if isinstance(run, dict) else {}
    status = run.get("status") if isinstance(run.get("status"), str) else None
    error = run.get("error")
    if "result" in run and run["result"] is not None:
        response = run["result"]
    elif isinstance(error, dict) and isinstance(error.get("message"), str):
        response = error["message"]
    else:
        response = f"(the tool run ended: {status or 'no status'})"
    return response, status not in (None, "done"), status


class AmpMapper(Mapper):
    source = "amp"
    known_raw = frozenset({"thread", "ledger"})
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "amp"
        self.thread = name.removesuffix(".json")
        self.index = 0  # the position of the next message in the thread
        #: messageId -> the message's group (a ledger event gives it its usage)
        self.groups: dict[Any, Group] = {}

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "thread":
            return None
        return "not an Amp thread rendering: its first record is not the thread's"

    def handle(self, v: dict[str, Any]) -> None:
        t = v.get("type")
        out = self.main
        if t == "thread":
            self._thread(out, v)
            self.raw_line("thread", known=True)
        elif t == "ledger":
            self._usage_event(out, v.get("event"))
        elif v.get("role") in ("user", "assistant"):
            k, self.index = self.index, self.index + 1
            mid = v.get("messageId")
            msg_id = f"{self.thread}:{mid if isinstance(mid, (int, str)) else k}"
            if v["role"] == "user":
                meta = v.get("meta")
                sent = meta.get("sentAt") if isinstance(meta, dict) else None
                self.time = parse_time(sent) or self.time
                self._user(out, v.get("content"), msg_id)
            else:
                usage = v.get("usage")
                at = usage.get("timestamp") if isinstance(usage, dict) else None
                self.time = parse_time(at) or self.time
                self._assistant(out, v, msg_id)
        else:
            self.index += 1 if "role" in v else 0
            self.raw_line(f"message/{v.get('role')}" if "role" in v else str(t), known=False)

    def _thread(self, out: Out, v: dict[str, Any]) -> None:
        target = out.target
        if target.meta.get("import"):
            return
        info: dict[str, Any] = {}
        if isinstance(v.get("id"), str):
            info["session"] = v["id"]
            self.thread = v["id"]
        target.meta["import"] = info
        target.created = parse_time(v.get("created")) or None
        self.time = target.created or self.time
        target.cwd = _cwd(v.get("env"))
        env = v.get("env")
        initial = env.get("initial") if isinstance(env, dict) else None
        platform = initial.get("platform") if isinstance(initial, dict) else None
        version = platform.get("clientVersion") if isinstance(platform, dict) else None
        if isinstance(version, str) and version:
            target.agent = f"amp/{version}"

    def _user(self, out: Out, content: Any, msg_id: str) -> None:
        results, parts = anthropic_split(content)
        for k, b in enumerate(results):
            call = b.get("toolUseID", b.get("tool_use_id"))
            if not isinstance(call, str) or not call:
                raise ValueError("a tool_result without a toolUseID or tool_use_id")
            if "run" in b:
                response, is_error, status = _run_result(b["run"])
            else:
                response, is_error = anthropic_result(b.get("content")), b.get("is_error") is True
                status = None
            self.tool_result(
                out, call, response, is_error=is_error,
                msg_id=msg_id if k == 0 else f"{msg_id}#{k}", tag=f"result:{k}" if k else None,
                extra={"status": status} if status else None,
            )  # fmt: skip
        if parts:
            tag = "user" if results else None
            self.user_message(out, parts, msg_id, prompt=not results, tag=tag)
        elif not results:
            self.raw_line("message/user", known=True)  # nothing Amp sends

    def _assistant(self, out: Out, v: dict[str, Any], msg_id: str) -> None:
        parts = anthropic_assistant_parts(v.get("content"), signed_by=None)
        usage = v.get("usage")
        renamed: dict[str, Any] = {}
        if isinstance(usage, dict):
            renamed = renamed_usage(usage, _TOKENS, ints_only=True) or {}
            credits = usage.get("credits")
            if isinstance(credits, (int, float)) and not isinstance(credits, bool):
                renamed["credits"] = credits
        if not parts and not renamed:
            self.raw_line("message/assistant", known=True)  # nothing said, nothing it cost
            return
        if out.turn is None:
            self.start_turn(out)
        g = self.group_for(out, msg_id)
        self.add_line(g)
        g.parts.extend(parts)
        if isinstance(usage, dict) and isinstance(usage.get("model"), str) and usage["model"]:
            g.model = usage["model"]
        g.usage = renamed or None
        state = v.get("state")
        if isinstance(state, dict) and isinstance(state.get("stopReason"), str):
            g.extra["stop_reason"] = state["stopReason"]
        if isinstance(v.get("messageId"), (int, str)):
            self.groups[v["messageId"]] = g
        self.flush_group(out)

    def _usage_event(self, out: Out, event: Any) -> None:
        """An older thread's usage ledger event: the usage of the message it ends at, when
        that message has none of its own."""
        if not isinstance(event, dict):
            return
        self.time = parse_time(event.get("timestamp")) or self.time
        g = self.groups.get(event.get("toMessageId"))
        usage = renamed_usage(event.get("tokens"), _LEDGER_TOKENS, ints_only=True)
        if g is None or not usage:
            return
        if isinstance(event.get("model"), str) and event["model"] and g.model is None:
            g.model = event["model"]
        self.late_usage(out, g, usage)


def _thread(path: Path) -> list[Unit] | None:
    return [thread_unit(path)] if path.is_file() else None


#: The readers of Amp's threads all use the XDG layout, on macOS too; Windows is unknown.
AGENTS = (
    Agent(
        "amp",
        "Amp",
        AmpMapper,
        (Home(("linux", "darwin"), "${XDG_DATA_HOME:-~/.local/share}/amp/threads"),),
        "T-*.json, threads/*.json",
        is_thread,
        units=_thread,
    ),
)
