"""The read-only in-place index of the sources whose sessions are not files of their own:
databases (OpenCode's ``opencode.db``, Goose's ``sessions.db``, Crush's ``.crush/crush.db``),
Cline / Roo Code / Kilo Code task folders and Aider's ``.aider.chat.history.md``
(daemon/FOREIGN.md, "Units"). Each is indexed, grown the way its agent grows it (rows written to
the ``-wal`` only while the agent's connection stays open, documents rewritten whole, a run
appended), synced again, and the index must equal a fresh index of the same tree and hold the
sessions the import maps; a session deleted from a database is forgotten; a half-written
document or run waits; bad rows are one verdict; nothing is ever written beside the source."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignIngestor, parse_source, split_member
from jsonltape_daemon.ingest.rows import Store

from jsonltape.interop import discover, foreign

from ._agents import imported, run
from ._agents_b import AGENTS as AGENTS_B
from ._agents_b import DATABASES, DOCUMENTS, database, tree
from .test_index_foreign import rebuild
from .test_index_helpers import dump, fts_ok
from .test_interop_agents_b import _damage, _listing
from .test_interop_opencode import FIX, build_db

AGENTS = (*AGENTS_B, "opencode")
DBS = (*DATABASES, "opencode")


def src_tree(agent: str, dest: Path, keep: float = 1.0) -> Path:
    """The agent's fixture tree (``keep`` of each session written); OpenCode's data directory
    holds an ``opencode.db`` built from its storage fixture, its later half of messages cut."""
    if agent != "opencode":
        return tree(agent, dest, keep=keep)
    dest.mkdir(parents=True)
    db = build_db(FIX / "storage", dest / "opencode.db")
    if keep < 1.0:
        con = sqlite3.connect(db, isolation_level=None)
        ids = [r[0] for r in con.execute("SELECT id FROM message ORDER BY time_created, id")]
        gone = ids[max(1, int(len(ids) * keep)) :]
        con.executemany("DELETE FROM part WHERE message_id = ?", [(m,) for m in gone])
        con.executemany("DELETE FROM message WHERE id = ?", [(m,) for m in gone])
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
    return dest


def db_of(agent: str, root: Path) -> Path:
    return {
        "goose": root / "sessions.db",
        "crush": root / ".crush" / "crush.db",
        "opencode": root / "opencode.db",
    }[agent]


def full_db(agent: str, where: Path) -> Path:
    """The agent's whole database (every row the agent goes on to write), outside the tree."""
    if agent == "opencode":
        where.mkdir(parents=True)
        return build_db(FIX / "storage", where / "opencode.db")
    database(agent, where / "full.db").close()
    return where / "full.db"


def remove_db(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def copy_session(con: sqlite3.Connection, sid: str, new: str, keys: dict[str, str]) -> None:
    """Copy a session's rows as session ``new``: ``keys`` names each table and its column that
    holds the session id; other ids are made unique (an integer key left to SQLite)."""
    for table, key in keys.items():
        values = []
        for _n, col, kind, _null, _default, pk in con.execute(f"PRAGMA table_info({table})"):
            if col == key:
                values.append("?")
            elif pk and kind.upper() == "INTEGER":
                values.append("NULL")
            elif col in ("id", "message_id"):
                values.append(f"{col} || ?")
            else:
                values.append(col)
        args = [new if v == "?" else f"-{new}" for v in values if "?" in v]
        con.execute(
            f"INSERT INTO {table} SELECT {', '.join(values)} FROM {table} WHERE {key} = ?",
            (*args, sid),
        )


def writer(db: Path) -> sqlite3.Connection:
    """The agent, still running: its connection keeps the WAL and never checkpoints."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    return con


def grow_db(con: sqlite3.Connection, full: Path) -> None:
    """Write the rows of ``full`` the database lacks, in one transaction, into the WAL."""
    con.execute("ATTACH DATABASE ? AS whole", (f"file:{full}?mode=ro",))
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM whole.sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%'"
            )
        ]
        con.execute("BEGIN")
        for t in tables:
            con.execute(
                f"INSERT INTO main.{t} SELECT * FROM whole.{t}"
                f" WHERE rowid NOT IN (SELECT rowid FROM main.{t})"
            )
        con.execute("COMMIT")
    finally:
        con.execute("DETACH DATABASE whole")


def grow_files(agent: str, root: Path, full: Path) -> None:
    """Grow the tree's files to ``full``'s as the agent does: Aider's history (and Goose's
    legacy log) appended to, a task's documents and an SDK session rewritten whole."""
    for f in sorted(p for p in full.rglob("*") if p.is_file() and not p.name.endswith(".db")):
        mine = root / f.relative_to(full)
        data, have = f.read_bytes(), mine.read_bytes()
        if data == have:
            continue
        if f.suffix in (".md", ".jsonl"):
            assert data.startswith(have)
            with open(mine, "ab") as out:
                out.write(data[len(have) :])
        else:
            mine.write_bytes(data)  # rewritten whole, in place (as Node's writeFile does)


