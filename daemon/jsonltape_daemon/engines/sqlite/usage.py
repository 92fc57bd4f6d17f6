"""Token usage in the SQLite index: one row per response, counted once per key, summed per slot.

``usage`` holds a row per response event (``jsonltape.usage.response_of``: its tokens, model,
tier and key). Of the rows that share a key (the same response logged in several places),
exactly one has ``counted = 1``: the one :data:`RANK` puts first. Every change of what is
counted goes through :meth:`UsageRows._settle`, which also keeps ``usage_slots`` -- the counted
rows summed per session, 15-minute slot, model, tier and fast mode -- in step by adding and
subtracting the rows whose flag changed; reports read the slots. ``usage_sessions`` holds
each session's names in the sub-agent tree (``jsonltape.usage.session_links``).

The rows follow their session: added with its events, dropped with it, settled again when its
file moves (a rename changes the rank of identical copies). A rebuild gives the same rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from jsonltape.usage import SLOT_MS, Links, Response
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.usage import shift_sql

if TYPE_CHECKING:
    from jsonltape.usage import SessionNode

__all__ = ["RANK", "UsageReads", "UsageRows", "usage_check"]

#: Which row of a key is counted: the copy in the session created first (then by id and
#: header, for copies of one session the path), and in it the latest version (highest seq).
RANK = "s.created, s.id, s.header_crc, u.seq DESC, s.path"

_TOKENS = ("input", "output", "cache_5m", "cache_1h", "cache_read", "reasoning")
_COLS = ("sid", "seq", "rkey", "time", "model", *_TOKENS, "tier", "fast")
_INSERT = f"INSERT INTO usage ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"
_SLOT_KEY = "sid, slot, model, tier, fast"
_CHANGED = "(sid, seq) IN (SELECT sid, seq FROM temp.usage_changed)"
_SUMS = ", ".join(f"{{sign}} * sum({t})" for t in _TOKENS)
_ADD_SLOTS = f"""
INSERT INTO usage_slots ({_SLOT_KEY}, responses, {", ".join(_TOKENS)})
SELECT sid, time / {SLOT_MS}, model, tier, fast, {{sign}} * count(*), {_SUMS}
FROM usage WHERE {_CHANGED}
GROUP BY sid, time / {SLOT_MS}, model, tier, fast
ON CONFLICT ({_SLOT_KEY}) DO UPDATE SET responses = responses + excluded.responses,
    {", ".join(f"{t} = {t} + excluded.{t}" for t in _TOKENS)}
