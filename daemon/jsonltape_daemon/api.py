"""The index's public API: what the CLI (and any other front end) asks of an index.

One door for both engines: :func:`sync` brings an index up to date with a tree once,
:func:`rebuild` recreates it (one origin of a team index) from the files, :func:`optimize`
compacts it, :func:`status` reports on it and :func:`open_reader` searches it. Each takes a
:class:`~jsonltape_daemon.target.Target` (``parse_target`` makes one from ``--index``) and
returns typed results; none of them prints. The SQL stays inside the engines (``engines/``);
the orchestration (locks, bulk phases, the substring catch-up, which trees an index holds) is
here and in :class:`~jsonltape_daemon.ingest.mirror.Mirror`, which the daemon's loop uses too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from jsonltape.errors import InvalidArgumentError, SessionNotFoundError
from jsonltape_daemon.engines.sqlite.failures import storage_errors
from jsonltape_daemon.engines.sqlite.store import SqliteStore, remove_db
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.files import SyncStats, walk
from jsonltape_daemon.ingest.foreign import IN_PLACE, engine_for
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.ingest.mirror import Mirror, add_stats
from jsonltape_daemon.ingest.rows import FileRow
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.service.lock import index_lock
from jsonltape_daemon.target import PgTarget, Target
from jsonltape_daemon.target import parse as parse_target

__all__ = [
    "Progress",
    "RebuildReport",
    "SyncReport",
    "open_reader",
    "optimize",
    "parse_target",
    "rebuild",
    "status",
    "sync",
]


class Progress(Protocol):
    """Where a long step reports how far it got (a progress bar, or nothing)."""

    def begin(self, label: str, total: int) -> None:
        """A step of ``total`` units (bytes or messages) starts."""

    def advance(self, n: int) -> None:
        """``n`` more units are done."""

    def end(self) -> None:
        """The step is over (finished or stopped)."""

    def note(self, text: str) -> None:
        """A step with nothing to count (another process does it) starts."""


class _Silent:
    def begin(self, label: str, total: int) -> None:
        pass

    def advance(self, n: int) -> None:
        pass

    def end(self) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class SyncReport:
    """What one :func:`sync` did."""

    stats: SyncStats
    #: Sessions the index holds afterwards (for a team index: this origin's).
    sessions: int
    #: Seconds until the index was searchable (before the substring catch-up).
    searchable_seconds: float
    #: Files of these trees that could not be read, with the reason.
    errors: list[FileRow] = field(default_factory=list)
    #: The substring index is not complete yet (the sync was stopped before it was).
    substrings_pending: bool = False


@dataclass
class RebuildReport:
    """What one :func:`rebuild` did."""

    roots: list[str]
    sessions: int


def sync(
    target: Target,
    root: str,
    sources: Sequence[tuple[str, str]] = (),
    *,
    origin: str | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Progress | None = None,
) -> SyncReport:
    """Bring ``target`` up to date with ``root`` (and the foreign ``(kind, path)`` trees,
    read-only) once. A local index is locked for the duration (``IndexBusyError`` when a daemon
    or another sync holds it) and its substring index is finished in the foreground; a team
    index takes ``origin``'s writer lock and pushes only that origin's sessions."""
    root = os.path.abspath(root)
    sources = [(kind, os.path.abspath(path)) for kind, path in sources]
    _check_trees(root, sources)  # before the index is created or locked
    if isinstance(target, PgTarget):
        return _sync_shared(target, root, sources, _need_origin(origin), should_stop)
    lock = index_lock(target.path)
    try:
        with storage_errors(target.path):
            store = SqliteStore(target.path)
            try:
                mirror = Mirror(store, root, sources, should_stop=should_stop)
                stats = mirror.rescan()
                searchable = stats.seconds
                if store.substrings_pending() and not should_stop():
                    before = store.substring_progress()[0]
                    more = _finish_substrings(store, mirror.main, progress or _Silent())
                    add_stats(stats, more)
                    stats.substrings = store.substring_progress()[0] - before
                return SyncReport(
                    stats,
                    store.session_count(),
                    searchable,
                    mirror.failed_files(),
                    store.substrings_pending(),
                )
            finally:
                store.close()
    finally:
        lock.release()


def _check_trees(root: str, sources: Sequence[tuple[str, str]]) -> None:
    if not os.path.isdir(root):
        raise SessionNotFoundError("no such directory (the root to sync)", path=root)
    for kind, path in sources:
        if kind not in IN_PLACE:
            raise InvalidArgumentError(
                f"unknown source kind {kind!r} (one of {', '.join(IN_PLACE)})", field="sources"
            )
        if not os.path.isdir(path):
            raise SessionNotFoundError(f"no such directory (the {kind} source)", path=path)


def _sync_shared(
    target: PgTarget,
    root: str,
    sources: Sequence[tuple[str, str]],
    origin: str,
    should_stop: Callable[[], bool],
) -> SyncReport:
    from jsonltape_daemon.engines.postgres.store import PgStore

    store = PgStore(target.url, origin)
    try:
        mirror = Mirror(store, root, sources, should_stop=should_stop)
        stats = mirror.rescan()
        return SyncReport(stats, store.session_count(), stats.seconds, mirror.failed_files())
    finally:
        store.close()


def _finish_substrings(store: SqliteStore, engine: Ingestor, progress: Progress) -> SyncStats:
    """Finish the substring index: in steps reported to ``progress``, or all at once when a
    helper process builds it (there are no steps to count then)."""
    done, total = store.substring_progress()
    if store.substrings_waiting():
        progress.note(f"substring index: building in a helper process ({total} messages)")
        return engine.build_substrings(tx_seconds=1.0)
    stats = SyncStats()
    progress.begin("substring index", max(total - done, 1))
    try:
        while store.substrings_pending() and not engine.should_stop():
            add_stats(stats, engine.build_substrings(2.0, tx_seconds=1.0))
            now = store.substring_progress()[0]  # a count over every message: once a step
            progress.advance(now - done)
            done = now
    finally:
        progress.end()
    return stats


def _need_origin(origin: str | None) -> str:
    if origin is None:
        from jsonltape_daemon.origin import default_origin
        from jsonltape_daemon.paths import data_dir

        return default_origin(data_dir())
    return origin


def _tree_bytes(roots: Sequence[str]) -> int:
    """Bytes of the session files under the absolute roots (a KIND:PATH root counts 0)."""
    total = 0
    for r in roots:
        if os.path.isabs(r):
            for p in walk(r):
                try:
                    total += os.stat(p).st_size
                except OSError:
                    pass
    return total


def rebuild(
    target: Target,
    roots: Sequence[str] = (),
    *,
    origin: str | None = None,
    default_root: str,
    progress: Progress | None = None,
) -> RebuildReport:
    """Recreate the index from the session files of ``roots`` (default: the roots synced
    before, else ``default_root``). A local index is built beside the old one, which stays
    searchable until it is replaced; for a team index only ``origin``'s rows are deleted and
    pushed again (the other origins are untouched)."""
    p = progress or _Silent()
    if isinstance(target, PgTarget):
        return _rebuild_shared(target, roots, _need_origin(origin), default_root, p)
    lock = index_lock(target.path)
    try:
        with storage_errors(target.path):
            try:
                store = SqliteStore(target.path)
            except IndexStateError:  # unreadable, or written by a newer jsonltape: start over
                remove_db(target.path)
                store = SqliteStore(target.path)
            try:
                chosen = list(roots) or store.roots() or [default_root]
                store.start_bulk()
                store.begin()
                store.set_meta("roots", msgspec.json.encode(sorted(chosen)).decode())
                store.commit()
                p.begin("rebuilding", max(_tree_bytes(chosen), 1))
                try:
                    for r in chosen:  # a KIND:PATH root is a foreign tree (sync --source)
                        engine_for(store, r, progress=p.advance).rescan()
                finally:
                    p.end()
                store.rebuild_fts()
                store.finish_bulk()
                _finish_substrings(store, engine_for(store, chosen[0]), p)
                n = store.session_count()
                store.checkpoint()
            finally:
                store.close()
    finally:
        lock.release()
    return RebuildReport(chosen, n)


def _rebuild_shared(
    target: PgTarget, roots: Sequence[str], origin: str, default_root: str, p: Progress
) -> RebuildReport:
    from jsonltape_daemon.engines.postgres.store import PgStore

    store = PgStore(target.url, origin)
    try:
        chosen = list(roots) or store.roots() or [default_root]
        store.drop_origin()
        for r in chosen:
            store.add_root(r)
        p.begin("pushing", max(_tree_bytes(chosen), 1))
        try:
            for r in chosen:
                engine_for(store, r, progress=p.advance).rescan()
        finally:
            p.end()
        return RebuildReport(chosen, store.session_count())
    finally:
        store.close()


def optimize(target: Target) -> list[str]:
    """Compact the index (merge the full-text segments; on PostgreSQL VACUUM ANALYZE, which
    needs the owner role); what was done, one item per table or step."""
    if isinstance(target, PgTarget):
        from jsonltape_daemon.engines.postgres.admin import optimize as pg_optimize

        return pg_optimize(target)
    if not target.path.exists():
        raise IndexStateError(f"{target.path}: no index here yet")
    lock = index_lock(target.path)
    try:
        with storage_errors(target.path):
            store = SqliteStore(target.path)
            try:
                store.begin()
                store.optimize()
                store.commit()
            finally:
                store.close()
    finally:
        lock.release()
    return ["full-text tables merged"]


def status(target: Target, *, origin: str | None = None) -> dict[str, Any]:
    """What the index holds: counts, sizes per table, problems (local); per origin counts and
    lag (team; ``origin`` is the one whose unpushed bytes are counted)."""
    if isinstance(target, PgTarget):
        from jsonltape_daemon.engines.postgres.status import shared_status

        return shared_status(target.url, name=str(target), origin=_need_origin(origin))
    from jsonltape_daemon.engines.sqlite.status import local_status

    return local_status(target.path)
