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
"""

from __future__ import annotations

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
