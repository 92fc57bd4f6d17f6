"""Token usage in the PostgreSQL team index: the SQLite design (``engines/sqlite/usage.py``)
with every row keyed by origin.

Each origin's writer counts one row per key among its own rows (:data:`RANK`, with the text
columns compared byte by byte as SQLite does, ``COLLATE "C"``) and keeps its ``usage_slots`` in
step. Another origin may hold the same response (a session file kept in git and synced by
several machines): the reports count a key once over all origins, in the first origin by name
that counts it (:func:`duplicate_sums` finds what to take away, usually nothing).

The migration (:data:`MIGRATION`, a step of ``migrations.MIGRATIONS``) creates the three
tables, and on an index set up by ``index init`` gives them the row-level security, policies
and grants of ``files``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jsonltape.usage import SLOT_MS, Links, Response
from jsonltape_daemon.engines.postgres._rows import clean
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.usage import shift_sql

if TYPE_CHECKING:
    import psycopg

    from jsonltape.usage import SessionNode

__all__ = ["MIGRATION", "RANK", "PgUsage", "UsageQueries"]

RANK = 's.created, s.id COLLATE "C", s.header_crc COLLATE "C", u.seq DESC, s.path COLLATE "C"'
_TOKENS = ("input", "output", "cache_5m", "cache_1h", "cache_read", "reasoning")
_COLS = ("sid", "seq", "rkey", "time", "model", *_TOKENS, "tier", "fast")

MIGRATION = """
CREATE TABLE {s}.usage (
    origin     text NOT NULL,
    sid        bigint NOT NULL,
    seq        bigint NOT NULL,
    rkey       text NOT NULL,
    time       bigint NOT NULL,
    model      text NOT NULL,
{tokens}    tier       smallint NOT NULL,
    fast       boolean NOT NULL,
    counted    boolean NOT NULL DEFAULT false,
    PRIMARY KEY (origin, sid, seq),
    FOREIGN KEY (origin, sid) REFERENCES {s}.sessions ON DELETE CASCADE
);
CREATE INDEX usage_rkey ON {s}.usage (rkey COLLATE "C", origin) WHERE counted;
CREATE INDEX usage_origin_rkey ON {s}.usage (origin, rkey);
CREATE INDEX usage_time ON {s}.usage (time) WHERE counted;
CREATE TABLE {s}.usage_slots (
    origin     text NOT NULL,
    sid        bigint NOT NULL,
    slot       bigint NOT NULL,
    model      text NOT NULL,
    tier       smallint NOT NULL,
    fast       boolean NOT NULL,
    responses  bigint NOT NULL,
{tokens}    PRIMARY KEY (origin, sid, slot, model, tier, fast),
    FOREIGN KEY (origin, sid) REFERENCES {s}.sessions ON DELETE CASCADE
);
CREATE INDEX usage_slots_slot ON {s}.usage_slots (slot);
CREATE TABLE {s}.usage_sessions (
    origin text NOT NULL,
    sid    bigint NOT NULL,
    name   text NOT NULL,
    alias  text,
    up     text,
    PRIMARY KEY (origin, sid),
    FOREIGN KEY (origin, sid) REFERENCES {s}.sessions ON DELETE CASCADE
);
-- An index set up by `index init` gets the security of `files` on the new tables: its
-- row-level security, its policies, its grants.
DO $$
DECLARE r record; t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['usage', 'usage_slots', 'usage_sessions'] LOOP
        IF (SELECT relrowsecurity FROM pg_class WHERE oid = '{s}.files'::regclass) THEN
            EXECUTE format('ALTER TABLE {s}.%I ENABLE ROW LEVEL SECURITY', t);
        END IF;
        FOR r IN SELECT * FROM pg_policies WHERE schemaname = {n} AND tablename = 'files' LOOP
            EXECUTE format('CREATE POLICY %I ON {s}.%I AS %s FOR %s TO %s',
                           r.policyname, t, r.permissive, r.cmd,
                           (SELECT string_agg(quote_ident(x), ', ') FROM unnest(r.roles) x))
                || coalesce(' USING (' || r.qual || ')', '')
                || coalesce(' WITH CHECK (' || r.with_check || ')', '');
        END LOOP;
        FOR r IN SELECT grantee, privilege_type FROM information_schema.role_table_grants
            WHERE table_schema = {n} AND table_name = 'files'
            AND grantee <> (SELECT pg_get_userbyid(relowner) FROM pg_class
                            WHERE oid = '{s}.files'::regclass)
        LOOP
            EXECUTE format('GRANT %s ON {s}.%I TO %s', r.privilege_type, t,
                           CASE WHEN r.grantee = 'PUBLIC' THEN 'PUBLIC'
                           ELSE quote_ident(r.grantee) END);
        END LOOP;
    END LOOP;
