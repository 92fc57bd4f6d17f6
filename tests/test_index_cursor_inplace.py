"""Cursor indexed in place, read-only (``sync --source cursor:PATH``): the composers of its
``state.vscdb`` as units at ``DB#cursor-<composer id>`` keyed by the importer's own fingerprint
(daemon/FOREIGN.md, "Units"), its agent transcripts as JSONL files. Cursor is grown the way it
writes (rows only in the ``-wal`` while its connection stays open), synced again, and the index
must equal a fresh index of the same tree on SQLite and PostgreSQL; ``ItemTable``'s login token
is never in the index; nothing is written beside the source; a deleted composer is forgotten; a
transcript the default database holds is indexed once, from the database, as the import does."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonltape_daemon.engines.postgres.store import PgStore
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest import foreign
from jsonltape_daemon.ingest.foreign import ForeignIngestor, parse_source

from jsonltape.interop import foreign as mapping

from . import _cursor_db as cdb
from ._agents import run
from ._cursor import TID, TRANSCRIPT, TRANSCRIPTS, build_db, by_id, ok
from ._importers import copy_tree
from .test_index_foreign import rebuild
from .test_index_foreign_units import writer
from .test_index_foreign_units_engines import counted_once, daemon_sees_a_wal_only_write
from .test_index_foreign_units_fuzz import _verdicts
from .test_index_helpers import dump, fts_ok
from .test_interop_agents_b import _listing
from .test_interop_sqlite_snapshot import count_copies
from .test_pg_store import assert_same, pg_dump


def tree(tmp: Path) -> tuple[Path, Path]:
    """A Cursor ``User`` folder (its global ``state.vscdb``, the sub-agent's rows and a renewed
    token only in the ``-wal``) and its agent transcripts, both below ``tmp/src``."""
    db = build_db(tmp / "src")
    copy_tree(TRANSCRIPTS, tmp / "src" / "projects")
    return tmp / "src", db


def add_turn(con: sqlite3.Connection, cid: str, n: int, text: str) -> None:
    """Cursor writing a prompt of composer ``cid``: its bubble row, then the composer row
    rewritten with one more header and a later ``lastUpdatedAt``, in one transaction."""
    key = f"composerData:{cid}"
    (raw,) = con.execute("SELECT value FROM cursorDiskKV WHERE key = ?", (key,)).fetchone()
    data = json.loads(raw)
    data = json.loads(data) if isinstance(data, str) else data
    bid = f"added-{n}"
    data["fullConversationHeadersOnly"].append({"bubbleId": bid, "type": 1})
    data["lastUpdatedAt"] += 1_000 * n
    bubble = cdb.bubble(1, cdb.T0 + 100_000 * n, text=text)
    con.execute("BEGIN")
    con.execute(
        "INSERT INTO cursorDiskKV VALUES (?, ?)", (f"bubbleId:{cid}:{bid}", json.dumps(bubble))
    )
    con.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (key, json.dumps(data)))
    con.execute("COMMIT")


def columns_holding(store: SqliteStore, needle: str) -> list[tuple[str, str]]:
    """Every ``(table, column)`` of the index whose values hold ``needle`` (the FTS shadow
    tables included: they hold the indexed text)."""
    tables = [
        r[0]
        for r in store.con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        )
    ]
    out = []
    for table in tables:
        for col in [r[1] for r in store.con.execute(f"PRAGMA table_info({table})")]:
            (n,) = store.con.execute(
                f"SELECT count(*) FROM {table} WHERE instr(CAST({col} AS BLOB), ?) > 0",
                (needle.encode(),),
            ).fetchone()
            if n:
                out.append((table, col))
    return out


def composers(store: SqliteStore) -> dict[str, str]:
    """The index's composer sessions: composer id -> registry path."""
    out = {}
    for sid, path in store.con.execute("SELECT id, path FROM sessions"):
        if "state.vscdb#" in path:
            out[sid.removeprefix("cursor-")] = path
    return out


@contextlib.contextmanager
def indexed(root: Path, at: Path) -> Iterator[tuple[SqliteStore, ForeignIngestor]]:
    store = SqliteStore(at)
    try:
        engine = ForeignIngestor(store, root, "cursor")
        assert engine.rescan().errors == 0
        yield store, engine
    finally:
        store.close()


