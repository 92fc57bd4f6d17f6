"""The storage interface of the index, and its SQLite implementation.

The ingest engine talks to storage only through :class:`Store` (a Protocol): registry rows,
session rows, event and message rows, and the few surface look-ups the incremental fold needs.
Nothing in ingest writes SQL, so a PostgreSQL backend is another class with these methods.

Every change happens inside ``begin()`` ... ``commit()``; the engine bounds what goes into one
transaction. Full-text tables are kept in step explicitly (not by triggers) so that a bulk
load can skip them and rebuild them once at the end: the ``meta.fts`` flag says ``stale``
while that is pending, and a later sync finishes the job even after a crash.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import msgspec

from .schema import connect, migrate, probe

__all__ = ["FileRow", "MessageRow", "SessionRow", "SqliteStore", "Store"]


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
    call_id: str | None
    text: str
    truncated: int


EventRow = tuple[int, int, str, int, int, str]  # sid, seq, type, time, offset, raw


class Store(Protocol):
    """What the ingest engine needs from a backend."""

    commits: int

    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def close(self) -> None: ...
    def files(self, under: str | None = None) -> dict[str, FileRow]: ...
    def file(self, path: str) -> FileRow | None: ...
    def put_file(self, row: FileRow) -> None: ...
    def delete_file(self, path: str) -> None: ...
    def move_file(self, old: str, new: str) -> None: ...
    def session(self, sid: int) -> SessionRow | None: ...
    def sessions_with(self, session_id: str, header_crc: str) -> list[SessionRow]: ...
    def add_session(self, row: SessionRow) -> int: ...
    def put_session(self, row: SessionRow) -> None: ...
    def drop_session(self, sid: int) -> None: ...
    def add_events(self, rows: Sequence[EventRow]) -> None: ...
    def add_messages(self, rows: Sequence[MessageRow]) -> None: ...
    def current(self, sid: int, seq: int) -> tuple[int, str | None, str] | None: ...
    def current_between(self, sid: int, lo: int, hi: int) -> list[tuple[int, str | None, str]]: ...
    def has_compaction(self, sid: int, seqs: Iterable[int], before: int) -> bool: ...
    def set_status(self, sid: int, seqs: Sequence[int], status: str) -> None: ...
    @property
    def fts_live(self) -> bool: ...
    def set_fts_stale(self) -> None: ...
    def rebuild_fts(self) -> None: ...
    def is_empty(self) -> bool: ...


_FILE_COLS = "path, status, sid, error, dev, ino, size, mtime_ns, offset, last_seq, last_crc"
_SESSION_COLS = (
    "sid, id, path, header_crc, title, cwd, agent, created, updated, parent, parent_seq, "
    "events, messages, state, error, open_turn, closed"
)
_FTS_TABLES = ("messages_fts", "messages_trigram")


def _file(r: tuple[object, ...]) -> FileRow:
    return FileRow(**dict(zip(_FILE_COLS.split(", "), r, strict=True)))  # type: ignore[arg-type]


def _session(r: tuple[object, ...]) -> SessionRow:
    d = dict(zip(_SESSION_COLS.split(", "), r, strict=True))
    d["closed"] = bool(d["closed"])
    return SessionRow(**d)  # type: ignore[arg-type]


class SqliteStore:
    """:class:`Store` over one SQLite file (``:memory:`` works too)."""

    def __init__(self, path: Path | str) -> None:
        probe()
        self.path = path
        self.con = connect(path, create=True)
        migrate(self.con)
        self.commits = 0
        self._fts_live = self._meta("fts") != "stale"

    # -- transactions --------------------------------------------------------------------

    def begin(self) -> None:
        self.con.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.con.execute("COMMIT")
        self.commits += 1

    def rollback(self) -> None:
        if self.con.in_transaction:
            self.con.execute("ROLLBACK")
        self._fts_live = self._meta("fts") != "stale"

    def close(self) -> None:
        try:
            self.rollback()
            self.con.execute("PRAGMA optimize")
        except sqlite3.Error:  # pragma: no cover - closing anyway
            pass
        self.con.close()

    def _meta(self, key: str) -> str | None:
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def roots(self) -> list[str]:
        """The roots synced into this index so far (``index rebuild`` syncs them again)."""
        raw = self._meta("roots")
        return list(msgspec.json.decode(raw, type=list[str])) if raw else []

    def add_root(self, root: str) -> None:
        roots = self.roots()
        if root in roots:
            return
        self.begin()
        self.set_meta("roots", msgspec.json.encode(sorted([*roots, root])).decode())
        self.commit()

    # -- registry ------------------------------------------------------------------------

    def files(self, under: str | None = None) -> dict[str, FileRow]:
        sql = f"SELECT {_FILE_COLS} FROM files"
        params: tuple[str, ...] = ()
        if under is not None:
            # Paths under a directory: a range scan on the primary key, no LIKE escaping.
            base = under.rstrip("/") + "/"
            sql += " WHERE path >= ? AND path < ?"
            params = (base, base[:-1] + "0")
        return {r[0]: _file(r) for r in self.con.execute(sql, params)}

    def file(self, path: str) -> FileRow | None:
        r = self.con.execute(f"SELECT {_FILE_COLS} FROM files WHERE path = ?", (path,)).fetchone()
        return None if r is None else _file(r)

    def put_file(self, row: FileRow) -> None:
        self.con.execute(
            f"INSERT OR REPLACE INTO files ({_FILE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                row.path,
                row.status,
                row.sid,
                row.error,
                row.dev,
                row.ino,
                row.size,
                row.mtime_ns,
                row.offset,
                row.last_seq,
                row.last_crc,
            ),
        )

    def delete_file(self, path: str) -> None:
        self.con.execute("DELETE FROM files WHERE path = ?", (path,))

    def move_file(self, old: str, new: str) -> None:
        self.con.execute("DELETE FROM files WHERE path = ?", (new,))
        self.con.execute("UPDATE files SET path = ? WHERE path = ?", (new, old))
        self.con.execute("UPDATE sessions SET path = ? WHERE path = ?", (new, old))

    # -- sessions ------------------------------------------------------------------------

    def session(self, sid: int) -> SessionRow | None:
        r = self.con.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE sid = ?", (sid,)
        ).fetchone()
        return None if r is None else _session(r)

    def sessions_with(self, session_id: str, header_crc: str) -> list[SessionRow]:
        rows = self.con.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE id = ? AND header_crc = ?",
            (session_id, header_crc),
        )
        return [_session(r) for r in rows]

    def add_session(self, row: SessionRow) -> int:
        values = msgspec.structs.astuple(row)[1:]
        cur = self.con.execute(
            f"INSERT INTO sessions ({_SESSION_COLS.partition(', ')[2]}) "
            f"VALUES ({', '.join('?' * len(values))})",
            values,
        )
        assert cur.lastrowid is not None
        row.sid = cur.lastrowid
        return row.sid

    def put_session(self, row: SessionRow) -> None:
        names = _SESSION_COLS.split(", ")[1:]
        values = msgspec.structs.astuple(row)[1:]
        self.con.execute(
            f"UPDATE sessions SET {', '.join(n + ' = ?' for n in names)} WHERE sid = ?",
            (*values, row.sid),
        )

    def drop_session(self, sid: int) -> None:
        if self._fts_live:
            for table in _FTS_TABLES:
                self.con.execute(
                    f"INSERT INTO {table} ({table}, rowid, text) "
                    "SELECT 'delete', id, text FROM messages WHERE sid = ?",
                    (sid,),
                )
        self.con.execute("DELETE FROM messages WHERE sid = ?", (sid,))
        self.con.execute("DELETE FROM events WHERE sid = ?", (sid,))
        self.con.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
        self.con.execute("UPDATE files SET sid = NULL WHERE sid = ?", (sid,))

    # -- rows ----------------------------------------------------------------------------

    def add_events(self, rows: Sequence[EventRow]) -> None:
        self.con.executemany(
            "INSERT OR IGNORE INTO events (sid, seq, type, time, offset, raw) VALUES (?,?,?,?,?,?)",
            rows,
        )

    def add_messages(self, rows: Sequence[MessageRow]) -> None:
        if not rows:
            return
        con = self.con
        if not self._fts_live:
            con.executemany(
                "INSERT OR IGNORE INTO messages (sid, seq, type, role, time, status, anchor, "
                "call_id, text, truncated) VALUES (?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            return
        first = con.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        con.executemany(
            "INSERT OR IGNORE INTO messages (sid, seq, type, role, time, status, anchor, "
            "call_id, text, truncated) VALUES (?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        for table in _FTS_TABLES:
            con.execute(
                f"INSERT INTO {table} (rowid, text) SELECT id, text FROM messages WHERE id > ?",
                (first,),
            )

    def current(self, sid: int, seq: int) -> tuple[int, str | None, str] | None:
        r = self.con.execute(
            "SELECT anchor, call_id, type FROM messages "
            "WHERE sid = ? AND seq = ? AND status = 'current'",
            (sid, seq),
        ).fetchone()
        return None if r is None else (int(r[0]), r[1], str(r[2]))

    def current_between(self, sid: int, lo: int, hi: int) -> list[tuple[int, str | None, str]]:
        return [
            (int(r[0]), r[1], str(r[2]))
            for r in self.con.execute(
                "SELECT seq, call_id, type FROM messages INDEXED BY messages_surface "
                "WHERE sid = ? AND status = 'current' AND anchor BETWEEN ? AND ? "
                "ORDER BY anchor",
                (sid, lo, hi),
            )
        ]

    def has_compaction(self, sid: int, seqs: Iterable[int], before: int) -> bool:
        wanted = sorted({s for s in seqs if isinstance(s, int) and s < before})
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            r = self.con.execute(
                "SELECT 1 FROM events WHERE sid = ? AND type IN "
                "('compaction/summary', 'compaction/prune') "
                f"AND seq IN ({', '.join('?' * len(part))}) LIMIT 1",
                (sid, *part),
            ).fetchone()
            if r is not None:
                return True
        return False

    def set_status(self, sid: int, seqs: Sequence[int], status: str) -> None:
        self.con.executemany(
            "UPDATE messages SET status = ? WHERE sid = ? AND seq = ?",
            [(status, sid, s) for s in seqs],
        )

    # -- full-text maintenance -----------------------------------------------------------

    @property
    def fts_live(self) -> bool:
        return self._fts_live

    def set_fts_stale(self) -> None:
        self.set_meta("fts", "stale")
        self._fts_live = False

    def rebuild_fts(self) -> None:
        for table in _FTS_TABLES:
            self.con.execute(f"INSERT INTO {table} ({table}) VALUES ('rebuild')")
        self.set_meta("fts", "live")
        self._fts_live = True

    def is_empty(self) -> bool:
        return self.con.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None