"""
_TEMP = (
    "CREATE TEMP TABLE IF NOT EXISTS usage_keys (rkey TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS usage_win (sid INTEGER, seq INTEGER, PRIMARY KEY (sid, seq))"
    " WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS usage_changed (sid INTEGER, seq INTEGER, "
    "PRIMARY KEY (sid, seq)) WITHOUT ROWID",
)


class UsageRows:
    """The usage upkeep of :class:`~.store.SqliteStore` (a mixin over its ``con``)."""

    con: sqlite3.Connection

    def add_usage(self, sid: int, rows: Sequence[tuple[int, Response]]) -> None:
        """Rows of the responses ``(seq, response)`` of session ``sid``, then count them."""
        self.con.executemany(
            _INSERT,
            [
                (sid, seq, r.rkey, r.time, r.model, *r.tokens, r.tier, int(r.fast))
                for seq, r in rows
            ],
        )
        self._settle(r.rkey for _seq, r in rows)

    def add_usage_session(self, sid: int, links: Links) -> None:
        self.con.execute(
            "INSERT OR REPLACE INTO usage_sessions (sid, name, alias, up) VALUES (?, ?, ?, ?)",
            (sid, *links),
        )

    def drop_usage(self, sid: int) -> None:
        """Before session ``sid`` goes: its rows, and whichever copies of them count now."""
        keys = [k for (k,) in self.con.execute("SELECT rkey FROM usage WHERE sid = ?", (sid,))]
        self.con.execute("DELETE FROM usage_sessions WHERE sid = ?", (sid,))
        if not keys:
            return
        self._changed("SELECT sid, seq FROM usage WHERE sid = ? AND counted", (sid,))
        self._slots(-1)
        self.con.execute("DELETE FROM usage WHERE sid = ?", (sid,))
        self._settle(keys)

    def moved_usage(self, path: str) -> None:
        """After a session's file moved: its path decides between identical copies."""
        self._settle(
            k
            for (k,) in self.con.execute(
                "SELECT u.rkey FROM usage u JOIN sessions s USING (sid) WHERE s.path = ?", (path,)
            ).fetchall()
        )

    def _changed(self, select: str, params: Sequence[Any] = ()) -> None:
        for statement in _TEMP:  # per connection (a bulk load has its own)
            self.con.execute(statement)
        self.con.execute("DELETE FROM temp.usage_changed")
        self.con.execute(f"INSERT INTO temp.usage_changed (sid, seq) {select}", params)

    def _slots(self, sign: int) -> None:
        """Add (1) or subtract (-1) the rows of ``usage_changed`` to or from the slots."""
        con = self.con
        con.execute(_ADD_SLOTS.format(sign=sign))
        if sign < 0:
            con.execute(
                "DELETE FROM usage_slots WHERE responses = 0 AND sid IN "
                "(SELECT DISTINCT sid FROM temp.usage_changed)"
            )

    def _settle(self, keys: Iterable[str]) -> None:
        """Count exactly the :data:`RANK`-first row of each of ``keys``."""
        con = self.con
        self._changed("SELECT sid, seq FROM usage WHERE 0")  # the scratch tables, empty
        con.execute("DELETE FROM temp.usage_keys")
        con.executemany(
            "INSERT OR IGNORE INTO temp.usage_keys (rkey) VALUES (?)", ((k,) for k in keys)
        )
        con.execute("DELETE FROM temp.usage_win")
        con.execute(
            f"""INSERT INTO temp.usage_win (sid, seq)
            SELECT sid, seq FROM (
                SELECT u.sid, u.seq, row_number() OVER (PARTITION BY u.rkey ORDER BY {RANK}) AS n
                FROM usage u JOIN sessions s ON s.sid = u.sid
                WHERE u.rkey IN (SELECT rkey FROM temp.usage_keys)
            ) WHERE n = 1"""
        )
        self._changed(
            "SELECT sid, seq FROM usage WHERE counted AND rkey IN "
            "(SELECT rkey FROM temp.usage_keys) AND (sid, seq) NOT IN "
            "(SELECT sid, seq FROM temp.usage_win)"
        )
        self._slots(-1)
        con.execute(f"UPDATE usage SET counted = 0 WHERE {_CHANGED}")
        self._changed(
            "SELECT w.sid, w.seq FROM temp.usage_win w JOIN usage u ON u.sid = w.sid AND "
            "u.seq = w.seq WHERE NOT u.counted"
        )
        con.execute(f"UPDATE usage SET counted = 1 WHERE {_CHANGED}")
        self._slots(1)

    # -- the usage backfill of an index migrated to schema 12 ---------------------------

    def sessions_without_usage(self) -> list[tuple[int, str, str, str | None]]:
        """Sessions indexed before usage was counted: (sid, id, path, parent)."""
        return self.con.execute(
            "SELECT s.sid, s.id, s.path, s.parent FROM sessions s "
            "WHERE NOT EXISTS (SELECT 1 FROM usage_sessions u WHERE u.sid = s.sid) ORDER BY s.sid"
        ).fetchall()

    def response_marks(self, sid: int) -> list[tuple[int, str, int, int, str]]:
        """(seq, type, offset, size, crc) of a session's header and the events that may be
        responses."""
        return self.con.execute(
            "SELECT seq, type, offset, size, crc FROM events WHERE sid = ? AND (seq = 0 OR "
            "type IN ('assistant/message', 'branch/event')) ORDER BY seq",
            (sid,),
        ).fetchall()

    def reread(self, sid: int) -> None:
        """Make the next sync ingest this session's file (and its members) again."""
        self.con.execute(
            "UPDATE files SET dev = NULL, ino = NULL, size = NULL, mtime_ns = NULL, "
            "last_seq = NULL WHERE sid = ?",
            (sid,),
        )


def usage_check(con: sqlite3.Connection) -> None:
    """Raise :class:`~jsonltape_daemon.errors.IndexStateError` when this index cannot give
    complete usage reports yet."""
    version = con.execute("PRAGMA user_version").fetchone()[0]
    have = con.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'usage_sessions'"
    ).fetchone()
    if have is None:
        raise IndexStateError(
            f"this index (schema {version}) predates usage reports: run `jsonltape sync` (or "
            "start the daemon) once to migrate it"
        )
    # every session has its usage_sessions row from its first transaction on (and loses it
    # with its row): two counts, not a look-up per session (1M events: 32 -> 0.1 ms)
    (left,) = con.execute(
        "SELECT (SELECT count(*) FROM sessions) - (SELECT count(*) FROM usage_sessions)"
    ).fetchone()
    if left:
        raise IndexStateError(
            f"the usage of {left} sessions indexed before jsonltape counted usage is not in the "
            "index yet: run `jsonltape sync` (or start the daemon) once"
        )


