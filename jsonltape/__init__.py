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

    jsonltape.messages("s.jsonl", format="openai")   # the request body a model would get
"""

from __future__ import annotations

from .errors import (
    ConcurrentModificationError,
    CorruptError,
    FoldError,
    FormatError,
    InvalidArgumentError,
    InvalidEventError,
    InvalidSessionIdError,
    JsonltapeError,
    LockedError,
    NotLosslessError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
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
from .fold import (
    Compaction,
    FileLedger,
    ForkInfo,
    LedgerConfig,
    MergeResult,
    SurfaceFold,
    compact,
    discard,
    fork,
    handoff,
    merge,
    message_text,
    messages,
    prune,
    request_header,
    restore,
    retract,
    revise,
    todo,
)
from .ids import new_session_id, validate_session_id
from .reader import Report, header, lines, read, verify
from .repair import RepairResult, repair
from .writer import Durability, Tape, TurnHandle, open

__version__ = "0.1.0"

__all__ = [
    "FORMAT",
    "VERSION",
    "Compaction",
    "ConcurrentModificationError",
    "CorruptError",
    "Durability",
    "Event",
    "FileLedger",
    "FoldError",
    "ForkInfo",
    "FormatError",
    "HeaderData",
    "InvalidArgumentError",
    "InvalidEventError",
    "InvalidSessionIdError",
    "JsonltapeError",
    "LedgerConfig",
    "Line",
    "LockedError",
    "MergeResult",
    "Message",
    "NotLosslessError",
    "ParentRef",
    "RepairResult",
    "Replace",
    "Report",
    "Retract",
    "SessionExistsError",
    "SessionNotFoundError",
    "StorageError",
    "SurfaceError",
    "SurfaceFold",
    "Tape",
    "TurnHandle",
    "UnknownEventTypeError",
    "UnsafeFileError",
    "UnsupportedVersionError",
    "WriterFailedError",
    "__version__",
    "compact",
    "discard",
    "fork",
    "handoff",
    "header",
    "lines",
    "merge",
    "message_text",
    "messages",
    "new_session_id",
    "open",
    "prune",
    "read",
    "repair",
    "request_header",
    "restore",
    "retract",
    "revise",
    "todo",
    "validate_session_id",
    "verify",
]
