"""Streaming reads and verification. Readers never write and never take the writer's lock.

``read`` yields the committed events in constant memory. A torn last line is simply not yet
committed and is not served; damage before a checkpoint raises :class:`CorruptError` at the
line where it starts, after every good event before it was yielded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import msgspec

from . import _fs
from ._lines import Bad, scan, scan_events
from ._scan import State, TailScan, read_header, scan_full, scan_tail, too_deep, witness_after
from ._seek import start_of
from .errors import CorruptError, InvalidArgumentError
from .events import Event, HeaderData, Line

__all__ = ["Report", "header", "lines", "read", "tail_scan", "verify", "witness_after"]

_decoder = msgspec.json.Decoder(Event)


class Report(msgspec.Struct, omit_defaults=False):
    """The result of :func:`verify`, also what ``jsonltape verify --json`` prints."""

    path: str
    state: State
    events: int
    size: int
    committed_bytes: int
    last_checkpoint_seq: int | None
    last_checkpoint_offset: int | None
    open_turn: int | None
    closed: bool
    line: int | None = None
    offset: int | None = None
    reason: str | None = None

    @classmethod
    def from_scan(cls, s: TailScan) -> Report:
        return cls(
            path=s.path,
            state=s.state,
            events=s.events,
            size=s.size,
            committed_bytes=s.committed,
            last_checkpoint_seq=s.checkpoint_seq,
            last_checkpoint_offset=s.checkpoint_offset,
            open_turn=s.turn.seq if s.turn is not None else None,
            closed=s.closed,
            line=s.bad_line,
            offset=s.bad_offset,
            reason=s.bad_reason,
        )


def verify(path: str | os.PathLike[str]) -> Report:
    """Classify a file as clean, torn-tail, open-turn or corrupt by reading every line once.

    Every line gets the good-line test of spec §10.2: newline, CRC, a JSON object (data
    included: valid JSON and UTF-8 throughout) with the envelope's member types, and the
    expected seq; for a merge's branch records, their shape (§8.7.14). Nothing else about the
    data is checked.
    """
    p = _fs.given_path(path)
    fd = _fs.open_for_read(p)
    try:
        return Report.from_scan(scan_full(fd, str(p)))
    finally:
        os.close(fd)


def header(path: str | os.PathLike[str]) -> HeaderData:
    """Return the session header (line 1) without reading the rest of the file."""
    p = _fs.given_path(path)
    fd = _fs.open_for_read(p)
    try:
        return read_header(fd, str(p))[0]
    finally:
        os.close(fd)


def tail_scan(path: str | os.PathLike[str]) -> TailScan:
    """O(tail) scan: header, last checkpoint, and the lines after it."""
    p = _fs.given_path(path)
    fd = _fs.open_for_read(p)
    try:
        return scan_tail(fd, str(p))
    finally:
        os.close(fd)


def lines(
    path: str | os.PathLike[str], *, from_seq: int = 0, from_offset: int | None = None
) -> Iterator[Line]:
    """Yield committed :class:`Line` s (offset, raw bytes, decoded event) in order.

    ``from_offset`` must be the start of a line (for example a ``Line.offset`` seen before);
    ``from_seq`` is found by bisection, so starting late in a big file is cheap.
    """
    return _lines(_fs.given_path(path), from_seq, from_offset)


def read(
    path: str | os.PathLike[str],
    *,
    from_seq: int = 0,
    from_offset: int | None = None,
    follow: bool = False,
    idle_timeout: float | None = None,
) -> Iterator[Event]:
    """Yield the committed events of a session in seq order, in constant memory.

    With ``follow=True`` the iterator does not end at the end of the file: it waits for a
    writer to append, across its checkpoints and across a crash whose torn tail ``repair``
    cuts, and yields each event once it is committed, each exactly once (a bounded poll of
    10 to 250 ms, see ``jsonltape._follow``). It ends after ``idle_timeout`` seconds without
    a new event (None: never), when the caller closes it, or with
    :class:`ConcurrentModificationError` if the file is replaced, or shrinks below or is
    rewritten under what was read. ``idle_timeout`` is for ``follow`` only.
    """
    if follow:
        from ._follow import follow_events

        return follow_events(
            path, from_seq=from_seq, from_offset=from_offset, idle_timeout=idle_timeout
        )
    if idle_timeout is not None:
        raise InvalidArgumentError("idle_timeout is for follow=True only", field="idle_timeout")
    return _events(_fs.given_path(path), from_seq, from_offset)


# read and lines differ only in what they yield; which lines are good is scan's alone.
def _events(p: Path, min_seq: int, from_offset: int | None) -> Iterator[Event]:
    def open_() -> tuple[int, int, int | None]:
        fd = _fs.open_for_read(p)
        try:
            return (fd, *start_of(fd, str(p), min_seq, from_offset))
        except BaseException:
            os.close(fd)
            raise

    return scan_events(open_, min_seq=min_seq, on_bad=lambda fd, bad: _stop(fd, str(p), bad))


def _lines(p: Path, min_seq: int, from_offset: int | None) -> Iterator[Line]:
    fd = _fs.open_for_read(p)
    try:
        start, expected = start_of(fd, str(p), min_seq, from_offset)
        for item in scan(fd, start, expected):
            if isinstance(item, Bad):
                _stop(fd, str(p), item)
                return
            off, body, event = item
            if event.seq >= min_seq:
                yield Line(off, body + b"\n", event)
    finally:
        os.close(fd)


def _stop(fd: int, path: str, bad: Bad) -> None:
    """A bad line: raise if a witness proves it corruption; otherwise it is a torn tail, not
    committed, and the read simply ends before it."""
    if bad.too_deep:
        raise too_deep(path, bad.line, bad.offset)
    if witness_after(fd, bad.offset + len(bad.raw)):  # a too-deep line is never a witness
        raise CorruptError(bad.problem, path=path, line=bad.line, offset=bad.offset)
