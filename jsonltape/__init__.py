"""jsonltape: crash-safe, append-only JSONL session logs for AI agents.

One import gives an agent everything it needs::

    import jsonltape

    with jsonltape.open("s.jsonl", create=True, title="demo") as tape:
        with tape.turn():
            tape.user("hello")
            tape.assistant("hi there")
        tape.flush()  # returns only once everything above is durable

    for event in jsonltape.read("s.jsonl"):
        print(event.seq, event.type)
"""

from __future__ import annotations

from .errors import (
    ConcurrentModificationError,
    CorruptError,
    FormatError,
    InvalidEventError,
    InvalidSessionIdError,
    JsonltapeError,
    LockedError,
    NotLosslessError,
    SessionNotFoundError,
    SurfaceError,
    UnknownEventTypeError,
    UnsafeFileError,
    UnsupportedVersionError,
    WriterFailedError,
)
from .events import (
    FORMAT,
    VERSION,
    Event,
    HeaderData,
    Line,
    Message,
    ParentRef,
    Replace,
    Retract,
)
from .ids import new_session_id, validate_session_id
from .reader import Report, header, lines, read, verify
from .repair import RepairResult, repair
from .writer import Durability, Tape, TurnHandle, open

__version__ = "0.1.0"

__all__ = [
    "FORMAT",
    "VERSION",
    "ConcurrentModificationError",
    "CorruptError",
    "Durability",
    "Event",
    "FormatError",
    "HeaderData",
    "InvalidEventError",
    "InvalidSessionIdError",
    "JsonltapeError",
    "Line",
    "LockedError",
    "Message",
    "NotLosslessError",
    "ParentRef",
    "RepairResult",
    "Replace",
    "Report",
    "Retract",
    "SessionNotFoundError",
    "SurfaceError",
    "Tape",
    "TurnHandle",
    "UnknownEventTypeError",
    "UnsafeFileError",
    "UnsupportedVersionError",
    "WriterFailedError",
    "__version__",
    "header",
    "lines",
    "new_session_id",
    "open",
    "read",
    "repair",
    "validate_session_id",
    "verify",
]
