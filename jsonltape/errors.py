"""The one exception hierarchy of jsonltape.

Every error the library raises on purpose derives from :class:`JsonltapeError` and carries
*where* it happened: the file path, the 1-based line number, the byte offset of that line and,
for bad event data, the field path inside the event (``$.data.message.parts[0].content``).
Only the command line turns these into exit codes; the library never exits.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ConcurrentModificationError",
    "CorruptError",
    "FoldError",
    "FormatError",
    "InvalidEventError",
    "InvalidSessionIdError",
    "JsonltapeError",
    "LockedError",
    "NotLosslessError",
    "SessionNotFoundError",
    "SurfaceError",
    "UnknownEventTypeError",
    "UnsafeFileError",
    "UnsupportedVersionError",
    "WriterFailedError",
]


class JsonltapeError(Exception):
    """Root of every error raised by jsonltape on purpose."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        offset: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.offset = offset
        self.field = field
        #: Index of the offending event within an ``append_batch`` call, if any.
        self.batch_item: int | None = None

    def where(self) -> str:
        """Return the location part of the message, e.g. ``s.jsonl: line 3, byte 120, $.data``."""
        loc: list[str] = []
        if self.line is not None:
            loc.append(f"line {self.line}")
        if self.offset is not None:
            loc.append(f"byte {self.offset}")
        if self.field is not None:
            loc.append(self.field)
        parts = [self.path] if self.path is not None else []
        if loc:
            parts.append(", ".join(loc))
        return ": ".join(parts)

    def __str__(self) -> str:
        where = self.where()
        return f"{where}: {self.message}" if where else self.message


class InvalidEventError(JsonltapeError, ValueError):
    """An event handed to the writer breaks a format rule; nothing was written."""


class NotLosslessError(InvalidEventError):
    """Event data would not survive a JSON round trip unchanged (NaN, bytes, sets, ...)."""


class SurfaceError(InvalidEventError):
    """A surface operation (append/replace/retract) or its ``sources`` breaks a fold rule."""


class InvalidSessionIdError(InvalidEventError):
    """A session id outside the safe character set ``[A-Za-z0-9._-]`` (1-128 chars)."""


class FoldError(JsonltapeError, ValueError):
    """A fold request names something that is not there (a seq past the end, a wrong parent,
    a discarded fork, ...). Nothing was written."""


class FormatError(JsonltapeError):
    """The file is not a jsonltape session (bad or missing header, not JSON, ...)."""


class UnsupportedVersionError(FormatError):
    """The file was written by a newer major version of the format."""


class UnknownEventTypeError(FormatError):
    """Folding met an event type it does not know that is not marked ``ignorable``."""


class CorruptError(JsonltapeError):
    """Damage before the last checkpoint: media damage or a bad edit, not a crash."""


class SessionNotFoundError(JsonltapeError, FileNotFoundError):
    """The session file does not exist."""


class UnsafeFileError(JsonltapeError, PermissionError):
    """A symlink, a file owned by another user, or a group/world-writable file or directory."""


class LockedError(JsonltapeError):
    """Another writer holds the session's lock."""


class ConcurrentModificationError(JsonltapeError):
    """The file changed under the writer (truncated, replaced or appended by someone else)."""


class WriterFailedError(JsonltapeError):
    """The writer hit an I/O error (for example a failed fsync) and refuses further work."""
