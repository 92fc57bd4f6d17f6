"""The daemon: real watchdog observers, real threads and processes, real SQLite.

Watcher events are hints; these tests check that the index converges with the watcher off
(rescans alone), with inotify refused (polling takes over), under bursts (a handful of
transactions for 2,000 appends), and across SIGTERM and SIGKILL in the middle of an ingest:
during a first (bulk) load, which must leave the old index or none, never half of one, and
during an incremental one. ``index rebuild`` and a first ``sync`` killed mid-way too.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters, notes, search
from jsonltape_daemon.engines.sqlite.store import SqliteStore, build_path, helper_path
from jsonltape_daemon.errors import IndexBusyError, IndexStateError
from jsonltape_daemon.ingest import units
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.paths import pid_file
from jsonltape_daemon.service.daemon import Config, Daemon, daemon_status, running_pid
from jsonltape_daemon.service.watcher import Hints
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

import jsonltape
from jsonltape import _framing
from jsonltape._spawn import SAFE_CWD, command

from .test_index_helpers import dump, fts_ok, rebuild, session

REPO = Path(__file__).resolve().parent.parent


def wait_for(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def indexed_events(index: Path) -> int:
    try:
        con = connect(index, readonly=True)
    except IndexStateError:  # not there yet, or still being created
        return 0
    try:
        return int(con.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        con.close()


def file_events(root: Path) -> int:
    return sum(sum(1 for _ in jsonltape.read(p)) for p in root.rglob("*.jsonl"))


class _Running:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.thread = threading.Thread(target=daemon.run, daemon=True)

    def __enter__(self) -> Daemon:
        self.thread.start()
        wait_for(lambda: self.daemon.status.get("state") == "running")
        return self.daemon

    def __exit__(self, *exc: object) -> None:
        self.daemon.request_stop()
        self.thread.join(timeout=20)
        assert not self.thread.is_alive()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "sessions"
    r.mkdir(mode=0o700)
    return r


class _Deaf(PollingObserver):
    """A real observer that never reports anything: the watcher is effectively off."""

    def schedule(self, *args: object, **kw: object) -> None:  # type: ignore[override]
        return None


class _NoWatches(Observer):  # type: ignore[misc, valid-type]
    """inotify refusing a watch: what a machine at fs.inotify.max_user_watches sees."""

    def schedule(self, *args: object, **kw: object) -> None:  # type: ignore[override]
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


def test_rescans_alone_converge_when_the_watcher_is_deaf(root: Path, tmp_path: Path) -> None:
    session(root / "a.jsonl", ["one"])
    cfg = Config(root, tmp_path / "i.db", rescan_interval=0.3, observer_factory=_Deaf)
    with _Running(Daemon(cfg, log=lambda _m: None)):
        session(root / "d" / "b.jsonl", ["two", "three"])
        with jsonltape.open(root / "a.jsonl") as tape:
            tape.user("more")
        (root / "a.jsonl").rename(root / "c.jsonl")
        wait_for(lambda: indexed_events(cfg.index) == file_events(root))
    store = SqliteStore(cfg.index)
    assert dump(store.con) == rebuild(root)
    store.close()


def test_inotify_limit_falls_back_to_polling(root: Path, tmp_path: Path) -> None:
    cfg = Config(
        root,
        tmp_path / "i.db",
        rescan_interval=3600,
        poll_interval=0.1,
        observer_factory=_NoWatches,
    )
    logs: list[str] = []
    with _Running(Daemon(cfg, log=logs.append)) as d:
        assert d.status["watcher"] == "polling"
        session(root / "a.jsonl", ["after the fallback"])
        wait_for(lambda: indexed_events(cfg.index) == file_events(root))
    assert any("max_user_watches" in m for m in logs)


def test_quick_appends_coalesce_into_a_handful_of_transactions(root: Path, tmp_path: Path) -> None:
    path = root / "busy.jsonl"
    session(path, [])
    cfg = Config(root, tmp_path / "i.db", rescan_interval=3600)
    with _Running(Daemon(cfg, log=lambda _m: None)) as d:
        assert d.status["watcher"] == "inotify"
        before = d.status["transactions"]
        # 2,000 separate write() calls, as 2,000 unbuffered appends make (the writer's own
        # buffering would turn them into a few writes and prove nothing).
        seq = file_events(root)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(2000):
                line = {"seq": seq + i, "type": "x.test/tick", "time": 1, "data": {"i": i}}
                os.write(fd, _framing.frame(msgspec.json.encode(line)))
        finally:
            os.close(fd)
        wait_for(lambda: indexed_events(cfg.index) == file_events(root))
        spent = d.status["transactions"] - before
    assert 1 <= spent <= 30, spent


def test_hints_overflow_asks_for_a_rescan_instead_of_blocking() -> None:
    hints = Hints(capacity=3)
    for i in range(10):
        hints.add(f"/r/{i}.jsonl")
    assert len(hints) == 3 and hints.overflows == 7
    paths, rescan = hints.take(1.0, quiet=0.0, max_wait=0.0, stop=threading.Event())
    assert rescan and len(paths) == 3


def test_one_daemon_per_index(root: Path, tmp_path: Path) -> None:
    cfg = Config(root, tmp_path / "i.db")
    with _Running(Daemon(cfg, log=lambda _m: None)):
        with pytest.raises(IndexBusyError, match="daemon"):
            Daemon(Config(root, cfg.index), log=lambda _m: None).run()
        assert running_pid(cfg.index) == os.getpid()
    assert running_pid(cfg.index) is None
    assert oct(cfg.index.stat().st_mode & 0o777) == "0o600"
    assert oct(cfg.index.parent.stat().st_mode & 0o777) == "0o700"


def _archive(root: Path, files: int, turns: int) -> None:
    for f in range(files):
        with jsonltape.open(root / f"s{f}.jsonl", create=True, durability="manual") as tape:
            for t in range(turns):
                with tape.turn():
                    tape.user(f"question {f} {t} about the migration")
                    tape.assistant(f"answer {f} {t}")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "jsonltape", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _completed(index: Path, root: Path) -> bool:
    """The index holds every file under ``root`` (nothing half loaded)."""
    store = SqliteStore(index)
    try:
        return bool(dump(store.con) == rebuild(root))
    finally:
        store.close()


@pytest.mark.parametrize(
    ("sig", "phase"),
    [
        (signal.SIGTERM, "bulk"),
        (signal.SIGKILL, "bulk"),
        (signal.SIGTERM, "incremental"),
        (signal.SIGKILL, "incremental"),
    ],
)
def test_signal_during_ingest_then_restart_equals_rebuild(
    root: Path, tmp_path: Path, sig: signal.Signals, phase: str
) -> None:
    index = tmp_path / "i.db"
    if phase == "incremental":  # an index exists; a burst of new sessions is being ingested
        session(root / "first.jsonl", ["before"])
        store = SqliteStore(index)
        Ingestor(store, root).rescan()
        store.close()
    _archive(root, files=40, turns=200)
    proc = _cli("daemon", "run", str(root), "--index", str(index))
    if phase == "bulk":
        wait_for(lambda: build_path(index).exists() or proc.poll() is not None, timeout=30)
    else:
        wait_for(lambda: indexed_events(index) > 10 or proc.poll() is not None, timeout=30)
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    if sig == signal.SIGTERM:
        assert proc.returncode == 0
        assert running_pid(index) is None
    else:
        assert proc.returncode == -signal.SIGKILL
    if phase == "bulk" and sig == signal.SIGKILL:
        # Killed during the first load: no index or an empty one, never part of the load.
        assert indexed_events(index) in (0, file_events(root))
    # Whatever was published is consistent; a restart finishes the job (and a stray bulk
    # file is removed).
    store = SqliteStore(index)
    assert not build_path(index).exists()
    Ingestor(store, root).rescan()
    assert dump(store.con) == rebuild(root)
    fts_ok(store.con)
    store.close()


def test_killed_rebuild_and_first_sync_leave_the_old_index_or_none(
    root: Path, tmp_path: Path
) -> None:
    _archive(root, files=40, turns=200)
    index = tmp_path / "i.db"
    first = _cli("sync", str(root), "--index", str(index))
    wait_for(lambda: build_path(index).exists() or first.poll() is not None, timeout=30)
    first.kill()
    first.communicate(timeout=30)
    assert indexed_events(index) in (0, file_events(root))
    again = subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(root), "--index", str(index)],
        capture_output=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    old = rebuild(root)
    with jsonltape.open(root / "s0.jsonl") as tape:  # the files move on; the index does not
        tape.user("after the sync")
    proc = _cli("index", "rebuild", "--index", str(index))
    wait_for(lambda: build_path(index).exists() or proc.poll() is not None, timeout=30)
    proc.kill()
    proc.communicate(timeout=30)
    store = SqliteStore(index)
    assert dump(store.con) in (old, rebuild(root))  # the old index, or the complete new one
    fts_ok(store.con)
    store.close()


_LAUNCH = (
    "import sys; from pathlib import Path; "
    "from jsonltape_daemon.service.daemon import Config, Daemon; "
    "sys.exit(Daemon(Config(Path(sys.argv[1]), Path(sys.argv[2]), helper_from=0)).run())"
)


def _helpers_of(index: Path) -> list[int]:
    """Pids of full-text helper processes working for ``index``."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if (
            b"jsonltape_daemon.engines.sqlite.fts_helper" in cmd
            and bytes(helper_path(index)) in cmd
        ):
            found.append(int(d.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="looks for processes in /proc")
@pytest.mark.parametrize("phase", ["bulk", "published"])
def test_a_killed_daemon_leaves_no_helper_process_behind(
    root: Path, tmp_path: Path, phase: str
) -> None:
    _archive(root, files=40, turns=200)
    index = tmp_path / "i.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, str(root), str(index)], stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: bool(_helpers_of(index)) or proc.poll() is not None, timeout=30)
        if phase == "published":  # the helper builds the substring index after the load
            wait_for(lambda: not build_path(index).exists() or proc.poll() is not None)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not _helpers_of(index))  # it noticed its parent is gone, and quit
    store = SqliteStore(index)
    assert not helper_path(index).exists()
    engine = Ingestor(store, root)
    engine.rescan()
    engine.build_substrings()
    assert dump(store.con) == rebuild(root)
    fts_ok(store.con)
    store.close()


