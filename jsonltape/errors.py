"""The one exception hierarchy of jsonltape.

Every error the library raises on purpose derives from :class:`JsonltapeError` and carries
*where* it happened: the file path, the 1-based line number, the byte offset of that line and,
for bad event data, the field path inside the event (``$.data.message.parts[0].content``).
These are read-only constructor arguments (filelock's ``Timeout`` is the model); a caller that
learns more about the place, such as the file a fold was reading, raises a located copy made
by :meth:`JsonltapeError.at`.

Each class has a stable :attr:`~JsonltapeError.code` (documented in the README beside the exit
codes), so scripts tell kinds apart without parsing messages. Only the command line turns
errors into exit codes; the library never exits.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import ClassVar, TypeVar

__all__ = [
    "ConcurrentModificationError",
    "CorruptError",
    "FoldError",
    "FormatError",
    "GitError",
    "InvalidArgumentError",
    "InvalidEventError",
    "InvalidSessionIdError",
    "JsonltapeError",
    "LockedError",
    "NotLosslessError",
    "SessionExistsError",
    "SessionNotFoundError",
    "StorageError",
    "SurfaceError",
    "UnknownEventTypeError",
    "UnsafeFileError",
    "UnsupportedVersionError",
    "WriterFailedError",
]

_E = TypeVar("_E", bound="JsonltapeError")
_KEEP: object = object()


class JsonltapeError(Exception):
    """Root of every error raised by jsonltape on purpose."""

    #: A stable name for the kind of error, e.g. ``"corrupt"``; never changes between releases.
    code: ClassVar[str] = "error"

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        offset: int | None = None,
        field: str | None = None,
        batch_item: int | None = None,
    ) -> None:
        super().__init__(message)
        self._message = message
        self._path = str(path) if path is not None else None
        self._line = line
        self._offset = offset
        self._field = field
        self._batch_item = batch_item

    @property
    def message(self) -> str:
        """What is wrong, without the place."""
        return self._message

    @property
    def path(self) -> str | None:
        """The file the error is about, if any."""
        return self._path

    @property
    def line(self) -> int | None:
        """The 1-based line number (seq + 1), if the error is about one line."""
        return self._line

    @property
    def offset(self) -> int | None:
        """The byte offset where that line starts."""
        return self._offset

    @property
    def field(self) -> str | None:
        """The field path inside the event, e.g. ``$.data.message``."""
        return self._field

    @property
    def batch_item(self) -> int | None:
        """The index of the offending event within an ``append_batch`` call, if any."""
        return self._batch_item

    def at(
        self: _E,
        *,
        path: str | Path | object | None = _KEEP,
        line: int | object | None = _KEEP,
        offset: int | object | None = _KEEP,
        field: str | object | None = _KEEP,
        batch_item: int | object | None = _KEEP,
    ) -> _E:
        """Return a copy of this error with some of its location replaced (the rest kept).

        The copy keeps the cause, so ``raise exc.at(path=p) from exc.__cause__`` loses nothing.
        """
        new = copy.copy(self)
        if path is not _KEEP:
            new._path = str(path) if path is not None else None
        if line is not _KEEP:
            new._line = line  # type: ignore[assignment]
        if offset is not _KEEP:
            new._offset = offset  # type: ignore[assignment]
        if field is not _KEEP:
            new._field = field  # type: ignore[assignment]
        if batch_item is not _KEEP:
            new._batch_item = batch_item  # type: ignore[assignment]
        new.__cause__ = self.__cause__
        new.__traceback__ = None
        return new

    def where(self) -> str:
        """Return the location part of the message, e.g. ``s.jsonl: line 3, byte 120, $.data``."""
        loc: list[str] = []
        if self._line is not None:
            loc.append(f"line {self._line}")
        if self._offset is not None:
            loc.append(f"byte {self._offset}")
        if self._field is not None:
            loc.append(self._field)
        parts = [self._path] if self._path is not None else []
        if loc:
            parts.append(", ".join(loc))
        return ": ".join(parts)

    def __str__(self) -> str:
        where = self.where()
        return f"{where}: {self._message}" if where else self._message

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only constructor data survives pickling (errors cross process pools).
        return (_rebuild, (type(self),), dict(self.__dict__))


def _rebuild(cls: type[_E]) -> _E:
    return cls.__new__(cls)


class InvalidEventError(JsonltapeError, ValueError):
    """An event handed to the writer breaks a format rule; nothing was written."""

    code = "invalid-event"


class InvalidArgumentError(InvalidEventError):
    """A library call got an argument it cannot use (a path with NUL, a NaN timeout, an
    unknown durability); ``field`` names the argument. Nothing was written."""

    code = "bad-argument"


class NotLosslessError(InvalidEventError):
    """Event data would not survive a JSON round trip unchanged (NaN, bytes, sets, ...)."""

    code = "not-lossless"


class SurfaceError(InvalidEventError):
    """A surface operation (append/replace/retract) or its ``sources`` breaks a fold rule."""

    code = "bad-surface"


class InvalidSessionIdError(InvalidEventError):
    """A session id outside the safe character set ``[A-Za-z0-9._-]`` (1-128 chars)."""

    code = "bad-session-id"


class FoldError(JsonltapeError, ValueError):
    """A fold request names something that is not there (a seq past the end, a wrong parent,
    a discarded fork, ...). Nothing was written."""

    code = "fold"


class FormatError(JsonltapeError):
    """The file is not a jsonltape session (bad or missing header, not JSON, ...)."""

    code = "not-a-session"


class UnsupportedVersionError(FormatError):
    """The file was written by a newer major version of the format (or names no version)."""

    code = "unsupported-version"


class UnknownEventTypeError(FormatError):
    """Folding (or the writer) met an event type it does not know that is not ``ignorable``."""

    code = "unknown-type"

    def __init__(
        self,
        message: str,
        *,
        type: str,
        path: str | Path | None = None,
        line: int | None = None,
        offset: int | None = None,
        field: str | None = None,
        batch_item: int | None = None,
    ) -> None:
        super().__init__(
            message, path=path, line=line, offset=offset, field=field, batch_item=batch_item
        )
        self._type = type

    @property
    def type(self) -> str:
        """The unknown event type."""
        return self._type


class CorruptError(JsonltapeError):
    """Damage before the last checkpoint: media damage or a bad edit, not a crash."""

    code = "corrupt"


class SessionNotFoundError(JsonltapeError, FileNotFoundError):
    """The session file does not exist."""

    code = "not-found"


class SessionExistsError(JsonltapeError, FileExistsError):
    """A session was to be created where a file already exists; nothing was written."""

    code = "exists"


class UnsafeFileError(JsonltapeError, PermissionError):
    """A symlink, a file owned by another user, or a group/world-writable file or directory."""

    code = "unsafe-file"


class LockedError(JsonltapeError, TimeoutError):
    """Another writer holds the session (raised ``from`` the lock library's timeout)."""

    code = "locked"


class ConcurrentModificationError(JsonltapeError):
    """The file changed under the writer (truncated, replaced or appended by someone else)."""

    code = "changed-underneath"


class GitError(JsonltapeError):
    """``git`` is missing, or a git command jsonltape ran failed (its message is git's)."""

    code = "git"


class StorageError(JsonltapeError, OSError):
    """The operating system refused or failed an I/O operation (a lock file that cannot be
    created, a full disk, EIO); ``errno`` is the OS error's."""

    code = "io"

    def __init__(
        self,
        message: str,
        *,
        errno: int | None = None,
        path: str | Path | None = None,
        line: int | None = None,
        offset: int | None = None,
        field: str | None = None,
        batch_item: int | None = None,
    ) -> None:
        super().__init__(
            message, path=path, line=line, offset=offset, field=field, batch_item=batch_item
        )
        # OSError's own attributes, so code that handles OSError sees the errno it expects.
        self.errno = errno
        self.strerror = message
        self.filename = self._path

    def __str__(self) -> str:
        return JsonltapeError.__str__(self)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_storage, (type(self), self.errno), dict(self.__dict__))


def _rebuild_storage(cls: type[StorageError], errno: int | None) -> StorageError:
    new = cls.__new__(cls)
    new.errno = errno
    return new


class WriterFailedError(StorageError):
    """The writer hit an I/O error (for example a failed fsync) and refuses further work."""

    code = "writer-failed"
