"""How often a foreign file that is costly to map is mapped again while it grows.

A foreign file is mapped again from its start at every change (``foreign.py``: the mapping is
deterministic, not resumable), so a live agent appending to a 20 MB session every second kept
the daemon mapping it all the time (1.2 s a change here). After a mapping that took ``T``
seconds (its sync: the mapping, its rows, its members'), the next one of that file waits until
:attr:`Pace.factor` × ``T`` have passed, the changes in between coalesced into it: 20-32 % of a
core for such a file where it took a whole one (benchmarks/bench_live_foreign.py), and its
rows at most that much later. Files mapped in less than :attr:`Pace.floor` seconds (nearly all) are
never held back, and a rescan maps what changed whatever the pace.

Only a caller that hints the held paths again at their time may hold them (the daemon, through
``take_held`` and ``Hints.later``): an engine's pace holds nothing unless it is :attr:`Pace.on`
(``Mirror(paced=True)``), so that ``sync_paths`` elsewhere syncs every path it is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

__all__ = ["Pace"]


class Pace:
    """The earliest time each costly file may be mapped again, and the paths held back."""

    #: A file is mapped again no sooner than this many times its last mapping's duration after
    #: that mapping ended.
    factor = 4.0
    #: Seconds of mapping below which a file is never held back.
    floor = 0.05

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, on: bool = True) -> None:
        self.clock = clock
        #: whether :meth:`ready` holds anything back (the caller hints those paths again)
        self.on = on
        self._next: dict[str, float] = {}  # path -> monotonic time it may be mapped again
        self._held: dict[str, float] = {}

    def ready(self, paths: Iterable[str]) -> set[str]:
        """The paths that may be mapped now; the others are held back until their time
        (:meth:`take_held`)."""
        if not self.on:
            return set(paths)
        now = self.clock()
        out: set[str] = set()
        for p in paths:
            at = self._next.get(p, 0.0)
            if at > now:
                self._held[p] = at
            else:
                out.add(p)
        return out

    @contextmanager
    def timing(self, path: str) -> Iterator[None]:
        """Time the sync of ``path`` (its mapping and rows): its next one waits in proportion."""
        start = self.clock()
        try:
            yield
        finally:
            end = self.clock()
            took = end - start
            if took >= self.floor:
                self._next[path] = end + self.factor * took
            else:
                self._next.pop(path, None)
            self._held.pop(path, None)

    def take_held(self) -> dict[str, float]:
        """The paths held back since the last call, with when each may be mapped."""
        held, self._held = self._held, {}
        return held
