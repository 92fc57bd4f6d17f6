"""Message keys (``keys.py``): the first free key at or above the preferred one, at a cost that
does not depend on how the messages' times are spread.

The rule is checked against an oracle written the slow, obvious way (a set of taken keys and a
linear search), over batchings, syncs, restarts, rollbacks, dropped sessions and ``index
optimize``; the cost is counted, not timed: SQLite VM steps and statements on every connection
the store opens, and the Python lines run in ``keys.py``, for 100k messages in one second
against the same messages a second apart, on the first sync's bulk path (with its helper) and
on the incremental path.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite import fulltext as fulltext_mod
from jsonltape_daemon.engines.sqlite import schema, search
from jsonltape_daemon.engines.sqlite import store as store_mod
from jsonltape_daemon.engines.sqlite.schema import TKEY_SPAN, tkey_base
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Budget, Ingestor
from jsonltape_daemon.ingest.rows import MessageRow

import jsonltape

from ._search_cases import T0, event
from .test_index_helpers import fts_ok, runs_ok

# -- the oracle -------------------------------------------------------------------------------


def first_fit(rows: list[tuple[int, int]], taken: set[int]) -> dict[int, int]:
    """``id -> key`` for ``(id, time)`` rows in id order: the preferred key, or the first free
    one above it; ``taken`` (every key in the index or dead) grows with the keys given."""
    out: dict[int, int] = {}
    for i, t in rows:
        k = tkey_base(t) + i % TKEY_SPAN
        while k in taken:
            k += 1
        taken.add(k)
        out[i] = k
    return out


def keys_of(con: sqlite3.Connection) -> dict[int, int]:
    return dict(con.execute("SELECT id, tkey FROM messages"))


# -- the rule, over the store's operations ------------------------------------------------------

# Times as offsets in ms from T0, drawn from a pool: one second (a burst), a few seconds (whose
# key ranges a burst spills into), two seconds and a far one (a second's messages then have ids
# spread over more than its slots: they meet its taken slots with free ones between), seconds
# far apart.
_POOLS = ([0], [0, 1000, 2000], [0, 1000, 2_000_000], range(6000), range(0, 3_000_000, 997))


@st.composite
def _times(draw: st.DrawFn, most: int) -> list[int]:
    pool = draw(st.sampled_from(_POOLS))
    rnd = draw(st.randoms(use_true_random=False))
    return [rnd.choice(pool) for _ in range(draw(st.integers(1, most)))]


_batch = st.tuples(st.integers(1, 4), _times(200))
_op = st.one_of(
    st.tuples(st.just("add"), _batch),
    st.tuples(st.just("burst"), st.tuples(st.integers(1, 4), st.integers(60, 400))),
    st.tuples(st.just("rollback"), _batch),
    st.tuples(st.just("drop"), st.integers(1, 4)),
    st.just(("reopen", None)),
    st.just(("optimize", None)),
)


def _rows(sid: int, seq0: int, times: list[int]) -> list[MessageRow]:
    user = ("user/message", "user")
    return [
        MessageRow(sid, s, *user, T0 + t, "current", s, None, (), f"m{s}", 0)
        for s, t in enumerate(times, seq0)
    ]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_op, min_size=1, max_size=14))
@example(  # a search for a free key that started at the last key given in its second skipped
    ops=[  # the free keys below it (the rule before schema 9, batch after batch)
        ("add", (1, [0, 0, 0])),
        ("add", (2, [2_000_000] * 61)),
        ("add", (1, [0] + [2_000_000] * 34 + [0] + [2_000_000] * 28 + [0])),
    ]
)
def test_keys_are_the_first_free_key_whatever_the_batches(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]]
) -> None:
    index = tmp_path_factory.mktemp("keys") / "index.db"
    store = SqliteStore(index, helper_from=None)
    want: dict[int, int] = {}
    taken: set[int] = set()
    seqs = dict.fromkeys(range(1, 5), 1)
    try:
        for op, arg in ops:
            if op in ("add", "burst", "rollback"):
                sid, times = arg if op != "burst" else (arg[0], [500] * arg[1])
                rows = _rows(sid, seqs[sid], times)
                first = store._next_id
                store.begin()
                store.add_messages(rows)
                if op == "rollback":
                    store.rollback()  # nothing taken: the ids and keys are given again
                else:
                    store.commit()
                    seqs[sid] += len(rows)
                    want |= first_fit([(first + n, r.time) for n, r in enumerate(rows)], taken)
            elif op == "drop":
                store.begin()
                gone = {
                    i for (i,) in store.con.execute("SELECT id FROM messages WHERE sid = ?", (arg,))
                }
                store.drop_session(arg)
                store.commit()
                want = {i: k for i, k in want.items() if i not in gone}  # their keys stay taken
            elif op == "reopen":
                store.close()
                store = SqliteStore(index, helper_from=None)
            else:
                store.optimize()
                taken = set(want.values())  # the dead keys are free again
            assert keys_of(store.con) == want
            runs_ok(store.con)
    finally:
        store.close()


# -- the rule, over real syncs ----------------------------------------------------------------


def _tree(root: Path, sessions: list[list[int]]) -> None:
    root.mkdir(parents=True)
    for s, times in enumerate(sessions):
        with jsonltape.open(root / f"s{s}.jsonl", create=True, durability="manual") as tape:
            tape.append_batch(
                event("user", f"word {s} {n}", n, T0 + t) for n, t in enumerate(times)
            )


def _sync_keys(root: Path, index: Path, incremental: bool, **kw: Any) -> dict[tuple[str, int], int]:
    budget = kw.pop("budget", Budget())
    helper_from = kw.pop("helper_from", None)
    if incremental:  # a header-only file first: the index is not empty, the sync not a bulk load
        with jsonltape.open(root / "0-empty.jsonl", create=True, durability="manual"):
            pass
        store = SqliteStore(index, helper_from=helper_from)
        Ingestor(store, root).sync_file(str(root / "0-empty.jsonl"))
        store.close()
    store = SqliteStore(index, helper_from=helper_from)
    try:
        stats = Ingestor(store, root, budget=budget, bulk_budget=budget).rescan()
        assert stats.bulk is not incremental
        con = store.con
        rows = con.execute("SELECT id, time FROM messages ORDER BY id").fetchall()
        assert keys_of(con) == first_fit(rows, set())
        runs_ok(con)
        fts_ok(con)
        return {
            (Path(p).name, seq): k
            for p, seq, k in con.execute(
                "SELECT s.path, m.seq, m.tkey FROM messages m JOIN sessions s USING (sid)"
            )
        }
    finally:
        store.close()


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sessions=st.lists(_times(150), min_size=1, max_size=4),
    rows=st.integers(1, 60),
)
def test_a_sync_gives_the_same_keys_whatever_its_path_and_transactions(
    tmp_path_factory: pytest.TempPathFactory, sessions: list[list[int]], rows: int
) -> None:
    base = tmp_path_factory.mktemp("sync")
    root = base / "root"
    _tree(root, [sorted(s) for s in sessions])
    got = [
        _sync_keys(root, base / "bulk.db", False),
        _sync_keys(root, base / "helper.db", False, helper_from=0, budget=Budget(rows, 1.0)),
        _sync_keys(root, base / "small.db", True, budget=Budget(rows, 1.0)),
    ]
    assert got[0] == got[1] == got[2]


# -- the cost ---------------------------------------------------------------------------------


class Work:
    """Work done while it is on: SQLite VM steps and statements on every connection the store
    opens (the helper process's not counted), and Python function calls (C functions too)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steps = self.statements = self.calls = 0
        self.on = False
        real = schema.connect

        def counted(*args: Any, **kw: Any) -> sqlite3.Connection:
            con = real(*args, **kw)
            # Called every 100 steps of a statement, counted over its runs (Python's sqlite3
            # keeps its statements prepared), so the count is the steps / 100 give or take one
            # per statement.
            con.set_progress_handler(self._step, 100)
            con.set_trace_callback(self._statement)
            return con

        monkeypatch.setattr(store_mod, "connect", counted)
        monkeypatch.setattr(fulltext_mod, "connect", counted)

    def _step(self) -> int:
        self.steps += self.on
        return 0

    def _statement(self, _sql: str) -> None:
        self.statements += self.on

    def _profile(self, _frame: FrameType, event: str, _arg: object) -> None:
        if event in ("call", "c_call"):
            self.calls += 1

    def __enter__(self) -> Work:
        self.on = True
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        self.on = False

    def counts(self) -> tuple[int, int, int]:
        return self.steps * 100, self.statements, self.calls


def _write_messages(root: Path, n: int, step_ms: int, per_session: int = 10_000) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for s in range(0, n, per_session):
        with jsonltape.open(root / f"s{s:07d}.jsonl", create=True, durability="manual") as tape:
            for at in range(s, min(n, s + per_session), 1000):
                tape.append_batch(
                    event("user", f"deploy {i % 97} step {i}", i, T0 + i * step_ms)
                    for i in range(at, min(n, s + per_session, at + 1000))
                )


def _sync_work(
    tmp: Path, monkeypatch: pytest.MonkeyPatch, step_ms: int, incremental: bool
) -> list[tuple[int, int, int]]:
    """The work of syncing 100k messages ``step_ms`` apart, then (a store opened again, as
    by the next ``jsonltape sync``) of 200 more in the first one's second."""
    root, index = tmp / "root", tmp / "index.db"
    if incremental:  # a first, tiny sync: the one measured is not a bulk load
        _write_messages(root / "a", 1, 0)
        store = SqliteStore(index)
        Ingestor(store, root).rescan()
        store.close()
    _write_messages(root / "b", 100_000, step_ms)
    out = []
    for n in (100_000, 200):
        if n == 200:
            _write_messages(root / "c", n, 0)
        work = Work(monkeypatch)
        store = SqliteStore(index)  # a helper process from 20,000 messages on
        try:
            with work:
                stats = Ingestor(store, root).rescan()
            assert stats.messages == n and stats.bulk is (n > 200 and not incremental)
            runs_ok(store.con)
        finally:
            store.close()
        out.append(work.counts())
    return out


@pytest.mark.parametrize("incremental", [False, True], ids=["first-sync", "later-sync"])
def test_100k_messages_in_one_second_cost_what_they_cost_a_second_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, incremental: bool
) -> None:
    spread = _sync_work(tmp_path / "spread", monkeypatch, 1000, incremental)
    burst = _sync_work(tmp_path / "burst", monkeypatch, 0, incremental)
    for b, s in zip(burst, spread, strict=True):  # the 100k, then the next sync's 200
        ratios = [x / y for x, y in zip(b, s, strict=True)]
        assert max(ratios) <= 1.5, (b, s)


