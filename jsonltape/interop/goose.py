"""Goose sessions (``sessions.db``, and the per-session ``.jsonl`` files Goose wrote before 1.10)
to jsonltape.

:mod:`._goose_store` renders each session of the database as JSONL records; a legacy ``.jsonl``
is read as it is (its first line the session's metadata ``{working_dir, description,
message_count, ...}``, then one ``Message`` a line). The message shape is Goose's
(block/goose ``crates/goose/src/conversation/message.rs`` at commit
05132966065f7dd80b97af7d080a41328d103073): ``{role, created, content, id?, metadata?}``,
``content`` a list of ``MessageContent`` tagged by ``type``.

Mapping (each record or line is kept verbatim on the event it produced, else as ``import/raw``),
as Goose's providers send a conversation: a ``user`` message with text → a prompt starting a
turn (``text`` parts; ``image`` → a blob); its ``toolResponse`` items → a ``tool/result`` each
(the result's text items joined, else its content list; ``isError`` or an error status → an
error result); an ``assistant`` message → an ``assistant/message`` (``thinking`` → reasoning,
unsigned: Goose does not record which provider signed it; ``text``; ``toolRequest`` and
``frontendToolRequest`` → a ``tool_call`` with the call's ``name`` and ``arguments``; a request
Goose could not parse is left out, as Goose's providers leave it out).
``toolConfirmationRequest``, ``actionRequired``, ``systemNotification`` and
``conversationCompacted`` items are shown to the user only (kept raw). A message with
``userVisible: false`` followed by the assistant note Goose adds when it compacts ("The previous
message contains a summary …") is the summary of a compaction of everything before it; Goose's
background summaries of old tool calls stay messages (the calls they stand for stay too). A
``usage`` record (one model call) gives its tokens, cost and model to the call's assistant
message (the turn's latest one without usage, else the next); the summariser's calls
(``is_compaction``) and ``carried_forward`` catch-up rows stay raw. Goose never marks the end
of a turn: the next prompt (or a finished source) ends it. A session is titled as Goose shows
it (its ``name``); a sub-agent's session keeps its ``parent_session_id`` as ``parent``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from ._agent import Agent, Home
from ._base import Group, Mapper, Out, title_of
from ._goose_store import session_ids, units, utc_ms
from ._parts import blob_part, reasoning_part, text_part, tool_call_part
from ._source import parse_time

__all__ = ["AGENTS", "GooseMapper"]

_TOKENS = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_tokens", "cache_read_input_tokens"),
    ("cache_write_tokens", "cache_creation_input_tokens"),
    ("total_tokens", "total_tokens"),
)


def _text(content: list[Any]) -> str:
    return "\n".join(
        c["text"] for c in content
        if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str)
    )  # fmt: skip


def _call(c: dict[str, Any]) -> dict[str, Any] | None:
    call = c.get("toolCall")
    value = (
        call.get("value") if isinstance(call, dict) and call.get("status") == "success" else None
    )
    if not isinstance(value, dict) or not isinstance(c.get("id"), str):
        return None  # an unparsed request: Goose's providers leave it out
    return tool_call_part(c["id"], str(value.get("name")), value.get("arguments"))


def _parts(content: list[Any]) -> list[dict[str, Any]]:
    """The model-visible parts of a message (tool responses apart)."""
    out: list[dict[str, Any]] = []
    for c in content:
        kind = c.get("type") if isinstance(c, dict) else None
        if kind == "text" and isinstance(c.get("text"), str) and c["text"]:
            out.append(text_part(c["text"]))
        elif kind == "image" and isinstance(c.get("data"), str):
            mime = str(c.get("mimeType") or "image/png")
            out.append(blob_part(c["data"], mime, "image"))
        elif kind == "thinking" and isinstance(c.get("thinking"), str) and c["thinking"]:
            out.append(reasoning_part(c["thinking"]))
        elif kind == "redactedThinking":
            out.append(dict(c))  # encrypted: a part of its own type
        elif kind in ("toolRequest", "frontendToolRequest"):
            part = _call(c)
            if part is not None:
                out.append(part)
    return out


def _response(c: dict[str, Any]) -> tuple[Any, bool]:
    """What a tool answered (its text items joined, else its content) and whether it failed."""
    result = c.get("toolResult")
    if not isinstance(result, dict) or result.get("status") != "success":
        error = result.get("error") if isinstance(result, dict) else None
        return (error if isinstance(error, str) else "tool error"), True
    value = result.get("value")
    content = value.get("content") if isinstance(value, dict) else value  # older: Content[]
    failed = isinstance(value, dict) and value.get("isError") is True
    if isinstance(content, list):
        got = [i.get("text") for i in content if isinstance(i, dict)]
        texts = [t for t in got if isinstance(t, str)]
        if len(texts) == len(content):
            return "\n".join(texts), failed
    return content, failed


class GooseMapper(Mapper):
    source = "goose"
    implicit_end = True
    known_raw = frozenset({"session", "usage", "compaction"})

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "goose"
        #: a compaction started: the next message is its summary
        self.compacting = False
        #: the usage of calls whose message has not come yet (oldest first)
        self.usages: list[dict[str, Any]] = []
        #: the turn's latest assistant message, while it may still take a call's usage
        self.last: Group | None = None

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "session" and isinstance(value.get("id"), str):
            return None
        if "working_dir" in value or isinstance(value.get("role"), str):
            return None  # a legacy .jsonl: its metadata line, or a message
        if "payload" in value or "uuid" in value:
            return "this looks like a Codex or Claude Code session, not Goose's"
        return "not a Goose session: its first line is neither metadata nor a message"

    def handle(self, v: dict[str, Any]) -> None:
        kind = v.get("type")
        if kind == "session":
            self._session(v)
        elif kind == "usage":
            self._usage(v)
        elif kind == "compaction":
            self._compaction()
        elif kind == "message" or (kind is None and isinstance(v.get("role"), str)):
            self._record(v)
        elif kind is None and "working_dir" in v:
            self._legacy_meta(v)
        else:
            self.raw_line(str(kind), known=False)

    # -- records --------------------------------------------------------------------------

    def _session(self, v: dict[str, Any]) -> None:
        target = self.main.target
        if target.meta.get("import"):
            return
        self.time = parse_time(v.get("created_at")) or utc_ms(v.get("created_at")) or self.time
        info: dict[str, Any] = {"session": v["id"]}
        for src, dst in (("session_type", "kind"), ("parent_session_id", "parent"),
                         ("schedule_id", "schedule")):  # fmt: skip
            if isinstance(v.get(src), str) and v[src]:
                info[dst] = v[src]
        target.meta["import"] = info
        if isinstance(v.get("working_dir"), str) and v["working_dir"]:
            target.cwd = v["working_dir"]
        target.created = self.time or None

    def _legacy_meta(self, v: dict[str, Any]) -> None:
        target = self.main.target
        if target.meta.get("import"):
            self.raw_line("metadata", known=True)
            return
        target.meta["import"] = {"session": Path(self.name).stem, "legacy": True}
        if isinstance(v.get("working_dir"), str) and v["working_dir"]:
            target.cwd = v["working_dir"]
        if isinstance(v.get("description"), str) and v["description"].strip():
            target.title = title_of(v["description"])
        self.raw_line("metadata", known=True)

    def _record(self, v: dict[str, Any]) -> None:
        content = v.get("content")
        if not isinstance(content, list):
            raise ValueError("a message whose content is not a list")
        self.time = parse_time(v.get("created_timestamp", v.get("created"))) or self.time
        mid = v.get("message_id") or v.get("id")
        mid = mid if isinstance(mid, str) else f"goose-{v.get('id', self.n)}"
        if self.compacting:
            self.compacting = False
            if self.finish_compaction(self.main, _text(content), mid) is not None:
                return
        self._message(v, mid)

    def _message(self, v: dict[str, Any], mid: str) -> None:
        out = self.main
        content: list[Any] = v["content"]
        if v.get("role") == "assistant":
            self._assistant(out, v, mid)
            return
        if v.get("role") != "user":
            self.raw_line(f"message/{v.get('role')}", known=False)
            return
        responses = [c for c in content if isinstance(c, dict) and c.get("type") == "toolResponse"
                     and isinstance(c.get("id"), str)]  # fmt: skip
        for i, c in enumerate(responses):
            response, failed = _response(c)
            self.tool_result(out, c["id"], response, is_error=failed, msg_id=f"{mid}.{i}",
                             tag=f"result:{i}" if i else None)  # fmt: skip
        parts = _parts(content)
        if not parts:
            if not responses:
                self.raw_line("message/user", known=True)  # shown to the user only
            return
        if not responses:
            self.start_turn(out)
            self.note_title(out, _text(content))
        self.message(out, "user/message", "user", parts, mid, tag="text" if responses else None)

    def _assistant(self, out: Out, v: dict[str, Any], mid: str) -> None:
        parts = _parts(v["content"])
        if not parts:
            self.raw_line("message/assistant", known=True)
            return
        if out.turn is None:
            self.start_turn(out)
        g = self.group_for(out, mid)
        self.add_line(g, mid)
        g.parts = parts
        if self.usages:
            self._give(g, self.usages.pop(0))
        self.flush_group(out)
        self.last = g

    def _usage(self, v: dict[str, Any]) -> None:
        if v.get("is_compaction") or v.get("cost_source") == "carried_forward":
            return  # no message of the conversation made it: raw
        usage: dict[str, Any] = {dst: v[src] for src, dst in _TOKENS if type(v.get(src)) is int}
        if isinstance(v.get("cost"), (int, float)) and not isinstance(v["cost"], bool):
            usage["cost"] = v["cost"]
        if isinstance(v.get("model"), str) and v["model"]:
            usage["model"] = v["model"]
        g = self.last
        if (
            g is not None
            and g.usage is None
            and g.vid is not None
            and self.main.surface.is_current(g.vid)
        ):
            self.main.group = g  # revised in place to carry its call's usage
            self.add_line(g)
            self._give(g, usage)
            self.flush_group(self.main)
            return
        self.usages.append(usage)  # given to the next assistant message; its line stays raw

    @staticmethod
    def _give(g: Group, usage: dict[str, Any]) -> None:
        usage = dict(usage)
        model = usage.pop("model", None)
        g.usage = usage
        if isinstance(model, str):
            g.model = model

    def _compaction(self) -> None:
        """A compaction of everything so far; the next message is its summary."""
        out = self.main
        self.end_turn(out, "completed")
        self.last = None
        self.compacting = self.start_compaction(out, "compacted", None)


def _wanted(path: Path) -> bool:
    return path.name == "sessions.db" or path.name.endswith(".jsonl")


@lru_cache(maxsize=64)
def _ids(db: Path, stamp: tuple[int, int]) -> frozenset[str]:
    return frozenset(session_ids(db))


def _migrated(path: Path) -> str | None:
    """Why a legacy ``.jsonl`` is left out: Goose imported it into the ``sessions.db`` beside
    it (and left the file), which is imported."""
    db = path.with_name("sessions.db")
    if not path.name.endswith(".jsonl") or not db.is_file():
        return None
    st = db.stat()
    if path.name[: -len(".jsonl")] in _ids(db, (st.st_size, st.st_mtime_ns)):
        return "imported by Goose into sessions.db beside it, which is imported"
    return None


_DATA = "${XDG_DATA_HOME:-~/.local/share}/goose/sessions"
AGENTS = (
    Agent(
        "goose",
        "Goose",
        GooseMapper,
        (
            Home(("linux", "darwin", "win32"), "${GOOSE_PATH_ROOT}/data/sessions"),
            Home(("linux", "darwin"), _DATA),
            Home(("win32",), "%APPDATA%/Block/goose/data/sessions"),
        ),
        "sessions.db, *.jsonl (before Goose 1.10)",
        _wanted,
        units=units,
        keyed=True,
        skip=_migrated,
    ),
)
