"""File-system events as hints: a bounded, debounced set of paths, and the observer wiring.

Events never carry meaning here: a burst of writes gives a handful of events (or none at all,
when inotify's queue overflowed), so the handler only notes *which* paths changed and the
engine looks at the files themselves. When the set is full the handler asks for a rescan
instead of blocking the observer thread; the daemon's periodic rescan is the safety net for
everything a watcher can miss (moves across the boundary, overflowed queues, network mounts).

If the native observer cannot start (inotify's watch or instance limit: ENOSPC, EMFILE) or dies
later, the watcher falls back to watchdog's polling observer and asks for a rescan.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserver

__all__ = ["Hints", "Watcher"]

_LIMIT_ERRNOS = (errno.ENOSPC, errno.EMFILE)
_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileDeletedEvent,
    FileClosedEvent,
    DirCreatedEvent,
    DirMovedEvent,
    DirDeletedEvent,
]


class Hints:
    """Paths that changed, coalesced; at most ``capacity`` of them, then "rescan needed"."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._cond = threading.Condition()
        self._paths: dict[str, float] = {}  # path -> when it was first noted (monotonic)
        self._later: dict[str, float] = {}  # path -> when it is to be a hint (monotonic)
        #: a path held back (or come back from it and not taken yet) -> when the change it
        #: waits to have synced was first noted: how far behind the index is for it
        self._since: dict[str, float] = {}
        self._given: dict[str, float] = {}  # the paths the last take gave -> when noted
        self._rescan = False
        self._last = 0.0
        self.overflows = 0

    def add(self, path: str) -> None:
        with self._cond:
            now = time.monotonic()
            self._last = now
            self._note(path, now)
            self._cond.notify()

    def _note(self, path: str, at: float) -> None:
        """Hold ``path`` as a hint noted at ``at``, or ask for a rescan when full."""
        if path not in self._paths:
            if len(self._paths) >= self.capacity:
                self._rescan = True
                self.overflows += 1
            else:
                self._paths[path] = at

    def later(self, path: str, at: float) -> None:
        """Make ``path`` a hint at monotonic time ``at`` (a file the engine held back). It
        counts as pending meanwhile, as old as the change the last take gave it for."""
        with self._cond:
            self._later[path] = min(at, self._later.get(path, at))
            since = self._given.get(path, time.monotonic())
            self._since[path] = min(since, self._since.get(path, since))
            self._cond.notify()

    def _due(self, now: float) -> float | None:
        """Move the paths whose time came to the hints; the next such time, if any."""
        for path, at in list(self._later.items()):
            if at <= now:
                del self._later[path]
                self._note(path, at)  # within the capacity, as a watcher's hint
                self._last = max(self._last, at)
        return min(self._later.values(), default=None)

    def request_rescan(self) -> None:
        with self._cond:
            self._rescan = True
            self._cond.notify()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def __len__(self) -> int:
        """The paths pending: hints, and paths held back to come back later."""
        with self._cond:
            return len(self._paths.keys() | self._later.keys())

    def held(self) -> int:
        """The paths held back, to come back later."""
        with self._cond:
            return len(self._later)

    def oldest_age(self) -> float:
        """Seconds since the oldest pending change was noted (0 when none is pending): a held
        path's counts from the hint it was held back from."""
        with self._cond:
            times = [*self._paths.values(), *self._since.values()]
            return time.monotonic() - min(times) if times else 0.0

    def take(
        self, timeout: float, *, quiet: float, max_wait: float, stop: threading.Event
    ) -> tuple[list[str], bool]:
        """Wait for hints; return them once no new one came for ``quiet`` seconds (or the
        oldest waited ``max_wait``), with whether a rescan was asked for. ``([], False)`` after
        ``timeout`` without any hint."""
        with self._cond:
            deadline = time.monotonic() + timeout
            while not stop.is_set():
                now = time.monotonic()
                upcoming = self._due(now)
                if self._paths or self._rescan:
                    break
                if deadline <= now:
                    return [], False
                wake = deadline if upcoming is None else min(deadline, upcoming)
                self._cond.wait(max(wake - now, 0.0))
            while not self._rescan and not stop.is_set() and self._paths:
                now = time.monotonic()
                due = min(self._last + quiet, min(self._paths.values()) + max_wait)
                if now >= due:
                    break
                self._cond.wait(due - now)
            paths = list(self._paths)
            self._given = {p: min(t, self._since.pop(p, t)) for p, t in self._paths.items()}
            self._paths.clear()
            rescan, self._rescan = self._rescan, False
            return paths, rescan


