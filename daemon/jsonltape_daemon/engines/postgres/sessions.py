"""The session list and transcript windows of the PostgreSQL team index: what ``jsonltape
sessions`` and ``show`` read. Every value from the user is a bound parameter; ``origins``
restricts a list or a lookup to some origins (the same path or id may be on several)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jsonltape_daemon.engines.postgres._rows import clean
from jsonltape_daemon.engines.postgres.query import sessions_where
from jsonltape_daemon.engines.postgres.schema import SCHEMA
from jsonltape_daemon.search.language import SessionInfo, Turn, Window

if TYPE_CHECKING:
    import psycopg

__all__ = ["PgSessionInfo", "SessionKey", "resolve_session", "sessions", "window"]

_S = '"' + SCHEMA.replace('"', '""') + '"'
#: A session of the team index: ``(origin, sid)``.
SessionKey = tuple[str, int]


class PgSessionInfo(SessionInfo):
    """A session of the team index: :class:`~search.language.SessionInfo` and its origin."""

    origin: str


_SESSION_COLS = (
    "s.id, s.path, s.title, s.cwd, s.agent, s.created, s.updated, s.events, s.messages, "
    "s.state, s.error, s.parent, s.origin"
)


def _info(r: Sequence[Any]) -> PgSessionInfo:
    return PgSessionInfo(*r)


def sessions(
    con: psycopg.Connection[Any],
    *,
    limit: int | None = None,
    path: str | None = None,
    origins: Sequence[str] = (),
) -> list[PgSessionInfo]:
    """Every session (of ``origins``, when given), most recent activity first."""
    where, params = sessions_where(None, path, origins)
    sql = f"SELECT {_SESSION_COLS} FROM {_S}.sessions s WHERE {where} "
    sql += "ORDER BY s.updated DESC, s.path, s.origin"
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    return [_info(r) for r in con.execute(sql, params)]


def resolve_session(
    con: psycopg.Connection[Any], ref: str, *, origins: Sequence[str] = ()
) -> list[tuple[SessionKey, PgSessionInfo]]:
    """Sessions matching a path, an id or an id prefix (best match kind only); the same path
    or id may be found on several origins."""
    extra, extra_params = sessions_where(None, None, origins)
    ref = clean(ref)
    for where, params in (
        ("s.path = %s", [ref]),
        ("s.id = %s", [ref]),
        ("starts_with(s.id, %s)", [ref]),
    ):
        rows = con.execute(
            f"SELECT s.origin, s.sid, {_SESSION_COLS} FROM {_S}.sessions s "
            f"WHERE {where} AND {extra} ORDER BY s.updated DESC, s.origin",
            [*params, *extra_params],
        ).fetchall()
        if rows:
            return [((str(r[0]), int(r[1])), _info(r[2:])) for r in rows]
    return []


def window(
    con: psycopg.Connection[Any], session: SessionKey, *, last: int, before: int | None
) -> Window:
    """The ``last`` messages before seq ``before`` (all statuses), oldest first."""
    params: list[object] = [session[0], session[1]]
    sql = (
        f"SELECT seq, time, role, type, status, text, truncated FROM {_S}.messages "
        "WHERE origin = %s AND sid = %s"
    )
    if before is not None:
        sql += " AND seq < %s"
        params.append(before)
    sql += " ORDER BY seq DESC LIMIT %s"
    params.append(last + 1)
    rows = con.execute(sql, params).fetchall()
    more = len(rows) > last
    rows = rows[:last]
    rows.reverse()
    turns = [Turn(int(r[0]), int(r[1]), r[2], r[3], r[4], r[5], bool(r[6])) for r in rows]
    return Window(turns, turns[0].seq if more and turns else None)
