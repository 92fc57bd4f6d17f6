"""The public index API (``jsonltape_daemon.api``) and the CLI in front of it, under bad
roots, bad index paths and concurrent syncs: one clear error, nothing created or corrupted."""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon import api
from jsonltape_daemon.errors import IndexBusyError, IndexStateError
from jsonltape_daemon.search.language import Filters
from jsonltape_daemon.target import SqliteTarget

import jsonltape
from jsonltape.errors import JsonltapeError
from tests._search_cases import T0, cli, cli_search, event

# -- the public API ----------------------------------------------------------------------------


def test_api_sync_of_a_root_that_does_not_exist_is_one_clear_error(tmp_path: Path) -> None:
    target = SqliteTarget(tmp_path / "index.db")
    with pytest.raises(JsonltapeError, match="nowhere"):  # SessionNotFoundError, exit 2
        api.sync(target, str(tmp_path / "nowhere"))
    assert not target.path.exists()


def test_the_cli_refuses_a_root_or_source_that_does_not_exist(tmp_path: Path) -> None:
    for extra in ([str(tmp_path / "nowhere")], [str(tmp_path), "--source", "codex:/nope/x"]):
        r = cli("sync", *extra, "--index", str(tmp_path / "i.db"))
        assert r.returncode == 2 and "no such directory" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert not (tmp_path / "i.db").exists()


def test_api_sync_with_an_unknown_source_kind_fails_before_touching_the_index(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    index = tmp_path / "index.db"
    with pytest.raises(JsonltapeError, match="nosuch"):  # InvalidArgumentError, exit 2
        api.sync(SqliteTarget(index), str(root), [("nosuch", str(tmp_path))])
    assert not index.exists()


def test_a_file_where_the_index_should_be_is_one_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _write_few(root)
    bad = tmp_path / "index.db"
    bad.write_text("not a database at all\n" * 100)
    with pytest.raises(IndexStateError, match=r"index\.db"):
        api.sync(SqliteTarget(bad), str(root))
    assert bad.read_text().startswith("not a database")  # left as it was
    with pytest.raises(IndexStateError, match=r"index\.db"):
        api.open_reader(SqliteTarget(bad))
    with pytest.raises(IndexStateError, match=r"index\.db"):
        api.optimize(SqliteTarget(bad))
    r = cli_search(bad, "x")
    assert r.returncode != 0 and "Traceback" not in r.stderr


def test_a_directory_where_the_index_should_be_is_one_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _write_few(root)
    d = tmp_path / "index.db"
    d.mkdir()
    r = cli("sync", str(root), "--index", str(d))
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    r = cli_search(d, "x")
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr


def _write_few(root: Path) -> None:
    with jsonltape.open(root / "a.jsonl", create=True, durability="manual") as tape:
        tape.append(**event("user", "the migration raised FileNotFoundError", 0, T0))
        tape.append(**event("assistant", "retry_count is 3", 1, T0 + 1000))


def test_a_relative_root_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _write_few(root)
    monkeypatch.chdir(tmp_path)
    target = SqliteTarget(tmp_path / "index.db")
    report = api.sync(target, "root")
    assert report.sessions == 1
    reader = api.open_reader(target)
    try:
        hits = reader.search("NotFound migr*", Filters(), 10)
        assert [h.path for h in hits] == [str(root / "a.jsonl")]
    finally:
        reader.close()
    monkeypatch.chdir(root)  # syncing again from elsewhere with an absolute root: no doubles
    assert api.sync(target, str(root)).sessions == 1
    status = api.status(target)
    assert status


def _sync_in_child(index: str, root: str, out: Any, hold: float) -> None:
    """Sync; with ``hold``, stop once inside the sync (the lock taken) to tell the parent,
    then wait that long before going on, so that the other sync surely meets the lock."""
    told = False

    def should_stop() -> bool:
        nonlocal told
        if hold and not told:
            told = True
            out.put("started")
            time.sleep(hold)
        return False

    try:
        api.sync(SqliteTarget(Path(index)), root, should_stop=should_stop)
        out.put("ok")
    except IndexBusyError as exc:
        out.put(f"busy {exc}")
    except Exception as exc:  # reported to the parent
        out.put(f"error {type(exc).__name__}: {exc}")


def test_two_concurrent_syncs_one_is_busy_nothing_is_corrupted(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for s in range(20):
        with jsonltape.open(root / f"s{s}.jsonl", create=True, durability="manual") as tape:
            tape.append_batch(
                event("user", f"message {i} run_migrations_{s} NotFoundError", i, T0 + i)
                for i in range(200)
            )
    index = tmp_path / "index.db"
    ctx = multiprocessing.get_context("spawn")
    first_out, second_out = ctx.Queue(), ctx.Queue()
    first = ctx.Process(target=_sync_in_child, args=(str(index), str(root), first_out, 3.0))
    first.start()
    assert first_out.get(timeout=30) == "started"
    second = ctx.Process(target=_sync_in_child, args=(str(index), str(root), second_out, 0.0))
    second.start()
    second.join(30)
    busy = second_out.get(timeout=5)
    first.join(60)
    assert first_out.get(timeout=5) == "ok"
    assert busy.startswith("busy ") and str(index) in busy, busy
    con = sqlite3.connect(index)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 20
    finally:
        con.close()
    reader = api.open_reader(SqliteTarget(index))
    try:
        assert len(reader.search("run_migrations_7 NotFound", Filters(), 1000)) == 200
    finally:
        reader.close()


def test_optimize_of_a_missing_index_is_clear(tmp_path: Path) -> None:
    with pytest.raises(IndexStateError, match="no index here"):
        api.optimize(SqliteTarget(tmp_path / "none.db"))
    assert not (tmp_path / "none.db").exists()


def test_status_of_a_missing_index_is_clear_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(IndexStateError, match="no index here yet"):
        api.status(SqliteTarget(tmp_path / "none.db"))
    assert not (tmp_path / "none.db").exists()
