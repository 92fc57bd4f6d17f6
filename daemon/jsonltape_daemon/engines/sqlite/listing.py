"""A viewer's session list over the local index: filters, sort, pages, facets, and the status
of a transcript page's messages (``jsonltape serve``). Every value from a request is a bound
parameter; a sort column is one of :data:`~search.language.SESSION_SORTS`, never request text.
"""

from __future__ import annotations

import sqlite3

from jsonltape_daemon.search.language import (
    FACET_LIMIT,
    SESSION_SORTS,
    ListedSession,
    SessionInfo,
    SessionPage,
    SessionQuery,
)

__all__ = ["facets", "list_sessions", "statuses"]

_COLS = "sid, id, path, title, cwd, agent, created, updated, events, messages, state, error, parent"


def _where(q: SessionQuery) -> tuple[str, list[object]]:
    where: list[str] = []
    params: list[object] = []
    for column, value in (("agent", q.agent), ("cwd", q.cwd), ("parent", q.parent)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if q.text:
        pattern = "%" + q.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        where.append("(title LIKE ? ESCAPE '\\' OR id LIKE ? ESCAPE '\\')")
        params += [pattern, pattern]
    return (" WHERE " + " AND ".join(where)) if where else "", params


def list_sessions(con: sqlite3.Connection, q: SessionQuery) -> SessionPage:
    """One page of the sessions that pass ``q``'s filters, in its order (ties by key), and
    their number. A local index has no origins: a query naming one finds nothing."""
    if q.origin is not None:
        return SessionPage([], 0)
    if q.sort not in SESSION_SORTS:
        raise ValueError(f"cannot sort sessions by {q.sort!r}")
    where, params = _where(q)
    order = "DESC" if q.descending else "ASC"
    column = "coalesce(title, '')" if q.sort == "title" else q.sort
    # the page's keys first, then their rows: the sort carries keys, not whole rows (20,000
    # sessions, page 200 by creation time: 70-115 -> 25-44 ms)
    rows = con.execute(
        f"SELECT {_COLS}, closed FROM sessions WHERE sid IN (SELECT sid FROM sessions{where} "
        f"ORDER BY {column} {order}, sid {order} LIMIT ? OFFSET ?) "
        f"ORDER BY {column} {order}, sid {order}",
        [*params, max(q.limit, 0), max(q.offset, 0)],
    ).fetchall()
    total = con.execute(f"SELECT count(*) FROM sessions{where}", params).fetchone()[0]
    listed = [ListedSession(int(r[0]), SessionInfo(*r[1:13]), bool(r[13])) for r in rows]
    return SessionPage(listed, int(total))


def facets(con: sqlite3.Connection) -> dict[str, list[tuple[str, int]]]:
    """The agents and projects (working directories) of the indexed sessions, each with its
    number of sessions, the most common first (at most :data:`FACET_LIMIT` each)."""
    out: dict[str, list[tuple[str, int]]] = {"origin": []}
    for column in ("agent", "cwd"):
        out[column] = [
            (str(v), int(n))
            for v, n in con.execute(
                f"SELECT {column}, count(*) AS n FROM sessions WHERE {column} IS NOT NULL "
                f"GROUP BY {column} ORDER BY n DESC, {column} LIMIT ?",
                (FACET_LIMIT,),
            )
        ]
    return out


def statuses(con: sqlite3.Connection, sid: int, lo: int, hi: int) -> dict[int, str]:
    """The status (current, superseded, compacted, retracted...) of each message of session
    ``sid`` whose seq is in ``[lo, hi)``."""
    return {
        int(seq): str(status)
        for seq, status in con.execute(
            "SELECT seq, status FROM messages WHERE sid = ? AND seq >= ? AND seq < ?",
            (sid, lo, hi),
        )
    }
