"""The ingest engine case by case: incremental reads, torn tails, bad files, renames, copies,
bounded transactions, schema versions and the SQLite feature probe."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite import schema
from jsonltape_daemon.engines.sqlite.store import FTS_TABLES, SqliteStore
from jsonltape_daemon.errors import FeatureMissingError
from jsonltape_daemon.ingest import surface
from jsonltape_daemon.ingest.ingestor import Budget, Ingestor

import jsonltape

from ._search_cases import cli
from .helpers import drop_session_bounds
from .test_index_helpers import dump, fts_ok, raw_append, rebuild, session, user_data


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "index.db")
    yield s  # type: ignore[misc]
    s.close()


def test_incremental_sync_reads_only_new_bytes(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    path = root / "s.jsonl"
    session(path, ["first"] * 50)
    engine = Ingestor(store, root)
    first = engine.rescan()
    assert first.events == sum(1 for _ in jsonltape.read(path))
    assert engine.rescan().transactions == 0  # nothing changed: nothing opened, no transaction
    size = path.stat().st_size
    with jsonltape.open(path) as tape:
        tape.user("second")
    again = engine.rescan()
    assert again.bytes == path.stat().st_size - size and again.transactions == 1
    assert again.reingested == 0 and again.sessions_added == 0
    assert dump(store.con) == rebuild(root)
    fts_ok(store.con)


def test_torn_tail_waits_and_repair_converges(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    path = root / "s.jsonl"
    session(path, ["a"])
    with open(path, "ab") as f:
        f.write(b'{"seq":7,"type":"user/message","ti')
    engine = Ingestor(store, root)
    engine.rescan()
    state, error = store.con.execute("SELECT state, error FROM sessions").fetchone()
    assert state == "torn-tail" and "incomplete line" in error
    jsonltape.repair(path)
    engine.rescan()
    assert store.con.execute("SELECT state FROM sessions").fetchone()[0] == "clean"
    assert dump(store.con) == rebuild(root)


def test_bad_files_are_recorded_and_skipped(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    session(root / "good.jsonl", ["fine"])
    (root / "foreign.jsonl").write_text('{"type":"user","message":"claude"}\n')
    (root / "pending.jsonl").write_bytes(b'{"seq":0,"type":"session/st')
    corrupt = root / "corrupt.jsonl"
    session(corrupt, ["x" * 50, "y"])
    data = bytearray(corrupt.read_bytes())
    data[len(data) // 3] ^= 0x01
    corrupt.write_bytes(bytes(data))
    (root / "link.jsonl").symlink_to(root / "good.jsonl")
    Ingestor(store, root).rescan()
    files = {
        Path(p).name: (s, e)
        for p, s, e in store.con.execute("SELECT path, status, error FROM files")
    }
    assert files["good.jsonl"] == ("indexed", None)
    assert (
        files["foreign.jsonl"][0] == "foreign"
        and "not a jsonltape session" in files["foreign.jsonl"][1]
    )
    assert files["pending.jsonl"] == ("pending", None)
    assert files["corrupt.jsonl"][0] == "indexed" and "damage before" in files["corrupt.jsonl"][1]
    assert "link.jsonl" not in files  # symlinks are never followed
    states = sorted(r[0] for r in store.con.execute("SELECT state FROM sessions"))
    assert states == ["clean", "corrupt"]


def test_a_file_name_that_is_not_utf8_is_reported_and_the_rest_indexed(tmp_path: Path) -> None:
    root = tmp_path / "r"
    session(root / "good.jsonl", ["fine"])
    odd = os.fsdecode(os.fsencode(root) + b"/odd\xffname.jsonl")
    with jsonltape.open(odd, create=True) as tape:
        tape.user("a surrogate path")
    os.mkdir(os.fsencode(root) + b"/dir\xfe")  # a directory's name too
    session(Path(os.fsdecode(os.fsencode(root) + b"/dir\xfe/inner.jsonl")), ["inner"])
    index = tmp_path / "index.db"
    for _ in range(2):  # the second sync is as quiet as the first: nothing half-stored
        r = cli("sync", str(root), "--index", str(index))
        assert r.returncode == 0 and "1 session indexed" in r.stdout, r.stdout + r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 2 and all("the file name is not UTF-8" in x for x in lines), lines
        assert "odd\\udcffname.jsonl" in r.stderr and "dir\\udcfe/inner.jsonl" in r.stderr
    assert "fine" in cli("search", "fine", "--index", str(index)).stdout


def test_a_watcher_rename_to_or_from_a_name_that_is_not_utf8_is_reported_at_once(
    tmp_path: Path, store: SqliteStore
) -> None:
    root = tmp_path / "r"
    session(root / "good.jsonl", ["fine"])
    odd = os.fsdecode(os.fsencode(root) + b"/odd\xffname.jsonl")
    session(Path(odd), ["odd text"])
    engine = Ingestor(store, root)
    assert engine.rescan().errors == 1 and engine.unnamed == [odd]
    named = str(root / "renamed.jsonl")
    os.rename(odd, named)
    stats = engine.sync_paths([odd, named])  # as the watcher reports a rename: both paths
    assert (stats.errors, stats.sessions_added, engine.unnamed) == (0, 1, [])
    hidden = os.fsdecode(os.fsencode(root) + b"/gone\xfe.jsonl")
    os.rename(root / "good.jsonl", hidden)
    stats = engine.sync_paths([str(root / "good.jsonl"), hidden])
    assert (stats.errors, stats.sessions_removed, engine.unnamed) == (1, 1, [hidden])


def test_rename_keeps_rows_and_copy_gets_its_own(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    session(root / "a.jsonl", ["hello"])
    engine = Ingestor(store, root)
    engine.rescan()
    os.rename(root / "a.jsonl", root / "sub.jsonl")
    moved = engine.sync_paths([str(root / "a.jsonl"), str(root / "sub.jsonl")])
    assert moved.sessions_added == 0 and moved.events == 0 and moved.reingested == 0
    shutil.copyfile(root / "sub.jsonl", root / "copy.jsonl")
    copied = engine.rescan()
    assert copied.sessions_added == 1
    assert dump(store.con) == rebuild(root)


def test_replace_and_truncate_reingest(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    session(root / "a.jsonl", ["one", "two", "three"])
    session(root / "b.jsonl", ["other"])
    engine = Ingestor(store, root)
    engine.rescan()
    data = (root / "a.jsonl").read_bytes()
    (root / "a.jsonl").write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])
    assert engine.rescan().reingested == 1
    shutil.copyfile(root / "b.jsonl", root / "a.jsonl")
    out = engine.rescan()
    assert out.sessions_removed == 1 and out.sessions_added == 1
    assert dump(store.con) == rebuild(root)


def test_transactions_are_bounded(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    session(root / "big.jsonl", [f"m{i}" for i in range(200)])
    engine = Ingestor(store, root, budget=Budget(100, 10.0), bulk_budget=Budget(100, 10.0))
    stats = engine.rescan()
    assert stats.transactions >= stats.events // 100
    assert dump(store.con) == rebuild(root)


def test_open_turn_compaction_and_retract_statuses(tmp_path: Path, store: SqliteStore) -> None:
    root = tmp_path / "r"
    path = root / "s.jsonl"
    session(path, ["a", "b"])
    Ingestor(store, root).rescan()  # bulk first, then live full-text upkeep below
    n = sum(1 for _ in jsonltape.read(path))
    raw_append(path, [("compaction/summary", {"summary": "s"})])
    raw_append(
        path,
        [("user/message", user_data("summary"))],
        surface={"op": "replace", "start": 2, "end": 7},
        sources=[2, 3, 6, 7, n],
    )
    raw_append(path, [("turn/start", {}), ("user/message", user_data("lost in a crash"))])
    Ingestor(store, root).rescan()
    statuses = dict(store.con.execute("SELECT seq, status FROM messages"))
    assert statuses[2] == statuses[7] == "compacted"
    assert store.con.execute("SELECT state FROM sessions").fetchone()[0] == "open-turn"
    assert dump(store.con) == rebuild(root)
    fts_ok(store.con)


def test_missing_fts5_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        schema, "features", lambda con: {"FTS5": True, "the FTS5 trigram tokenizer": False}
    )
    with pytest.raises(FeatureMissingError, match="lacks the FTS5 trigram tokenizer"):
        schema.probe()


def test_schema_is_documented_and_versioned(tmp_path: Path) -> None:
    con = sqlite3.connect(":memory:")
    assert schema.migrate(con) == schema.SCHEMA_VERSION
    doc = (Path(__file__).resolve().parent.parent / "daemon" / "SCHEMA.md").read_text()
    tables = [
        r[0]
        for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'messages_%' "
            "AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for name in tables:
        assert f"`{name}`" in doc, name
        for col in con.execute(f"PRAGMA table_info({name})"):
            assert f"`{col[1]}`" in doc, (name, col[1])
    assert f"version {schema.SCHEMA_VERSION}" in doc


def _texts_root(root: Path, sessions: int = 3) -> None:
    for n in range(sessions):
        session(
            root / f"s{n}.jsonl",
            [f"FileNotFoundError {i} in 東京都の天気 naïve {n}" for i in range(20)],
        )


def _searches(con: sqlite3.Connection) -> list[list[tuple[str, int]]]:
    from jsonltape_daemon.engines.sqlite.search import Filters, search

    return [
        sorted((h.path, h.seq) for h in search(con, q, Filters(all=True), 1000))
        for q in ("NotFound", "naive", "天気", "雨", "answer", "E 1")
    ]


def test_a_helper_process_builds_the_same_full_text_indexes(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _texts_root(root)
    alone = SqliteStore(tmp_path / "alone.db", helper_from=None)
    helped = SqliteStore(tmp_path / "helped.db", helper_from=0)
    try:
        for store in (alone, helped):
            engine = Ingestor(store, root)
            engine.rescan()
            if store is helped:
                assert store.substrings_waiting() or not store.substrings_pending()
            engine.build_substrings()
            assert not store.substrings_pending()
            fts_ok(store.con)
        assert dump(helped.con) == dump(alone.con)
        assert _searches(helped.con) == _searches(alone.con)
        assert not (tmp_path / "helped.db.fts").exists()
    finally:
        alone.close()
        helped.close()


def test_sessions_dropped_before_the_helper_is_done_leave_its_index(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _texts_root(root, sessions=4)
    store = SqliteStore(tmp_path / "i.db", helper_from=0)
    engine = Ingestor(store, root)
    engine.rescan()
    (root / "s1.jsonl").unlink()  # dropped while the helper builds the substring index
    shutil.copyfile(root / "s2.jsonl", root / "s3.jsonl")  # and one replaced
    engine.rescan()
    engine.build_substrings()
    assert not store.substrings_pending()
    fts_ok(store.con)
    assert dump(store.con) == rebuild(root)
    store.close()


def _dated(path: Path, texts: list[str], time: int) -> None:
    """A session of user messages, one millisecond apart from ``time`` on."""
    with jsonltape.open(path, create=True, durability="manual") as tape:
        tape.append_batch(
            {
                "type": "user/message",
                "surface": "append",
                "time": time + n,
                "data": user_data(text),
            }
            for n, text in enumerate(texts)
        )


def _bulk_loaded(tmp_path: Path, helper_from: int | None) -> tuple[SqliteStore, Ingestor]:
    """Twelve sessions, each older than the one before (the keys, in time order, go back at
    every session), loaded into a new index with its substring index complete."""
    root = tmp_path / "r"
    for n in range(12):
        _dated(
            root / f"s{n:02d}.jsonl",
            [f"FileNotFoundError {n}.{i} in 東京都 words" for i in range(30)],
            1_780_000_000_000 - n * 86_400_000,
        )
    store = SqliteStore(tmp_path / "i.db", helper_from=helper_from)
    engine = Ingestor(store, root)
    engine.rescan()
    engine.build_substrings()
    assert not store.substrings_pending()
    fts_ok(store.con)
    return store, engine


def _segments(con: sqlite3.Connection, table: str) -> int:
    return int(con.execute(f"SELECT count(DISTINCT segid) FROM {table}_idx").fetchone()[0])


@pytest.mark.parametrize("helper_from", [0, None])
def test_a_bulk_load_writes_each_full_text_table_in_key_order(
    tmp_path: Path, helper_from: int | None
) -> None:
    """Each session read holds older messages than the one before, yet a load writes each
    full-text table as one segment: FTS5 starts a new one at every key that is not above the
    last, and merging them costs CPU."""
    store, _engine = _bulk_loaded(tmp_path, helper_from)
    try:
        segments = {t: _segments(store.con, t) for t in FTS_TABLES}
        if helper_from is None:
            # The loader itself: the substrings after the load, a segment per step of 128
            # messages (three here), each in key order.
            assert segments.pop("messages_trigram") <= 3
        assert set(segments.values()) == {1}, segments
    finally:
        store.close()


def test_a_bulk_load_merges_its_batches_and_hands_over_fts5s_merge_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk load (the helper, and the loader for the CJK table) merges nothing while it
    builds and each table into one segment at the end; the index it publishes must merge
    again as later syncs add segments (FTS5 keeps the merge settings in the copied
    ``_config``: a load that left its own there would pile up a segment per sync; with FTS5's
    defaults 16 small segments on a level are merged at once)."""
    from jsonltape_daemon.engines.sqlite import fts_helper, fulltext

    monkeypatch.setattr(fts_helper, "_BATCH", 40)  # frames of 40 messages: 9 of them
    monkeypatch.setattr(fulltext, "_CJK_BATCH", 40)
    store, engine = _bulk_loaded(tmp_path, 0)
    try:
        for table in FTS_TABLES:
            assert _segments(store.con, table) == 1, table
            config = dict(store.con.execute(f"SELECT k, v FROM {table}_config"))
            assert config.get("automerge", 4) == 4, (table, config)  # FTS5's defaults
            assert config.get("crisismerge", 16) == 16, (table, config)
        for n in range(20):  # each sync writes a segment of its own to each table
            _dated(
                Path(engine.root) / f"later{n:02d}.jsonl",
                [f"later_word {n} 雨"],
                1_790_000_000_000 + n,
            )
            engine.rescan()
        fts_ok(store.con)
        for table in FTS_TABLES:
            assert _segments(store.con, table) <= 16, table
        assert dump(store.con) == rebuild(Path(engine.root))
    finally:
        store.close()


