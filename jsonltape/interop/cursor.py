"""Cursor sessions to jsonltape: its agent transcripts (``~/.cursor/projects/<slug>/
agent-transcripts/``) and the composers of its global ``state.vscdb``.

Cursor is closed source and publishes no format: this follows what independent readers of its
files observe (spec Appendix B.20 names them). Two stores:

* **Agent transcripts** ``<uuid>.jsonl`` (newer: ``<uuid>/<uuid>.jsonl``), appended to: one
  ``{"role": "user"|"assistant", "message": {"content": ...}}`` a line, the content Anthropic
  Messages content (a string, or ``text``, ``tool_use`` ``{name, input}``, ``tool_result``
  ``{content}`` blocks; ids only where a line has them), the user's text wrapped in
  ``<user_query>…</user_query>``; other lines (``turn_ended``) are control lines. No time, id,
  model or usage: every event takes the file's change time (spec B.1), message ids are the
  line's (``line-<n>``), and a call without an id gets ``line-<n>.<k>``, its result the oldest
  unanswered call. The legacy ``<uuid>.txt`` transcripts are left out (said).
* **Composers** (:mod:`._cursor_store` renders them): a ``bubble`` of ``type`` 1 is a prompt
  starting a turn (its ``text``); of ``type`` 2 an ``assistant/message`` (``message.id`` the
  bubble id, in ``import.ids``): ``thinking`` (a string or ``{text}``) as unsigned reasoning,
  ``text``, ``toolFormerData`` ``{name, toolCallId, params|rawArgs, status, result}`` as a
  tool call (arguments decoded when JSON text) and, once it has a result or ended, its
  ``tool/result`` (``status`` ``error`` → an error); ``model`` from ``modelInfo.modelName`` or
  ``modelName``; usage from ``tokenCount`` ``{inputTokens, outputTokens}`` when not all zero.
  Times: the composer's ``createdAt`` (ms), each bubble's ``createdAt`` (ISO), an untimed bubble
  its nearest timed neighbour's. The title is the composer's ``name``; a sub-agent's composer
  names its parent (``subagentInfo.parentComposerId``) and the call that started it. An edited
  or re-run prompt (the headers name other bubbles from it on) is a rewrite from that prompt.

A conversation in both stores (a transcript named by a composer id of the global
``state.vscdb`` in its default place) is imported from the database, which holds what the
transcript drops; the transcript is skipped, said (naming the database to import). The read-only
index (``sync --source cursor:PATH``) asks the same question at each sync, so a conversation
is indexed once: the answer follows the database's ``-wal`` too, where Cursor writes first.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from pathlib import Path
from typing import Any

from ._agent import Agent, Home, homes_of
from ._base import Mapper, Out
from ._cursor_store import composer_ids, units
from ._parts import (
    anthropic_result,
    anthropic_split,
    json_arguments,
    member,
    reasoning_part,
    text_of,
    text_part,
    tool_call_part,
)
from ._source import parse_time

__all__ = ["AGENTS", "ComposerMapper", "TranscriptMapper", "mapper"]

_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.S)
_TRANSCRIPTS = "agent-transcripts"
_DB = "state.vscdb"
_ASSISTANT = 2
#: A tool call's ``status`` once it ran (a result may still be empty).
_DONE = frozenset({"completed", "error", "cancelled", "canceled", "rejected"})
_TOKENS = (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"))


def _prompt_text(text: str) -> str:
    """The text the user typed: inside ``<user_query>`` when Cursor wrapped it."""
    m = _QUERY.search(text)
    return m.group(1) if m is not None else text


class TranscriptMapper(Mapper):
    """An agent transcript (JSONL)."""

    source = "cursor"
    known_raw = frozenset({"turn_ended"})
    implicit_end = True

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "cursor"
        self._calls: list[str] = []  # unanswered calls without ids of their own, oldest first

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("role") in ("user", "assistant") and isinstance(value.get("message"), dict):
            return None
        if "payload" in value:
            return "this looks like a Codex rollout (use --from codex)"
        if "uuid" in value:
            return "this looks like a Claude Code transcript (use --from claude-code)"
        return "not a Cursor agent transcript line (no role and message)"

    def handle(self, v: dict[str, Any]) -> None:
        out = self.main
        if v.get("type") == "turn_ended" and out.turn is not None:
            self.end_turn(out, "completed", raw=True)
            return
        content = member(v, "message").get("content")
        mid = f"line-{self.n}"
        if v.get("role") == "user":
            self._user(out, content, mid)
        elif v.get("role") == "assistant":
            self._assistant(out, content, mid)

    def _user(self, out: Out, content: Any, mid: str) -> None:
        results, parts = anthropic_split(content)
        for k, b in enumerate(results):
            call = b.get("tool_use_id")
            if isinstance(call, str) and call:
                if call in self._calls:
                    self._calls.remove(call)
            elif self._calls:
                call = self._calls.pop(0)
            else:
                raise ValueError("a tool_result with no call to answer")
            self.tool_result(
                out, call, anthropic_result(b.get("content")), is_error=b.get("is_error") is True,
                msg_id=mid if k == 0 else f"{mid}.{k}", tag=f"result:{k}" if k else None,
            )  # fmt: skip
        if parts:
            if not results:  # titled by what the user typed, without Cursor's wrapper
                self.note_title(out, _prompt_text(text_of(parts)))
            self.user_message(out, parts, mid, prompt=not results, tag="user" if results else None)

    def _assistant(self, out: Out, content: Any, mid: str) -> None:
        if out.turn is None:
            self.start_turn(out)
        parts: list[dict[str, Any]] = []
        blocks = [content] if isinstance(content, str) else content
        for k, b in enumerate(blocks if isinstance(blocks, list) else ()):
            if isinstance(b, str):
                b = {"type": "text", "text": b}
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text" and isinstance(b.get("text"), str):
                if b["text"]:
                    parts.append(text_part(b["text"]))
            elif kind == "thinking" and isinstance(b.get("thinking"), str):
                parts.append(reasoning_part(b["thinking"]))
            elif kind == "tool_use" and isinstance(b.get("name"), str):
                call = b.get("id")
                if not isinstance(call, str) or not call:
                    call = f"{mid}.{k}"
                    self._calls.append(call)
                parts.append(tool_call_part(call, b["name"], b.get("input")))
            elif isinstance(kind, str):
                parts.append(dict(b))
        if not parts:
            self.raw_line("assistant", known=True)
            return
        g = self.group_for(out, mid)
        self.add_line(g)
        g.parts = parts
        self.flush_group(out)


class ComposerMapper(Mapper):
    """A composer of ``state.vscdb``, as :mod:`._cursor_store` renders it. Cursor rewrites a
    conversation when the user edits or re-runs a prompt (the headers then name other bubbles
    from there on): a rewrite (:mod:`._rewrite`) from that prompt."""

    source = "cursor"
    implicit_end = True
    rewrites = True

    @staticmethod
    def rewrite_start(value: dict[str, Any]) -> bool:
        return value.get("type") == "bubble" and member(value, "bubble").get("type") == 1

    def __init__(self, name: str, path: str, session_id: str) -> None:
        super().__init__(name, path)
        self.main = self.new_out("", session_id, {})
        self.main.target.agent = "cursor"

    def sniff(self, value: dict[str, Any]) -> str | None:
        if value.get("type") == "composer" and isinstance(value.get("composerId"), str):
            return None
        return "not a Cursor composer rendering: its first record is not the composer's"

    def handle(self, v: dict[str, Any]) -> None:
        if v.get("type") == "composer":
            self._composer(v)
            return
        bubble = v.get("bubble")
        if v.get("type") != "bubble" or not isinstance(bubble, dict):
            return
        self.time = parse_time(bubble.get("createdAt")) or self.time
        bid = str(v.get("id"))
        if bubble.get("type") == 1:
            self._user(bubble, bid)
        elif bubble.get("type") == _ASSISTANT:
            self._assistant(bubble, bid)

    def _composer(self, v: dict[str, Any]) -> None:
        target = self.main.target
        if target.meta.get("import"):
            return
        self.time = parse_time(v.get("createdAt")) or self.time
        info: dict[str, Any] = {"session": v["composerId"]}
        sub = member(v, "subagentInfo")
        # a sub-agent's composer names its parent (``sidechain_of``: usage rolls it up there)
        for src, dst in (("parentComposerId", "sidechain_of"), ("toolCallId", "spawned_by"),
                         ("subagentTypeName", "subagent_type")):  # fmt: skip
            if isinstance(sub.get(src), str) and sub[src]:
                info[dst] = sub[src]
        target.meta["import"] = info
        target.created = self.time or None
        self.raw_line("composer", known=True)

    def _user(self, bubble: dict[str, Any], bid: str) -> None:
        text = bubble.get("text")
        if not isinstance(text, str) or not text.strip():
            self.raw_line("bubble/user", known=True)  # nothing the model was sent
            return
        out = self.main
        self.user_message(out, [text_part(text)], bid, prompt=True)

    def _assistant(self, bubble: dict[str, Any], bid: str) -> None:
        out = self.main
        if out.turn is None:
            self.start_turn(out)
        parts: list[dict[str, Any]] = []
        thinking = bubble.get("thinking")
        thought = member(bubble, "thinking").get("text") if isinstance(thinking, dict) else thinking
        if isinstance(thought, str) and thought:
            parts.append(reasoning_part(thought))  # unsigned: who answered is not recorded
        if isinstance(bubble.get("text"), str) and bubble["text"]:
            parts.append(text_part(bubble["text"]))
        tool = member(bubble, "toolFormerData")
        call = tool.get("toolCallId") if isinstance(tool.get("toolCallId"), str) else None
        if tool and isinstance(tool.get("name"), str):
            call = call or f"{bid}.call"
            args = tool.get("params") if tool.get("params") is not None else tool.get("rawArgs")
            parts.append(tool_call_part(call, tool["name"], json_arguments(args)))
        if not parts:
            self.raw_line("bubble/assistant", known=True)
            return
        g = self.group_for(out, bid)
        self.add_line(g, bid)
        g.parts = parts
        model = member(bubble, "modelInfo").get("modelName") or bubble.get("modelName")
        if isinstance(model, str) and model:
            g.model = model
        usage = _usage(bubble.get("tokenCount"))
        if usage:
            g.usage = usage
        self.flush_group(out)
        if call is not None and (tool.get("result") is not None or tool.get("status") in _DONE):
            result = tool.get("result")
            self.tool_result(
                out, call, json_arguments(result) if result is not None else "",
                is_error=tool.get("status") == "error", msg_id=f"{bid}.result", tag="result",
            )  # fmt: skip


def _usage(count: Any) -> dict[str, Any] | None:
    """``tokenCount`` under jsonltape's names; None when it counts nothing (Cursor writes
    zeros on every bubble but the ones a model call's tokens are given to)."""
    if not isinstance(count, dict):
        return None
    usage = {dst: count[src] for src, dst in _TOKENS if type(count.get(src)) is int}
    return usage if any(usage.values()) else None


