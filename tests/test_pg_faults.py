"""Faults while pushing into PostgreSQL: a pusher SIGKILLed mid-push again and again, the server
restarted mid-push, the connection cut by the server (``pg_terminate_backend``). After a final
sync the origin's rows equal a rebuild of its tree: no duplicate, no ghost, nothing missing;
and a killed pusher never blocks the next one (the server drops its origin lock)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jsonltape_daemon
import psycopg
import pytest
from jsonltape_daemon.engines.postgres.store import IndexUnreachableError, PgStore
from jsonltape_daemon.ingest.ingestor import Budget, Ingestor

import jsonltape

from ._pg import PgServer, dbname_of
from .conftest import LONG
from .test_index_helpers import rebuild
from .test_index_model import World
from .test_pg_store import S, assert_same, pg_dump

#: The pusher: no jsonltape CLI, just the engine over a PgStore, with a small budget so that a
#: push is many transactions. It says when it holds the origin lock and when it is done.
PUSHER = """
import sys, time
from jsonltape_daemon.ingest.ingestor import Budget
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.engines.postgres.store import PgStore
url, origin, root = sys.argv[1:4]
budget = Budget(rows=int(sys.argv[4]), seconds=float(sys.argv[5]))
store = PgStore(url, origin, lock_timeout=20)
print("ready", time.time(), flush=True)
Mirror(store, root, budget=budget).rescan()
store.close()
print("done", time.time(), flush=True)
"""
KILLS = 60 if LONG else 30


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # The pusher imports the daemon package from this checkout, whatever the cwd.
    pkg = str(Path(jsonltape_daemon.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([pkg, env.get("PYTHONPATH", "")])
    return env


def _events(url: str) -> int:
    with psycopg.connect(url) as con:
        row = con.execute(f"SELECT count(*) FROM {S}.events").fetchone()
    return int(row[0]) if row else 0


def _grow(world: World, rng: random.Random) -> None:
    """Changes for the next push: a new long session and a few of the model test's ops."""
    path = world.fresh_path()
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for i in range(rng.randint(20, 60)):
            with tape.turn():
                tape.user(f"step {i} of FileNotFoundError hunt 東京")
                tape.assistant(f"done {i}")
    for _ in range(3):
        paths = world.paths()
        if not paths:
            break
        op = rng.choice(["append", "append", "rename", "delete", "replace_with_other"])
        try:
            getattr(world, op)(rng.choice(paths))
        except jsonltape.JsonltapeError:
            pass


