"""An index that cannot be written (a full disk, an I/O error) as the library's
:class:`~jsonltape.errors.StorageError`: one line naming the index, exit 5 from the CLI.

SQLite reports a full disk as ``sqlite3.OperationalError`` (``SQLITE_FULL``: "database or disk
is full") and a failed read or write as one of the ``SQLITE_IOERR`` codes, wherever a statement
happened to need a page: in a commit, an insert, a ``PRAGMA`` of :func:`schema.connect`. A
transaction that fails so is rolled back by SQLite and by the store; a bulk load is thrown away
before it is published. What was committed stays, so the next sync, once there is room again,
goes on from the registry's cursors and gives the rows a clean sync gives.
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from jsonltape.errors import StorageError

__all__ = ["storage_error", "storage_errors"]

#: SQLite's codes for no more room: the database (or its journal) cannot grow, or the
#: shared-memory file of a WAL index cannot be made (``SHMSIZE``: every connection needs it).
_FULL = frozenset({"SQLITE_FULL", "SQLITE_IOERR_SHMSIZE"})
#: OS errors that mean no more room to write (the index is the only file a sync writes).
_NO_ROOM = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def storage_error(exc: BaseException, index: Path | str) -> StorageError | None:
    """``exc`` as a :class:`StorageError` naming ``index``, or None when it is not a failure
    to store (a bad statement, a locked database, a damaged file are not)."""
    if isinstance(exc, sqlite3.Error):
        # sqlite_errorname is Python 3.11's; before it, SQLite's messages for the two codes
        name = getattr(exc, "sqlite_errorname", None) or _name_of(str(exc))
        if name in _FULL:
            return StorageError(
                f"no room left to write the index ({exc}, {name}); what it had committed is "
                "kept: free some space and try again",
                errno=errno.ENOSPC,
                path=index,
            )
        if name is not None and name.startswith("SQLITE_IOERR"):
            return StorageError(
                f"the index could not be read or written ({exc}, {name}); what it had "
                "committed is kept: try again once the disk is healthy",
                errno=errno.EIO,
                path=index,
            )
        return None
    if isinstance(exc, OSError) and not isinstance(exc, StorageError) and exc.errno in _NO_ROOM:
        where = f" ({exc.filename})" if exc.filename else ""
        return StorageError(
            f"no room left to write the index{where}: {exc.strerror}; what it had committed "
            "is kept: free some space and try again",
            errno=exc.errno,
            path=index,
        )
    return None


def _name_of(message: str) -> str | None:
    if message.startswith("database or disk is full"):
        return "SQLITE_FULL"
    if message.startswith("disk I/O error"):
        return "SQLITE_IOERR"
    return None


@contextmanager
def storage_errors(index: Path | str) -> Iterator[None]:
    """Raise the failures to store that happen inside as :class:`StorageError`."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        err = storage_error(exc, index)
        if err is None:
            raise
        raise err from exc
