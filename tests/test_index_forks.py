"""A session's forks and sub-agent sessions (the viewer's transcript page lists them) are found
by their parent through an index on both engines, not by reading every session row: the work
of a lookup follows the number of forks, not of sessions (counted in SQLite's machine steps,
never timed), and an index of the schema before gets the index from its migration, rows kept.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.sqlite import listing
from jsonltape_daemon.engines.sqlite import schema as sq_schema
from jsonltape_daemon.search.language import SessionQuery

#: Sessions whose parent is "p0": the same few however many sessions there are.
FORKS = 3


def _fill(con: sqlite3.Connection, n: int) -> None:
    con.executemany(
        "INSERT INTO sessions (id, path, header_crc, created, updated, parent, events, messages, "
        "state, closed) VALUES (?, ?, 'c0', ?, ?, ?, 1, 1, 'clean', 1)",
        [(f"s{i}", f"/x/s{i}.jsonl", i, i, "p0" if i < FORKS else None) for i in range(n)],
    )
    con.commit()


def _steps(con: sqlite3.Connection, q: SessionQuery) -> int:
    """SQLite machine steps of one page of ``q`` (its rows and its count)."""
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0

    con.set_progress_handler(tick, 1)
    try:
        page = listing.list_sessions(con, q)
    finally:
        con.set_progress_handler(None, 0)
    assert page.total == FORKS and {s.info.session for s in page.sessions} == {"s0", "s1", "s2"}
    return steps


@pytest.mark.parametrize("sort", ["updated", "created", "title"])
def test_a_forks_lookup_reads_the_forks_not_every_session(sort: str) -> None:
    cost = {}
    for n in (1_000, 20_000):
        con = sqlite3.connect(":memory:")
        sq_schema.migrate(con)
        _fill(con, n)
        cost[n] = _steps(con, SessionQuery(parent="p0", sort=sort, limit=100))  # type: ignore[arg-type]
        con.close()
    # twenty times the sessions: the same forks, about the same work (a scan: twenty times)
    assert cost[20_000] < cost[1_000] * 1.5, cost


def test_an_index_of_the_schema_before_gets_the_forks_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "index.db"
    con = sqlite3.connect(path)
    with monkeypatch.context() as m:
        m.setattr(sq_schema, "MIGRATIONS", [s for s in sq_schema.MIGRATIONS if s[0] <= 9])
        assert sq_schema.migrate(con) == 9
    _fill(con, 2_000)
    before = _steps(con, SessionQuery(parent="p0"))
    assert sq_schema.migrate(con) == sq_schema.SCHEMA_VERSION
    names = {r[1] for r in con.execute("PRAGMA index_list(sessions)")}
    assert "sessions_parent" in names
    assert _steps(con, SessionQuery(parent="p0")) * 10 < before
    con.close()


def test_postgresql_finds_forks_by_their_parent_through_an_index(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = pg_schema.SCHEMA
    with monkeypatch.context() as m:  # a team index of the schema before
        m.setattr(pg_schema, "MIGRATIONS", [x for x in pg_schema.MIGRATIONS if x[0] <= 2])
        with psycopg.connect(pg_db) as con:
            pg_schema.migrate(con)
            assert pg_schema.schema_version(con) == 2
    with psycopg.connect(pg_db) as con:
        con.execute(f"INSERT INTO {s}.origins (origin) VALUES ('m1')")
        con.execute(
            f"INSERT INTO {s}.sessions (origin, id, path, header_crc, created, updated, parent, "
            "events, messages, state, closed) SELECT 'm1', 's' || i, '/x/s' || i, 'c0', i, i, "
            "CASE WHEN i < %s THEN 'p0' END, 1, 1, 'clean', true FROM generate_series(0, 19999) i",
            (FORKS,),
        )
    with psycopg.connect(pg_db) as con:
        assert pg_schema.migrate(con) == pg_schema.SCHEMA_VERSION
        con.execute(f"ANALYZE {s}.sessions")
        plan = con.execute(
            f"EXPLAIN SELECT s.sid FROM {s}.sessions s WHERE s.parent = %s ORDER BY s.updated",
            ("p0",),
        ).fetchall()
        assert "sessions_parent" in " ".join(r[0] for r in plan), plan
        found = con.execute(f"SELECT count(*) FROM {s}.sessions WHERE parent = 'p0'").fetchone()
        assert found == (FORKS,) and con.execute(
            f"SELECT count(*) FROM {s}.sessions"
        ).fetchone() == (20_000,)
