"""Keep the index current while the viewer runs: the running daemon's, or the daemon's loop
in-process (never a second copy of it).

A local index that a daemon (or another viewer) already keeps current is only read. Otherwise
the viewer runs the daemon's own loop (``jsonltape_daemon.service.daemon.Daemon``) in a
thread: the same watcher, ingest and lock as ``jsonltape daemon run``, so ``daemon status``
shows it and a ``daemon start`` meanwhile is refused. A team index on PostgreSQL is kept
current by each machine's daemon (the viewer connects as a reader and never pushes).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from jsonltape_daemon.service.daemon import Config, Daemon, running_pid
from jsonltape_daemon.target import SqliteTarget, Target

__all__ = ["Mirror", "start_mirror"]


class Mirror:
    """The daemon loop of one viewer, in a thread; :meth:`stop` ends it at a transaction
    boundary."""

    def __init__(self, root: Path, index: Path) -> None:
        self.daemon = Daemon(
            Config(root=root, index=index),
            log=lambda msg: print(f"jsonltape serve: index: {msg}", file=sys.stderr, flush=True),
        )
        self.thread = threading.Thread(target=self._run, name="jsonltape-mirror", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as exc:  # reported by serve; the viewer still reads the index
            self.error = exc
            print(f"jsonltape serve: the index mirror stopped: {exc}", file=sys.stderr)

    def stop(self, timeout: float = 10.0) -> None:
        self.daemon.request_stop()
        self.thread.join(timeout)
        if not self.thread.is_alive():
            return
        # Still inside a transaction (a first sync of a large tree commits rarely): the process
        # exits anyway, SQLite rolls the open transaction back and the next sync resumes from
        # the last commit. The loop did not get to remove its pid file; a stale one would make
        # `daemon status` report a daemon that is gone.
        print(
            f"jsonltape serve: the index mirror did not stop within {timeout:g} s;"
            " its open transaction is rolled back, the next sync goes on from there",
            file=sys.stderr,
        )
        self.daemon.abandon()


def start_mirror(target: Target, root: Path | None) -> tuple[Mirror | None, str]:
    """Start keeping ``target`` current with ``root`` unless something already does; the
    mirror (None when none was started) and one line saying who keeps the index current."""
    if not isinstance(target, SqliteTarget):
        return None, "the team index is kept current by each machine's daemon"
    pid = running_pid(target.path)
    if pid is not None:
        return None, f"the running daemon (pid {pid}) keeps the index current"
    if root is None:
        return None, "the index is not kept current (no sessions root)"
    mirror = Mirror(root, target.path)
    mirror.thread.start()
    return mirror, f"keeping the index current with {root}"
