"""The data a mapper produces: event specs in a virtual seq space, the headers of the sessions
it writes, and the per-session state it keeps while mapping (see :mod:`._base`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Any

from ..events import Replace, Retract
from ..fold import FileLedger, SurfaceFold
from ..ids import validate_session_id

__all__ = [
    "MAPPER_VERSION",
    "Group",
    "Out",
    "Spec",
    "Target",
    "call_ids",
    "line_kind",
    "safe_id",
    "source_lines",
    "title_of",
    "unique_key",
]

#: Bumped when a mapping changes in a way that would give different events for the same
#: lines; a session imported by another version is not appended to.
MAPPER_VERSION = 2
#: Longest title taken from a prompt.
_TITLE_MAX = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Spec:
    """One event to write: type, data, virtual refs, the provenance key, the source time."""

    __slots__ = (
        "data",
        "ignorable",
        "key",
        "refs",
        "sources",
        "surface",
        "target",
        "time",
        "type",
        "vid",
    )

    def __init__(
        self,
        target: str,
        vid: int,
        type_: str,
        data: dict[str, Any],
        key: str,
        time: int,
        *,
        surface: tuple[str, int, int] | None = None,
        sources: list[int] | None = None,
        refs: tuple[str, ...] = (),
        ignorable: bool | None = None,
    ) -> None:
        self.target = target
        self.vid = vid
        self.type = type_
        self.data = data
        self.key = key
        self.time = time
        self.surface = surface
        self.sources = sources
        self.refs = refs
        self.ignorable = ignorable

    def resolved(self, seq_of: Callable[[int], int]) -> dict[str, Any]:
        """The append request with virtual seqs replaced (``seq_of(vid)`` is the real seq)."""
        data = self.data
        if self.refs:
            data = dict(data)
            for name in self.refs:
                v = data.get(name)
                if isinstance(v, int):
                    data[name] = seq_of(v)
        item: dict[str, Any] = {"type": self.type, "data": data, "key": self.key}
        if self.surface is not None:
            op, s, e = self.surface
            item["surface"] = (Replace if op == "replace" else Retract)(seq_of(s), seq_of(e))
        elif self.type in ("user/message", "assistant/message", "tool/result"):
            item["surface"] = "append"
        if self.sources is not None:
            item["sources"] = sorted(seq_of(s) for s in self.sources)
        if self.ignorable:
            item["ignorable"] = True
        if self.time > 0:
            item["time"] = self.time  # the source's time, not the import's
        return item


class Target:
    """Header of a session an import writes (``name`` "" is the file's main session)."""

    def __init__(self, name: str, session_id: str, meta: dict[str, Any]) -> None:
        self.name = name
        self.session_id = session_id
        self.meta = meta
        self.title: str | None = None
        self.cwd: str | None = None
        self.agent: str | None = None
        self.created: int | None = None
        #: Sidechains link to the main session by a fork at seq 0 (they inherit nothing).
        self.child_of_main = False
        self._fixed: Target | None = None
        #: the title the session's events give: the fixed header's, then each session/title
        self.shown: str | None = None

    def fix(self) -> None:
        """Fix the header as it is now: once the session has a message and a title, or a reply.

        A header is written once and never changes, and when it is written differs between an
        import (when its first batch is written) and a read-only scan (before its first event):
        fixing it at a point of the *mapping* makes both give the same title, cwd and metadata,
        whatever a later line (a rename, a summary) says.
        """
        if self._fixed is not None:
            return
        copy = Target(self.name, self.session_id, dict(self.meta))
        copy.title, copy.cwd, copy.agent = self.title, self.cwd, self.agent
        copy.created, copy.child_of_main = self.created, self.child_of_main
        self._fixed = copy
        self.shown = self.title

    @property
    def header(self) -> Target:
        """What the session's header holds: as fixed by :meth:`fix`, else as it is now."""
        return self._fixed if self._fixed is not None else self


class Group:
    """An assistant message spread over several source lines (or items), merged into one."""

    def __init__(self, out: Out, msg_id: str, time: int) -> None:
        self.out = out
        self.msg_id = msg_id
        self.time = time
        self.lines: list[int] = []
        self.raw: dict[str, str] = {}  # raw text of lines no emitted version carries yet
        self.parts: list[dict[str, Any]] = []
        self.model: str | None = None
        self.usage: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}
        self.ids: list[str] = []  # source ids of the lines
        self.vid: int | None = None  # vid of the version on the surface, once emitted
        self.emitted_lines = 0  # how many lines that version covered
        self.calls: set[str] = set()  # call ids already recorded with a tool/call


