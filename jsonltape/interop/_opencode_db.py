"""Reading OpenCode's ``opencode.db``: its real tables only, every row checked against the types
OpenCode writes, and the work capped, so that a crafted or damaged file gets a verdict (one line
naming the file, table, row and column), never a hang or a traceback.

The tables, as OpenCode declares them (anomalyco/opencode
packages/opencode/src/session/session.sql.ts at commit
063e8306d9895af9bdd175306cfa4fa3291fd83a; the ``time_created``/``time_updated`` pair is its
``Timestamps``, packages/opencode/src/storage/schema.sql.ts at commit
9b58d7430157b7d03151cb822353895880a2a05c: ``integer NOT NULL``, ``Date.now()``):

* ``session``: ``id`` text primary key, ``project_id`` text, ``parent_id`` text or NULL,
  ``directory`` text, ``version`` text, ``title`` text, ``time_created``, ``time_updated`` (and
  columns not read);
* ``message``: ``id``, ``session_id``, times, ``data``: the message info as JSON text;
* ``part``: ``id``, ``message_id``, ``session_id``, times, ``data``: the part as JSON text.

What is checked:

* ``session``, ``message`` and ``part`` are tables (``sqlite_master`` type ``table``, not a view,
  which may be a recursive query that never ends, nor a virtual table), holding the columns read,
  none computed when read (a generated column): else the database is refused, in one line;
* each row read: ids are text, times integers, ``data`` text holding a JSON object nested at
  most :data:`ROW_DEPTH` levels (so its record stays within ``_source.MAX_DEPTH``); ``project_id``,
  ``directory`` and ``version`` text or NULL. A session with a row that is not is refused, naming
  the row; the other sessions import. Text that is not UTF-8 is named the same way;
* the work: SQLite's virtual-machine steps are counted over all reads of one database (a
  progress handler, so the cap does not depend on time), at most :data:`STEPS_PER_PAGE` per page
  of the file plus :data:`BASE_STEPS`; OpenCode's own databases take a small fraction of that
  (every read is by an index), a table scanned once per session does not. Past the cap every
  read of the database is refused. Values come from the file (no function is applied to them),
  so none is larger than the file.

The database is opened read-only and never written: with ``mode=ro`` (which reads the WAL),
or, where that would create files (a WAL database whose ``-wal`` and ``-shm`` are missing),
``immutable=1``: with no ``-wal`` everything is in the database file (a ``-wal`` without
``-shm``, left by a crash, is not read).
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec

from ..errors import JsonltapeError
from ._source import MAX_DEPTH, too_deep

__all__ = [
    "BASE_STEPS",
    "ROW_DEPTH",
    "STEPS_PER_PAGE",
    "Database",
    "OpenCodeStoreError",
    "SessionRow",
    "with_ids",
]

#: A part's data sits two levels down in its record (``{"parts": [{...}]}``).
ROW_DEPTH = MAX_DEPTH - 2
#: SQLite steps allowed per page of the database, and in any case (see the module docs).
STEPS_PER_PAGE = 10_000
BASE_STEPS = 20_000_000
#: The progress handler runs every this many steps.
_TICK = 100
_T = TypeVar("_T")
_decode = msgspec.json.decode

_TEXT = ("text",)
_OPTIONAL = ("text", "null")
_INT = ("integer",)
#: The columns read and the types each may hold (``sqlite3`` value types named as ``typeof``).
COLUMNS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "session": (("id", _TEXT), ("project_id", _OPTIONAL), ("parent_id", _OPTIONAL),
                ("directory", _OPTIONAL), ("version", _OPTIONAL), ("title", _OPTIONAL),
                ("time_created", _INT), ("time_updated", _INT)),
    "message": (("id", _TEXT), ("time_created", _INT), ("time_updated", _INT), ("data", _TEXT)),
    "part": (("id", _TEXT), ("message_id", _TEXT), ("time_created", _INT), ("time_updated", _INT),
             ("data", _TEXT)),
}  # fmt: skip
_SELECT = {t: ", ".join(c for c, _kinds in cols) for t, cols in COLUMNS.items()}
#: Every column the checks need to exist (``session_id`` is only filtered on).
_NEEDED = {t: [c for c, _k in cols] + ([] if t == "session" else ["session_id"])
           for t, cols in COLUMNS.items()}  # fmt: skip


class OpenCodeStoreError(JsonltapeError):
    """Not an OpenCode database or storage tree, or one that cannot be read."""

    code = "bad-source"


class _Text(bytes):
    """A TEXT value as SQLite stored it (``text_factory``): told apart from a BLOB, and decoded
    here, so text that is not UTF-8 is a verdict on its row, not an error of the whole read."""


#: What ``typeof`` calls each value ``sqlite3`` returns (with ``text_factory = _Text``).
_KIND: dict[type, str] = {
    _Text: "text",
    type(None): "null",
    bytes: "blob",
    int: "integer",
    float: "real",
}


class SessionRow(NamedTuple):
    """One row of ``session`` with its rows' count and newest change."""

    sid: str | None
    """The session id, or None when the row's id is unusable (``problem`` says why)."""
    record: dict[str, Any]
    """What the session's first record holds (``id``, ``projectID``, ``directory``, ...)."""
    rows: int
    """Its messages and parts."""
    changed_ms: int
    """The newest ``time_updated`` of the session and its rows."""
    problem: str | None
    """Why the session cannot be imported (a row that breaks the types above), or None."""
    title: str | None = None
    """The session's title as OpenCode shows it (rewritten in place: not in ``record``)."""


