"""The daemon's life: one per index (a lock), a pid and a status file, signals, the loop.

``run`` is the foreground daemon that systemd or launchd supervise: it never forks. ``start``
launches ``run`` in the background (``python -P``, in ``/``: ``jsonltape._spawn``) with its
output in a log file and waits until it is up.
SIGTERM and SIGINT let the current transaction finish, then the daemon exits 0; SIGUSR1 asks
for a rescan. The daemon only reads session files; it writes the index and its own files.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonltape import _index_api as _api
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.errors import DaemonError
from jsonltape_daemon.ingest.files import Budget, SyncStats
from jsonltape_daemon.ingest.mirror import IndexStore, Mirror
from jsonltape_daemon.paths import ensure_private_dir, log_file, pid_file, status_file
from jsonltape_daemon.service.lock import (
    daemon_status,
    holder,
    in_serve,
    index_lock,
    running_pid,
    write_private,
)
from jsonltape_daemon.service.remote import Remote
from jsonltape_daemon.service.watcher import Hints, ObserverFactory, Watcher

__all__ = [
    "Config",
    "Daemon",
    "daemon_status",
    "holder",
    "in_serve",
    "index_lock",
    "running_pid",
    "start",
    "stop",
]


@dataclass
class Config:
    root: Path
    index: Path
    poll: bool = False
    poll_interval: float = 2.0
    rescan_interval: float = 60.0
    debounce: float = 0.1
    max_wait: float = 0.5
    budget: Budget = field(default_factory=Budget)
    #: Longest write transaction of the substring index's catch-up after a first sync (it runs
    #: between syncs, so this bounds how long a change waits behind it).
    substring_step: float = 0.25
    #: Messages from which a first (bulk) load builds its full-text indexes in a helper
    #: process (None: never).
    helper_from: int | None = 20_000
    observer_factory: ObserverFactory | None = None
    #: Foreign trees mirrored read-only beside the root: (kind, absolute path) pairs.
    sources: tuple[tuple[str, str], ...] = ()
    #: A shared PostgreSQL index to push into beside the local one (its URL; see remote.py),
    #: and the origin this machine pushes as.
    remote: str | None = None
    origin: str | None = None
    #: The address of the ``jsonltape serve`` that runs this loop in a thread of its own
    #: (None: ``daemon run``); the status file names it, and ``stop`` asks that process to stop
    #: the loop only (SIGUSR2), not to exit.
    serve: str | None = None


class Daemon:
    """The foreground loop. ``stop`` (an Event) ends it at the next transaction boundary."""

    def __init__(self, config: Config, *, log: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.stop_event = threading.Event()
        self.log = log or (
            lambda msg: print(f"jsonltape daemon: {msg}", file=sys.stderr, flush=True)
        )
        self.hints = Hints()
        self.status: dict[str, Any] = {}
        self._errors: list[str] = []
        self._status_at = 0.0
        self.store: SqliteStore | None = None
        self.remote: Remote | None = None

    def request_stop(self) -> None:
        self.stop_event.set()
        self.hints.wake()

    def abandon(self) -> None:
        """Remove this process's pid file while :meth:`run` still runs in another thread: the
        process is exiting without waiting for the loop's transaction (which SQLite rolls
        back), and a pid file left behind would name a daemon that is gone."""
        path = pid_file(self.config.index)
        with contextlib.suppress(OSError, ValueError):
            if int(path.read_text().strip()) == os.getpid():
                path.unlink()

    def run(self) -> int:
        cfg = self.config
        root = os.path.abspath(cfg.root)
        if not os.path.isdir(root):
            ensure_private_dir(Path(root))
        lock = index_lock(cfg.index)
        try:
            self.status = {
                "pid": os.getpid(),
                "root": root,
                "index": str(cfg.index),
                "started": _now_ms(),
                "state": "starting",
                "syncs": 0,
                "rescans": 0,
                "transactions": 0,
                "events": 0,
            }
            if cfg.serve is not None:
                self.status["serve"] = cfg.serve
            # before the pid file: whoever finds the pid finds what runs it
            self._write_status(force=True)
            write_private(pid_file(cfg.index), f"{os.getpid()}\n")
            self._install_signals()
            store = SqliteStore(cfg.index, helper_from=cfg.helper_from)
            self.store = store
            mirror = Mirror(
                store,
                root,
                cfg.sources,
                budget=cfg.budget,
                should_stop=self.stop_event.is_set,
                paced=True,  # what a sync holds back is hinted again at its time (_hold)
            )
            # One watcher per tree; every hint goes to every engine, which ignores paths
            # outside its tree.
            watchers = [
                Watcher(
                    tree,
                    self.hints,
                    poll=cfg.poll,
                    poll_interval=cfg.poll_interval,
                    observer_factory=cfg.observer_factory,
                    log=self.log,
                    wants=mirror.hinted,
                )
                for tree in (root, *(path for _kind, path in cfg.sources))
            ]
            self.remote = self._remote(mirror)
            try:
                for w in watchers:
                    w.start()
                self.status["watcher"] = watchers[0].mode
                self.log(f"watching {root} ({watchers[0].mode}); index {cfg.index}")
                self._loop(mirror, watchers)
            finally:
                for w in watchers:
                    w.stop()
                if self.remote is not None:
                    self.remote.close()
                store.close()
                self.status["state"] = "stopped"
                self._write_status(force=True)
        finally:
            try:
                pid_file(cfg.index).unlink()
            except FileNotFoundError:
                pass
            lock.release()
        self.log("stopped")
        return 0

    def _loop(self, mirror: Mirror, watchers: list[Watcher]) -> None:
        cfg = self.config
        engine, store = mirror.main, mirror.main.store
        assert isinstance(store, SqliteStore)
        self._account(mirror.rescan(), rescan=True)
        self._push((), rescan=True)
        self.status["state"] = "running"
        self._write_status(force=True)
        next_rescan = time.monotonic() + cfg.rescan_interval
        while not self.stop_event.is_set():
            # While the substring index catches up, look for hints without waiting.
            building = store.substrings_pending()
            wait = 0.0 if building else max(0.0, next_rescan - time.monotonic())
            if self.remote is not None and not self.remote.connected:
                wait = min(wait, self.remote.wait())
            paths, rescan = self.hints.take(
                min(wait, 1.0), quiet=cfg.debounce, max_wait=cfg.max_wait, stop=self.stop_event
            )
            if self.stop_event.is_set():
                break
            try:
                if rescan or time.monotonic() >= next_rescan:
                    self._account(mirror.rescan(), rescan=True)
                    self._push((), rescan=True)
                    next_rescan = time.monotonic() + cfg.rescan_interval
                elif paths:
                    self._account(mirror.sync_paths(paths), rescan=False)
                    self._push(paths, rescan=False)
                    self._hold(mirror.take_held())
                elif self.remote is not None and not self.remote.connected:
                    self._push((), rescan=False)  # due for a reconnect: it rescans then
                elif building:
                    stats = engine.build_substrings(
                        cfg.substring_step, tx_seconds=cfg.substring_step
                    )
                    self.status["substrings"] = self.status.get("substrings", 0) + stats.substrings
                    if not store.substrings_pending():
                        self.log("the substring index is complete")
            except Exception as exc:  # a bad moment (disk full, ...) must not end the mirror
                self._errors = ([*self._errors, f"{time.strftime('%H:%M:%S')} {exc}"])[-10:]
                self.log(f"sync failed, retrying at the next rescan: {exc}")
                next_rescan = min(next_rescan, time.monotonic() + 5.0)
                if building:
                    self.stop_event.wait(1.0)  # do not spin on a failing catch-up step
            for w in watchers:
                w.check()
            self.status["watcher"] = watchers[0].mode
            self.status["substrings_ready"] = not store.substrings_pending()
            self._write_status()

    def _remote(self, local: Mirror) -> Remote | None:
        cfg = self.config
        if cfg.remote is None:
            return None
        from jsonltape_daemon.origin import default_origin
        from jsonltape_daemon.paths import data_dir
        from jsonltape_daemon.target import redact

        url, origin = cfg.remote, cfg.origin or default_origin(data_dir())

        def open_store() -> IndexStore:
            from jsonltape_daemon.engines.postgres.store import PgStore

            return PgStore(url, origin)

        self.log(f"pushing to {redact(url)} as origin {origin}")
        return Remote(
            redact(url),
            open_store,
            local.main.root,
            cfg.sources,
            budget=cfg.budget,
            should_stop=self.stop_event.is_set,
            log=self.log,
            paced=True,
        )

    def _push(self, paths: Iterable[str], *, rescan: bool) -> None:
        r = self.remote
        if r is None:
            return
        stats = r.step(paths, rescan=rescan)
        self._hold(r.take_held())
        if stats is not None:
            self.status["pushed"] = _now_ms()
            self.status["pushed_events"] = self.status.get("pushed_events", 0) + stats.events
        self.status["remote"] = {
            "index": r.name,
            "connected": r.connected,
            "error": r.error,
            "failures": r.failures,
        }

    def _hold(self, held: dict[str, float]) -> None:
        """Hint again, each at its time, the paths a sync held back (``ingest/pace.py``: a
        costly foreign file mapped again too soon)."""
        for path, at in held.items():
            self.hints.later(path, at)

    def _account(self, stats: SyncStats, *, rescan: bool) -> None:
        s = self.status
        s["rescans" if rescan else "syncs"] += 1
        s["transactions"] += stats.transactions
        s["events"] += stats.events
        s["last_sync"] = _now_ms()
        if rescan:
            s["last_rescan"] = s["last_sync"]
        s["errors"] = self._errors
        if stats.events or stats.sessions_removed or stats.errors:
            self.log(
                f"{'rescan' if rescan else 'sync'}: {stats.files} files, +{stats.events} events, "
                f"{stats.sessions_added} new, {stats.sessions_removed} removed, "
                f"{stats.errors} errors, {stats.transactions} transactions, {stats.seconds:.3f} s"
            )

    def _write_status(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._status_at < 1.0:
            return
        self._status_at = now
        self.status["pending"] = len(self.hints)
        self.status["held"] = self.hints.held()
        self.status["lag"] = round(self.hints.oldest_age(), 3)
        self.status["updated"] = _now_ms()
        try:
            write_private(status_file(self.config.index), json.dumps(self.status) + "\n")
        except OSError as exc:  # pragma: no cover - status is best effort
            self.log(f"cannot write the status file: {exc}")

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGTERM, lambda *_: self.request_stop())
        signal.signal(signal.SIGINT, lambda *_: self.request_stop())
        if hasattr(signal, "SIGUSR1"):
            signal.signal(signal.SIGUSR1, lambda *_: self.hints.request_rescan())


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def start(
    args: Sequence[str | os.PathLike[str]],
    index: Path,
    *,
    timeout: float = 20.0,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run ``jsonltape daemon run ARGS`` in the background; return its pid once it is up.
    A path in ``args`` goes as a path-like object (the daemon runs in ``/``, so it is made
    absolute). ``env``: variables added to the child's environment (a PostgreSQL URL goes
    there, never into its argv)."""
    pid = running_pid(index)
    if pid is not None:
        if in_serve(index, pid) is not None:
            raise DaemonError(
                f"{holder(index, pid)} keeps this index current; `jsonltape daemon stop` "
                "stops that (the viewer goes on serving), then start the daemon",
                path=index,
            )
        raise DaemonError(f"the daemon is already running (pid {pid})", path=index)
    ensure_private_dir(index.parent)
    log = log_file(index)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600)
        proc = _api.spawn.start(
            "jsonltape",
            "daemon",
            "run",
            *args,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
        )
    finally:
        os.close(fd)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise DaemonError(
                "the daemon exited at once: " + (" | ".join(tail) or f"exit {proc.returncode}"),
                path=log,
            )
        status = daemon_status(index)
        if status and status.get("pid") == proc.pid and status.get("state") == "running":
            return proc.pid
        time.sleep(0.05)
    return proc.pid  # still starting (a big first sync); `daemon status` will tell


def stop(index: Path, *, timeout: float = 30.0) -> int | None:
    """Stop the daemon's loop on ``index`` and wait until it has; return its pid (None if
    idle). A ``daemon run`` gets SIGTERM and exits; a ``jsonltape serve`` that runs the loop
    in-process (``in_serve``) gets SIGUSR2: the loop stops, the viewer goes on serving."""
    pid = running_pid(index)
    if pid is None:
        return None
    serve = in_serve(index, pid)
    os.kill(pid, signal.SIGUSR2 if serve is not None else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if running_pid(index) is None:
            return pid
        time.sleep(0.05)
    raise DaemonError(f"{holder(index, pid)} did not stop within {timeout:g} s", path=index)
