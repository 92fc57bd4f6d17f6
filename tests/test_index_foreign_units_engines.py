"""The in-place index of databases, task folders and Aider histories beyond one SQLite index:
on PostgreSQL (the same rows as in SQLite, after the first sync and after a WAL-only change),
in usage reports (a response indexed in place and imported counts once, spec Appendix B.12),
and in a real ``jsonltape daemon run`` subprocess whose watchdog sees a change that lives only in
a database's ``-wal``."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from jsonltape_daemon.engines.postgres.store import PgStore
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters, search
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignIngestor
from jsonltape_daemon.ingest.mirror import Mirror

from jsonltape.interop import import_paths

from .test_daemon import _cli, indexed_events, wait_for
from .test_index_foreign import rebuild
from .test_index_foreign_units import (
    copy_session,
    db_of,
    full_db,
    grow_db,
    grow_files,
    src_tree,
    writer,
)
from .test_index_helpers import dump
from .test_interop_agents_b import _listing
from .test_pg_store import assert_same, pg_dump
from .test_usage_index import _daily


@pytest.mark.parametrize("agent", ["goose", "crush", "opencode", "cline", "aider"])
def test_postgresql_holds_the_rows_sqlite_holds_before_and_after_a_wal_only_change(
    tmp_path: Path, pg_db: str, agent: str
) -> None:
    root = src_tree(agent, tmp_path / "src", keep=0.5)
    full = src_tree(agent, tmp_path / "full")
    local = SqliteStore(tmp_path / "index.db")
    pg = PgStore(pg_db, "laptop")
    with contextlib.ExitStack() as stack:
        stack.callback(local.close)
        stack.callback(pg.close)
        engines = [ForeignIngestor(s, root, agent) for s in (local, pg)]
        for e in engines:
            assert e.rescan().errors == 0
        assert_same(pg_dump(pg_db, "laptop"), dump(local.con))
        grow_files(agent, root, full)
        if agent in ("goose", "crush", "opencode"):
            con = stack.enter_context(contextlib.closing(writer(db_of(agent, root))))
            grow_db(con, full_db(agent, tmp_path / "whole"))
            hint = f"{db_of(agent, root)}-wal"
            for e in engines:
                assert e.sync_paths([hint]).errors == 0
        for e in engines:
            e.rescan()
        assert_same(pg_dump(pg_db, "laptop"), dump(local.con))


def counted_once(tmp_path: Path, source: str, src: Path) -> int:
    """``src`` indexed in place, then imported into the root the same index syncs: each
    response is there twice and counted once, the daily report unchanged. How many."""
    root = tmp_path / "root"
    root.mkdir()
    index = tmp_path / "index.db"
    store = SqliteStore(index)
    try:
        Mirror(store, str(root), [(source, str(src))]).rescan()
        once = _daily(index)
        (n, counted) = store.con.execute("SELECT count(*), sum(counted) FROM usage").fetchone()
        assert n > 0 and counted == n
        reports = list(import_paths(source, [src], root, settle=0))
        assert {r.status for r in reports if r.status != "skipped"} == {"imported"}
        Mirror(store, str(root), [(source, str(src))]).rescan()
        again = store.con.execute("SELECT count(*), sum(counted) FROM usage").fetchone()
        assert again == (2 * n, n)  # each response twice, counted once
        assert _daily(index) == once
        return int(n)
    finally:
        store.close()


def test_a_response_indexed_in_place_and_imported_is_counted_once(tmp_path: Path) -> None:
    counted_once(tmp_path, "goose", src_tree("goose", tmp_path / "goose"))


def _hits(index: Path, query: str) -> int:
    try:
        con = connect(index, readonly=True)
    except Exception:  # not there yet
        return 0
    try:
        return len(search(con, query, Filters(), limit=5))
    finally:
        con.close()


def daemon_sees_a_wal_only_write(
    tmp_path: Path, source: str, db: Path, write: Callable[[sqlite3.Connection], None]
) -> None:
    """A real ``daemon run --source SOURCE`` indexes its tree, then sees what ``write`` puts
    in ``db``'s ``-wal`` only (a message holding "zebrafinch"), through its watcher, writing
    nothing beside the database."""
    src = Path(source.partition(":")[2])
    root = tmp_path / "root"
    root.mkdir()
    index = tmp_path / "index.db"
    proc = _cli("daemon", "run", str(root), "--index", str(index), "--source", source)
    try:
        wait_for(lambda: indexed_events(index) > 0 or proc.poll() is not None, timeout=60)
        assert proc.poll() is None
        assert _hits(index, "zebrafinch") == 0
        with contextlib.closing(writer(db)) as con:  # the agent, running: its WAL kept
            before = db.read_bytes()
            write(con)
            listing = _listing(src)
            start = time.monotonic()
            # well before the daemon's 60 s rescan: the watcher's event for the -wal did it
            wait_for(lambda: _hits(index, "zebrafinch") > 0, timeout=30)
            assert time.monotonic() - start < 30
            assert db.read_bytes() == before  # the change is in the WAL only
            assert _listing(src) == listing  # the daemon wrote nothing beside the database
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in out + err


def test_the_daemon_subprocess_sees_a_message_that_lives_only_in_the_wal(tmp_path: Path) -> None:
    src = src_tree("crush", tmp_path / "project")

    def write(con: sqlite3.Connection) -> None:
        con.execute(
            "INSERT INTO messages (id, session_id, role, parts, model, created_at,"
            " updated_at) VALUES ('m-new', 'f306c145-4c83-492c-b575-739c30bbced4', 'user',"
            " ?, '', 1755891900, 1755891900)",
            ('[{"type":"text","data":{"text":"what about the zebrafinch flag"}}]',),
        )

    daemon_sees_a_wal_only_write(tmp_path, f"crush:{src}", db_of("crush", src), write)


def _copies(db: Path, n: int) -> None:
    """``n`` more Goose sessions: copies of the fixture's session, rows and usage with them."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as con:
        (sid,) = con.execute("SELECT id FROM sessions").fetchone()
        keys = {"sessions": "id", "messages": "session_id", "usage_ledger": "session_id"}
        for k in range(n):
            copy_session(con, sid, f"{sid}-{k}", keys)


