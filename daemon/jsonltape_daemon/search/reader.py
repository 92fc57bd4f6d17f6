"""Read an index, whatever its engine: search, the session list, a session's transcript.

``open_reader(target)`` gives a :class:`Reader` over a SQLite file (``search.py``) or a
PostgreSQL database (``pg_search.py``); the CLI and the terminal UI use only this, so neither
holds SQL nor knows which engine answers. The query language, the filters and the hit and
session types are the same for both; a PostgreSQL hit or session also names its ``origin``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from jsonltape.usage import UsageSource
from jsonltape_daemon.engines.sqlite import listing
from jsonltape_daemon.engines.sqlite import search as s
from jsonltape_daemon.errors import IndexStateError, SearchStoppedError
from jsonltape_daemon.search.language import SessionPage, SessionQuery
from jsonltape_daemon.target import PgTarget, SqliteTarget, Target

if TYPE_CHECKING:
    from jsonltape.usage import SessionNode
    from jsonltape_daemon.engines.postgres.usage import UsageQueries
    from jsonltape_daemon.engines.sqlite.usage import UsageReads

__all__ = ["STOP_POLL", "STOP_STEPS", "Reader", "cancel_when", "open_reader"]


class Reader(UsageSource, Protocol):
    """A read-only view of one index (and the sums usage reports read,
    ``jsonltape.usage.UsageSource``)."""

    name: str  #: the index as shown to people (a path, or a URL without its password)

    def notes(self) -> list[str]:
        """Warnings about what searches may miss right now (an index still being built)."""
        ...

    def search(
        self,
        query: str,
        filters: s.Filters,
        limit: int,
        *,
        phrases: Sequence[str] = (),
        sort: s.Sort = "relevance",
        origins: Sequence[str] = (),
        stop: Callable[[], bool] | None = None,
    ) -> list[s.Hit]:
        """The hits of ``query``. ``stop``, when given, is asked while the search runs (from
        this thread, or another); once it says True the search ends with
        :class:`~.errors.SearchStoppedError` instead of running on for no one."""
        ...

    def sessions(
        self, *, limit: int | None = None, path: str | None = None, origins: Sequence[str] = ()
    ) -> list[s.SessionInfo]: ...

    def resolve(self, ref: str, *, origins: Sequence[str] = ()) -> list[tuple[Any, s.SessionInfo]]:
        """Sessions matching a path, an id or an id prefix: ``(key, info)`` pairs."""
        ...

    def window(self, key: Any, *, last: int, before: int | None) -> s.Window: ...

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        """One page of the sessions that pass ``query`` (a viewer's list), and their number."""
        ...

    def facets(self) -> dict[str, list[tuple[str, int]]]:
        """The values of ``agent``, ``cwd`` and ``origin`` with their numbers of sessions."""
        ...

    def statuses(self, key: Any, lo: int, hi: int) -> dict[int, str]:
        """seq -> status of the messages of session ``key`` with ``lo <= seq < hi``."""
        ...

    def close(self) -> None: ...


class _SqliteReader:
    def __init__(self, con: sqlite3.Connection, name: str) -> None:
        self.con, self.name = con, name
        self._reads: UsageReads | None = None

    def notes(self) -> list[str]:
        return s.notes(self.con)

    def search(
        self,
        query: str,
        filters: s.Filters,
        limit: int,
        *,
        phrases: Sequence[str] = (),
        sort: s.Sort = "relevance",
        origins: Sequence[str] = (),
        stop: Callable[[], bool] | None = None,
    ) -> list[s.Hit]:
        if origins:
            return []  # a local index holds this machine's sessions only: no origin names them
        if stop is None:
            return s.search(self.con, query, filters, limit, phrases=phrases, sort=sort)
        _stopped(stop)
        # every STOP_STEPS steps of SQLite's machine: a search's Python work between its
        # statements is short, each batch of texts it reads is a statement
        self.con.set_progress_handler(stop, STOP_STEPS)
        try:
            hits = s.search(self.con, query, filters, limit, phrases=phrases, sort=sort)
        except sqlite3.OperationalError:
            _stopped(stop)
            raise
        finally:
            self.con.set_progress_handler(None, 0)
        _stopped(stop)  # a statement it stopped that the search got past: hits may be missing
        return hits

    def sessions(
        self, *, limit: int | None = None, path: str | None = None, origins: Sequence[str] = ()
    ) -> list[s.SessionInfo]:
        return [] if origins else s.sessions(self.con, limit=limit, path=path)

    def resolve(self, ref: str, *, origins: Sequence[str] = ()) -> list[tuple[Any, s.SessionInfo]]:
        return [] if origins else list(s.resolve_session(self.con, ref))

    def window(self, key: Any, *, last: int, before: int | None) -> s.Window:
        return s.window(self.con, int(key), last=last, before=before)

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        return listing.list_sessions(self.con, query)

    def facets(self) -> dict[str, list[tuple[str, int]]]:
        return listing.facets(self.con)

    def statuses(self, key: Any, lo: int, hi: int) -> dict[int, str]:
        return listing.statuses(self.con, int(key), lo, hi)

    # -- token usage: this machine's sessions, under its origin name ----------------------

    @property
    def _usage(self) -> UsageReads:
        from jsonltape_daemon.engines.sqlite.usage import UsageReads
        from jsonltape_daemon.origin import default_origin
        from jsonltape_daemon.paths import data_dir

        if self._reads is None:
            self._reads = UsageReads(self.con, default_origin(data_dir()))
        return self._reads

    def _mine(self, origins: Sequence[str]) -> bool:
        return not origins or self._usage.origin in origins

    def usage_check(self) -> None:
        from jsonltape_daemon.engines.sqlite.usage import usage_check

        usage_check(self.con)

    def usage_span(self, origins: Sequence[str]) -> tuple[int, int] | None:
        return self._usage.span() if self._mine(origins) else None

    def usage_days(
        self,
        shifts: Sequence[tuple[int, int]],
        lo: int | None,
        hi: int | None,
        dims: Sequence[str],
        origins: Sequence[str],
    ) -> Iterable[tuple[Any, ...]]:
        return self._usage.days(shifts, lo, hi, dims) if self._mine(origins) else []

    def usage_by_session(
        self,
        lo: int | None,
        hi: int | None,
        origins: Sequence[str],
        keys: Sequence[Any] | None = None,
    ) -> Iterable[tuple[Any, ...]]:
        return self._usage.by_session(lo, hi, keys) if self._mine(origins) else []

    def usage_sessions(self, origins: Sequence[str]) -> Iterable[SessionNode]:
        return self._usage.sessions() if self._mine(origins) else []

    def usage_responses(
        self, lo: int | None, hi: int | None, origins: Sequence[str]
    ) -> Iterable[tuple[Any, ...]]:
        return self._usage.responses(lo, hi) if self._mine(origins) else []

    def close(self) -> None:
        self.con.close()


class _PgReader:
    def __init__(self, con: Any, target: PgTarget) -> None:
        from jsonltape_daemon.engines.postgres.schema import SCHEMA

        self.con, self.name, self._target = con, str(target), target
        self._schema = SCHEMA
        self._queries: UsageQueries | None = None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        import psycopg

        from jsonltape_daemon.engines.postgres.conn import failure

        try:
            return fn(*args, **kwargs)
        except psycopg.Error as exc:
            raise failure(self._target, self.con, exc) from None

    def notes(self) -> list[str]:
        return []  # every PostgreSQL index is complete once its rows are committed

    def search(
        self,
        query: str,
        filters: s.Filters,
        limit: int,
        *,
        phrases: Sequence[str] = (),
        sort: s.Sort = "relevance",
        origins: Sequence[str] = (),
        stop: Callable[[], bool] | None = None,
    ) -> list[s.Hit]:
        from jsonltape_daemon.engines.postgres import search as pg_search

        def run() -> list[s.Hit]:
            return list(
                self._call(
                    pg_search.search,
                    self.con,
                    query,
                    filters,
                    limit,
                    phrases=phrases,
                    sort=sort,
                    origins=origins,
                )
            )

        if stop is None:
            return run()
        _stopped(stop)
        try:
            with cancel_when(self.con, stop):
                hits = run()
        except IndexStateError:
            _stopped(stop)  # the server cancelled the statement we asked it to
            raise
        _stopped(stop)
        return hits

    def sessions(
        self, *, limit: int | None = None, path: str | None = None, origins: Sequence[str] = ()
    ) -> list[s.SessionInfo]:
        from jsonltape_daemon.engines.postgres import sessions as pg_sessions

        return list(
            self._call(pg_sessions.sessions, self.con, limit=limit, path=path, origins=origins)
        )

    def resolve(self, ref: str, *, origins: Sequence[str] = ()) -> list[tuple[Any, s.SessionInfo]]:
        from jsonltape_daemon.engines.postgres import sessions as pg_sessions

        return list(self._call(pg_sessions.resolve_session, self.con, ref, origins=origins))

    def window(self, key: Any, *, last: int, before: int | None) -> s.Window:
        from jsonltape_daemon.engines.postgres import sessions as pg_sessions

        result: s.Window = self._call(pg_sessions.window, self.con, key, last=last, before=before)
        return result

    def list_sessions(self, query: SessionQuery) -> SessionPage:
        from jsonltape_daemon.engines.postgres import listing as pg_listing

        page: SessionPage = self._call(pg_listing.list_sessions, self.con, query)
        return page

    def facets(self) -> dict[str, list[tuple[str, int]]]:
        from jsonltape_daemon.engines.postgres import listing as pg_listing

        found: dict[str, list[tuple[str, int]]] = self._call(pg_listing.facets, self.con)
        return found

    def statuses(self, key: Any, lo: int, hi: int) -> dict[int, str]:
        from jsonltape_daemon.engines.postgres import listing as pg_listing

        key = (str(key[0]), int(key[1]))
        found: dict[int, str] = self._call(pg_listing.statuses, self.con, key, lo, hi)
        return found

    # -- token usage: every origin's, each response counted once over all of them -------

    @property
    def _usage(self) -> UsageQueries:
        from jsonltape_daemon.engines.postgres.usage import UsageQueries

        if self._queries is None:
            self._queries = UsageQueries(self.con, self._schema)
        return self._queries

    def usage_check(self) -> None:
        self._call(self._usage.check)

    def usage_span(self, origins: Sequence[str]) -> tuple[int, int] | None:
        span: tuple[int, int] | None = self._call(self._usage.span, origins)
        return span

    def usage_days(
        self,
        shifts: Sequence[tuple[int, int]],
        lo: int | None,
        hi: int | None,
        dims: Sequence[str],
        origins: Sequence[str],
    ) -> Iterable[tuple[Any, ...]]:
        return list(self._call(self._usage.days, shifts, lo, hi, dims, origins))

    def usage_by_session(
        self,
        lo: int | None,
        hi: int | None,
        origins: Sequence[str],
        keys: Sequence[Any] | None = None,
    ) -> Iterable[tuple[Any, ...]]:
        rows = list(self._call(self._usage.by_session, lo, hi, origins))
        if keys is None:
            return rows
        # these sessions' rows of the whole: the rule that counts a session two origins hold
        # once needs every origin of the report, not only theirs
        wanted = {(str(k[0]), int(k[1])) for k in keys}
        return [r for r in rows if tuple(r[0]) in wanted]

    def usage_sessions(self, origins: Sequence[str]) -> Iterable[SessionNode]:
        return list(self._call(self._usage.sessions, origins))

    def usage_responses(
        self, lo: int | None, hi: int | None, origins: Sequence[str]
    ) -> Iterable[tuple[Any, ...]]:
        return list(self._call(self._usage.responses, lo, hi, origins))

    def close(self) -> None:
        self.con.close()


#: SQLite machine steps between two questions to a search's ``stop`` (about 0.1 ms each).
STOP_STEPS = 1000
#: Seconds between two questions to a PostgreSQL search's ``stop`` (its server is asked to
#: cancel the statement running when it says True).
STOP_POLL = 0.02


def _stopped(stop: Callable[[], bool]) -> None:
    if stop():
        raise SearchStoppedError("the search was stopped: no one wants its hits any more")


@contextmanager
def cancel_when(con: Any, stop: Callable[[], bool]) -> Iterator[None]:
    """While the block runs, a thread asks ``stop`` every :data:`STOP_POLL` seconds and, once
    it says True, has the server cancel the statement ``con`` runs (its query then raises
    ``QueryCanceled``); the block's end waits for that thread."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(STOP_POLL):
            if stop():
                con.cancel_safe()
                return

    watcher = threading.Thread(target=watch, name="jsonltape-search-stop", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def open_reader(target: Target) -> Reader:
    """A reader of the index ``target`` names (:class:`~.errors.IndexStateError` if there is
    none yet, or it cannot be read; :class:`~.errors.EngineMissingError` without psycopg)."""
    if isinstance(target, SqliteTarget):
        from jsonltape_daemon.engines.sqlite.schema import connect

        return _SqliteReader(connect(target.path, readonly=True), str(target.path))
    assert isinstance(target, PgTarget)
    from jsonltape_daemon.engines.postgres.conn import (
        read_only,  # the PostgreSQL driver's door: not on a local query's path
    )

    return _PgReader(read_only(target), target)
