"""What an earlier import left: the target session's import metadata, keys, sync markers and
the title it shows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import reader

__all__ = ["State", "last_sync"]


class State:
    """An existing (or not yet existing) target session: its header's import metadata at
    once; its keys and sync markers after :meth:`load` (one pass over the file)."""

    def __init__(self, path: Path, *, load: bool = True) -> None:
        self.path = path
        self.exists = os.path.lexists(path)
        self.keys: dict[str, int] = {}
        self.markers: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {}
        self.crc0: str | None = None
        #: the title the session shows: its header's, then each ``session/title`` (after load)
        self.title: str | None = None
        self.loaded = False
        if self.exists:
            meta = reader.header(path).meta
            info = meta.get("import") if isinstance(meta, dict) else None
            self.meta = info if isinstance(info, dict) else {}
            if load:
                self.load()

    def load(self) -> None:
        if self.loaded or not self.exists:
            return
        self.loaded = True
        for line in reader.lines(self.path):
            e = line.event
            if e.seq == 0:
                self.crc0 = e.crc
                title = e.data.get("title")
                self.title = title if isinstance(title, str) else None
            elif e.type == "session/title" and isinstance(e.data.get("title"), str):
                self.title = e.data["title"]
            if e.key is not None:
                self.keys[e.key] = e.seq
            if e.type == "import/sync":
                self.markers.append(e.data)


def last_sync(path: Path) -> dict[str, Any] | None:
    """The newest ``import/sync`` marker, read from the end of the session only."""
    scan = reader.tail_scan(path)
    found = None
    for line in reader.lines(path, from_seq=max(1, scan.next_seq - 8)):
        if line.event.type == "import/sync":
            found = line.event.data
    return found