END $$;
"""
MIGRATION = MIGRATION.replace(
    "{tokens}", "".join(f"    {name:<10} bigint NOT NULL,\n" for name in _TOKENS)
)


class PgUsage:
    """The usage upkeep of :class:`~.store.PgStore` (a mixin): rows are held until the
    store's flush, after the session rows they belong to."""

    origin: str
    _s: str
    _usage_held: list[tuple[Any, ...]] | None = None

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        raise NotImplementedError

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def add_usage(self, sid: int, rows: Sequence[tuple[int, Response]]) -> None:
        held = self._usage_held if self._usage_held is not None else []
        held += [
            (sid, seq, clean(r.rkey), r.time, clean(r.model), *r.tokens, r.tier, r.fast)
            for seq, r in rows
        ]
        self._usage_held = held

    def add_usage_session(self, sid: int, links: Links) -> None:
        self._exec(
            f"INSERT INTO {self._s}.usage_sessions (origin, sid, name, alias, up) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (origin, sid) DO UPDATE SET "
            "name = EXCLUDED.name, alias = EXCLUDED.alias, up = EXCLUDED.up",
            (self.origin, sid, *(clean(x) if x is not None else None for x in links)),
        )

    def _forget_usage(self, sid: int | None = None) -> None:
        if sid is None or self._usage_held is None:
            self._usage_held = None
        else:
            self._usage_held = [r for r in self._usage_held if r[0] != sid]

    def _flush_usage(self) -> None:
        """Insert the held rows (their sessions are written) and count them."""
        held, self._usage_held = self._usage_held, None
        if not held:
            return
        cols = ", ".join(_COLS)
        self._exec(
            f"INSERT INTO {self._s}.usage (origin, {cols}) SELECT %s, * FROM unnest("
            "%s::bigint[], %s::bigint[], %s::text[], %s::bigint[], %s::text[], "
            + ", ".join(["%s::bigint[]"] * len(_TOKENS))
            + ", %s::smallint[], %s::boolean[]) ON CONFLICT DO NOTHING",
            (self.origin, *([r[i] for r in held] for i in range(len(_COLS)))),
        )
        self._settle({r[2] for r in held})

    def drop_usage(self, sid: int) -> None:
        """Before session ``sid`` is deleted: take its counted rows out of the slots and
        count whichever copies of its responses remain."""
        self._forget_usage(sid)
        s = self._s
        keys = [
            k
            for (k,) in self._all(
                f"SELECT rkey FROM {s}.usage WHERE origin = %s AND sid = %s", (self.origin, sid)
            )
        ]
        if not keys:
            return
        rows = self._all(
            f"SELECT sid, seq FROM {s}.usage WHERE origin = %s AND sid = %s AND counted",
            (self.origin, sid),
        )
        self._slots(rows, -1)
        self._exec(f"DELETE FROM {s}.usage WHERE origin = %s AND sid = %s", (self.origin, sid))
        self._settle(keys)

    def moved_usage(self, path: str) -> None:
        self._settle(
            k
            for (k,) in self._all(
                f"SELECT u.rkey FROM {self._s}.usage u JOIN {self._s}.sessions s "
                "ON s.origin = u.origin AND s.sid = u.sid WHERE s.origin = %s AND s.path = %s",
                (self.origin, clean(path)),
            )
        )

    def _slots(self, rows: Sequence[tuple[int, int]], sign: int) -> None:
        if not rows:
            return
        s = self._s
        sums = ", ".join(f"{sign} * sum({t})" for t in _TOKENS)
        self._exec(
            f"INSERT INTO {s}.usage_slots (origin, sid, slot, model, tier, fast, responses, "
            f"{', '.join(_TOKENS)}) SELECT origin, sid, time / {SLOT_MS}, model, tier, fast, "
            f"{sign} * count(*), {sums} FROM {s}.usage WHERE origin = %s AND (sid, seq) IN "
            "(SELECT * FROM unnest(%s::bigint[], %s::bigint[])) "
            f"GROUP BY origin, sid, time / {SLOT_MS}, model, tier, fast "
            "ON CONFLICT (origin, sid, slot, model, tier, fast) DO UPDATE SET "
            "responses = usage_slots.responses + EXCLUDED.responses, "
            + ", ".join(f"{t} = usage_slots.{t} + EXCLUDED.{t}" for t in _TOKENS),
            (self.origin, [r[0] for r in rows], [r[1] for r in rows]),
        )
        if sign < 0:
            self._exec(
                f"DELETE FROM {s}.usage_slots WHERE origin = %s AND sid = ANY(%s) "
                "AND responses = 0",
                (self.origin, sorted({r[0] for r in rows})),
            )

    def _settle(self, keys: Iterable[str]) -> None:
        """Count exactly the :data:`RANK`-first row of each of ``keys`` (this origin's)."""
        wanted = sorted(set(keys))
        if not wanted:
            return
        s = self._s
        flips = self._all(
            f"""SELECT sid, seq, n = 1 FROM (
                SELECT u.sid, u.seq, u.counted,
                    row_number() OVER (PARTITION BY u.rkey ORDER BY {RANK}) AS n
                FROM {s}.usage u JOIN {s}.sessions s ON s.origin = u.origin AND s.sid = u.sid
                WHERE u.origin = %s AND u.rkey = ANY(%s)
            ) r WHERE (n = 1) <> counted""",
            (self.origin, wanted),
        )
        losers = [(a, b) for a, b, win in flips if not win]
        winners = [(a, b) for a, b, win in flips if win]
        self._slots(losers, -1)
        for rows, flag in ((losers, False), (winners, True)):
            if rows:
                self._exec(
                    f"UPDATE {s}.usage SET counted = %s WHERE origin = %s AND (sid, seq) IN "
                    "(SELECT * FROM unnest(%s::bigint[], %s::bigint[]))",
                    (flag, self.origin, [r[0] for r in rows], [r[1] for r in rows]),
                )
        self._slots(winners, 1)

    # -- the backfill of sessions pushed before the migration (``ingest/usage.py``) ------

    def sessions_without_usage(self) -> list[tuple[int, str, str, str | None]]:
        s = self._s
        return [
            (int(a), b, c, d)
            for a, b, c, d in self._all(
                f"SELECT x.sid, x.id, x.path, x.parent FROM {s}.sessions x WHERE x.origin = %s "
                f"AND NOT EXISTS (SELECT FROM {s}.usage_sessions u WHERE u.origin = x.origin "
                "AND u.sid = x.sid) ORDER BY x.sid",
                (self.origin,),
            )
        ]

    def response_marks(self, sid: int) -> list[tuple[int, str, int, int, str]]:
        return [
            (int(a), b, int(c), int(d), e)
            for a, b, c, d, e in self._all(
                f'SELECT seq, type, "offset", size, crc FROM {self._s}.events WHERE origin = %s '
                "AND sid = %s AND (seq = 0 OR type IN ('assistant/message', 'branch/event')) "
                "ORDER BY seq",
                (self.origin, sid),
            )
        ]

    def reread(self, sid: int) -> None:
        self._exec(
            f"UPDATE {self._s}.files SET dev = NULL, ino = NULL, size = NULL, mtime_ns = NULL, "
            "last_seq = NULL WHERE origin = %s AND sid = %s",
            (self.origin, sid),
        )