def test_a_sync_killed_anywhere_while_it_reingests_a_database_converges_to_a_rebuild(
    tmp_path: Path,
) -> None:
    src = src_tree("goose", tmp_path / "goose")
    db = db_of("goose", src)
    _copies(db, 200)
    root = tmp_path / "root"
    root.mkdir()
    index = tmp_path / "index.db"
    with contextlib.closing(SqliteStore(index)) as store:
        Mirror(store, str(root), [("goose", str(src))]).rescan()
    sync = ("sync", str(root), "--index", str(index), "--source", f"goose:{src}")

    def touch(n: int) -> None:
        with contextlib.closing(writer(db)) as con:  # Goose touches every session
            con.execute(
                "UPDATE messages SET content_json = json_insert(content_json, '$[#]',"
                " json_object('type', 'text', 'text', ?))",
                (f"edit {n}",),
            )
            con.execute("UPDATE sessions SET updated_at = datetime(updated_at, '+1 minute')")

    touch(0)
    t = time.monotonic()
    _cli(*sync).communicate(timeout=120)
    whole = time.monotonic() - t  # start-up, then every session reingested
    for n, share in enumerate((0.3, 0.5, 0.65, 0.8, 0.95), 1):
        touch(n)
        proc = _cli(*sync)
        time.sleep(whole * share)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        with contextlib.closing(SqliteStore(index)) as store:
            Mirror(store, str(root), [("goose", str(src))]).rescan()
            got = dump(store.con)
        want = rebuild(src, "goose")
        assert {p: r for p, r in got["files"].items() if "goose" in p} == want["files"]
        assert [e for e in got["events"] if e[0] in want["sessions"]] == want["events"]


def test_cli_sync_source_mirrors_a_crush_project_and_aider_histories_read_only(
    tmp_path: Path,
) -> None:
    crush = src_tree("crush", tmp_path / "crush")
    aider = src_tree("aider", tmp_path / "aider")
    (tmp_path / "root").mkdir()
    before = {**_listing(crush), **_listing(aider)}
    idx = str(tmp_path / "index.db")
    sync = ("sync", str(tmp_path / "root"), "--index", idx, "--source", f"crush:{crush}",
            "--source", f"aider:{aider}", "--json")  # fmt: skip

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jsonltape", *args], capture_output=True, text=True, timeout=120
        )

    def found(word: str) -> bool:
        out = run("search", word, "--index", idx, "--json")
        return out.returncode == 0 and word in out.stdout

    first = run(*sync)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["errors"] == 0
    assert found("codebase") and found("Spinner")  # Crush's first prompt, Aider's
    assert json.loads(run(*sync).stdout)["events"] == 0
    rebuilt = run("index", "rebuild", "--index", idx)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert found("codebase") and found("Spinner")
    assert {**_listing(crush), **_listing(aider)} == before  # nothing written in the sources