def _jsonl(path: str) -> bool:
    return path.endswith(".jsonl")


class _Handler(FileSystemEventHandler):
    def __init__(self, hints: Hints, wants: Callable[[str], bool]) -> None:
        self.hints = hints
        self.wants = wants

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            # A directory moved in shows up as one event without its contents.
            if event.event_type in ("created", "moved", "deleted"):
                self.hints.request_rescan()
            return
        for raw in (event.src_path, event.dest_path):
            path = os.fsdecode(raw)
            if path and self.wants(path):
                self.hints.add(path)


ObserverFactory = Callable[[], BaseObserver]


class Watcher:
    """Runs an observer over ``root`` that feeds :class:`Hints`; falls back to polling."""

    def __init__(
        self,
        root: str,
        hints: Hints,
        *,
        poll: bool = False,
        poll_interval: float = 2.0,
        observer_factory: ObserverFactory | None = None,
        log: Callable[[str], None] = lambda _msg: None,
        wants: Callable[[str], bool] = _jsonl,
    ) -> None:
        self.root = root
        self.hints = hints
        #: which paths' events are hints (a foreign source's: its files, a database's -wal)
        self.wants = wants
        self.poll = poll
        self.poll_interval = poll_interval
        self.factory: ObserverFactory = observer_factory or Observer
        self.log = log
        self.observer: BaseObserver | None = None
        self.mode = "off"

    def start(self) -> None:
        if self.poll:
            self._polling("--poll was given")
            return
        observer = self.factory()
        try:
            observer.schedule(
                _Handler(self.hints, self.wants), self.root, recursive=True, event_filter=_EVENTS
            )
            observer.start()
        except OSError as exc:
            if exc.errno not in _LIMIT_ERRNOS:
                raise
            _stop(observer)
            self._polling(_limit_message(exc))
            return
        self.observer = observer
        self.mode = type(observer).__name__.removesuffix("Observer").lower() or "native"

    def check(self) -> None:
        """Fall back to polling if the native observer died (limits hit after start)."""
        if self.observer is not None and self.mode != "polling" and not self.observer.is_alive():
            self.log("the file watcher stopped unexpectedly; falling back to polling")
            _stop(self.observer)
            self._polling("the native watcher died")

    def _polling(self, why: str) -> None:
        observer = PollingObserver(timeout=self.poll_interval)
        observer.schedule(
            _Handler(self.hints, self.wants), self.root, recursive=True, event_filter=_EVENTS
        )
        observer.start()
        self.observer = observer
        self.mode = "polling"
        self.log(f"watching {self.root} by polling every {self.poll_interval:g} s ({why})")
        self.hints.request_rescan()

    def stop(self) -> None:
        if self.observer is not None:
            _stop(self.observer)
            self.observer = None


def _stop(observer: BaseObserver) -> None:
    try:
        observer.stop()
        if observer.is_alive():
            observer.join(timeout=5)
    except (OSError, RuntimeError):  # pragma: no cover - best effort on shutdown
        pass


def _limit_message(exc: OSError) -> str:
    which: dict[int, Any] = {
        errno.ENOSPC: "inotify watch limit reached (raise fs.inotify.max_user_watches)",
        errno.EMFILE: "inotify instance limit reached (raise fs.inotify.max_user_instances)",
    }
    return str(which.get(exc.errno or 0, exc))
