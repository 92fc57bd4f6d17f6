"""Keep the index current while the viewer runs: the running daemon's, or the daemon's loop
in-process (never a second copy of it).

A local index that a daemon (or another viewer) already keeps current is only read. Otherwise
the viewer runs the daemon's own loop (``jsonltape_daemon.service.daemon.Daemon``) in a
thread: the same watcher, ingest and lock as ``jsonltape daemon run``, so ``daemon status``
shows it (naming the viewer) and a ``daemon start`` meanwhile is refused; ``sync`` of its root
asks it to rescan (SIGUSR1), and ``daemon stop`` stops that loop only (SIGUSR2,
:meth:`Mirror.release`): the viewer goes on serving the index. A team
index on PostgreSQL is kept current by each machine's daemon (the viewer connects as a reader
and never pushes).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from jsonltape_daemon.service.daemon import Config, Daemon, holder, running_pid
from jsonltape_daemon.target import SqliteTarget, Target

__all__ = ["Mirror", "mirror_for"]


def _say(text: str) -> None:
    print(f"jsonltape serve: {text}", file=sys.stderr, flush=True)


class Mirror:
    """The daemon loop of one viewer, in a thread; :meth:`stop` ends it at a transaction
    boundary. ``note`` says who keeps the index current, for the pages' footer."""

    def __init__(self, root: Path, index: Path, url: str) -> None:
        self.daemon = Daemon(
            Config(root=root, index=index, serve=url), log=lambda msg: _say(f"index: {msg}")
        )
        self.thread = threading.Thread(target=self._run, name="jsonltape-mirror", daemon=True)
        self.error: BaseException | None = None
        self.note = f"keeping the index current with {root}"

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as exc:  # reported by serve; the viewer still reads the index
            self.error = exc
            self.note = f"the index is not kept current: its mirror stopped ({exc})"
            _say(f"the index mirror stopped: {exc}")

    def start(self) -> None:
        self.thread.start()

    def rescan(self) -> None:
        """``jsonltape sync`` of the same root: rescan the tree now, as a daemon does."""
        self.daemon.hints.request_rescan()

    def release(self) -> None:
        """``jsonltape daemon stop``: stop keeping the index current, go on serving it."""
        if self.daemon.stop_event.is_set():
            return
        self.note = "the index is no longer kept current (jsonltape daemon stop)"
        _say("`jsonltape daemon stop`: no longer keeping the index current; still serving")
        self.daemon.request_stop()

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


def mirror_for(target: Target, root: Path | None, url: str) -> tuple[Mirror | None, str]:
    """The mirror that would keep ``target`` current with ``root``, not yet started (None when
    something already keeps it current, or it cannot be), and one line saying who keeps the
    index current. ``url``: the viewer's address, which ``daemon status`` names."""
    if not isinstance(target, SqliteTarget):
        return None, "the team index is kept current by each machine's daemon"
    pid = running_pid(target.path)
    if pid is not None:
        return None, f"{holder(target.path, pid)} keeps the index current"
    if root is None:
        return None, "the index is not kept current (no sessions root)"
    mirror = Mirror(root, target.path, url)
    return mirror, mirror.note
