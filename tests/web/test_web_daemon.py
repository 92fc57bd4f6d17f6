"""The daemon's loop in ``jsonltape serve``, seen from the daemon's commands: ``daemon
status`` names the viewer that runs it, ``daemon start``, ``sync`` and ``index rebuild`` say it
holds the index, and ``daemon stop`` stops that loop only, saying so: the viewer goes on
serving, and a daemon started next keeps the index it reads current. A second signal while
serve stops cannot cut the loop's own stop short. Real processes throughout: serve, the CLI,
the daemon."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from jsonltape_daemon.paths import pid_file

import jsonltape
from tests.web import corpus
from tests.web.server import Serve

pytestmark = pytest.mark.timeout(120)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=60,
    )


def _wait_for_pid_file(index: Path, pid: int) -> None:
    for _ in range(200):  # the mirror writes its pid file as it starts
        if pid_file(index).exists() and pid_file(index).read_text().strip() == str(pid):
            return
        time.sleep(0.05)
    raise AssertionError("serve's index mirror never wrote its pid file")


def _shows(url: str, title: str) -> bool:
    with httpx.Client(base_url=url, timeout=10) as c:
        for _ in range(150):
            if title in c.get("/").text:
                return True
            time.sleep(0.1)
    return False


def test_daemon_commands_name_serve_and_daemon_stop_stops_only_its_index_loop(
    tmp_path: Path,
) -> None:
    root, index, home = tmp_path / "sessions", tmp_path / "index.db", tmp_path / "home"
    root.mkdir(mode=0o700)
    corpus.long_session(root, turns=2)
    s = Serve("--index", str(index), "--root", str(root), home=home)
    try:
        pid = s.proc.pid
        _wait_for_pid_file(index, pid)
        who = f"jsonltape serve (pid {pid}, {s.url})"

        status = _cli(home, "daemon", "status", "--index", str(index))
        assert status.returncode == 0, status.stderr
        assert f"running:  pid {pid} in jsonltape serve {s.url} (" in status.stdout
        data = json.loads(_cli(home, "daemon", "status", "--index", str(index), "--json").stdout)
        assert data["pid"] == pid and data["serve"] == s.url

        start = _cli(home, "daemon", "start", str(root), "--index", str(index))
        assert start.returncode != 0 and who in start.stderr, start.stderr
        assert len(start.stderr.strip().splitlines()) == 1
        # sync of its root asks it to rescan (SIGUSR1 ended serve: its default action)
        rescan = _cli(home, "sync", str(root), "--index", str(index))
        assert rescan.returncode == 0, rescan.stderr
        assert rescan.stdout.startswith(f"{who} keeps {index} in sync with {root}")
        rebuild = _cli(home, "index", "rebuild", str(root), "--index", str(index))
        assert rebuild.returncode != 0 and f"{who} is writing this index" in rebuild.stderr
        assert s.proc.poll() is None

        stop = _cli(home, "daemon", "stop", "--index", str(index))
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout.strip() == (
            f"stopped keeping the index current in jsonltape serve (pid {pid}, {s.url}); "
            "the viewer goes on serving it"
        )
        assert s.proc.poll() is None  # still serving
        assert not pid_file(index).exists()
        after = _cli(home, "daemon", "status", "--index", str(index))
        assert after.returncode == 3 and "not running" in after.stdout
        with httpx.Client(base_url=s.url) as c:
            page = c.get("/")
        assert page.status_code == 200
        assert "the index is no longer kept current (jsonltape daemon stop)" in page.text

        # the daemon started now keeps current the index the viewer reads
        started = _cli(home, "daemon", "start", str(root), "--index", str(index))
        assert started.returncode == 0, started.stderr
        try:
            with jsonltape.open(root / "new.jsonl", create=True, title="after the hand-over") as t:
                t.user("hello")
            assert _shows(s.url, "after the hand-over")
        finally:
            stopped = _cli(home, "daemon", "stop", "--index", str(index))
        assert stopped.returncode == 0 and stopped.stdout.startswith("daemon stopped (pid ")
        assert s.proc.poll() is None
    finally:
        code, _out, err = s.stop()
    assert code == 0, err


def test_a_second_signal_while_serve_stops_leaves_no_pid_file(tmp_path: Path) -> None:
    """SIGTERM, then Ctrl-C after Ctrl-C while it stops (an impatient user, or a supervisor
    that sends both): each later signal is ignored, the mirror stops and removes its pid file,
    and serve exits 0, also when a Ctrl-C comes after serve's own stop is over."""
    root, index, home = tmp_path / "sessions", tmp_path / "index.db", tmp_path / "home"
    root.mkdir(mode=0o700)
    corpus.long_session(root, turns=2)
    for _ in range(3):
        s = Serve("--index", str(index), "--root", str(root), home=home)
        _wait_for_pid_file(index, s.proc.pid)
        s.proc.send_signal(signal.SIGTERM)
        # until it has exited: during the mirror's stop, and after it, on serve's way out
        while s.proc.poll() is None:
            try:
                s.proc.send_signal(signal.SIGINT)
            except ProcessLookupError:  # pragma: no cover - exited between the two
                break
            time.sleep(0.002)
        code, _out, err = s.stop()
        # 0: once stopped by a signal, serve ignores the later ones on its way out (a Ctrl-C
        # that landed after its handlers were restored was "Aborted!", exit 1)
        assert code == 0, err
        assert not pid_file(index).exists(), err