def test_a_helper_that_dies_leaves_the_work_to_the_loader(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _texts_root(root)
    store = SqliteStore(tmp_path / "i.db", helper_from=0)
    store.start_bulk()
    engine = Ingestor(store, root)
    engine.rescan()
    assert store._helper is not None
    store._helper.proc.kill()
    store._helper.proc.wait()
    store.rebuild_fts()  # the word index is built here instead
    store.finish_bulk()
    engine.build_substrings()  # and the substring index too
    assert not store.substrings_pending() and store._helper is None
    fts_ok(store.con)
    assert dump(store.con) == rebuild(root)
    store.close()


def test_a_bulk_load_is_published_whole(tmp_path: Path) -> None:
    root = tmp_path / "r"
    _texts_root(root)
    index = tmp_path / "i.db"
    store = SqliteStore(index)
    store.start_bulk()
    Ingestor(store, root).rescan()  # the caller owns the bulk load: nothing published yet
    reader = sqlite3.connect(index)
    assert reader.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
    assert (tmp_path / "i.db.build").exists()
    store.abort_bulk()  # e.g. an error: the published index is untouched, the copy is gone
    assert not (tmp_path / "i.db.build").exists()
    assert store.is_empty()
    stats = Ingestor(store, root).rescan()  # now the engine starts and publishes one itself
    assert stats.bulk and "publish" in stats.phases
    assert reader.execute("SELECT count(*) FROM sessions").fetchone() == (0,)  # old snapshot
    reader.close()
    reader = sqlite3.connect(index)
    assert reader.execute("SELECT count(*) FROM sessions").fetchone() == (3,)
    reader.close()
    store.close()


@pytest.mark.parametrize("first_sync", [True, False], ids=["new-file", "new-generation"])
def test_an_io_error_halfway_through_a_file_leaves_no_half_session(
    tmp_path: Path, store: SqliteStore, monkeypatch: pytest.MonkeyPatch, first_sync: bool
) -> None:
    # An OSError while a file's rows go in (EIO on a failing disk; injected into the real
    # surface step here) used to leave the session just begun without its file row: every
    # later sync then failed on sessions.path.
    root = tmp_path / "r"
    session(root / "b.jsonl", ["neighbour"])
    engine = Ingestor(store, root, budget=Budget(rows=1))
    if not first_sync:
        session(root / "a.jsonl", ["old generation"])
        engine.rescan()
        (root / "a.jsonl").unlink()
        (root / ".a.jsonl.lock").unlink()
    session(root / "a.jsonl", ["fine", "BOOM", "after"])
    real = surface.message_fields

    def failing(type_: str, data: Any) -> Any:
        fields = real(type_, data)
        if "BOOM" in fields[1]:
            raise OSError(5, "Input/output error (injected)")
        return fields

    monkeypatch.setattr(surface, "message_fields", failing)
    assert engine.rescan().errors == 1
    assert store.session_at(str(root / "a.jsonl")) is None
    monkeypatch.setattr(surface, "message_fields", real)
    engine.rescan()  # the disk is fine again: the file goes in whole
    assert dump(store.con) == rebuild(root)


@pytest.mark.parametrize(
    "vector", ["y_span_from_beyond_offset", "y_span_crc_uppercase", "y_span_unknown_member"]
)
def test_the_index_calls_a_session_closed_exactly_when_verify_does(
    tmp_path: Path, store: SqliteStore, vector: str
) -> None:
    """One valid-checkpoint rule (jsonltape._lines.checkpoint_at): a closing checkpoint whose
    span is malformed closes nothing, for the index as for verify (spec §10.2)."""
    root = tmp_path / "r"
    root.mkdir(mode=0o700)
    src = Path(__file__).parent.parent / "spec" / "vectors" / "read" / f"{vector}.jsonl"
    path = root / "s.jsonl"
    shutil.copyfile(src, path)
    os.chmod(path, 0o600)
    Ingestor(store, root).rescan()
    ((closed,),) = store.con.execute("SELECT closed FROM sessions").fetchall()
    assert bool(closed) == jsonltape.verify(path).closed


def test_a_schema_5_index_gets_its_events_rebuilt_in_place(tmp_path: Path) -> None:
    """Step 6 rebuilds ``events`` keyed by (sid, seq) alone; every row, and every answer the
    index gives, stays the same, and nothing is read from the files again."""
    root = tmp_path / "r"
    _texts_root(root)
    index = tmp_path / "i.db"
    store = SqliteStore(index)
    Ingestor(store, root).rescan()
    store.close()
    con = sqlite3.connect(index, isolation_level=None)
    cols = "sid, seq, type, time, offset, size, crc"
    rows = con.execute(f"SELECT {cols} FROM events ORDER BY sid, seq").fetchall()
    assert rows
    # back to schema 5: the rowid table with its primary key beside it
    con.executescript(
        f"""
        CREATE TABLE old_events (sid INTEGER NOT NULL, seq INTEGER NOT NULL,
            type TEXT NOT NULL, time INTEGER NOT NULL, offset INTEGER NOT NULL,
            size INTEGER NOT NULL, crc TEXT NOT NULL, PRIMARY KEY (sid, seq));
        INSERT INTO old_events SELECT {cols} FROM events;
        DROP TABLE events;
        ALTER TABLE old_events RENAME TO events;
        DELETE FROM migrations WHERE version >= 6;
        PRAGMA user_version = 5;
        """
    )
    drop_session_bounds(con)  # and what step 7 added
    con.close()
    with sqlite3.connect(index) as old:
        before = dump(old)
    old.close()
    store = SqliteStore(index)  # the writer migrates
    try:
        stats = Ingestor(store, root).rescan()
        assert stats.files == 0  # nothing read again
        sql = store.con.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()
        assert "WITHOUT ROWID" in sql[0]
        assert store.con.execute(f"SELECT {cols} FROM events ORDER BY sid, seq").fetchall() == rows
        assert dump(store.con) == before == rebuild(root)
        assert store.con.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    finally:
        store.close()


def test_a_bulk_load_that_fails_to_publish_leaves_the_index_and_loads_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Merging the CJK table at the end of a load can fail (a full disk): the load is thrown
    away, the published index and its connection are untouched, and the next sync loads."""
    from jsonltape_daemon.engines.sqlite import store as store_module
    from jsonltape_daemon.paths import build_path

    root = tmp_path / "r"
    _texts_root(root)
    index = tmp_path / "i.db"
    real = store_module.finish_bulk_merging
    calls = []

    def full_disk(con: sqlite3.Connection, table: str) -> None:
        calls.append(table)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database or disk is full")
        real(con, table)

    monkeypatch.setattr(store_module, "finish_bulk_merging", full_disk)
    store = SqliteStore(index, helper_from=0)
    try:
        engine = Ingestor(store, root)
        with pytest.raises(sqlite3.OperationalError):
            engine.rescan()
        assert not store.in_bulk and not build_path(index).exists()
        assert store.con.execute("PRAGMA database_list").fetchone()[2] == str(index)
        engine.rescan()  # a new load, published
        engine.build_substrings()
        assert len(calls) == 2
        fts_ok(store.con)
        assert dump(store.con) == rebuild(root)
    finally:
        store.close()


def test_the_helpers_file_is_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    """The helper's database holds the code-like tokens of every message while a first sync
    runs: it is created 0600 (SQLite alone would take the umask's 0644)."""
    root = tmp_path / "r"
    _texts_root(root)
    old = os.umask(0o022)
    try:
        store = SqliteStore(tmp_path / "i.db", helper_from=0)
        store.start_bulk()
        Ingestor(store, root).rescan()
        helper = store._helper
        assert helper is not None and helper.finish_words()
        assert helper.path.stat().st_mode & 0o777 == 0o600
        assert store.path.with_name("i.db.build").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
    store.close()