def test_the_daemon_builds_the_substring_index_after_a_first_load(
    root: Path, tmp_path: Path
) -> None:
    _archive(root, files=4, turns=50)
    cfg = Config(root, tmp_path / "i.db", rescan_interval=3600, substring_step=0.01)
    with _Running(Daemon(cfg, log=lambda _m: None)) as d:
        wait_for(lambda: bool(d.status.get("substrings_ready")))
        session(root / "later.jsonl", ["a substring like FileNotFoundError"])
        wait_for(lambda: indexed_events(cfg.index) == file_events(root))
        con = connect(cfg.index, readonly=True)
        try:
            assert notes(con) == []
            hits = search(con, "NotFound", Filters())
            assert [h.match for h in hits] == ["substring"] * 2  # the question, the answer
        finally:
            con.close()
    assert _completed(cfg.index, root)


def test_start_status_stop_from_the_command_line(root: Path, tmp_path: Path) -> None:
    session(root / "a.jsonl", ["hello daemon"])
    index = tmp_path / "home" / "x.db"
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "jsonltape", *a], capture_output=True, text=True, timeout=60
    )
    started = run("daemon", "start", str(root), "--index", str(index))
    assert started.returncode == 0, started.stderr
    try:
        wait_for(lambda: indexed_events(index) == file_events(root))
        status = run("daemon", "status", "--index", str(index), "--json")
        assert status.returncode == 0 and '"running":true' in status.stdout
        assert daemon_status(index)["root"] == str(root)  # type: ignore[index]
        again = run("daemon", "start", str(root), "--index", str(index))
        assert again.returncode != 0 and "already running" in again.stderr
        busy = run("sync", str(root), "--index", str(index))
        assert busy.returncode == 0 and "asked it to rescan" in busy.stdout
    finally:
        stopped = run("daemon", "stop", "--index", str(index))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    # LSB status codes: 3 not running; stopping a stopped daemon succeeds
    assert run("daemon", "status", "--index", str(index)).returncode == 3
    again_stopped = run("daemon", "stop", "--index", str(index))
    assert again_stopped.returncode == 0 and "not running" in again_stopped.stdout
    # 1: dead, but its pid file remains (a daemon that was SIGKILLed leaves one)
    pid_file(index).write_text("999999999\n")
    dead = run("daemon", "status", "--index", str(index))
    assert dead.returncode == 1 and "pid file" in dead.stdout, dead


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the templates show Python 3.11's -P")
def test_service_files_match_the_checked_in_templates() -> None:
    argv = command("jsonltape", "daemon", "run", "{root}", "--index", "{index}", python="{python}")
    systemd = units.systemd(argv, SAFE_CWD)
    launchd = units.launchd(argv, SAFE_CWD, "{log}")
    assert (REPO / "daemon/systemd/jsonltape-daemon.service").read_text() == systemd
    assert (REPO / "daemon/launchd/dev.jsonltape.daemon.plist").read_text() == launchd
    assert "Restart=on-failure" in systemd and "WantedBy=default.target" in systemd
    assert '"{python}" "-P" "-m" "jsonltape"' in systemd and "WorkingDirectory=/\n" in systemd
    quoted = units.systemd(["/opt/py 3/python", "/home/u/100%"], "/srv/50%")
    assert '"/opt/py 3/python"' in quoted and '"/home/u/100%%"' in quoted
    assert "WorkingDirectory=/srv/50%%\n" in quoted