class Out:
    """Mapping state of one target session."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.next_vid = 1
        self.surface = SurfaceFold()
        self.data: dict[int, dict[str, Any]] = {}  # current node vid -> data
        self.types: dict[int, str] = {}
        self.turn: int | None = None  # vid of the open turn/start
        self.pending: dict[str, int | None] = {}  # unanswered call id -> its tool/call vid
        self.request: dict[str, Any] = {}
        #: (source line, the request state it set), for a rewrite to go back to (``_base``)
        self.request_log: list[tuple[int, dict[str, Any]]] = []
        self.group: Group | None = None
        self.ledgers: dict[int, FileLedger] = {}  # summary message vid -> its ledger
        self.entry_vid: dict[str, int] = {}  # source entry id -> vid of the node it made
        self.entry_group: dict[str, Group] = {}
        self.parent_of: dict[str, str | None] = {}
        self.leaf: str | None = None
        self.last_time = 0
        self.compaction: tuple[int, int, int, int | None] | None = None  # (vid, s, e, tokens)
        #: the ledger of the started compaction's summary, for its summary message
        self.pending_ledger: FileLedger | None = None
        #: (summary vid, start, end): the next message appended replaces start..end instead
        self.replacing: tuple[int, int, int] | None = None
        #: current node vid -> the first source line of what it replaced (a summary), for a
        #: rewrite to tell whether it took lines the rewrite keeps off the surface
        self.covered: dict[int, int] = {}


def source_lines(data: dict[str, Any] | None) -> list[int]:
    """The source lines an event's data says it was made from (``import.lines``)."""
    info = data.get("import") if isinstance(data, dict) else None
    lines = info.get("lines") if isinstance(info, dict) else None
    return [n for n in lines if isinstance(n, int)] if isinstance(lines, list) else []


def safe_id(text: str, prefix: str = "") -> str:
    """A valid session id from ``prefix + text``: unsafe characters become ``-``; a long or
    altered result gets a hash of the original so different names stay different."""
    raw = prefix + text
    clean = _UNSAFE.sub("-", raw).strip("-._") or "session"
    if clean != raw or len(clean) > 128:
        digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        clean = f"{clean[:110]}-{digest}"
    return validate_session_id(clean)


def unique_key(seen: dict[str, int], key: str) -> str:
    """``key`` made unique within one mapping (a repeat gets ``#2``, ``#3``, ... in order, so
    replays agree) and at most 1024 characters (long source ids are hashed)."""
    n = seen.get(key, 0) + 1
    seen[key] = n
    if n > 1:
        key = f"{key}#{n}"
    if len(key) > 1000:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        key = f"{key[:900]}#{digest[:32]}"
    return key


def title_of(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _TITLE_MAX else line[: _TITLE_MAX - 1] + "…"


def call_ids(parts: list[dict[str, Any]]) -> list[str]:
    return [p["id"] for p in parts if p.get("type") == "tool_call"]


def line_kind(value: dict[str, Any] | None) -> str:
    if value is None:
        return "malformed"
    t = value.get("type")
    if not isinstance(t, str):
        return "(no type)"
    sub = value.get("subtype")
    if isinstance(sub, str):
        return f"{t}/{sub}"
    payload = value.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("type"), str):
        return f"{t}/{payload['type']}"
    return t
