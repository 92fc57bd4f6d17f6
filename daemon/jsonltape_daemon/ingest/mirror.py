"""One index kept in step with the trees it mirrors: the jsonltape root and foreign sources.

``jsonltape sync`` runs a :class:`Mirror` once; the daemon keeps one running and feeds it the
watcher's hints. Whatever the engine behind the store (SQLite here, PostgreSQL for a team),
this is the one place that decides which trees an index holds and adds their statistics up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from jsonltape_daemon.ingest.files import UNNAMED, Budget, SyncStats
from jsonltape_daemon.ingest.foreign import engine_for
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.ingest.rows import FileRow, Store
from jsonltape_daemon.ingest.usage import BackfillStore, backfill

__all__ = ["IndexStore", "Mirror", "add_stats"]


class IndexStore(Store, BackfillStore, Protocol):
    """A store that also records which trees it mirrors (and can give the sessions indexed
    before usage was counted their usage, ``usage.py``)."""

    def add_root(self, root: str) -> None: ...


def add_stats(total: SyncStats, more: SyncStats) -> SyncStats:
    """Add ``more`` into ``total`` (counts, seconds and phases; ``bulk`` if either was)."""
    for f in dataclasses.fields(SyncStats):
        a, b = getattr(total, f.name), getattr(more, f.name)
        if f.name == "phases":
            for phase, seconds in b.items():
                total.add(phase, seconds)
        elif isinstance(a, bool):
            setattr(total, f.name, a or b)
        else:
            setattr(total, f.name, a + b)
    return total


class Mirror:
    """The engines of one store: one for ``root`` and one per ``(kind, path)`` source."""

    def __init__(
        self,
        store: IndexStore,
        root: str,
        sources: Sequence[tuple[str, str]] = (),
        *,
        budget: Budget | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        paced: bool = False,
    ) -> None:
        # paced: a costly foreign file may be held back by sync_paths (``pace.py``); only a
        # caller that hints what take_held returns again at its time may ask for it
        self.store = store
        self.roots = [root, *(f"{kind}:{path}" for kind, path in sources)]
        for r in self.roots:
            store.add_root(r)
        b = budget or Budget()
        self.main = Ingestor(store, root, budget=b, should_stop=should_stop)
        self.engines: list[Ingestor] = [
            self.main,
            *(
                engine_for(store, r, budget=b, should_stop=should_stop, paced=paced)
                for r in self.roots[1:]
            ),
        ]

    def rescan(self) -> SyncStats:
        """Compare every tree with the index and bring the index up to date (first the usage
        of sessions indexed before the index counted usage, ``usage.py``)."""
        if not self.store.in_bulk:
            backfill(self.store)
        total = SyncStats()
        for engine in self.engines:
            add_stats(total, engine.rescan())
        return total

    def sync_paths(self, paths: Iterable[str]) -> SyncStats:
        """Sync the files a watcher reported (each engine ignores paths outside its tree)."""
        todo = list(paths)
        total = SyncStats()
        for engine in self.engines:
            add_stats(total, engine.sync_paths(todo))
        return total

    def take_held(self) -> dict[str, float]:
        """What the last ``sync_paths`` held back, and when each may be synced (see
        ``pace.py``): the daemon hints those paths again at that time."""
        return {p: at for engine in self.engines for p, at in engine.take_held().items()}

    def hinted(self, path: str) -> bool:
        """Whether a watcher's event for ``path`` concerns one of the trees (a session file, a
        foreign source's file or a database's ``-wal``); called on the watcher's thread."""
        return any(engine.hinted(path) for engine in self.engines)

    def failed_files(self) -> list[FileRow]:
        """The files of these trees that the last sync could not read, and why."""
        return [
            f
            for under in (e.root for e in self.engines)
            for f in self.store.files(under=under).values()
            if f.status == "error"
        ] + [
            FileRow(path=p, status="error", error=UNNAMED) for e in self.engines for p in e.unnamed
        ]
