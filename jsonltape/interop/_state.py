"""What an earlier import left: the target session's import metadata, keys, sync markers and
the title it shows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .. import _framing, _fs, reader
from .._limits import MAX_INT
from .._lines import checkpoint_at
from .._scan import check
from ..errors import FormatError, InvalidSessionIdError
from ..ids import validate_session_id
from ._raw import kept_lines

__all__ = ["State", "last_sync", "marker_problem"]


class State:
    """An existing (or not yet existing) target session: its header's import metadata at
    once; its keys and sync markers after :meth:`load` (one pass over the file)."""

    def __init__(self, path: Path, *, load: bool = True, raws: bool = False) -> None:
        self.path = path
        self.exists = os.path.lexists(path)
        self.keys: dict[str, int] = {}
        self.markers: list[dict[str, Any]] = []
        self.meta: dict[str, Any] = {}
        self.crc0: str | None = None
        #: the title the session shows: its header's, then each ``session/title`` (after load)
        self.title: str | None = None
        #: source line number -> its verbatim text (after ``load(raws=True)``)
        self.raws: dict[int, str] = {}
        self.loaded = False
        if self.exists:
            meta = reader.header(path).meta
            info = meta.get("import") if isinstance(meta, dict) else None
            self.meta = info if isinstance(info, dict) else {}
            if load:
                self.load(raws=raws)

    def load(self, *, raws: bool = False) -> None:
        """Read the keys, markers and title; ``raws``: also every source line kept verbatim
        (what a source that rewrites its sessions is continued from, :mod:`._rewrite`)."""
        if self.loaded or not self.exists:
            return
        self.loaded = True
        for line in reader.lines(self.path):
            e = line.event
            if raws:
                info = e.data.get("import") if isinstance(e.data, dict) else None
                if isinstance(info, dict):
                    self.raws.update(kept_lines(info.get("raw")))
            if e.seq == 0:
                self.crc0 = e.crc
                title = e.data.get("title")
                self.title = title if isinstance(title, str) else None
            elif e.type == "session/title" and isinstance(e.data.get("title"), str):
                self.title = e.data["title"]
            if e.key is not None:
                self.keys[e.key] = e.seq
            if e.type == "import/sync":
                why = marker_problem(e.data)
                if why is not None:
                    raise FormatError(
                        f"an import/sync marker no import writes ({why}): import the source "
                        "into a new root",
                        path=self.path,
                        line=e.seq + 1,
                        offset=line.offset,
                    )
                self.markers.append(e.data)


def _count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_INT


def _pair(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(map(_count, value))


def _session_id(value: Any) -> bool:
    try:
        validate_session_id(value)
    except InvalidSessionIdError:
        return False
    return True


def marker_problem(data: dict[str, Any]) -> str | None:
    """What makes ``data`` an ``import/sync`` marker no import writes (a session edited by hand),
    in a member a re-import reads of it; None when there is nothing: where the run stopped
    (``lines``), the rewrite points, the other sessions, the tail held back."""
    if "lines" in data and not _count(data["lines"]):
        return "lines: not a count of lines"
    points = data.get("rewrites")
    if points is not None and not (isinstance(points, list) and all(map(_pair, points))):
        return "rewrites: not a list of [line, record] pairs"
    targets = data.get("targets")
    if targets is not None and not (isinstance(targets, list) and all(map(_session_id, targets))):
        return "targets: not a list of session ids"
    for kind in ("torn", "held"):
        tail = data.get(kind)
        if tail is not None and not (
            isinstance(tail, dict) and all(_count(tail.get(k)) for k in ("line", "offset", "bytes"))
        ):
            return f"{kind}: not a line, an offset and a byte count"
    return None


def last_sync(path: Path) -> dict[str, Any] | None:
    """The newest ``import/sync`` marker among the session's last events (:data:`_WINDOW`).

    A session as an import leaves it (its marker, then the checkpoint that closed it) is
    decided from one read of its last bytes; any other end (a crash's tail, damage, a marker
    further back) by a scan of the tail, which says the same for such a session.
    """
    fd = _fs.open_for_read(path)
    try:
        found = _closed_marker(fd)
    finally:
        os.close(fd)
    if found is None:
        found = _scanned_marker(path)
    # one no import writes is not trusted to say the source is unchanged: the import reads the
    # session whole, and its load names the marker
    return found if found is not None and marker_problem(found) is None else None


#: The events from the end in which a marker is looked for: an import ends with its marker
#: and the checkpoint closing it.
_WINDOW = 8
#: The bytes :func:`_closed_marker` reads: a marker and a checkpoint are a few hundred bytes
#: (a marker names every session of its source).
_TAIL = 1 << 14


def _closed_marker(fd: int) -> dict[str, Any] | None:
    """The newest marker if the file ends with a valid checkpoint and every line from the
    marker to it is good and dense (so all of it is committed); else None (undecided)."""
    size = os.fstat(fd).st_size
    stop = max(0, size - _TAIL)
    seq = -1
    for n, (off, raw) in enumerate(_framing.iter_lines_reverse(fd, size, stop)):
        if n == _WINDOW or (off == stop and stop > 0):  # beyond the window, or cut by the read
            return None
        try:
            event, problem = check(raw, None)
        except FormatError:  # too deep to decode: the scan names it
            return None
        if event is None or problem is not None:
            return None
        if checkpoint_at(event, off) is None if n == 0 else event.seq != seq - 1:
            return None
        seq = event.seq
        if event.type == "import/sync":
            return event.data
    return None


def _scanned_marker(path: Path) -> dict[str, Any] | None:
    """:func:`last_sync` for any end: the newest marker of the committed events in the window."""
    scan = reader.tail_scan(path)
    found = None
    for line in reader.lines(path, from_seq=max(1, scan.next_seq - _WINDOW)):
        if line.event.type == "import/sync":
            found = line.event.data
    return found