def _agent(column: str) -> str:
    """The agent's name: what the header's ``agent`` says before a ``/`` (its version)."""
    return (
        f"CASE WHEN instr({column}, '/') > 0 THEN substr({column}, 1, instr({column}, '/') - 1) "
        f"ELSE {column} END"
    )


def _range(lo: int | None, hi: int | None, column: str) -> tuple[str, list[int]]:
    where, params = [], []
    if lo is not None:
        where.append(f"{column} >= ?")
        params.append(lo)
    if hi is not None:
        where.append(f"{column} < ?")
        params.append(hi)
    return (" WHERE " + " AND ".join(where)) if where else "", params


class UsageReads:
    """The report queries of a read-only connection (``search/reader.py``)."""

    def __init__(self, con: sqlite3.Connection, origin: str) -> None:
        self.con, self.origin = con, origin

    def span(self) -> tuple[int, int] | None:
        # two subqueries: SQLite reads min() or max() alone from the index, not both at once
        lo, hi = self.con.execute(
            "SELECT (SELECT min(slot) FROM usage_slots), (SELECT max(slot) FROM usage_slots)"
        ).fetchone()
        return None if lo is None else (lo, hi)

    def days(
        self,
        shifts: Sequence[tuple[int, int]],
        lo: int | None,
        hi: int | None,
        dims: Sequence[str],
    ) -> list[tuple[Any, ...]]:
        offset = shift_sql(shifts, "u.slot")
        columns = {"agent": _agent("s.agent"), "project": "s.cwd", "origin": "?"}
        picked = [columns[d] for d in dims]
        where, params = _range(lo, hi, "u.slot")
        join = " JOIN sessions s ON s.sid = u.sid" if set(dims) - {"origin"} else ""
        group = ["day", "model", "tier", "fast", *(f"d{i}" for i in range(len(dims)))]
        sql = (
            f"SELECT (u.slot * {SLOT_MS} + {offset}) / 86400000 AS day, u.model, u.tier, u.fast"
            + "".join(f", {c} AS d{i}" for i, c in enumerate(picked))
            + ", sum(u.responses), "
            + ", ".join(f"sum(u.{t})" for t in _TOKENS)
            + f" FROM usage_slots u{join}{where} GROUP BY {', '.join(group)}"
        )
        origin_params = [self.origin for d in dims if d == "origin"]
        return self.con.execute(sql, [*origin_params, *params]).fetchall()

    def by_session(
        self, lo: int | None, hi: int | None, sids: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        where, bounds = _range(lo, hi, "slot")
        params: list[Any] = list(bounds)
        if sids is not None:  # a page of a list: these sessions' slots, by the primary key
            where += (" AND " if where else " WHERE ") + "sid IN (SELECT value FROM json_each(?))"
            params.append(json.dumps([int(s) for s in sids]))
        return self.con.execute(
            "SELECT sid, model, tier, fast, sum(responses), "
            + ", ".join(f"sum({t})" for t in _TOKENS)
            + f" FROM usage_slots{where} GROUP BY sid, model, tier, fast",
            params,
        ).fetchall()

    def sessions(self) -> Iterator[SessionNode]:
        from jsonltape.usage import SessionNode

        for sid, id_, path, title, cwd, agent, updated, name, alias, up in self.con.execute(
            "SELECT s.sid, s.id, s.path, s.title, s.cwd, s.agent, s.updated, u.name, u.alias, "
            "u.up FROM sessions s JOIN usage_sessions u ON u.sid = s.sid"
        ):
            yield SessionNode(
                sid, id_, path, title, cwd, agent, updated, self.origin, name, alias, up
            )

    def responses(self, lo: int | None, hi: int | None) -> list[tuple[Any, ...]]:
        where, params = _range(lo, hi, "time")
        where = (where + " AND counted") if where else " WHERE counted"
        return self.con.execute(
            f"SELECT time, model, tier, fast, {', '.join(_TOKENS)} FROM usage{where} "
            "ORDER BY time, sid, seq",
            params,
        ).fetchall()
