"""A viewer's session list over the PostgreSQL team index: filters, sort, pages, facets, and
the status of a transcript page's messages (``jsonltape serve``). Every value from a request is
a bound parameter; a sort column is one of :data:`~search.language.SESSION_SORTS`. Row-level
security decides which rows the connection's role sees: a role granted some origins lists
only theirs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jsonltape_daemon.engines.postgres.query import clean, like_pattern
from jsonltape_daemon.engines.postgres.schema import SCHEMA
from jsonltape_daemon.engines.postgres.sessions import PgSessionInfo, SessionKey
from jsonltape_daemon.search.language import (
    FACET_LIMIT,
    SESSION_SORTS,
    ListedSession,
    SessionPage,
    SessionQuery,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["facets", "list_sessions", "statuses"]

_S = '"' + SCHEMA.replace('"', '""') + '"'
_COLS = (
    "s.origin, s.sid, s.id, s.path, s.title, s.cwd, s.agent, s.created, s.updated, s.events, "
    "s.messages, s.state, s.error, s.parent, s.origin, s.closed"
)


def _where(q: SessionQuery) -> tuple[str, list[object]]:
    where: list[str] = []
    params: list[object] = []
    for column, value in (
        ("s.agent", q.agent),
        ("s.cwd", q.cwd),
        ("s.parent", q.parent),
        ("s.origin", q.origin),
    ):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(clean(value))
    if q.text:
        pattern = like_pattern(clean(q.text))
        where.append("(s.title ILIKE %s OR s.id ILIKE %s)")
        params += [pattern, pattern]
    return " AND ".join(where) or "true", params


def list_sessions(con: psycopg.Connection[Any], q: SessionQuery) -> SessionPage:
    """One page of the sessions that pass ``q``'s filters, in its order (ties by key), and
    their number."""
    if q.sort not in SESSION_SORTS:
        raise ValueError(f"cannot sort sessions by {q.sort!r}")
    where, params = _where(q)
    order = "DESC" if q.descending else "ASC"
    column = "coalesce(s.title, '')" if q.sort == "title" else f"s.{q.sort}"
    # the page's keys first, then their rows (the sort carries keys, not whole rows)
    rows = con.execute(
        f"SELECT {_COLS} FROM {_S}.sessions s WHERE (s.origin, s.sid) IN ("
        f"SELECT s.origin, s.sid FROM {_S}.sessions s WHERE {where} "
        f"ORDER BY {column} {order}, s.origin {order}, s.sid {order} LIMIT %s OFFSET %s) "
        f"ORDER BY {column} {order}, s.origin {order}, s.sid {order}",
        [*params, max(q.limit, 0), max(q.offset, 0)],
    ).fetchall()
    found = con.execute(f"SELECT count(*) FROM {_S}.sessions s WHERE {where}", params).fetchone()
    listed = [
        ListedSession((str(r[0]), int(r[1])), PgSessionInfo(*r[2:15]), bool(r[15])) for r in rows
    ]
    return SessionPage(listed, int(found[0]) if found else 0)


def facets(con: psycopg.Connection[Any]) -> dict[str, list[tuple[str, int]]]:
    """The agents, projects (working directories) and origins of the sessions this role may
    read, each with its number of sessions, the most common first (at most
    :data:`FACET_LIMIT` each)."""
    out: dict[str, list[tuple[str, int]]] = {}
    for name, column in (("agent", "s.agent"), ("cwd", "s.cwd"), ("origin", "s.origin")):
        out[name] = [
            (str(v), int(n))
            for v, n in con.execute(
                f"SELECT {column}, count(*) AS n FROM {_S}.sessions s "
                f"WHERE {column} IS NOT NULL GROUP BY {column} ORDER BY n DESC, {column} "
                "LIMIT %s",
                (FACET_LIMIT,),
            )
        ]
    return out


def statuses(con: psycopg.Connection[Any], key: SessionKey, lo: int, hi: int) -> dict[int, str]:
    """The status of each message of session ``key`` whose seq is in ``[lo, hi)``."""
    return {
        int(seq): str(status)
        for seq, status in con.execute(
            f"SELECT seq, status FROM {_S}.messages "
            "WHERE origin = %s AND sid = %s AND seq >= %s AND seq < %s",
            (key[0], key[1], lo, hi),
        )
    }