class _RowError(Exception):
    """A row breaks the types OpenCode writes (the message names the row and column)."""


class Database:
    """One ``opencode.db``, read through short-lived read-only connections under one work cap
    shared by all of them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.used = 0  # SQLite steps so far, in hundreds (_TICK)
        self.cap = BASE_STEPS // _TICK
        self.pages = 0

    @property
    def steps(self) -> int:
        """SQLite steps taken so far by reads of this database (counted to the hundred)."""
        return self.used * _TICK

    # -- connections ----------------------------------------------------------------------

    def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` on a fresh connection (closed after it); SQLite errors, the cap reached
        included, become :class:`OpenCodeStoreError` naming the file."""
        if self.used > self.cap:
            raise self._capped()
        try:
            con = self._connect()
        except sqlite3.Error as exc:
            raise OpenCodeStoreError(f"cannot read the database: {exc}", path=self.path) from None
        try:
            return fn(con)
        except sqlite3.Error as exc:
            if self.used > self.cap:
                raise self._capped() from None
            raise OpenCodeStoreError(f"cannot read the database: {exc}", path=self.path) from None
        finally:
            con.close()

    def _capped(self) -> OpenCodeStoreError:
        return OpenCodeStoreError(
            f"reading it stopped after {self.cap * _TICK:,} SQLite steps, the most its "
            f"{self.pages:,} pages allow ({STEPS_PER_PAGE:,} a page; OpenCode's own databases "
            "need far fewer): a crafted or damaged database",
            path=self.path,
        )

    def _connect(self) -> sqlite3.Connection:
        db = self.path
        quoted = urllib.parse.quote(str(db.resolve()))
        wal = db.with_name(db.name + "-wal").exists()
        shm = db.with_name(db.name + "-shm").exists()
        # mode=ro reads the WAL, but on a WAL database it creates -wal and -shm when they are
        # missing: then nothing is un-checkpointed, and immutable=1 reads the same rows.
        mode = "mode=ro" if (wal and shm) or not _wal_mode(db) else "immutable=1"
        con = sqlite3.connect(f"file:{quoted}?{mode}", uri=True)
        try:
            con.text_factory = _Text
            con.set_progress_handler(self._tick, _TICK)
            (pages,) = con.execute("PRAGMA page_count").fetchone()
            if isinstance(pages, int) and pages > self.pages:  # a live database grows
                self.pages = pages
                self.cap = max(self.cap, (BASE_STEPS + STEPS_PER_PAGE * pages) // _TICK)
        except BaseException:
            con.close()
            raise
        return con

    def _tick(self) -> int:
        self.used += 1
        return 1 if self.used > self.cap else 0

    # -- the schema -----------------------------------------------------------------------

    def check(self, con: sqlite3.Connection) -> None:
        """Refuse a database whose ``session``, ``message`` or ``part`` is not a table with the
        columns read, as stored values."""
        for table, wanted in _NEEDED.items():
            found = con.execute(
                "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE"
                " AND type IN ('table', 'view')",
                (table,),
            ).fetchall()
            why = None
            if not found:
                why = f"no {table!r} table"
            elif found[0][0] != b"table":
                why = f"{table!r} is a view, not a table: OpenCode's is a table"
            elif bytes(found[0][1] or b"").upper().startswith(b"CREATE VIRTUAL"):
                why = f"{table!r} is a virtual table, not a table: OpenCode's is a table"
            else:
                have = {
                    bytes(r[1]).decode("utf-8", "replace"): r[6]
                    for r in con.execute(f"PRAGMA table_xinfo({table})")
                }
                missing = [c for c in wanted if c not in have]
                computed = [c for c in wanted if have.get(c, 0) != 0]
                if missing:
                    why = f"{table!r} lacks {', '.join(missing)}"
                elif computed:
                    why = f"{table!r} computes {', '.join(computed)} when read (generated)"
            if why is not None:
                raise OpenCodeStoreError(f"not an OpenCode database ({why})", path=self.path)

    # -- the rows -------------------------------------------------------------------------

    def sessions(self) -> list[SessionRow]:
        """Every session, oldest first, with its rows' count and newest change."""
        return self.read(self._sessions)

    def _sessions(self, con: sqlite3.Connection) -> list[SessionRow]:
        self.check(con)
        counts: dict[object, list[int]] = {}
        for table in ("message", "part"):
            # Text or NULL times are left out here; the session's render names the row.
            for sid, n, newest in con.execute(
                f"SELECT session_id, count(*), max(CASE WHEN typeof(time_updated) = 'integer'"
                f" THEN time_updated END) FROM {table} GROUP BY session_id"
            ):
                seen = counts.setdefault(sid, [0, 0])
                seen[0] += n
                seen[1] = max(seen[1], newest if isinstance(newest, int) else 0)
        out = []
        for n, row in enumerate(con.execute(f"SELECT {_SELECT['session']} FROM session"
                                            " ORDER BY time_created, id"), 1):  # fmt: skip
            sid = row[0]
            rows, newest = counts.get(sid, (0, 0))
            try:
                values = _checked("session", row, f"number {n} (its id is unusable)")
            except _RowError as exc:
                usable = _utf8(sid) if isinstance(sid, _Text) and sid else None
                out.append(SessionRow(usable, {}, rows, 0, str(exc)))
                continue
            sid, project, parent, directory, version, title, created, updated = values
            record = {"id": sid, "projectID": project, "directory": directory,
                      "parentID": parent, "time": {"created": created},
                      "version": version}  # fmt: skip
            out.append(SessionRow(sid, record, rows, max(updated, newest), None, title))
        return out

    def messages(self, sid: str) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """A session's messages (info with ids, parts), in the order OpenCode reads them."""
        try:
            return self.read(lambda con: list(self._messages(con, sid)))
        except _RowError as exc:
            raise OpenCodeStoreError(
                f"session {sid}: {exc}; nothing of this session is imported", path=self.path
            ) from None

    def _messages(
        self, con: sqlite3.Connection, sid: str
    ) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        parts: dict[str, list[dict[str, Any]]] = {}
        for row in con.execute(
            f"SELECT {_SELECT['part']} FROM part WHERE session_id = ? ORDER BY message_id, id",
            (sid,),
        ):
            pid, mid, _tc, _tu, data = _checked("part", row)
            ids = {"id": pid, "sessionID": sid, "messageID": mid}
            parts.setdefault(mid, []).append(with_ids(ids, _object("part", pid, data)))
        for row in con.execute(
            f"SELECT {_SELECT['message']} FROM message WHERE session_id = ?"
            " ORDER BY time_created, id",
            (sid,),
        ):
            mid, _tc, _tu, data = _checked("message", row)
            info = with_ids({"id": mid, "sessionID": sid}, _object("message", mid, data))
            yield info, parts.get(mid, [])


_SAID = {
    "text": "text",
    "null": "NULL",
    "integer": "an integer",
    "real": "a real number",
    "blob": "a blob",
}


def _checked(table: str, row: tuple[Any, ...], fallback: str = "with an unusable id") -> list[Any]:
    """The row's values (text other than ``data`` decoded), or :class:`_RowError` naming the
    row (by its id, else as ``fallback`` says) and the column."""
    out = list(row)
    for i, (column, kinds) in enumerate(COLUMNS[table]):
        kind = _KIND[type(row[i])]
        if kind not in kinds:
            wanted = " or ".join(_SAID[k] for k in kinds)
            raise _row_error(table, row, fallback, f"{column} holds {_SAID[kind]}, not {wanted}")
        if kind == "text" and column != "data":
            try:
                out[i] = row[i].decode("utf-8")
            except UnicodeDecodeError:
                out[i] = ""
            if not out[i] and (row[i] or column == "id"):
                raise _row_error(table, row, fallback, f"{column} is not UTF-8 text, or empty")
    return out


def _row_error(table: str, row: tuple[Any, ...], fallback: str, why: str) -> _RowError:
    rid = _utf8(row[0]) if isinstance(row[0], _Text) and row[0] else None
    return _RowError(f"{table} row {repr(rid) if rid is not None else fallback}: {why}")


def _object(table: str, rid: str, data: bytes) -> dict[str, Any]:
    """A row's ``data``: a JSON object, or :class:`_RowError` saying why not."""
    where = f"{table} row {rid!r}: data"
    deep = too_deep(data, ROW_DEPTH)
    if deep is not None:
        raise _RowError(f"{where}: {deep}")
    try:
        value = _decode(data)
    except msgspec.DecodeError as exc:
        raise _RowError(f"{where} is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise _RowError(f"{where} is not a JSON object (a {type(value).__name__})")
    return value


def with_ids(ids: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``ids`` first (a stored id of the same name gives way to them)."""
    out = dict(ids)
    out.update((k, v) for k, v in data.items() if k not in ids)
    return out


def _utf8(value: bytes) -> str | None:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _wal_mode(db: Path) -> bool:
    try:
        with open(db, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"