def test_print_and_install_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "jsonltape", "daemon", "print-service", "--kind", "launchd"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert "<key>RunAtLoad</key>" in out.stdout
    inst = subprocess.run(
        [sys.executable, "-m", "jsonltape", "daemon", "install-service", "--kind", "systemd"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert inst.returncode == 0, inst.stderr
    unit = tmp_path / ".config/systemd/user/jsonltape-daemon.service"
    assert '"daemon" "run"' in unit.read_text()
    assert "systemctl --user" in inst.stdout


@pytest.fixture(autouse=True)
def _no_thread_leaks() -> Iterator[None]:
    before = threading.active_count()
    yield
    wait_for(lambda: threading.active_count() <= before, timeout=10)


_ = BaseObserver


def test_the_daemon_mirrors_a_foreign_tree_and_follows_its_appends(
    root: Path, tmp_path: Path
) -> None:
    """daemon run --source codex:PATH: a Codex rollout is indexed read-only, and a line the
    agent appends later shows up in search (through a watcher hint)."""
    from jsonltape_daemon.engines.sqlite import search as s
    from jsonltape_daemon.engines.sqlite.schema import connect as connect_index

    src = tmp_path / "codex"
    src.mkdir()
    from .conftest import SAMPLES

    sample = SAMPLES / "codex-0.104-rollout-complete.jsonl"
    lines = sample.read_bytes().splitlines(keepends=True)
    rollout = src / "rollout-2026-02-23T19-36-00-test.jsonl"
    rollout.write_bytes(b"".join(lines[:-4]))
    cfg = Config(root, tmp_path / "i.db", sources=(("codex", str(src)),), debounce=0.05)

    def hits(query: str) -> int:
        con = connect_index(cfg.index, readonly=True)
        try:
            return len(s.search(con, query, s.Filters(), limit=5))
        finally:
            con.close()

    with _Running(Daemon(cfg, log=lambda _m: None)):
        wait_for(lambda: indexed_events(cfg.index) > 0)
        assert (
            hits("10502814") == 0
        )  # the final answer (its text ends in this hash) is not there yet
        with open(rollout, "ab") as f:
            f.write(b"".join(lines[-4:]))
        wait_for(lambda: hits("10502814") > 0)
    assert rollout.read_bytes() == sample.read_bytes()  # never written by the daemon
