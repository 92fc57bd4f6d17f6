"""The viewer's in-process index mirror stops without leaving a pid file behind, also when its
loop is still inside a transaction when the viewer exits."""

from __future__ import annotations

import time
from pathlib import Path

from jsonltape_daemon.paths import pid_file
from jsonltape_daemon.service.daemon import running_pid

from jsonltape.web._mirror import Mirror

from . import corpus


def _started(mirror: Mirror, index: Path) -> None:
    mirror.thread.start()
    deadline = time.monotonic() + 60
    while not pid_file(index).exists():
        assert time.monotonic() < deadline, "the mirror never wrote its pid file"
        time.sleep(0.01)


def test_a_mirror_stopped_mid_transaction_leaves_no_pid_file(tmp_path: Path) -> None:
    root, index = tmp_path / "sessions", tmp_path / "index.db"
    root.mkdir(mode=0o700)
    corpus.long_session(root, turns=2000)  # a first sync of 8,000 events: one long transaction
    mirror = Mirror(root, index, "http://127.0.0.1:8765/")
    _started(mirror, index)
    mirror.stop(timeout=0.001)  # the viewer exiting while the loop is still committing
    assert mirror.thread.is_alive(), "the loop finished first: the test did not test the case"
    assert not pid_file(index).exists()
    assert running_pid(index) is None  # `daemon status` says stopped, not a daemon that is gone
    mirror.thread.join(120)  # it stops at its next boundary; its own clean-up finds no file
    assert not mirror.thread.is_alive() and mirror.error is None


def test_a_mirror_that_stops_in_time_removes_its_own_pid_file(tmp_path: Path) -> None:
    root, index = tmp_path / "sessions", tmp_path / "index.db"
    root.mkdir(mode=0o700)
    corpus.long_session(root, turns=2)
    mirror = Mirror(root, index, "http://127.0.0.1:8765/")
    _started(mirror, index)
    mirror.stop(timeout=60)
    assert not mirror.thread.is_alive() and mirror.error is None
    assert not pid_file(index).exists()