def mapper(name: str, path: str, session_id: str) -> Mapper:
    """The importer of one Cursor session: a composer of a ``state.vscdb`` (a rendering named
    ``state.vscdb#<composer>``) or an agent transcript."""
    if name.startswith(f"{_DB}#"):
        return ComposerMapper(name, path, session_id)
    return TranscriptMapper(name, path, session_id)


def _in_transcripts(path: Path) -> bool:
    """Whether a file lies below an ``agent-transcripts`` folder (at any depth: sub-agents'
    transcripts may lie beside their parent's, a layout not confirmed)."""
    return _TRANSCRIPTS in path.parts[:-1]


def _take(path: Path) -> bool | str:
    if path.name == _DB:
        return path.parent.name == "globalStorage"
    if not _in_transcripts(path):
        return False
    if path.name.endswith(".txt"):
        return ("a legacy Cursor text transcript: not imported (its format is not known well "
                "enough to map)")  # fmt: skip
    if not path.name.endswith(".jsonl"):
        return False
    stem = path.name[: -len(".jsonl")]
    if path.parent.name == _TRANSCRIPTS and (path.parent / stem / path.name).is_file():
        return f"the same conversation's {stem}/{path.name} beside it is imported instead"
    return _in_database(path) or True


def wanted(path: Path) -> bool:
    return _take(path) is True


