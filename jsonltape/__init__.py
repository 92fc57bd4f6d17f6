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

Every public name loads its module on first use: ``import jsonltape`` itself imports nothing
else, so a script that only reads never loads the writer's lock library, and one that only
writes never loads the fold or the importers (issue 11: a command starts in a few tens of ms).
Type checkers and IDEs see every name through the imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType

# Not `from typing import TYPE_CHECKING`: importing typing would be most of this module's
# start-up. mypy, pyright and ruff treat a constant of this name the same way (PEP 781).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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

#: Where each public name lives (module relative to this package -> names). Must list exactly
#: the names of ``__all__`` (tests/test_startup.py checks both ways).
_SOURCES: dict[str, tuple[str, ...]] = {
    ".errors": (
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
    ),
    ".events": (
        "FORMAT",
        "VERSION",
        "Event",
        "HeaderData",
        "Line",
        "Message",
        "ParentRef",
        "Replace",
        "Retract",
    ),
    ".fold": (
        "Compaction",
        "FileLedger",
        "ForkInfo",
        "LedgerConfig",
        "MergeResult",
        "SurfaceFold",
        "compact",
        "discard",
        "fork",
        "handoff",
        "merge",
        "message_text",
        "messages",
        "prune",
        "request_header",
        "restore",
        "retract",
        "revise",
        "todo",
    ),
    ".ids": ("new_session_id", "validate_session_id"),
    ".reader": ("Report", "header", "lines", "read", "verify"),
    ".repair": ("RepairResult", "repair"),
    ".writer": ("Durability", "Tape", "TurnHandle", "open"),
}
_MODULE_OF: dict[str, str] = {name: mod for mod, names in _SOURCES.items() for name in names}

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
    "GitError",
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


def _lazy_package(name: str, homes: dict[str, tuple[str, str]], public: list[str]) -> None:
    """Make the package ``name`` load each public name from its module on first use.

    ``homes`` maps a public name to (its module relative to the package, its name there). The
    package's module-level ``__getattr__`` (PEP 562) imports and caches the name; any other
    name is tried as a submodule, as an eager ``__init__`` made them attributes. Importing a
    submodule binds it as a package attribute (the import system does so), which would hide a
    public name of the same spelling (``jsonltape.repair``, ``interop.export``): the package's
    module type keeps the public name instead.
    """
    package = sys.modules[name]
    space = package.__dict__

    def __getattr__(attr: str) -> Any:
        home = homes.get(attr)
        if home is not None:
            value = getattr(import_module(home[0], name), home[1])
        elif attr.startswith("__"):  # a probe for a dunder (copy, inspect, pickle): none here
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        else:
            try:
                value = import_module(f"{name}.{attr}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{name}.{attr}":
                    raise  # the submodule exists but something it imports is missing
                raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None
        space[attr] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*space, *public})

    space["__getattr__"], space["__dir__"] = __getattr__, __dir__
    space["_lazy_homes"] = homes
    package.__class__ = _Package


class _Package(ModuleType):
    """The module type of a :func:`_lazy_package`: a submodule bound as an attribute under a
    public name's spelling is replaced by that name's value."""

    def __setattr__(self, name: str, value: object) -> None:
        home = self.__dict__.get("_lazy_homes", {}).get(name)
        if (
            home is not None
            and isinstance(value, ModuleType)
            and value.__name__ == self.__name__ + home[0]
        ):
            value = getattr(value, home[1])
        super().__setattr__(name, value)


_lazy_package(__name__, {name: (module, name) for name, module in _MODULE_OF.items()}, __all__)
