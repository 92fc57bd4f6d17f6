"""Helpers of the Cursor importer's tests: the fixture transcript, a built and settled
``state.vscdb``, the sessions of an import by their source ids."""

from __future__ import annotations

from pathlib import Path

import jsonltape
from jsonltape.interop import FileReport

from . import _cursor_db as cdb
from ._agents import imported
from ._importers import FIXTURES, age

TRANSCRIPTS = FIXTURES / "cursor" / "projects"
TID = "e13fc9ba-0000-4000-8000-000000000001"
TRANSCRIPT = TRANSCRIPTS / "home-u-shop" / "agent-transcripts" / TID / f"{TID}.jsonl"


def build_db(tmp: Path, *, recent: bool = True, settled: bool = True) -> Path:
    db = cdb.build(tmp / "User" / "globalStorage" / "state.vscdb", recent=recent)
    if settled:
        age(db.parent.iterdir())
    return db


MARKERS = ("import/sync", "session/flush")


def by_id(sessions: list[Path]) -> dict[str, Path]:
    return {s.name[len("cursor-") : -len(".jsonl")]: s for s in sessions}


def ok(reports: list[FileReport]) -> list[Path]:
    """The sessions imported (the legacy text transcript is skipped, said)."""
    return imported([r for r in reports if r.status != "skipped"])


def events(path: Path, type_: str) -> list[jsonltape.Event]:
    return [e for e in jsonltape.read(path) if e.type == type_]
