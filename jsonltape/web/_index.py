"""The viewer's access to the index: one reader per worker thread, sessions found by id.

Only the index's reader interface (``jsonltape_daemon.search.reader``) is used: no SQL here
or in a route. A session is addressed by its session id (checked by the library's id rule
before it reaches the index, so a path in a request is never looked up, let alone opened),
narrowed by origin and index key when the same id is indexed more than once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from jsonltape_daemon.search.language import SessionInfo
from jsonltape_daemon.search.reader import Reader, open_reader
from jsonltape_daemon.target import Target

from jsonltape import InvalidSessionIdError, validate_session_id

__all__ = ["Found", "Index", "key_text"]

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
    """Readers of one index, one per thread (a SQLite connection stays in its thread; a
    PostgreSQL connection serves one query at a time)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.name = str(target)
        self._local = threading.local()

    def run(self, fn: Callable[[Reader], T]) -> T:
        """``fn`` with this thread's reader; a reader that failed is dropped (the next call
        opens a new one: a PostgreSQL server that went away and came back)."""
        reader: Reader | None = getattr(self._local, "reader", None)
        if reader is None:
            reader = open_reader(self.target)
            self._local.reader = reader
        try:
            return fn(reader)
        except Exception:
            self._local.reader = None
            try:
                reader.close()
            except Exception:  # pragma: no cover - closing a broken connection
                pass
            raise

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
