"""A shared index the daemon pushes into beside its local one.

The daemon always keeps its local SQLite index; with a PostgreSQL ``--index`` it also mirrors
the same trees into that database. The two are independent: when the server is down or the
connection is cut, the local index goes on being updated and searched, and the push is retried
with exponential backoff (1 s doubling to 60 s); once connected again it rescans, which is cheap
(files unchanged since their watermark are skipped) and catches up whatever changed meanwhile.
A retried push adds nothing twice: each file's rows and its watermark commit together.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

from jsonltape_daemon.ingest.files import Budget, SyncStats
from jsonltape_daemon.ingest.mirror import IndexStore, Mirror

__all__ = ["Remote"]


class Remote:
    """One shared index, opened on demand and reopened after a failure."""

    def __init__(
        self,
        name: str,
        open_store: Callable[[], IndexStore],
        root: str,
        sources: Sequence[tuple[str, str]] = (),
        *,
        budget: Budget | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        log: Callable[[str], None] = lambda _msg: None,
        first_delay: float = 1.0,
        max_delay: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        paced: bool = False,
    ) -> None:
        self.name = name  #: shown in logs and status: a redacted URL, never a password
        self._open = open_store
        self._root, self._sources = root, list(sources)
        self._budget, self._should_stop, self._log = budget, should_stop, log
        self._first, self._max, self._clock = first_delay, max_delay, clock
        self._paced = paced  # its engines may hold a costly file back (``take_held``)
        self.mirror: Mirror | None = None
        self.delay = first_delay
        self.next_try = clock()
        self.error: str | None = None
        self.failures = 0
        self._behind = True  # rescan on (re)connect: changes may have happened meanwhile

    @property
    def connected(self) -> bool:
        return self.mirror is not None

    def wait(self) -> float:
        """Seconds until the next connection attempt (0 when connected)."""
        return 0.0 if self.mirror is not None else max(0.0, self.next_try - self._clock())

    def step(self, paths: Iterable[str] = (), *, rescan: bool = False) -> SyncStats | None:
        """Push what changed: ``paths`` (watcher hints), everything when ``rescan`` or after a
        reconnect. Returns the statistics, or None when nothing was pushed (not due, or failed:
        the failure is logged and retried later)."""
        todo = list(paths)
        if self.mirror is None:
            if self._clock() < self.next_try:
                return None
            try:
                store = self._open()
                self.mirror = Mirror(
                    store,
                    self._root,
                    self._sources,
                    budget=self._budget,
                    should_stop=self._should_stop,
                    paced=self._paced,
                )
            except Exception as exc:
                self._failed(exc)
                return None
            if self.failures:
                self._log(f"push: {self.name} reachable again; catching up")
            self._behind = True
        try:
            if rescan or self._behind:
                stats = self.mirror.rescan()
                self._behind = False
            elif todo:
                stats = self.mirror.sync_paths(todo)
            else:
                return None
        except Exception as exc:
            self._failed(exc)
            return None
        self.delay, self.error, self.failures = self._first, None, 0
        return stats

    def take_held(self) -> dict[str, float]:
        """What the last push held back (``Mirror.take_held``)."""
        return self.mirror.take_held() if self.mirror is not None else {}

    def close(self) -> None:
        if self.mirror is not None:
            store, self.mirror = self.mirror.store, None
            try:
                store.close()
            except Exception:  # a dead connection may fail to close; it is gone either way
                pass

    def _failed(self, exc: BaseException) -> None:
        self.close()
        self.failures += 1
        self.error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        self.next_try = self._clock() + self.delay
        self._log(f"push failed: {self.error}; retrying in {self.delay:.0f} s")
        self.delay = min(self.delay * 2, self._max)
