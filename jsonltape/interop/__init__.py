"""Interop: import the sessions people already have, export and share with redaction.

Import (idempotent and incremental; every source line is kept verbatim)::

    from jsonltape import interop

    for report in interop.import_paths("claude-code", ["~/.claude/projects"], "sessions/"):
        print(report.status, report.sessions, report.problems)

Read a foreign file as jsonltape events without writing anything (what an indexer uses)::

    for session_id, event in interop.scan_foreign("codex", "rollout-....jsonl"):
        ...

Export a session to share it::

    out = interop.export("s.jsonl", "html", redact_tools=True, redact_secrets=True)
    open("s.html", "w").write(out.text); print(out.notes, out.redacted)

Modules: :mod:`~jsonltape.interop.claude_code`, :mod:`~jsonltape.interop.codex` and
:mod:`~jsonltape.interop.pi` (one mapper each, with its mapping in the module doc),
:mod:`~jsonltape.interop.foreign` (read-only mapping), :mod:`~jsonltape.interop.export` and
:mod:`~jsonltape.interop.redaction`.

Every public name loads its module on first use, as in :mod:`jsonltape`: the commit guard and
``jsonltape redact`` import :mod:`~jsonltape.interop.redaction` without the importers, the
exporters and markdown-it (~95 ms of a hook's start-up).
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType

TYPE_CHECKING = False  # not typing's: importing typing is start-up this package does not need
if TYPE_CHECKING:
    from typing import Any

    from ._base import MAPPER_VERSION
    from ._engine import (
        SOURCES,
        FileReport,
        SourceError,
        discover,
        import_file,
        import_paths,
        session_id_for,
    )
    from .export import FORMATS, Export, ExportFormat, export, transcript
    from .foreign import ForeignMessage, ForeignScan
    from .foreign import messages as foreign_messages
    from .foreign import scan as scan_foreign
    from .foreign import scan_file as scan_foreign_file
    from .redaction import Redactor, mask_secrets

#: Where each public name lives: module (relative to this package) -> (public name, its name
#: there). Must list exactly the names of ``__all__`` (tests/test_interop_startup.py checks).
_SOURCES: dict[str, tuple[tuple[str, str], ...]] = {
    "._base": (("MAPPER_VERSION", "MAPPER_VERSION"),),
    "._engine": (
        ("SOURCES", "SOURCES"),
        ("FileReport", "FileReport"),
        ("SourceError", "SourceError"),
        ("discover", "discover"),
        ("import_file", "import_file"),
        ("import_paths", "import_paths"),
        ("session_id_for", "session_id_for"),
    ),
    ".export": (
        ("FORMATS", "FORMATS"),
        ("Export", "Export"),
        ("ExportFormat", "ExportFormat"),
        ("export", "export"),
        ("transcript", "transcript"),
    ),
    ".foreign": (
        ("ForeignMessage", "ForeignMessage"),
        ("ForeignScan", "ForeignScan"),
        ("foreign_messages", "messages"),
        ("scan_foreign", "scan"),
        ("scan_foreign_file", "scan_file"),
    ),
    ".redaction": (("Redactor", "Redactor"), ("mask_secrets", "mask_secrets")),
}
_HOME: dict[str, tuple[str, str]] = {
    public: (module, attr) for module, names in _SOURCES.items() for public, attr in names
}

__all__ = [
    "FORMATS",
    "MAPPER_VERSION",
    "SOURCES",
    "Export",
    "ExportFormat",
    "FileReport",
    "ForeignMessage",
    "ForeignScan",
    "Redactor",
    "SourceError",
    "discover",
    "export",
    "foreign_messages",
    "import_file",
    "import_paths",
    "mask_secrets",
    "scan_foreign",
    "scan_foreign_file",
    "session_id_for",
    "transcript",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (then cached here); or a
    submodule (``interop.foreign``, ``interop.claude_code``), as the eager ``__init__`` made
    them attributes."""
    home = _HOME.get(name)
    if home is not None:
        value = getattr(import_module(home[0], __name__), home[1])
    elif name.startswith("__"):  # a probe for a dunder (copy, inspect, pickle): no such thing
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:
            value = import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # the submodule exists but something it imports is missing
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(ModuleType):
    """This package's module type: importing the submodule ``interop.export`` binds that
    module as the attribute ``export`` (the import system does so for every submodule), which
    would hide the function ``interop.export``. The public name keeps the function."""

    def __setattr__(self, name: str, value: object) -> None:
        home = _HOME.get(name)
        if (
            home is not None
            and isinstance(value, ModuleType)
            and value.__name__ == __name__ + home[0]
        ):
            value = getattr(value, home[1])  # only `export`: the one name shared with a module
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