def skip(path: Path) -> str | None:
    taken = _take(path)
    return taken if isinstance(taken, str) else None


def _in_database(path: Path) -> str | None:
    """Why a transcript is left out: the global ``state.vscdb`` in its default place holds the
    same conversation (a composer of the transcript's id), which is imported."""
    cid = path.name[: -len(".jsonl")]
    for db in default_dbs():
        changes = _changes(db)
        if changes is not None and cid in _ids(db, changes):
            return (f"the conversation is composer {cid} of {db}, which holds more of it: "
                    "import that database")  # fmt: skip
    return None


#: The variables the default places' templates name (what :func:`_dbs` is keyed by).
_HOME_VARS = ("HOME", "USERPROFILE", "XDG_CONFIG_HOME", "APPDATA")


def default_dbs() -> tuple[Path, ...]:
    """Where the global ``state.vscdb`` is by default on this machine (what a transcript is
    skipped for)."""
    return _dbs(tuple(os.environ.get(v) for v in _HOME_VARS))


@functools.lru_cache(maxsize=4)
def _dbs(env: tuple[str | None, ...]) -> tuple[Path, ...]:
    """The default places of the global ``state.vscdb`` with the variables ``env`` holds
    (expanded once: the read-only index asks for every transcript at every sync)."""
    return tuple(db for db in homes_of(AGENTS[0]) if db.name == _DB)


def _changes(db: Path) -> tuple[int, ...] | None:
    """What moves when the database's rows do: its own stat and its ``-wal``'s (Cursor writes
    there first, the database file's stat may stay put until a checkpoint; a long-running
    index asks again at each sync); None when it is not a file."""
    try:
        st = os.stat(db)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        wal = os.stat(f"{db}-wal")
    except OSError:
        return (st.st_ino, st.st_size, st.st_mtime_ns)
    return (st.st_ino, st.st_size, st.st_mtime_ns, wal.st_ino, wal.st_size, wal.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _ids(db: Path, changes: tuple[int, ...]) -> frozenset[str]:
    return composer_ids(db)


_USER_DIR = {
    "linux": "${XDG_CONFIG_HOME:-~/.config}/Cursor/User",
    "darwin": "~/Library/Application Support/Cursor/User",
    "win32": "%APPDATA%/Cursor/User",
}
AGENTS = (
    Agent(
        "cursor",
        "Cursor",
        mapper,
        (
            Home(("linux", "darwin", "win32"), "~/.cursor/projects"),
            *(Home((p,), f"{d}/globalStorage/{_DB}") for p, d in _USER_DIR.items()),
        ),
        "agent-transcripts/*.jsonl, globalStorage/state.vscdb",
        wanted,
        units=units,
        skip=skip,
        keyed=True,
        skip_inputs=default_dbs,
    ),
)
