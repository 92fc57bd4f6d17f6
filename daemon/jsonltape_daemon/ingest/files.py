"""What the ingest engines share (files of jsonltape sessions, foreign units): the walk of a
tree, the bounds of a write transaction, what a sync reports, and the errors a file's contents
can raise."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "DATA_ERRORS",
    "O_READ",
    "UNNAMED",
    "Budget",
    "Stat",
    "SyncStats",
    "storable",
    "walk",
]

#: How a file to ingest is opened: read-only, never through a symlink.
O_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Budget:
    """Bounds of one write transaction: rows and seconds of held write lock."""

    rows: int = 1000
    seconds: float = 0.05


@dataclass
class SyncStats:
    files: int = 0  #: files opened (changed since the last sync)
    sessions_added: int = 0
    sessions_removed: int = 0
    reingested: int = 0
    events: int = 0
    messages: int = 0
    bytes: int = 0
    errors: int = 0
    transactions: int = 0
    seconds: float = 0.0
    bulk: bool = False  #: a bulk load (first sync or rebuild) published at the end
    substrings: int = 0  #: messages added to the substring index
    #: seconds by phase: read (lines, crc, decode), rows (fold, text, tuples), insert (rows and
    #: commits), words (the word index), publish (sync and rename), substrings
    phases: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, seconds: float) -> None:
        self.phases[phase] = self.phases.get(phase, 0.0) + seconds


#: What a file's contents can make Python code raise (a value out of a column's range, text
#: that is not UTF-8, a shape no reader expected): caught per file, never past it.
DATA_ERRORS = (ValueError, OverflowError, TypeError, KeyError, IndexError, RecursionError)


class Stat(Protocol):
    """What the registry keeps of a file's stat (``os.stat_result`` has it): the hint that lets
    an unchanged file be skipped, and the size the cursor is checked against."""

    @property
    def st_dev(self) -> int: ...
    @property
    def st_ino(self) -> int: ...
    @property
    def st_size(self) -> int: ...
    @property
    def st_mtime_ns(self) -> int: ...


def walk(
    root: str,
    wants: Callable[[str], bool] = lambda p: p.endswith(".jsonl"),
    dotted: frozenset[str] = frozenset(),
) -> list[str]:
    """Every regular file under ``root`` that ``wants`` (given its path) takes; dot-names
    skipped (except those in ``dotted``), symlinks not followed."""
    out: list[str] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = os.scandir(d)
        except OSError:
            continue
        with entries:
            for e in entries:
                if e.name.startswith(".") and e.name not in dotted:
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif wants(e.path) and e.is_file(follow_symlinks=False):
                        out.append(e.path)
                except OSError:
                    continue
    out.sort()
    return out


#: Why a file whose name is not UTF-8 is not indexed (Python holds its bytes as lone
#: surrogates, which neither SQLite nor PostgreSQL text can hold, and a lossy stand-in would
#: not name the file again at the next sync).
UNNAMED = "the file name is not UTF-8, which the index cannot store: not indexed (rename it)"


def storable(path: str) -> bool:
    """Whether the index can store ``path`` as text (see :data:`UNNAMED`)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
