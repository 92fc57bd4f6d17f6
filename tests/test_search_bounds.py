"""`--until` and role/type filters read only what they can match (schema step 5).

An ``until`` filter bounds the full-text keys from above by ``tkey_base(until)`` plus the most
any key went past its second's base (``meta.tkey_spill``); a role/type filter that no
(role, type) pair the index has seen satisfies (``message_kinds``) has no hits without reading
a match. Each promise here is one a wrong bound would break: a burst of more messages in one
second than it has key slots, a spill written in a transaction that rolled back, a pair that
arrives in a later sync, an index migrated from schema 4.
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
    con.execute("DELETE FROM migrations WHERE version >= 5")  # and the steps after it
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