def test_a_schema_8_index_is_migrated_and_a_burst_over_its_keys_follows_the_rule(
    tmp_path: Path,
) -> None:
    root, index = tmp_path / "root", tmp_path / "index.db"
    _tree(root, [[0] * 300, [999, 5000, 9000]])
    _sync_keys(root, index, False)
    con = sqlite3.connect(index, isolation_level=None)  # back to schema 8: no key_runs
    con.execute("DROP TABLE key_runs")
    con.execute("DELETE FROM migrations WHERE version >= 9")
    con.execute("PRAGMA user_version = 8")
    con.close()
    con = schema.connect(index, readonly=True)  # a search reads it as it is
    try:
        assert len(search.search(con, "word", Filters(), 1000)) == 303
    finally:
        con.close()
    with jsonltape.open(root / "s1.jsonl", durability="manual") as tape:  # a burst over them
        tape.append_batch(event("user", f"more {n}", n, T0) for n in range(3, 400))
    store = SqliteStore(index, helper_from=None)  # the writer migrates
    try:
        assert Ingestor(store, root).rescan().messages == 397
        con = store.con
        assert con.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
        rows = con.execute("SELECT id, time FROM messages ORDER BY id").fetchall()
        assert keys_of(con) == first_fit(rows, set())
        [(lo, hi)] = runs_ok(con)  # the burst's keys, crossed once and kept
        assert hi - lo + 1 >= 397
        fts_ok(con)
    finally:
        store.close()
