"""The session list and transcript windows over the index (``jsonltape sessions``, ``show``).

Texts are read back from the session files (``texts.py``): a message whose line changed under
the index is shown with an empty text until the next sync.
"""

from __future__ import annotations

import sqlite3

from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.search.language import SessionInfo, Turn, Window

__all__ = ["SessionInfo", "Turn", "Window", "resolve_session", "sessions", "window"]


_SESSION_SQL = (
    "SELECT id, path, title, cwd, agent, created, updated, events, messages, state, error, parent "
    "FROM sessions"
)


def _info(r: tuple[object, ...]) -> SessionInfo:
    return SessionInfo(*r)  # type: ignore[arg-type]


def sessions(
    con: sqlite3.Connection, *, limit: int | None = None, path: str | None = None
) -> list[SessionInfo]:
    """Every session, most recent activity (the last event's time) first."""
    sql = _SESSION_SQL
    params: list[object] = []
    if path:
        sql += " WHERE path GLOB ?"
        params.append(path if path.startswith(("/", "*")) else "*" + path)
    sql += " ORDER BY updated DESC, path"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_info(r) for r in con.execute(sql, params)]


def resolve_session(con: sqlite3.Connection, ref: str) -> list[tuple[int, SessionInfo]]:
    """Sessions matching a path, an id or an id prefix (best match kind only)."""
    sql = f"SELECT sid, {_SESSION_SQL[7:]}"
    for where, params in (
        ("path = ?", [ref]),
        ("id = ?", [ref]),
        ("substr(id, 1, length(?)) = ?", [ref, ref]),
    ):
        rows = con.execute(f"{sql} WHERE {where} ORDER BY updated DESC", params).fetchall()
        if rows:
            return [(int(r[0]), _info(r[1:])) for r in rows]
    return []


def window(con: sqlite3.Connection, sid: int, *, last: int, before: int | None) -> Window:
    """The ``last`` messages before seq ``before`` (all statuses), oldest first."""
    params: list[object] = [sid]
    sql = "SELECT seq, time, role, type, status, tkey, truncated FROM messages WHERE sid = ?"
    if before is not None:
        sql += " AND seq < ?"
        params.append(before)
    sql += " ORDER BY seq DESC LIMIT ?"
    params.append(last + 1)
    rows = con.execute(sql, params).fetchall()
    more = len(rows) > last
    rows = rows[:last]
    rows.reverse()
    with Texts(con) as texts:  # a text the file no longer gives is shown empty
        got = texts.get([r[5] for r in rows])
    turns = [Turn(r[0], r[1], r[2], r[3], r[4], got[r[5]] or "", bool(r[6])) for r in rows]
    return Window(turns, turns[0].seq if more and turns else None)