@contextlib.contextmanager
def followed(
    tmp_path: Path,
) -> Iterator[tuple[Path, Path, sqlite3.Connection, SqliteStore, ForeignIngestor]]:
    """The tree indexed once while Cursor runs: its connection open, its WAL kept."""
    root, db = tree(tmp_path)
    with (
        contextlib.closing(writer(db)) as con,
        indexed(root, tmp_path / "index.db") as (store, engine),
    ):
        yield root, db, con, store, engine


def test_sync_source_takes_cursor_and_still_refuses_an_agent_declared_not_in_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert parse_source("cursor:/x") == ("cursor", "/x")
    # no importer declares in_place=False today: the refusal stays one line for the next one
    monkeypatch.setitem(foreign.AGENTS, "cursor", foreign.AGENTS["cursor"]._replace(in_place=False))
    with pytest.raises(ValueError, match=r"^Cursor sessions cannot be indexed in place: import"):
        parse_source("cursor:/x")


def test_a_wal_only_turn_re_maps_that_composer_alone_and_equals_a_fresh_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = count_copies(monkeypatch)
    with followed(tmp_path) as (root, db, con, store, engine):
        first = composers(store)
        assert sorted(first) == sorted([cdb.MAIN, cdb.SUB, cdb.OLD])
        assert dump(store.con) == rebuild(root, "cursor")
        assert engine.rescan().transactions == 0  # unchanged: nothing mapped, nothing written
        main = db.read_bytes()
        add_turn(con, cdb.MAIN, 1, "and the discount code too")
        before = _listing(root)
        assert db.read_bytes() == main and os.path.getsize(f"{db}-wal") > 0  # in the WAL only
        assert db.name in {name for name, _n in copied}  # the first sync copied the database
        copied.clear()
        stats = engine.sync_paths([f"{db}-wal"])  # the watcher's hint: the WAL, not the db
        assert stats.files == 1 and stats.errors == 0  # that composer alone was mapped
        assert {name for name, _n in copied} == {f"{db.name}-wal"}  # its -wal, not the db again
        assert _listing(root) == before  # nothing written, no file created beside the source
        got = dump(store.con)
        assert got == rebuild(root, "cursor")
        assert "and the discount code too" in json.dumps(got["messages"])
        assert len(got["sessions"]) == len({s[0] for s in got["sessions"].values()})  # no twin
        assert engine.rescan().transactions == 0
        fts_ok(store.con)


def test_the_index_holds_the_sessions_the_import_of_the_same_tree_writes(
    tmp_path: Path,
) -> None:
    root, _db = tree(tmp_path)
    with indexed(root, tmp_path / "index.db") as (store, _engine):
        rows = dict(store.con.execute("SELECT id, title FROM sessions"))
        sessions = by_id(ok(run("cursor", root, tmp_path / "out")))
        assert sorted(rows) == sorted(f"cursor-{k}" for k in sessions)


def test_item_table_and_its_login_token_are_never_in_the_index(tmp_path: Path) -> None:
    root, db = tree(tmp_path)
    at = tmp_path / "index" / "index.db"
    at.parent.mkdir()
    with (
        contextlib.closing(writer(db)) as con,
        indexed(root, at) as (store, engine),
    ):
        con.execute(
            "INSERT INTO ItemTable VALUES (?, ?)", ("cursorAuth/accessToken", cdb.TOKEN + "-2")
        )
        add_turn(con, cdb.MAIN, 1, "what about the zebrafinch flag")
        engine.sync_paths([f"{db}-wal"])
        assert cdb.TOKEN.encode() in Path(f"{db}-wal").read_bytes()  # the source holds it
        assert columns_holding(store, "zebrafinch")  # the search below can find text
        assert columns_holding(store, cdb.TOKEN[:20]) == []
        store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files = b"".join(f.read_bytes() for f in at.parent.rglob("*") if f.is_file())
    assert b"zebrafinch" in files
    assert cdb.TOKEN[:20].encode() not in files


def test_a_composer_deleted_or_the_database_gone_forgets_its_rows(tmp_path: Path) -> None:
    root, db = tree(tmp_path)
    with indexed(root, tmp_path / "index.db") as (store, engine):
        with contextlib.closing(writer(db)) as con:
            con.execute("DELETE FROM cursorDiskKV WHERE key >= ? AND key < ?",
                        (f"bubbleId:{cdb.OLD}:", f"bubbleId:{cdb.OLD};"))  # fmt: skip
            con.execute("DELETE FROM cursorDiskKV WHERE key = ?", (f"composerData:{cdb.OLD}",))
            assert engine.sync_paths([f"{db}-wal"]).errors == 0
        assert sorted(composers(store)) == sorted([cdb.MAIN, cdb.SUB])
        assert dump(store.con) == rebuild(root, "cursor")
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        engine.sync_paths([str(db)])
        assert composers(store) == {}
        assert dump(store.con) == rebuild(root, "cursor")