def index_of(store: SqliteStore) -> dict[str, Any]:
    return dump(store.con)


@contextlib.contextmanager
def indexed(agent: str, root: Path, at: Path) -> Iterator[tuple[SqliteStore, ForeignIngestor]]:
    """An index at ``at`` of the tree, synced once, and its engine."""
    store = SqliteStore(at)
    try:
        engine = ForeignIngestor(store, root, agent)
        engine.rescan()
        yield store, engine
    finally:
        store.close()


def as_imported(store: Store, root: Path, agent: str, out: Path) -> None:
    """The index holds the sessions the import of the tree writes, each with the events the
    mapping of its source gives (the import adds its checkpoint lines after them)."""
    assert isinstance(store, SqliteStore)
    rows = dict(store.con.execute("SELECT id, events FROM sessions"))
    sessions = imported(run(agent, root, out, settle=0))
    assert sorted(rows) == sorted(s.stem for s in sessions)
    items, _skipped = discover(agent, [root])
    mapped: dict[str, int] = {}
    for item in items:
        for sid, _event in foreign.scan(agent, item, raw=False):
            mapped[sid] = mapped.get(sid, 0) + 1
    assert rows == mapped


@pytest.mark.parametrize("agent", AGENTS)
def test_sync_source_takes_every_source_that_used_to_be_refused(agent: str) -> None:
    assert parse_source(f"{agent}:/x") == (agent, "/x")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_grown_source_synced_again_equals_a_fresh_index_and_the_import(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src", keep=0.5)
    full = src_tree(agent, tmp_path / "full")
    store = SqliteStore(tmp_path / "index.db")
    con = None
    try:
        engine = ForeignIngestor(store, root, agent)
        assert engine.rescan().errors == 0
        assert index_of(store) == rebuild(root, agent)
        grow_files(agent, root, full)
        if agent in DBS:
            db = db_of(agent, root)
            con = writer(db)
            main = db.read_bytes()
            grow_db(con, full_db(agent, tmp_path / "whole"))
            assert os.path.getsize(f"{db}-wal") > 0 and db.read_bytes() == main  # in the WAL only
        before = _listing(root)
        stats = engine.rescan()
        assert stats.errors == 0 and stats.events > 0
        assert _listing(root) == before  # nothing written, no file created beside the source
        got = index_of(store)
        assert got == rebuild(root, agent)
        assert len(got["sessions"]) == len({s[0] for s in got["sessions"].values()})  # no twin
        as_imported(store, root, agent, tmp_path / "import")
        assert engine.rescan().transactions == 0  # unchanged: nothing re-mapped, nothing written
        fts_ok(store.con)
    finally:
        if con is not None:
            con.close()
        store.close()


@pytest.mark.parametrize("agent", DBS)
def test_a_change_in_the_wal_re_maps_only_the_sessions_it_touched(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src")
    db = db_of(agent, root)
    with (
        contextlib.closing(writer(db)) as con,
        indexed(agent, root, tmp_path / "index.db") as (store, engine),
    ):
        paths = [p for (p,) in store.con.execute("SELECT path FROM sessions")]
        units = [p for p in paths if p.startswith(f"{db}#")]
        assert units
        target = units[-1]
        sid = str(split_member(target)[1]).removeprefix(f"{agent}-")
        touch = {
            "goose": "UPDATE messages SET content_json = json_insert(content_json, '$[#]',"
            " json_object('type', 'text', 'text', 'and more'))"
            " WHERE id = (SELECT max(id) FROM messages WHERE session_id = ?)",
            "crush": "UPDATE messages SET updated_at = updated_at + 1000"
            " WHERE rowid = (SELECT max(rowid) FROM messages WHERE session_id = ?)",
            "opencode": "INSERT INTO part SELECT id || 'z', message_id, session_id,"
            " time_created, time_updated, data FROM part"
            " WHERE id = (SELECT max(id) FROM part WHERE session_id = ?)",
        }[agent]
        con.execute(touch, (sid,))
        assert os.path.getsize(f"{db}-wal") > 0
        stats = engine.sync_paths([f"{db}-wal"])  # the watcher's hint: the WAL, not the db
        assert stats.files == 1  # that session's unit was mapped, no other
        assert index_of(store) == rebuild(root, agent)


@pytest.mark.parametrize("agent", DBS)
def test_a_session_deleted_from_the_database_or_the_database_gone_forgets_its_rows(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src")
    db = db_of(agent, root)
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        in_db = sorted(p for (p,) in store.con.execute("SELECT path FROM sessions") if "#" in p)
        sid = str(split_member(in_db[0])[1]).removeprefix(f"{agent}-")
        with contextlib.closing(writer(db)) as con:
            sessions = "session" if agent == "opencode" else "sessions"
            for table in ("part", "message") if agent == "opencode" else ("messages",):
                con.execute(f"DELETE FROM {table} WHERE session_id = ?", (sid,))
            con.execute(f"DELETE FROM {sessions} WHERE id = ?", (sid,))
            engine.sync_paths([f"{db}-wal"])
        left = {p for (p,) in store.con.execute("SELECT path FROM files")}
        assert in_db[0] not in left
        assert index_of(store) == rebuild(root, agent)
        remove_db(db)
        engine.sync_paths([str(db)])
        assert not [p for p in store.files(under=str(root)) if p.startswith(str(db))]
        assert index_of(store) == rebuild(root, agent)


@pytest.mark.parametrize("agent", DBS)
def test_a_database_that_cannot_be_listed_is_one_verdict_and_comes_back_whole(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src")
    db = db_of(agent, root)
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        good = index_of(store)
        data = db.read_bytes()
        other = tmp_path / "other.db"  # a database, not the agent's: another program's
        with contextlib.closing(sqlite3.connect(other)) as con:
            con.execute("CREATE TABLE notes (body TEXT)")
            con.commit()
        remove_db(db)
        os.replace(other, db)
        assert engine.sync_paths([str(db)]).errors == 1
        rows = store.files(under=str(root))
        assert [(p, r.status) for p, r in rows.items() if p.startswith(str(db))] == [
            (str(db), "error")
        ]
        assert "\n" not in (rows[str(db)].error or "")
        assert index_of(store) == rebuild(root, agent)
        db.write_bytes(data)
        engine.sync_paths([str(db)])
        got = index_of(store)
        assert got == rebuild(root, agent)
        assert got["sessions"] == good["sessions"] and got["events"] == good["events"]


@pytest.mark.parametrize("agent", DBS)
def test_a_bad_row_is_one_verdict_on_its_session_until_it_is_fixed(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src")
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        good = index_of(store)
        db = db_of(agent, root)
        if agent == "opencode":
            con = writer(db)
            (mid,) = con.execute("SELECT min(id) FROM message").fetchone()
            # written as OpenCode writes a row: its time_updated moves
            con.execute(
                "UPDATE message SET data = 42, time_updated = 9000000000000 WHERE id = ?", (mid,)
            )
            con.close()
        else:
            _damage(agent, root)
        stats = engine.rescan()  # no traceback: the verdict is the session's
        bad = [r for r in store.files(under=str(root)).values() if r.status == "error"]
        assert len(bad) == 1 and stats.errors == 1
        assert str(db) in bad[0].path and "row" in (bad[0].error or "")
        assert "\n" not in (bad[0].error or "")
        assert engine.rescan().errors == 0  # said once: kept until the session changes
        assert index_of(store) == rebuild(root, agent)
        remove_db(db)
        if agent == "opencode":
            build_db(FIX / "storage", db)
        else:
            database(agent, db).close()
        engine.rescan()
        assert index_of(store) == rebuild(root, agent)
        assert {k for k in index_of(store)["files"]} == {k for k in good["files"]}


@pytest.mark.parametrize("agent", DOCUMENTS)
def test_a_task_document_caught_half_way_through_a_rewrite_waits_then_indexes(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src")
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        whole = index_of(store)
        doc = sorted(root.glob("tasks/*/api_conversation_history.json"))[0]
        data = doc.read_bytes()
        for cut in (1, len(data) // 3, len(data) - 2):
            doc.write_bytes(data[:cut])
            stats = engine.sync_paths([str(doc)])
            assert stats.errors == 1  # one verdict naming the document, no traceback
            row = store.file(str(doc))
            assert row is not None and row.status == "error" and str(doc) in (row.error or "")
        doc.write_bytes(data)
        engine.sync_paths([str(doc)])
        got = index_of(store)
        assert got == rebuild(root, agent)
        del got["files"], whole["files"]  # the stat hints are the rewritten document's
        assert got == whole


@pytest.mark.parametrize("agent", DOCUMENTS)
def test_a_change_of_the_ui_messages_alone_is_a_change_of_the_task(
    tmp_path: Path, agent: str
) -> None:
    """The watcher hints ``ui_messages.json`` (its usage records changed, the API history did
    not): the task's session, anchored at its API history, is synced."""
    root = src_tree(agent, tmp_path / "src", keep=0.5)
    full = src_tree(agent, tmp_path / "full")
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        task = sorted(root.glob("tasks/*"))[0]
        ui = task / "ui_messages.json"
        ui.write_bytes((full / ui.relative_to(root)).read_bytes())
        assert engine.hinted(str(ui))
        assert engine.sync_paths([str(ui)]).files == 1
        assert index_of(store) == rebuild(root, agent)


@pytest.mark.parametrize("agent", DOCUMENTS)
def test_a_task_keeps_one_session_when_its_api_history_appears_beside_its_ui_messages(
    tmp_path: Path, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src", keep=0.5)
    task = sorted(root.glob("tasks/*"))[0]
    api = task / "api_conversation_history.json"
    data = api.read_bytes()
    api.unlink()
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        assert store.file(str(task / "ui_messages.json")) is not None
        api.write_bytes(data)
        engine.sync_paths([str(api)])
        got = index_of(store)
        assert got == rebuild(root, agent)
        assert [p for p in got["sessions"] if p.startswith(str(task))] == [str(api)]


@pytest.mark.parametrize("agent", (*DOCUMENTS, "crush"))
def test_a_message_rewritten_before_the_last_is_indexed_as_rewritten(
    tmp_path: Path, agent: str
) -> None:
    """A unit changes in place, not only at its end (a document rewritten whole, a row
    updated): the same last event says nothing of the ones before it."""
    root = src_tree(agent, tmp_path / "src")
    with indexed(agent, root, tmp_path / "index.db") as (store, engine):
        if agent == "crush":
            db = db_of(agent, root)
            with contextlib.closing(writer(db)) as con:
                rowid, parts = con.execute(
                    "SELECT rowid, parts FROM messages WHERE role = 'user'"
                    " ORDER BY created_at, rowid LIMIT 1"
                ).fetchone()
                con.execute(
                    "UPDATE messages SET parts = ?, updated_at = updated_at + 1 WHERE rowid = ?",
                    (_same_length(parts), rowid),
                )
            hint = f"{db}-wal"
        else:
            doc = sorted(root.glob("tasks/*/api_conversation_history.json"))[0]
            doc.write_bytes(_same_length(doc.read_bytes().decode()).encode())
            hint = str(doc)
        engine.sync_paths([hint])
        assert index_of(store) == rebuild(root, agent)


def _same_length(text: str) -> str:
    """``text`` with the first letter of its first user text swapped for another one."""
    at = text.index('"text"')
    at = text.index('"', text.index(":", at) + 1) + 1
    return text[:at] + ("Q" if text[at] != "Q" else "R") + text[at + 1 :]


def test_a_half_written_aider_run_waits_then_joins_its_session(tmp_path: Path) -> None:
    root = src_tree("aider", tmp_path / "src", keep=0.5)
    full = src_tree("aider", tmp_path / "full")
    with indexed("aider", root, tmp_path / "index.db") as (store, engine):
        f = root / "shop" / ".aider.chat.history.md"
        have, data = f.read_bytes(), (full / "shop" / ".aider.chat.history.md").read_bytes()
        rest = data[len(have) :]
        for cut in range(1, len(rest), max(1, len(rest) // 7)):
            with open(f, "wb") as out:
                out.write(data[: len(have) + cut])
            engine.sync_paths([str(f)])
            assert index_of(store) == rebuild(root, "aider")
            states = {s[11] for s in index_of(store)["sessions"].values()}
            assert "corrupt" not in states
        f.write_bytes(data)
        engine.sync_paths([str(f)])
        got = index_of(store)
        assert got == rebuild(root, "aider")
        assert {s[11] for p, s in got["sessions"].items() if p.startswith(str(f))} <= {
            "clean",
            "open-turn",
        }


def test_a_crush_database_is_found_below_its_dot_directory_and_no_other(
    tmp_path: Path,
) -> None:
    root = src_tree("crush", tmp_path / "src")
    hidden = root / ".cache" / ".crush"
    hidden.parent.mkdir()
    shutil.copytree(root / ".crush", hidden)  # not where Crush keeps it: a dot-dir skipped
    store = SqliteStore(tmp_path / "index.db")
    try:
        ForeignIngestor(store, root, "crush").rescan()
        paths = [p for (p,) in store.con.execute("SELECT path FROM sessions")]
        assert paths and all(p.startswith(str(root / ".crush" / "crush.db#")) for p in paths)
    finally:
        store.close()


def test_a_replaced_task_document_never_leaves_a_twin_session(tmp_path: Path) -> None:
    root = src_tree("cline", tmp_path / "src")
    with indexed("cline", root, tmp_path / "index.db") as (store, engine):
        doc = sorted(root.glob("tasks/*/api_conversation_history.json"))[0]
        value = json.loads(doc.read_bytes())
        tmp = doc.with_name(".swap")
        tmp.write_text(json.dumps(value, indent=1))  # the same messages, other bytes
        os.replace(tmp, doc)  # a new inode
        engine.sync_paths([str(doc)])
        got = index_of(store)
        assert got == rebuild(root, "cline")
        ids = [s[0] for s in got["sessions"].values()]
        assert len(ids) == len(set(ids))


def test_a_database_session_id_holding_slashes_is_indexed_at_a_valid_path_and_stays_put(
    tmp_path: Path,
) -> None:
    root = src_tree("crush", tmp_path / "src")
    db = db_of("crush", root)
    with contextlib.closing(writer(db)) as con:
        (sid,) = con.execute("SELECT id FROM sessions ORDER BY id LIMIT 1").fetchone()
        copy_session(con, sid, "../../evil/x", {"sessions": "id", "messages": "session_id"})
    with indexed("crush", root, tmp_path / "index.db") as (store, engine):
        paths = [p for (p,) in store.con.execute("SELECT path FROM sessions")]
        assert len(paths) == 3
        assert all(os.path.dirname(p) == str(db.parent) for p in paths), paths
        assert engine.rescan().transactions == 0  # the row stays where it is
        assert index_of(store) == rebuild(root, "crush")
