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

What is checked (by :class:`~._sqlite.SqliteSource`, which also opens the database without
writing beside it): ``session``, ``message`` and ``part`` are real tables holding the columns
read, none generated; each row read: ids are text, times integers, ``data`` text holding a JSON
object nested at most :data:`ROW_DEPTH` levels (so its record stays within
``_source.MAX_DEPTH``); ``project_id``, ``directory`` and ``version`` text or NULL. A session
with a row that is not is refused, naming the row; the other sessions import. The work is
capped (``_sqlite.STEPS_PER_PAGE``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ._source import MAX_DEPTH
from ._sqlite import (
    BASE_STEPS,
    INT,
    OPTIONAL,
    STEPS_PER_PAGE,
    TEXT,
    RowError,
    SqliteSource,
    StoreError,
    Text,
    checked,
    json_value,
    utf8,
)

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

#: The columns read and the types each may hold (``sqlite3`` value types named as ``typeof``).
COLUMNS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "session": (("id", TEXT), ("project_id", OPTIONAL), ("parent_id", OPTIONAL),
                ("directory", OPTIONAL), ("version", OPTIONAL), ("title", OPTIONAL),
                ("time_created", INT), ("time_updated", INT)),
    "message": (("id", TEXT), ("time_created", INT), ("time_updated", INT), ("data", TEXT)),
    "part": (("id", TEXT), ("message_id", TEXT), ("time_created", INT), ("time_updated", INT),
             ("data", TEXT)),
}  # fmt: skip
_SELECT = {t: ", ".join(c for c, _kinds in cols) for t, cols in COLUMNS.items()}


class OpenCodeStoreError(StoreError):
    """Not an OpenCode database or storage tree, or one that cannot be read."""

    code = "bad-source"


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


class Database(SqliteSource):
    """One ``opencode.db`` (see :class:`~._sqlite.SqliteSource`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path, COLUMNS, agent="OpenCode", needed={"message": ["session_id"],
            "part": ["session_id"]}, error=OpenCodeStoreError,
        )  # fmt: skip

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
            except RowError as exc:
                usable = utf8(sid) if isinstance(sid, Text) and sid else None
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
        except RowError as exc:
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


def _checked(table: str, row: tuple[Any, ...], fallback: str = "with an unusable id") -> list[Any]:
    return checked(COLUMNS[table], table, row, raw=("data",), fallback=fallback)


def _object(table: str, rid: str, data: bytes) -> dict[str, Any]:
    """A row's ``data``: a JSON object, or :class:`RowError` saying why not."""
    value: dict[str, Any] = json_value(f"{table} row {rid!r}: data", data, ROW_DEPTH)
    return value


def with_ids(ids: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``ids`` first (a stored id of the same name gives way to them)."""
    out = dict(ids)
    out.update((k, v) for k, v in data.items() if k not in ids)
    return out
