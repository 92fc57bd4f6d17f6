"""The viewer's access to the index: one reader per worker thread, sessions found by id.

Only the index's reader interface (``jsonltape_daemon.search.reader``) is used: no SQL here
or in a route. A session is addressed by its session id (checked by the library's id rule
before it reaches the index, so a path in a request is never looked up, let alone opened),
narrowed by origin and index key when the same id is indexed more than once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from jsonltape_daemon.errors import SearchStoppedError
from jsonltape_daemon.search.language import SessionInfo
from jsonltape_daemon.search.reader import Reader, open_reader
from jsonltape_daemon.target import Target

from jsonltape import InvalidSessionIdError, validate_session_id

__all__ = ["READERS", "Found", "Index", "key_text"]

#: Readers of the index at most (each query takes one; the others wait).
READERS = 4
#: Answers :meth:`Index.memo` keeps at most (then it starts afresh).
MEMO_MAX = 4096

T = TypeVar("T")


class Found:
    """A session the index holds: its key (for ``window`` and ``statuses``) and its row."""

    __slots__ = ("info", "key")

    def __init__(self, key: Any, info: SessionInfo) -> None:
        self.key, self.info = key, info

    @property
    def origin(self) -> str | None:
        origin = getattr(self.info, "origin", None)
        return origin if isinstance(origin, str) else None


def key_text(key: Any) -> str:
    """The part of an index key a link carries to tell two sessions with one id apart."""
    return str(key[1] if isinstance(key, tuple) else key)


class Index:
    """The readers of one index: a few threads, each with its own reader (a SQLite connection
    stays in the thread that opened it; a PostgreSQL connection serves one query at a time),
    that run every index call of the server's worker threads. A reader holds a page cache and
    a map of the file, so one per worker thread grew the server by ~20 MB a thread (20
    transcripts at once: 51 -> 488 MB); a worker waits for a free reader instead."""

    def __init__(self, target: Target, readers: int = READERS) -> None:
        self.target = target
        self.name = str(target)
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(readers, thread_name_prefix="jsonltape-index")
        self._memo: dict[object, tuple[float, object]] = {}
        self._memo_lock = threading.Lock()
        #: Searches stopped because no one wanted their hits any more (their client left).
        self.stopped = 0

    def run(self, fn: Callable[[Reader], T]) -> T:
        """``fn`` called with a reader, in a reader thread; its result or its exception."""
        return self.submit(fn).result()

    def submit(self, fn: Callable[[Reader], T]) -> Future[T]:
        """:meth:`run`, without waiting: the future of its result (an async route awaits it)."""
        return self._pool.submit(self._call, fn)

    def _call(self, fn: Callable[[Reader], T]) -> T:
        reader: Reader | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = open_reader(self.target)
            self._local.reader = reader
        try:
            return fn(reader)
        except SearchStoppedError:
            with self._memo_lock:
                self.stopped += 1  # the reader is fine: its search was only cut short
            raise
        except Exception:
            # a reader that failed is dropped: the next call opens a new one (a PostgreSQL
            # server that went away and came back)
            self._local.reader = None
            try:
                reader.close()
            except Exception:  # pragma: no cover - closing a broken connection
                pass
            raise

    def memo(self, key: object, seconds: float, fn: Callable[[Reader], T]) -> T:
        """``run(fn)``, kept for ``seconds`` under ``key`` (one call at a time computes it:
        twenty pages of one session asked at once cost one query)."""
        with self._memo_lock:
            hit = self._memo.get(key)
            if hit is not None and time.monotonic() - hit[0] < seconds:
                return hit[1]  # type: ignore[return-value]
            value = self.run(fn)
            if len(self._memo) >= MEMO_MAX:
                self._memo.clear()
            self._memo[key] = (time.monotonic(), value)
            return value

    def close(self) -> None:
        """Stop the reader threads (their readers close with them)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def find(
        self, session_id: str, *, origin: str | None = None, n: str | None = None
    ) -> list[Found]:
        """The indexed sessions with id ``session_id`` (of ``origin``; the one whose key is
        ``n``, when given); an id the library would refuse finds nothing."""
        try:
            validate_session_id(session_id)
        except InvalidSessionIdError:
            return []
        origins = (origin,) if origin else ()
        found = self.run(lambda r: r.resolve(session_id, origins=origins))
        out = [Found(key, info) for key, info in found if info.session == session_id]
        if n is not None:
            out = [f for f in out if key_text(f.key) == n]
        return out
