"""The index's public API (``jsonltape_daemon.api``): sync, rebuild, optimize, status and
search through one door, typed results, no printing, the lock respected."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonltape_daemon import api
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.errors import IndexBusyError, IndexStateError
from jsonltape_daemon.service.lock import index_lock
from jsonltape_daemon.target import SqliteTarget

import jsonltape


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def begin(self, label: str, total: int) -> None:
        self.calls.append(("begin", (label, total)))

    def advance(self, n: int) -> None:
        self.calls.append(("advance", n))

    def end(self) -> None:
        self.calls.append(("end", None))

    def note(self, text: str) -> None:
        self.calls.append(("note", text))


def _tree(root: Path, sessions: int = 3, first: int = 0) -> None:
    root.mkdir(exist_ok=True)
    for s in range(first, sessions):
        with jsonltape.open(root / f"s{s}.jsonl", create=True) as tape:
            for i in range(20):
                tape.user(f"session {s} prompt {i} about FileNotFoundError")
                tape.assistant(f"reply {i} with quokka{s}")


def test_sync_returns_what_it_did_and_the_index_answers(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root)
    target = SqliteTarget(tmp_path / "index.db")
    progress = _Recorder()
    report = api.sync(target, str(root), progress=progress)
    assert report.sessions == 3
    assert report.stats.files == 3 and report.stats.messages == 120
    assert report.errors == [] and not report.substrings_pending
    assert 0 < report.searchable_seconds <= report.stats.seconds
    # the substring catch-up ran in the foreground, reported as one step begun and ended
    kinds = [k for k, _ in progress.calls]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    hits = api.open_reader(target).search("NotFound", Filters(), limit=5)
    assert hits and all(h.session for h in hits)
    again = api.sync(target, str(root))
    assert again.stats.messages == 0 and again.sessions == 3  # nothing new: nothing added


def test_sync_refuses_an_index_another_writer_holds(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root, 1)
    target = SqliteTarget(tmp_path / "index.db")
    lock = index_lock(target.path)  # what a running daemon holds
    try:
        with pytest.raises(IndexBusyError):
            api.sync(target, str(root))
    finally:
        lock.release()
    assert api.sync(target, str(root)).sessions == 1


def test_rebuild_recreates_the_index_from_the_roots_synced_before(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root, 2)
    target = SqliteTarget(tmp_path / "index.db")
    api.sync(target, str(root))
    _tree(root, 4, first=2)  # two more sessions, not synced
    progress = _Recorder()
    report = api.rebuild(target, default_root=str(tmp_path / "elsewhere"), progress=progress)
    assert report.roots == [str(root)] and report.sessions == 4
    assert ("begin", ("rebuilding", sum(p.stat().st_size for p in root.iterdir()))) in (
        progress.calls
    )
    assert api.status(target)["sessions"] == 4


def test_optimize_and_status_of_a_missing_index(tmp_path: Path) -> None:
    target = SqliteTarget(tmp_path / "none.db")
    with pytest.raises(IndexStateError, match="no index here yet"):
        api.optimize(target)
    assert not target.path.exists()  # nothing created by asking


def test_optimize_keeps_every_hit(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root)
    target = SqliteTarget(tmp_path / "index.db")
    api.sync(target, str(root))
    before = api.open_reader(target).search("prompt", Filters(), limit=500)
    assert api.optimize(target)
    after = api.open_reader(target).search("prompt", Filters(), limit=500)
    assert [(h.session, h.seq) for h in after] == [(h.session, h.seq) for h in before]
    assert len(before) == 60