def test_a_bad_composer_row_in_the_wal_is_one_verdict_naming_file_table_key_and_column(
    tmp_path: Path,
) -> None:
    with followed(tmp_path) as (root, db, con, store, engine):
        con.execute(
            "INSERT INTO cursorDiskKV VALUES (?, ?)", (f"composerData:{cdb.MAIN}", b"{not json")
        )
        con.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", ("composerData:../evil", b"{}"))
        stats = engine.sync_paths([f"{db}-wal"])
        assert stats.errors == 2
        errors = sorted(e for (e,) in store.con.execute("SELECT error FROM files") if e)
        assert len(errors) == 2 and all(e.startswith(f"{db}: cursorDiskKV row '") for e in errors)
        assert "'composerData:../evil': key names no composer id" in errors[0]
        assert f"'composerData:{cdb.MAIN}': value is not JSON" in errors[1]
        assert cdb.MAIN not in composers(store)  # as a rebuild: nothing of it is indexed
        assert dump(store.con) == rebuild(root, "cursor")
        assert engine.rescan().transactions == 0  # said once
        add_turn(con, cdb.SUB, 1, "still followed")  # the other composers are
        assert engine.sync_paths([f"{db}-wal"]).files == 1


def test_a_transcript_the_default_database_holds_is_indexed_once_from_it_as_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rule "a transcript whose conversation the default ``state.vscdb`` holds is skipped"
    answers in place what it answers in the import, also when Cursor writes that composer only
    to the ``-wal`` while the index runs (its database file's stat unchanged)."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    user = home / ".config" / "Cursor" / "User"
    db = cdb.build(user / "globalStorage" / "state.vscdb")
    projects = copy_tree(TRANSCRIPTS, home / ".cursor" / "projects")
    transcript = next(projects.rglob(f"{TID}.jsonl"))
    store = SqliteStore(tmp_path / "index.db")
    try:
        engines = [ForeignIngestor(store, r, "cursor") for r in (user, projects)]
        for e in engines:
            assert e.rescan().errors == 0
        assert TID not in composers(store)
        ids = [sid for (sid,) in store.con.execute("SELECT id FROM sessions")]
        assert f"cursor-{TID}" in ids  # from its transcript: the database does not hold it
        with contextlib.closing(writer(db)) as con:
            stat = db.stat()
            con.execute(
                "INSERT INTO cursorDiskKV VALUES (?, ?)",
                (f"bubbleId:{TID}:b1", json.dumps(cdb.bubble(1, cdb.T0, text="files?"))),
            )
            con.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (
                f"composerData:{TID}",
                json.dumps(cdb.composer(TID, "Files", [("b1", {"type": 1})])),
            ))  # fmt: skip
            assert (db.stat().st_size, db.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
            copied = count_copies(monkeypatch)
            for e in engines:  # the watcher's event for the database's -wal, given to both
                assert e.hinted(f"{db}-wal")
                assert e.sync_paths([f"{db}-wal"]).errors == 0
            # The database file is copied once at most: the transcripts' question reuses it.
            assert [name for name, _n in copied].count(db.name) <= 1
            got = [(sid, p) for sid, p in store.con.execute("SELECT id, path FROM sessions")]
            twins = [p for sid, p in got if sid == f"cursor-{TID}"]
            assert twins == [f"{db}#cursor-{TID}"]  # once, from the database
            reports = run("cursor", projects, tmp_path / "out")
            assert [r.status for r in reports if r.path.endswith(f"{TID}.jsonl")] == ["skipped"]
            con.execute("DELETE FROM cursorDiskKV WHERE key LIKE ?", (f"%{TID}%",))
            for e in engines:  # the composer deleted: its transcript is the session again
                assert e.sync_paths([f"{db}-wal"]).errors == 0
            got = [(sid, p) for sid, p in store.con.execute("SELECT id, path FROM sessions")]
            assert [p for sid, p in got if sid == f"cursor-{TID}"] == [str(transcript)]
            assert all(e.rescan().transactions == 0 for e in engines)
    finally:
        store.close()


def test_a_reply_indexed_in_place_and_imported_is_counted_once(tmp_path: Path) -> None:
    src, _db = tree(tmp_path)
    # the replies with tokens: two of the main composer, one of its sub-agent's (the legacy
    # text transcript is skipped by the import, said)
    assert counted_once(tmp_path, "cursor", src) == 3


def test_postgresql_holds_the_rows_sqlite_holds_before_and_after_a_wal_only_change(
    tmp_path: Path, pg_db: str
) -> None:
    root, db = tree(tmp_path)
    local = SqliteStore(tmp_path / "index.db")
    pg = PgStore(pg_db, "laptop")
    with contextlib.ExitStack() as stack:
        stack.callback(local.close)
        stack.callback(pg.close)
        engines = [ForeignIngestor(s, root, "cursor") for s in (local, pg)]
        for e in engines:
            assert e.rescan().errors == 0
        assert_same(pg_dump(pg_db, "laptop"), dump(local.con))
        con = stack.enter_context(contextlib.closing(writer(db)))
        add_turn(con, cdb.SUB, 1, "what about the zebrafinch flag")
        for e in engines:
            assert e.sync_paths([f"{db}-wal"]).files == 1
        assert_same(pg_dump(pg_db, "laptop"), dump(local.con))
        assert dump(local.con) == rebuild(root, "cursor")
        for e in engines:
            assert e.rescan().transactions == 0


def test_the_daemon_subprocess_sees_a_bubble_that_lives_only_in_the_wal(tmp_path: Path) -> None:
    src, db = tree(tmp_path)

    def write(con: sqlite3.Connection) -> None:
        add_turn(con, cdb.MAIN, 1, "what about the zebrafinch flag")

    daemon_sees_a_wal_only_write(tmp_path, f"cursor:{src}", db, write)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=10,
)
#: Anything Cursor's untyped value column can hold: nothing, bytes, text, a number, JSON as
#: TEXT or as a BLOB, a composer with headers of any shape.
_VALUES = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.text(max_size=40),
    st.integers(-(2**63), 2**63 - 1),  # what SQLite stores
    _JSON.map(json.dumps),
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.lists(_JSON, max_size=3).map(
        lambda h: json.dumps({"fullConversationHeadersOnly": h, "lastUpdatedAt": 1})
    ),
)
_KEYS = st.one_of(
    st.sampled_from(
        [f"composerData:{cdb.MAIN}", f"bubbleId:{cdb.MAIN}:a3", f"bubbleId:{cdb.SUB}:new"]
    ),
    st.text(max_size=24).map(lambda t: f"composerData:{t}"),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=_KEYS, value=_VALUES)
