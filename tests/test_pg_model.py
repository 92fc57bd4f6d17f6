"""Model-based test of the PostgreSQL engine: two machines' trees (two origins pushing into one
database, each with its own local SQLite index) under random file operations (those of the
SQLite model test: appends, revisions, raw surface operations, torn tails, repairs,
replacements, deletes, renames, corruption) and random syncs. After every sync the origin's
rows in PostgreSQL equal its local index and a rebuild from scratch, the other origin's rows
are untouched, and at the end the database is exactly the union of the two local indexes and
equals a fresh push of both trees."""

from __future__ import annotations

import random
from pathlib import Path

import psycopg
import pytest
from jsonltape_daemon.engines.postgres.store import PgStore
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Budget, Ingestor

import jsonltape

from .conftest import LONG
from .test_index_helpers import dump, rebuild
from .test_index_model import OPS, World
from .test_pg_store import S, assert_same, pg_dump

ORIGINS = ("laptop", "ci-runner")


class Machine:
    """One machine: its tree, its local index and its pusher, synced together."""

    def __init__(self, tmp: Path, origin: str, url: str, rng: random.Random) -> None:
        root = tmp / origin / "root"
        root.mkdir(parents=True, mode=0o700)
        self.origin = origin
        self.world = World(root, rng)
        self.local = SqliteStore(tmp / origin / "index.db")
        self.pg = PgStore(url, origin)
        # Tiny budgets force many transactions: watermarks committed mid-file too.
        self.engines = [
            Ingestor(s, root, budget=Budget(rows=7, seconds=1.0), bulk_budget=Budget(9, 1.0))
            for s in (self.local, self.pg)
        ]
        self.syncs = 0

    def step(self, rng: random.Random) -> None:
        world = self.world
        names, weights = zip(*OPS, strict=True)
        op = rng.choices(names, weights)[0]
        paths = world.paths()
        if op == "create" or not paths:
            world.create()
            return
        target = rng.choice(paths)
        world.touch(target)
        try:
            getattr(world, op)(target)
        except jsonltape.JsonltapeError:
            pass  # e.g. appending to a corrupt file is refused; nothing was written

    def sync(self) -> None:
        self.syncs += 1
        for engine in self.engines:
            if self.syncs % 2:
                engine.rescan()
            else:
                engine.sync_paths(self.world.touched)
        self.world.touched.clear()

    def close(self) -> None:
        self.local.close()
        self.pg.close()


@pytest.mark.parametrize("seed", range(8 if LONG else 2))
def test_two_machines_pushing_equal_their_local_indexes_and_a_rebuild(
    tmp_path: Path, pg_db: str, seed: int
) -> None:
    rng = random.Random(seed)
    machines = [Machine(tmp_path, o, pg_db, rng) for o in ORIGINS]
    try:
        for m in machines:
            for _ in range(3):
                m.world.create()
        for _ in range(90 if LONG else 30):
            m = rng.choice(machines)
            for _ in range(rng.randint(1, 3)):
                m.step(rng)
            if rng.random() < 0.6:
                m.sync()
                got, local = pg_dump(pg_db, m.origin), dump(m.local.con)
                assert_same(got, local)
                assert_same(local, rebuild(m.world.root))
        for m in machines:
            m.sync()
        with psycopg.connect(pg_db) as con:
            totals = con.execute(
                f"SELECT (SELECT count(*) FROM {S}.events), (SELECT count(*) FROM {S}.messages), "
                f"(SELECT count(DISTINCT origin) FROM {S}.sessions)"
            ).fetchone()
        local_dumps = [dump(m.local.con) for m in machines]
        assert totals is not None
        assert totals[:2] == (
            sum(len(d["events"]) for d in local_dumps),
            sum(len(d["messages"]) for d in local_dumps),
        )
        for m, local in zip(machines, local_dumps, strict=True):
            before = pg_dump(pg_db, m.origin)
            assert_same(before, local)
            assert_same(local, rebuild(m.world.root))
            # a fresh push of the tree (index rebuild --origin) gives the very same rows
            m.pg.drop_origin()
            Ingestor(m.pg, m.world.root).rescan()
            assert_same(pg_dump(pg_db, m.origin), before)
    finally:
        for m in machines:
            m.close()
