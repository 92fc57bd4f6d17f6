"""What the ingest engine stores, and the interface of a storage backend (:class:`Store`).

The engine talks to storage only through :class:`Store`: registry rows, session rows, event and
message rows, the few surface look-ups the incremental fold needs, and the bulk-load and
full-text upkeep steps. Nothing in ingest writes SQL, so a PostgreSQL backend is another class
with these methods. ``store.SqliteStore`` is the SQLite one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

import msgspec

from jsonltape.usage import Links, Response

__all__ = ["EventRow", "FileRow", "MessageRow", "Node", "SessionRow", "Store"]


class FileRow(msgspec.Struct, kw_only=True):
    """The registry entry of one file under a root (the sync cursor lives here)."""

    path: str
    status: str  #: indexed | foreign | error | pending
    sid: int | None = None
    error: str | None = None
    dev: int | None = None
    ino: int | None = None
    size: int | None = None  #: size and mtime seen when fully synced (None mid-file)
    mtime_ns: int | None = None
    offset: int = 0  #: end of the last ingested line
    last_seq: int | None = None
    last_crc: str | None = None


class SessionRow(msgspec.Struct, kw_only=True):
    sid: int = 0
    id: str
    path: str
    header_crc: str
    title: str | None = None
    cwd: str | None = None
    agent: str | None = None
    created: int = 0
    updated: int = 0
    parent: str | None = None
    parent_seq: int | None = None
    events: int = 0
    messages: int = 0
    state: str = "clean"
    error: str | None = None
    open_turn: int | None = None
    closed: bool = False


class MessageRow(NamedTuple):
    sid: int
    seq: int
    type: str
    role: str
    time: int
    status: str
    anchor: int | None
    call_id: str | None  #: the call a tool/result answers
    calls: tuple[str, ...]  #: the tool calls an assistant/message declares
    text: str
    truncated: int


class Node(NamedTuple):
    """A current surface node, as the fold's range operations see it."""

    seq: int
    anchor: int
    type: str
    call_id: str | None
    calls: tuple[str, ...]


EventRow = tuple[int, int, str, int, int, int, str]  # sid, seq, type, time, offset, size, crc


class Store(Protocol):
    """What the ingest engine needs from a backend."""

    commits: int

    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    # bulk loads
    def is_empty(self) -> bool: ...
    @property
    def in_bulk(self) -> bool: ...
    def start_bulk(self) -> None: ...
    def finish_bulk(self) -> None: ...
    def abort_bulk(self) -> None: ...
    # the registry
    def files(self, under: str | None = None) -> dict[str, FileRow]: ...
    def file(self, path: str) -> FileRow | None: ...
    def put_file(self, row: FileRow) -> None: ...
    def delete_file(self, path: str) -> None: ...
    def move_file(self, old: str, new: str) -> None: ...
    # sessions and rows
    def session(self, sid: int) -> SessionRow | None: ...
    def session_at(self, path: str) -> SessionRow | None: ...
    def sessions_with(self, session_id: str, header_crc: str) -> list[SessionRow]: ...
    def add_session(self, row: SessionRow) -> int: ...
    def put_session(self, row: SessionRow) -> None: ...
    def drop_session(self, sid: int) -> None: ...
    def add_events(self, rows: Sequence[EventRow]) -> None: ...
    def line_marks(self, sid: int) -> Iterable[tuple[int, int, str]]: ...
    def add_messages(self, rows: Sequence[MessageRow]) -> None: ...
    # the surface (see surface.py)
    def current(self, sid: int, seq: int) -> tuple[int, str] | None: ...
    def current_between(self, sid: int, lo: int, hi: int) -> list[Node]: ...
    def declared(self, sid: int, call_id: str) -> int: ...
    def answers(self, sid: int, call_id: str) -> list[tuple[int, int]]: ...
    def has_compaction(self, sid: int, seqs: Iterable[int], before: int) -> bool: ...
    def set_status(self, sid: int, seqs: Sequence[int], status: str) -> None: ...
    # token usage (``jsonltape.usage``): the responses of a chunk, a session's tree links
    def add_usage(self, sid: int, rows: Sequence[tuple[int, Response]]) -> None: ...
    def add_usage_session(self, sid: int, links: Links) -> None: ...
    # full text
    @property
    def fts_live(self) -> bool: ...
    def set_fts_stale(self) -> None: ...
    def rebuild_fts(self) -> None: ...
    def substrings_pending(self) -> bool: ...
    def substrings_waiting(self) -> bool: ...
    def build_substrings(self, limit: int) -> int: ...