def test_any_value_under_any_key_written_while_followed_is_one_verdict_at_most(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: object
) -> None:
    root, db = tree(tmp_path_factory.mktemp("cursor"))
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, "cursor")
        engine.rescan()
        with contextlib.closing(writer(db)) as con:
            con.execute("INSERT INTO cursorDiskKV VALUES (?, ?)", (key, value))
            if key.startswith("bubbleId:"):  # Cursor moves its composer's mark with a bubble
                cid = key.split(":")[1]
                con.execute(
                    "UPDATE cursorDiskKV SET value = json_set(value, '$.lastUpdatedAt',"
                    " json_extract(value, '$.lastUpdatedAt') + 1) WHERE key = ?",
                    (f"composerData:{cid}",),
                )
            engine.sync_paths([f"{db}-wal"])
            _verdicts(store, root, "cursor")
            assert engine.rescan().transactions == 0  # a verdict is said once
    finally:
        store.close()


def test_a_transcript_grown_byte_by_byte_while_followed_is_never_damaged(tmp_path: Path) -> None:
    data = TRANSCRIPT.read_bytes()
    f = tmp_path / "projects" / "home-u-shop" / "agent-transcripts" / TID / f"{TID}.jsonl"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"")
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, tmp_path / "projects", "cursor")
        for cut in range(len(data) + 1):
            with open(f, "ab") as out:  # appended as Cursor appends, one byte at a time
                out.write(data[cut - 1 : cut] if cut else b"")
            engine.sync_paths([str(f)])
            _verdicts(store, tmp_path / "projects", "cursor")
            states = {r[0] for r in store.con.execute("SELECT state FROM sessions")}
            assert "corrupt" not in states  # a line still being written is never damage
        (events,) = store.con.execute("SELECT events FROM sessions").fetchone()
        assert events == len(list(mapping.scan("cursor", f, raw=False)))
    finally:
        store.close()