def test_a_pusher_killed_mid_push_again_and_again_converges(tmp_path: Path, pg_db: str) -> None:
    rng = random.Random(14)
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    world = World(root, rng)
    for _ in range(4):
        world.create()
    # A first push into an empty origin is one big transaction (the bulk budget): pushed
    # whole here, so that the kills below land between and inside small transactions.
    with PgStore(pg_db, "laptop") as store:
        Ingestor(store, root).rescan()
    mid_push = rounds = moved = pushed = 0
    # How long after "ready" to kill: adapted to this machine's speed, so that kills land
    # after some commits of a push and before its end.
    delay = 0.05
    env = _env()
    while mid_push < KILLS and rounds < 3 * KILLS:
        rounds += 1
        _grow(world, rng)
        proc = subprocess.Popen(
            [sys.executable, "-c", PUSHER, pg_db, "laptop", str(root), "40", "0.01"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(b"ready "), proc.communicate()
        time.sleep(delay * rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        if proc.returncode == -signal.SIGKILL and b"done" not in out:
            mid_push += 1
            pushed, before = _events(pg_db), pushed
            moved += pushed != before
            delay *= 1.0 if pushed != before else 1.3
        else:
            assert proc.returncode in (0, -signal.SIGKILL), err.decode()
            delay *= 0.7
    assert mid_push >= KILLS, f"only {mid_push} of {rounds} kills landed mid-push"
    # Many kills came after some commits of their push (a kill before the first one tests
    # less): the next pusher went on from a watermark the killed one left.
    assert moved >= KILLS // 3, f"only {moved} of {mid_push} killed pushes committed anything"
    with PgStore(pg_db, "laptop", lock_timeout=20) as store:  # the last lock was dropped
        Ingestor(store, root).rescan()
    assert_same(pg_dump(pg_db, "laptop"), rebuild(root))


def _cut_mid_push(
    tmp_path: Path, url: str, cut: Callable[[], object]
) -> tuple[Path, PgStore, Ingestor]:
    rng = random.Random(7)
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    world = World(root, rng)
    for _ in range(3):
        _grow(world, rng)
    store = PgStore(url, "laptop")
    calls = 0

    def progress(_n: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 5:
            cut()

    small = Budget(rows=30)
    engine = Ingestor(store, root, budget=small, bulk_budget=small, progress=progress)
    try:
        with pytest.raises(IndexUnreachableError, match="unreachable"):
            engine.rescan()
        assert calls == 5
    except BaseException:
        store.close()
        raise
    return root, store, engine


def test_a_server_restarted_mid_push_converges(
    tmp_path: Path, pg_server: PgServer, pg_db: str
) -> None:
    root, store, engine = _cut_mid_push(tmp_path, pg_db, pg_server.restart)
    try:
        engine.rescan()  # the same store connects again and goes on from its watermarks
        assert_same(pg_dump(pg_db, "laptop"), rebuild(root))
    finally:
        store.close()


def test_a_backend_terminated_mid_push_converges(
    tmp_path: Path, pg_server: PgServer, pg_db: str
) -> None:
    name = dbname_of(pg_db)
    root, store, engine = _cut_mid_push(tmp_path, pg_db, lambda: pg_server.terminate_backends(name))
    try:
        engine.rescan()
        assert_same(pg_dump(pg_db, "laptop"), rebuild(root))
        with pytest.raises(Exception, match="another writer"):
            PgStore(pg_db, "laptop")  # the reconnected store holds the origin lock again
    finally:
        store.close()


LOAD_PUSHERS = 8
LOAD_EVENTS = 50_000 if LONG else 5_000


def test_concurrent_pushers_of_eight_origins_store_every_row_once(
    tmp_path: Path, pg_db: str
) -> None:
    # One session of about a thousand events, copied: a copy is a session of its own.
    model = tmp_path / "model.jsonl"
    with jsonltape.open(model, create=True, durability="manual") as tape:
        for i in range(250):
            with tape.turn():
                tape.user(f"step {i}: FileNotFoundError in src/app_{i}.py 東京都")
                tape.assistant(f"fixed in commit {i:08x}")
    per_session = sum(1 for _ in jsonltape.read(model))
    copies = max(1, LOAD_EVENTS // per_session)
    roots = []
    for n in range(LOAD_PUSHERS):
        root = tmp_path / f"m{n}"
        root.mkdir()
        for c in range(copies):
            shutil.copyfile(model, root / f"s{c}.jsonl")
        roots.append(root)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PUSHER, pg_db, f"m{n}", str(root), "1000", "0.05"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        for n, root in enumerate(roots)
    ]
    marks = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()
        (_r, t0), (_d, t1) = (line.split() for line in out.decode().splitlines())
        marks.append((float(t0), float(t1)))
    seconds = max(t for _s, t in marks) - min(s for s, _t in marks)
    total = LOAD_PUSHERS * copies * per_session
    print(
        f"\n{LOAD_PUSHERS} pushers x {copies * per_session} events: {total / seconds:,.0f} events/s"
    )
    with psycopg.connect(pg_db) as con:
        rows = con.execute(
            f"SELECT origin, count(*), count(DISTINCT (sid, seq)) FROM {S}.events GROUP BY origin"
        ).fetchall()
    assert sorted(rows) == [(f"m{n}", copies * per_session, copies * per_session) for n in range(8)]
    assert_same(pg_dump(pg_db, "m3"), rebuild(roots[3]))
