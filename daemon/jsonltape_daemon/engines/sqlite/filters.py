"""A search's filters as SQL, and the spans of full-text keys a filtered search reads.

Every full-text rowid is a message's time-ordered key (``messages.tkey``), so a filter that
bounds the time or the sessions of its messages bounds the keys too: a pass reads its matches
in each span, newest span first, and the rows it reads are still checked against the filter.
The spans come from ``since`` (a key is never below its second's base), ``until`` (nor above
it by more than the index's ``tkey_spill``, schema step 5), the sessions a session or path
filter names (each from its first message's key to its last's, ``sessions.key_lo``/``key_hi``,
step 7), and are none at all when no message has ever had a role and type the filters take
(``message_kinds``, step 5).

The sessions of a path filter may be spread over the whole archive (a project worked on now
and then), so their spans are kept apart rather than joined into one from the first to the
last, each read by a query of its own: at most :data:`SPANS` of them, and a gap between two is
kept only where it would hold :data:`GAP_MESSAGES` messages or more at the archive's average
number of keys per message (skipping fewer saves less than a query costs). A filter naming more
than :data:`SPAN_SESSIONS` sessions reads every key (clipped by the times): the sessions' rows
are not read past that many, so a broad filter such as ``--path '/home/*'`` reads at most
``SPAN_SESSIONS + 1`` of them, not the whole sessions table.
"""

from __future__ import annotations

import itertools
import sqlite3

from jsonltape_daemon.engines.sqlite.schema import tkey_base
from jsonltape_daemon.search.language import Filters

__all__ = ["SPANS", "Span", "filter_sql", "key_spans"]

#: ``[lo, hi)`` of full-text keys; None: open at that end.
Span = tuple[int | None, int | None]
#: The most spans a filtered pass reads (one query each, about 0.03 ms for a word). 64 joined
#: the 125 sessions of one project in 40 (5M messages) in pairs with the 39 others' between
#: them, and a ranked word read 20 matches for each it kept (`stand`: 84 -> 40 ms).
SPANS = 256
#: The fewest messages a gap between two spans must hold to keep them apart: reading a span
#: costs about what checking 100-200 matches does (0.05-0.1 ms), which a gap of 2,000 messages
#: holds for a term in 5-10% of them; a rarer term has few matches to skip anyway.
GAP_MESSAGES = 2000
#: Sessions past which a filter's keys are not bounded by its sessions.
SPAN_SESSIONS = 1024


def filter_sql(f: Filters) -> tuple[str, list[object]]:
    """A filter as a WHERE condition over ``messages m`` (and ``sessions s`` when
    :attr:`Filters.on_sessions`) and its parameters."""
    where: list[str] = []
    params: list[object] = []
    if not f.all:
        where.append("m.status = 'current'")
    if f.session:
        where.append("(s.id = ? OR substr(s.id, 1, length(?)) = ? OR s.path = ?)")
        params += [f.session, f.session, f.session, f.session]
    if f.roles:
        where.append(f"m.role IN ({', '.join('?' * len(f.roles))})")
        params += list(f.roles)
    if f.types:
        where.append("(" + " OR ".join("m.type GLOB ?" for _ in f.types) + ")")
        params += list(f.types)
    if f.since is not None:
        where.append("m.time >= ?")
        params.append(f.since)
    if f.until is not None:
        where.append("m.time < ?")
        params.append(f.until)
    if f.path:
        glob = f.path if f.path.startswith(("/", "*")) else "*" + f.path
        where.append("s.path GLOB ?")
        params.append(glob)
    return " AND ".join(where) or "1", params


def key_spans(con: sqlite3.Connection, filters: Filters) -> list[Span]:
    """The spans of keys that hold every message ``filters`` allow, newest first, disjoint
    (see the module docs); empty when nothing can match."""
    lo = tkey_base(filters.since) if filters.since is not None else None
    hi = None
    row = con.execute("SELECT value FROM meta WHERE key = 'tkey_spill'").fetchone()
    if row is not None:  # schema 5 on: the bounds below are kept (schema._M005)
        if filters.until is not None:
            hi = tkey_base(filters.until) + int(row[0]) + 1
        if filters.roles or filters.types:
            where, params = filter_sql(Filters(roles=filters.roles, types=filters.types, all=True))
            kinds = f"SELECT 1 FROM message_kinds m WHERE {where} LIMIT 1"
            if con.execute(kinds, params).fetchone() is None:
                return []
    if not filters.session and not filters.path:
        return _clip([(lo, hi)], lo, hi)
    where, params = filter_sql(Filters(session=filters.session, path=filters.path, all=True))
    if con.execute("PRAGMA user_version").fetchone()[0] < 7:
        return _clip(_span_of_rows(con, where, params), lo, hi)
    spans = con.execute(
        f"SELECT s.key_lo, s.key_hi + 1 FROM sessions s WHERE {where} AND s.key_lo IS NOT NULL "
        "LIMIT ?",
        [*params, SPAN_SESSIONS + 1],
    ).fetchall()
    if len(spans) > SPAN_SESSIONS:
        return _clip([(None, None)], lo, hi)
    if len(spans) <= 1:  # none: no session, or none with a message, so nothing can match
        return _clip(spans, lo, hi)
    # keys per message over the archive (ids given out, dropped sessions' too: an estimate);
    # one aggregate a statement, each an index look-up (SQLite reads a table for several)
    n, first, last = (
        con.execute(f"SELECT {agg} FROM messages").fetchone()[0]
        for agg in ("max(id)", "min(tkey)", "max(tkey)")
    )
    gap = GAP_MESSAGES * (last - first + 1) // max(n, 1)
    return _clip(_joined(spans, SPANS, gap), lo, hi)


def _span_of_rows(con: sqlite3.Connection, where: str, params: list[object]) -> list[Span]:
    """An index before schema 7: the one span of up to 64 sessions, from their rows."""
    sids = [
        r[0] for r in con.execute(f"SELECT s.sid FROM sessions s WHERE {where} LIMIT 65", params)
    ]
    if len(sids) > 64:
        return [(None, None)]
    a, b = con.execute(
        "SELECT min(tkey), max(tkey) + 1 FROM messages "
        f"WHERE sid IN ({', '.join('?' * len(sids))})",
        sids,
    ).fetchone()
    return [] if a is None else [(a, b)]


def _joined(spans: list[tuple[int, int]], most: int, gap: int) -> list[Span]:
    """``spans`` sorted, joined across every gap of ``gap`` keys or fewer, then across the
    narrowest gaps until at most ``most`` are left."""
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    if len(out) > most:
        gaps = sorted(range(1, len(out)), key=lambda i: out[i][0] - out[i - 1][1])
        widest = gaps[len(out) - most :]  # the most - 1 widest gaps stay
        cuts = [0, *sorted(widest), len(out)]
        out = [[out[i][0], out[j - 1][1]] for i, j in itertools.pairwise(cuts)]
    return [(a, b) for a, b in out]


def _clip(spans: list[Span], lo: int | None, hi: int | None) -> list[Span]:
    """``spans`` within ``[lo, hi)``, the empty ones dropped, newest first."""
    out: list[Span] = []
    for a, b in reversed(spans):
        if lo is not None:
            a = lo if a is None else max(a, lo)
        if hi is not None:
            b = hi if b is None else min(b, hi)
        if a is None or b is None or a < b:
            out.append((a, b))
    return out
