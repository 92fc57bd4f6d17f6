"""`--until`, role/type, session and path filters read only what they can match (schema
steps 5 and 7).

An ``until`` filter bounds the full-text keys from above by ``tkey_base(until)`` plus the most
any key went past its second's base (``meta.tkey_spill``); a role/type filter that no
(role, type) pair the index has seen satisfies (``message_kinds``) has no hits without reading
a match; a session or path filter reads the keys from the first of its sessions' messages to
the last (``sessions.key_lo``/``key_hi``). Each promise here is one a wrong bound would break: a
burst of more messages in one second than it has key slots, a spill written in a transaction
that rolled back, a pair that arrives in a later sync, a session that grows at both ends in later
syncs, indexes migrated from schemas 4 and 6.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from jsonltape_daemon.engines.sqlite import search
from jsonltape_daemon.engines.sqlite.schema import TKEY_SPAN, connect, tkey_base
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.rows import MessageRow

import jsonltape

from ._search_cases import T0, cli_search, event, index_tree
from .helpers import drop_session_bounds


def _write(path: Path, items: list[dict[str, object]]) -> None:
    with jsonltape.open(path, create=not path.exists(), durability="manual") as tape:
        tape.append_batch(items)


def _seqs(index: Path, query: str, filters: Filters, limit: int = 1000) -> list[int]:
    con = connect(index, readonly=True)
    try:
        return sorted(h.seq for h in search.search(con, query, filters, limit))
    finally:
        con.close()


def _spill(index: Path) -> int:
    con = sqlite3.connect(index)
    try:
        return int(con.execute("SELECT value FROM meta WHERE key = 'tkey_spill'").fetchone()[0])
    finally:
        con.close()


def _drop_session_bounds(con: sqlite3.Connection) -> None:
    """Take an index back to before step 7 (which added the sessions' key bounds)."""
    drop_session_bounds(con)
    con.execute("DELETE FROM migrations WHERE version >= 7")
    con.execute("PRAGMA user_version = 6")


def _bounds(index: Path) -> dict[int, tuple[int | None, int | None]]:
    """Each session's kept key bounds, checked against its messages' keys."""
    con = sqlite3.connect(index)
    try:
        kept = {r[0]: (r[1], r[2]) for r in con.execute("SELECT sid, key_lo, key_hi FROM sessions")}
        truth = {
            r[0]: (r[1], r[2])
            for r in con.execute(
                "SELECT s.sid, min(m.tkey), max(m.tkey) FROM sessions s "
                "LEFT JOIN messages m ON m.sid = s.sid GROUP BY s.sid"
            )
        }
    finally:
        con.close()
    assert kept == truth
    return kept


def test_until_finds_every_message_of_a_burst_whose_keys_spilled_past_its_second(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    root.mkdir()
    burst = 3 * TKEY_SPAN  # more messages in one millisecond than a second has key slots
    items = [event("user", f"deploy step {n}", n, T0) for n in range(burst)]
    items.append(event("user", "deploy later", burst, T0 + 5_000))
    _write(root / "a.jsonl", items)
    index = tmp_path / "index.db"
    index_tree(root, index)
    assert _spill(index) >= burst - 1
    got = _seqs(index, "deploy", Filters(until=T0 + 1))
    assert len(got) == burst  # every one of the burst, not the later message
    assert _seqs(index, "deploy", Filters(since=T0 + 1)) == [burst + 1]
    assert _seqs(index, "deploy", Filters(since=T0, until=T0 + 1)) == got


def test_a_spill_that_was_rolled_back_is_written_again_by_the_next_batch(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    store = SqliteStore(index, helper_from=None)

    def rows(sid: int, n: int, time: int) -> list[MessageRow]:
        return [
            MessageRow(sid, s, "user/message", "user", time, "current", s, None, (), "x", 0)
            for s in range(1, n + 1)
        ]

    try:
        store.begin()
        store.add_messages(rows(1, 4 * TKEY_SPAN, T0))  # spills ~4 slots' worth
        store.rollback()
        store.begin()
        store.add_messages(rows(2, 2 * TKEY_SPAN, T0 + 60_000))  # spills less: must be kept
        store.commit()
        keys = [
            r[0] - tkey_base(r[1])
            for r in store.con.execute("SELECT tkey, time FROM messages WHERE sid = 2")
        ]
    finally:
        store.close()
    assert _spill(index) == max(keys) >= 2 * TKEY_SPAN - 1


def test_a_kind_first_seen_in_a_later_sync_is_found_by_its_filter(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    path = root / "a.jsonl"
    _write(path, [event("user", "rollback the migration", 0, T0)])
    index = tmp_path / "index.db"
    index_tree(root, index)
    assert _seqs(index, "migration", Filters(types=("assistant/*",))) == []
    _write(path, [event("assistant", "the migration rolled back", 1, T0 + 1_000)])
    index_tree(root, index)
    assert len(_seqs(index, "migration", Filters(types=("assistant/*",)))) == 1
    assert _seqs(index, "migration", Filters(roles=("assistant",), types=("user/*",))) == []
    # a kind no message has: nothing, from the CLI too (exit 0, one line)
    out = cli_search(index, "migration", "--type", "nothing/*")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "no matches\n")


def test_a_schema_4_index_gets_its_bounds_from_the_migration(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    items = [event("user", f"deploy {n}", n, T0) for n in range(2 * TKEY_SPAN)]
    items.append(event("assistant", "deploy done", 999, T0 + 2_000))
    _write(root / "a.jsonl", items)
    index = tmp_path / "index.db"
    index_tree(root, index)
    con = sqlite3.connect(index, isolation_level=None)
    spill = _spill(index)
    kinds = sorted(con.execute("SELECT role, type FROM message_kinds"))
    # back to schema 4: what step 5 added, gone
    con.execute("DELETE FROM meta WHERE key = 'tkey_spill'")
    con.execute("DROP TABLE message_kinds")
    _drop_session_bounds(con)  # and the steps after it
    con.execute("DELETE FROM migrations WHERE version >= 5")
    con.execute("PRAGMA user_version = 4")
    con.close()
    # a reader of schema 4 answers without the bounds, the same hits
    want = _seqs(index, "deploy", Filters(until=T0 + 1))
    assert len(want) == 2 * TKEY_SPAN
    assert _seqs(index, "deploy", Filters(types=("x/*",))) == []
    index_tree(root, index)  # the writer migrates
    con = sqlite3.connect(index)
    assert _spill(index) == spill
    assert sorted(con.execute("SELECT role, type FROM message_kinds")) == kinds
    con.close()
    assert _seqs(index, "deploy", Filters(until=T0 + 1)) == want


def _grow(root: Path, name: str, items: list[dict[str, object]]) -> None:
    root.mkdir(exist_ok=True)
    _write(root / name, items)


def test_session_and_path_filters_find_a_session_that_grew_at_both_ends_in_later_syncs(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    day = 86_400_000
    # three sessions far apart in time, a common word in every message of all of them
    for n, name in enumerate(("old.jsonl", "mid.jsonl", "new.jsonl")):
        _grow(
            root,
            name,
            [event("user", f"deploy {name} {i}", i, T0 + n * 30 * day + i) for i in range(5)],
        )
    index = tmp_path / "index.db"
    index_tree(root, index)
    _bounds(index)
    # later syncs: the old session gets a message after everything else, and one stamped
    # before its first (a clock that went back): its bounds widen at both ends
    _grow(root, "old.jsonl", [event("assistant", "deploy old late", 10, T0 + 90 * day)])
    index_tree(root, index)
    _grow(root, "old.jsonl", [event("assistant", "deploy old early", 11, T0 - day)])
    index_tree(root, index)
    bounds = _bounds(index)
    assert all(lo is not None for lo, _hi in bounds.values())
    con = connect(index, readonly=True)
    try:

        def seqs(name: str, **kw: str) -> tuple[list[int], list[int]]:
            """The seqs a filter finds, and the seqs of every message of the session."""
            hits = search.search(con, "deploy", Filters(**kw), 100)  # type: ignore[arg-type]
            every = con.execute(
                "SELECT m.seq FROM messages m JOIN sessions s ON s.sid = m.sid "
                "WHERE s.path GLOB ? ORDER BY m.seq",
                (f"*/{name}",),
            ).fetchall()
            return sorted(h.seq for h in hits), [r[0] for r in every]

        found, every = seqs("old.jsonl", path="*/old.jsonl")
        assert found == every and len(every) == 7
        sid = con.execute("SELECT id FROM sessions WHERE path GLOB '*/old.jsonl'").fetchone()[0]
        assert seqs("old.jsonl", session=sid)[0] == every
        found, every = seqs("mid.jsonl", path="*/mid.jsonl")
        assert found == every and len(every) == 5
        assert seqs("x", path="*/nothing.jsonl")[0] == []
        # the newest first, limited: the late message of the old session
        top = search.search(con, "deploy", Filters(path="*/old.jsonl"), 1, sort="recent")
        assert [h.time for h in top] == [T0 + 90 * day]
        top = search.search(con, "early", Filters(path="*/old.jsonl"), 1)
        assert [h.time for h in top] == [T0 - day]
    finally:
        con.close()


def test_a_filter_whose_sessions_have_no_messages_matches_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _grow(root, "a.jsonl", [event("user", "deploy now", 0, T0)])
    _grow(root, "empty.jsonl", [{"type": "turn/start", "time": T0, "data": {}}])
    index = tmp_path / "index.db"
    index_tree(root, index)
    assert sorted(lo is None for lo, _hi in _bounds(index).values()) == [False, True]
    assert _seqs(index, "deploy", Filters(path="*/empty.jsonl")) == []
    assert _seqs(index, "deploy", Filters(path="*/a.jsonl")) == [1]


def test_a_schema_6_index_gets_its_session_bounds_from_the_migration(tmp_path: Path) -> None:
    root = tmp_path / "s"
    # more sessions than a schema 6 reader bounds (64), interleaved in time
    for n in range(70):
        _grow(
            root,
            f"s{n:02}.jsonl",
            [event("user", f"deploy {n} {i}", i, T0 + i * 100 + n) for i in range(3)],
        )
    index = tmp_path / "index.db"
    index_tree(root, index)
    bounds = _bounds(index)
    con = sqlite3.connect(index, isolation_level=None)
    _drop_session_bounds(con)
    con.close()
    # a reader of schema 6 answers as before, with and without its bound of 64 sessions
    few, many = Filters(path="*/s0[0-4].jsonl"), Filters(path="*/s[0-6]?.jsonl")
    want_few, want_many = _seqs(index, "deploy", few), _seqs(index, "deploy", many)
    assert len(want_few) == 15 and len(want_many) == 210
    index_tree(root, index)  # the writer migrates
    assert _bounds(index) == bounds
    assert _seqs(index, "deploy", few) == want_few
    assert _seqs(index, "deploy", many) == want_many
