"""Interop: import the sessions people already have, export and share with redaction.

Import (idempotent and incremental; every source line is kept verbatim)::

    from jsonltape import interop

    for report in interop.import_paths("claude-code", ["~/.claude/projects"], "sessions/"):
        print(report.status, report.sessions, report.problems)

Rebuild a source from the lines the imported events keep (``data.import.raw``)::

    lines = {}
    for e in jsonltape.read(path):
        info = e.data.get("import")
        lines.update(interop.kept_lines(info.get("raw") if isinstance(info, dict) else None))
    source = "".join(lines[n] + "\n" for n in sorted(lines))

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

from .. import _lazy_package

TYPE_CHECKING = False  # not typing's: importing typing is start-up this package does not need
if TYPE_CHECKING:
    from ._base import MAPPER_VERSION
    from ._engine import (
        SOURCES,
        FileReport,
        SourceError,
        discover,
        import_file,
        session_id_for,
    )
    from ._many import import_many, import_paths
    from ._raw import kept_lines
    from ._render_html import message_html
    from .export import FORMATS, Export, ExportFormat, export, export_to, transcript
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
        ("session_id_for", "session_id_for"),
    ),
    "._many": (("import_many", "import_many"), ("import_paths", "import_paths")),
    "._raw": (("kept_lines", "kept_lines"),),
    ".export": (
        ("FORMATS", "FORMATS"),
        ("Export", "Export"),
        ("ExportFormat", "ExportFormat"),
        ("export", "export"),
        ("export_to", "export_to"),
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
    "._render_html": (("message_html", "message_html"),),
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
    "export_to",
    "foreign_messages",
    "import_file",
    "import_many",
    "import_paths",
    "kept_lines",
    "mask_secrets",
    "message_html",
    "scan_foreign",
    "scan_foreign_file",
    "session_id_for",
    "transcript",
]


_lazy_package(__name__, _HOME, __all__)