def _origins(origins: Sequence[str], column: str) -> tuple[str, list[Any]]:
    return (f" AND {column} = ANY(%s)", [list(origins)]) if origins else ("", [])


def _range(lo: int | None, hi: int | None, column: str) -> tuple[str, list[Any]]:
    where, params = "", []
    if lo is not None:
        where += f" AND {column} >= %s"
        params.append(lo)
    if hi is not None:
        where += f" AND {column} < %s"
        params.append(hi)
    return where, params


class UsageQueries:
    """The report queries over a read-only connection (``search/reader.py``)."""

    def __init__(self, con: psycopg.Connection[Any], schema: str) -> None:
        self.con, self._s = con, '"' + schema.replace('"', '""') + '"'
        # room to hash a report's groups (4 MB, the default, sorts the slots on disk instead:
        # 1M events, a daily report by origin 270 -> 24 ms on the server)
        self.con.execute(b"SET work_mem = '64MB'")

    def _rows(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return list(self.con.execute(sql.encode(), params).fetchall())

    def check(self) -> None:
        """Raise :class:`~jsonltape_daemon.errors.IndexStateError` when the team index cannot
        give complete usage reports yet."""
        s = self._s
        (missing,) = self.con.execute(
            f"SELECT to_regclass('{s}.usage_sessions') IS NULL".encode()
        ).fetchone() or (True,)
        if missing:
            raise IndexStateError(
                "this team index predates usage reports: a `jsonltape sync` of any origin "
                "migrates it"
            )
        # every session has its usage_sessions row from its first transaction on: counts per
        # origin, not a look-up per session
        rows = [
            (o, n - m)
            for o, n, m in self._rows(
                f"SELECT x.origin, x.n, coalesce(u.n, 0) FROM (SELECT origin, count(*) AS n "
                f"FROM {s}.sessions GROUP BY origin) x LEFT JOIN (SELECT origin, count(*) AS n "
                f"FROM {s}.usage_sessions GROUP BY origin) u ON u.origin = x.origin "
                "ORDER BY x.origin",
                (),
            )
            if n != m
        ]
        if rows:
            which = ", ".join(f"{o} ({n} sessions)" for o, n in rows)
            raise IndexStateError(
                f"the usage of sessions pushed before jsonltape counted usage is not in the "
                f"index yet: {which}; the next sync of each of those origins adds it"
            )

    def span(self, origins: Sequence[str]) -> tuple[int, int] | None:
        where, params = _origins(origins, "origin")
        row = self.con.execute(
            f"SELECT min(slot), max(slot) FROM {self._s}.usage_slots WHERE true{where}".encode(),
            params,
        ).fetchone()
        return None if row is None or row[0] is None else (int(row[0]), int(row[1]))

    def days(
        self,
        shifts: Sequence[tuple[int, int]],
        lo: int | None,
        hi: int | None,
        dims: Sequence[str],
        origins: Sequence[str],
    ) -> list[tuple[Any, ...]]:
        s = self._s
        columns = {"agent": "split_part(x.agent, '/', 1)", "project": "x.cwd", "origin": "u.origin"}
        picked = [columns[d] for d in dims]
        where, params = _range(lo, hi, "u.slot")
        owhere, oparams = _origins(origins, "u.origin")
        join = (
            f" JOIN {s}.sessions x ON x.origin = u.origin AND x.sid = u.sid"
            if set(dims) - {"origin"}
            else ""
        )
        group = ", ".join(["1", "2", "3", "4", *(str(5 + i) for i in range(len(dims)))])
        sql = (
            f"SELECT (u.slot * {SLOT_MS} + {shift_sql(shifts, 'u.slot')}) / 86400000, "
            "u.model, u.tier, u.fast"
            + "".join(f", {c}" for c in picked)
            + ", sum(u.responses)::bigint, "
            + ", ".join(f"sum(u.{t})::bigint" for t in _TOKENS)
            + f" FROM {s}.usage_slots u{join} WHERE true{where}{owhere} GROUP BY {group}"
        )
        rows = self._rows(sql, [*params, *oparams])
        slot = f"(u.time / {SLOT_MS})"
        day = f"({slot} * {SLOT_MS} + {shift_sql(shifts, slot)}) / 86400000"
        return _less(rows, self.duplicates(origins, day, picked, join, lo, hi), 4 + len(dims))

    def by_session(
        self, lo: int | None, hi: int | None, origins: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        where, params = _range(lo, hi, "u.slot")
        owhere, oparams = _origins(origins, "u.origin")
        rows = self._rows(
            "SELECT u.origin, u.model, u.tier, u.fast, u.sid, sum(u.responses)::bigint, "
            + ", ".join(f"sum(u.{t})::bigint" for t in _TOKENS)
            + f" FROM {self._s}.usage_slots u WHERE true{where}{owhere} "
            "GROUP BY u.origin, u.sid, u.model, u.tier, u.fast",
            [*params, *oparams],
        )
        dup = self.duplicates(origins, "u.origin", ["u.sid"], "", lo, hi)
        return [((o, int(sid)), m, t, f, *sums) for o, m, t, f, sid, *sums in _less(rows, dup, 5)]

    def sessions(self, origins: Sequence[str]) -> list[SessionNode]:
        from jsonltape.usage import SessionNode

        s = self._s
        owhere, oparams = _origins(origins, "x.origin")
        return [
            SessionNode((o, int(sid)), id_, path, title, cwd, agent, int(updated), o, n, a, up)
            for o, sid, id_, path, title, cwd, agent, updated, n, a, up in self._rows(
                "SELECT x.origin, x.sid, x.id, x.path, x.title, x.cwd, x.agent, x.updated, "
                f"u.name, u.alias, u.up FROM {s}.sessions x JOIN {s}.usage_sessions u "
                f"ON u.origin = x.origin AND u.sid = x.sid WHERE true{owhere}",
                oparams,
            )
        ]

    def responses(
        self, lo: int | None, hi: int | None, origins: Sequence[str]
    ) -> list[tuple[Any, ...]]:
        where, params = _range(lo, hi, "u.time")
        owhere, oparams = _origins(origins, "u.origin")
        rows = self._rows(
            f"SELECT u.time, u.model, u.tier, u.fast, {', '.join(f'u.{t}' for t in _TOKENS)}, "
            f"u.origin, u.sid, u.seq FROM {self._s}.usage u WHERE u.counted{where}{owhere} "
            "ORDER BY u.time, u.origin, u.sid, u.seq",
            [*params, *oparams],
        )
        twice = {
            tuple(r[-3:]) for r in self._twice(origins, where, params, "u.origin, u.sid, u.seq")
        }
        return [r[:-3] for r in rows if not twice or tuple(r[-3:]) not in twice]

    def _shared(self, origins: Sequence[str]) -> list[tuple[str, int]]:
        """The sessions whose id two of the origins read both hold: only their responses can
        be counted by two origins (a session file kept in git, checked out on two machines;
        the same Claude Code tree on both). Usually none."""
        s = self._s
        owhere, oparams = _origins(origins, "origin")
        return [
            (o, int(sid))
            for o, sid in self._rows(
                f"SELECT origin, sid FROM {s}.sessions WHERE id IN (SELECT id FROM {s}.sessions "
                f"WHERE true{owhere} GROUP BY id HAVING min(origin) <> max(origin)){owhere}",
                [*oparams, *oparams],
            )
        ]

    def _twice(
        self,
        origins: Sequence[str],
        where: str,
        params: Sequence[Any],
        select: str,
        *,
        join: str = "",
        tail: str = "",
    ) -> list[tuple[Any, ...]]:
        """``select`` of the counted rows (``u``, within ``where``; ``join`` joined, ``tail``
        after) of shared sessions whose key a shared session of an origin before theirs (by
        name) counts too: what the origins' own counts count twice."""
        shared = self._shared(origins)
        if not shared:
            return []
        s = self._s
        o, sid = [x[0] for x in shared], [x[1] for x in shared]
        return self._rows(
            f"WITH shared AS (SELECT * FROM unnest(%s::text[], %s::bigint[]) AS x(origin, sid)) "
            f"SELECT {select} FROM {s}.usage u{join} WHERE u.counted{where} "
            "AND (u.origin, u.sid) IN (SELECT origin, sid FROM shared) AND EXISTS ("
            f'SELECT FROM {s}.usage v WHERE v.counted AND v.rkey COLLATE "C" = u.rkey '
            'AND v.origin COLLATE "C" < u.origin COLLATE "C" '
            f"AND (v.origin, v.sid) IN (SELECT origin, sid FROM shared)){tail}",
            [o, sid, *params],
        )

    def duplicates(
        self,
        origins: Sequence[str],
        bucket: str,
        picked: Sequence[str],
        join: str,
        lo: int | None,
        hi: int | None,
    ) -> list[tuple[Any, ...]]:
        """Sums, per the same groups, of the counted rows whose key an origin before theirs
        (by name, among ``origins``) counts too: what the slots count twice."""
        where, params = _range(
            None if lo is None else lo * SLOT_MS, None if hi is None else hi * SLOT_MS, "u.time"
        )
        group = ", ".join(["1", "2", "3", "4", *(str(5 + i) for i in range(len(picked)))])
        select = (
            f"{bucket}, u.model, u.tier, u.fast"
            + "".join(f", {c}" for c in picked)
            + ", count(*), "
            + ", ".join(f"sum(u.{t})::bigint" for t in _TOKENS)
        )
        return self._twice(origins, where, params, select, join=join, tail=f" GROUP BY {group}")


def _less(
    rows: list[tuple[Any, ...]], minus: list[tuple[Any, ...]], n: int
) -> list[tuple[Any, ...]]:
    """``rows`` (group columns, then sums) less the sums of ``minus`` with the same groups."""
    if not minus:
        return rows
    take = {tuple(r[:n]): r[n:] for r in minus}
    out = []
    for r in rows:
        less = take.get(tuple(r[:n]))
        if less is None:
            out.append(r)
            continue
        sums = tuple(int(a) - int(b) for a, b in zip(r[n:], less, strict=True))
        if sums[0]:
            out.append((*r[:n], *sums))
    return out
