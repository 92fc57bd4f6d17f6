"""The library's inner pieces that the index (``jsonltape_daemon``) builds on: the one door.

The index reads session files as the library does (the same framing, line scan and verdicts),
writes its files as the library does (owner-only, no symlinks followed), starts its processes as
the library does (``python -P`` in a safe directory, :mod:`jsonltape._spawn`), and renders other
agents' files through the importers' mapping. Those pieces are private to the library; this
module names exactly the ones the index may use, so the coupling is visible in one place and a
second engine cannot deepen it. Nothing else in ``jsonltape_daemon`` imports a ``jsonltape._``
module (tests/test_layout.py checks).

Names load on first use (PEP 562): a query, which needs only the framing, does not pay for the
scanner, the event encoder or the importers at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import _fs as fs
    from . import _spawn as spawn
    from ._display import shown
    from ._framing import crc_of, frame_ok, iter_lines, iter_lines_reverse
    from ._lines import Bad, checkpoint_at, scan
    from ._prepare import encode_event
    from ._project import data_dir
    from ._scan import TOO_DEEP, read_header, witness_after
    from .interop._engine import SOURCES, session_id_for
    from .interop._registry import AGENTS
    from .interop._source import Unit

__all__ = [
    "AGENTS",
    "SOURCES",
    "TOO_DEEP",
    "Bad",
    "Unit",
    "checkpoint_at",
    "crc_of",
    "data_dir",
    "encode_event",
    "frame_ok",
    "fs",
    "iter_lines",
    "iter_lines_reverse",
    "read_header",
    "scan",
    "session_id_for",
    "shown",
    "spawn",
    "witness_after",
]

_HOME = {
    "crc_of": "jsonltape._framing",
    "frame_ok": "jsonltape._framing",
    "iter_lines": "jsonltape._framing",
    "iter_lines_reverse": "jsonltape._framing",
    "Bad": "jsonltape._lines",
    "checkpoint_at": "jsonltape._lines",
    "scan": "jsonltape._lines",
    "encode_event": "jsonltape._prepare",
    "data_dir": "jsonltape._project",
    "shown": "jsonltape._display",
    "TOO_DEEP": "jsonltape._scan",
    "read_header": "jsonltape._scan",
    "witness_after": "jsonltape._scan",
    "SOURCES": "jsonltape.interop._engine",
    "session_id_for": "jsonltape.interop._engine",
    "AGENTS": "jsonltape.interop._registry",
    "Unit": "jsonltape.interop._source",
}


def __getattr__(name: str) -> Any:
    if name in ("fs", "spawn"):  # modules: every process the index starts goes through _spawn
        return importlib.import_module(f"jsonltape._{name}")
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value
