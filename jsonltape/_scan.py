"""Classify a session file from its framing, CRCs and seqs alone.

Two scans share one line check:

* :func:`scan_full` walks every line (``verify``): it can tell corruption before the last
  checkpoint (media damage, a bad merge) from a torn tail (a crash after the last checkpoint).
* :func:`scan_tail` finds the last valid checkpoint by reading backwards from the end and only
  checks what follows it (writer open, repair): its cost is O(tail), not O(file).

The rule both apply: let B be the offset of the first bad line. If a good ``session/flush``
line (a checkpoint) comes after B, the file is corrupt: a checkpoint is only written after every
byte before it was durable, so a crash cannot have damaged bytes before it. Otherwise everything
from B on is a torn tail. (As the base to append after, a checkpoint must also record its own
offset in ``data.offset``.)
"""

from __future__ import annotations

import os
from typing import Literal

from . import _framing
from ._gate import MAX_DEPTH
from ._lines import Bad, Run, checkpoint_at, problem_of, scan_runs
from .errors import FormatError
from .events import Event, HeaderData, TurnRef, check_header

__all__ = [
    "TOO_DEEP",
    "State",
    "TailScan",
    "read_header",
    "scan_full",
    "scan_tail",
    "too_deep",
    "witness_after",
]

State = Literal["clean", "torn-tail", "open-turn", "corrupt"]
MAX_HEADER = 1 << 24
#: What :func:`read_header` reads first.
_HEADER_PROBE = 1 << 14


class TailScan:
    """What a scan learned about a file. Offsets are bytes from the file start.

    A plain class, not a dataclass: ``jsonltape cat`` and ``verify`` import this module, and
    the dataclasses machinery is start-up time they do not need.
    """

    def __init__(
        self,
        path: str,
        header: HeaderData,
        header_end: int,
        size: int,
        committed: int,
        next_seq: int,
        last_time: int,
    ) -> None:
        self.path = path
        self.header = header
        self.header_end = header_end
        self.size = size
        self.committed = committed  #: end of the longest valid prefix (E)
        self.next_seq = next_seq
        self.last_time = last_time
        self.checkpoint_seq: int | None = None
        self.checkpoint_offset: int | None = None
        #: Where the next checkpoint's span starts (spec §10.2): just after the last good
        #: ``session/flush`` line of the valid prefix, or after the header.
        self.span_from = header_end
        self.turn: TurnRef | None = None  #: the turn open at ``committed``
        self.closed = False  #: the valid prefix ends with a clean-close checkpoint
        self.bad_offset: int | None = None
        self.bad_line: int | None = None
        self.bad_reason: str | None = None
        self.corrupt = False

    def __eq__(self, other: object) -> bool:
        return type(other) is TailScan and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"TailScan({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    @property
    def state(self) -> State:
        if self.corrupt:
            return "corrupt"
        if self.bad_offset is not None:
            return "torn-tail"
        if self.turn is not None and not self.closed:
            return "open-turn"
        return "clean"

    @property
    def events(self) -> int:
        return self.next_seq


def check(raw: bytes, expected_seq: int | None) -> tuple[Event | None, str | None]:
    """The good-line test of spec §10.2 for one line (see :func:`jsonltape._lines.decode`).

    Returns (event, problem); a line too deep to decode raises :class:`FormatError` (it is not
    damage, spec §6).
    """
    try:
        return problem_of(raw, expected_seq)
    except RecursionError:
        raise too_deep(None, None, None) from None


#: What a line too deep to decode is called, wherever it is met (library and CLI).
TOO_DEEP = f"arrays and objects nest too deep to decode (the format allows {MAX_DEPTH} levels)"


def too_deep(path: str | None, line: int | None, offset: int | None) -> FormatError:
    """The error for a line nested deeper than the decoder can follow from this call stack.

    msgspec shares Python's recursion limit, so lines far beyond the format's 128 levels
    (around 1,000) decode or not depending on how deep the caller already is.
    """
    return FormatError(TOO_DEEP, path=path, line=line, offset=offset)


def is_witness(raw: bytes) -> bool:
    """A line after the first bad one that proves the damage is not a crash tail.

    Any good ``session/flush`` line counts, whatever offset it records: under the writer
    protocol no checkpoint is ever written after bytes that were not yet durable, so a crash
    cannot leave one behind a bad line; a deleted, duplicated or merged line (a bad edit, a git
    merge) shifts offsets but leaves its checkpoints' checksums intact.
    """
    # No substring pre-filter: a type may be spelled with JSON escapes. Lines after B are few,
    # and the checksum fails fast on garbage.
    try:
        head, problem = check(raw, None)
    except FormatError:  # too deep to decode: no checkpoint is, so it proves nothing
        return False
    return problem is None and head is not None and head.type == "session/flush"


def read_header(fd: int, path: str) -> tuple[HeaderData, int, int]:
    """Return ``(header, end_offset, time)`` of line 1, or raise FormatError."""
    # One small read holds nearly every header; a scan's CHUNK would copy up to a MiB of the
    # session for it (three times per session in an unchanged re-import, most of its cost).
    first = os.pread(fd, _HEADER_PROBE, 0)
    end = first.find(b"\n")
    if end >= 0:
        first = first[: end + 1]
    elif len(first) == _HEADER_PROBE:
        for _off, raw in _framing.iter_lines(fd, 0, MAX_HEADER):
            first = raw
            break
    if not first:
        raise FormatError("not a jsonltape session: the file is empty", path=path)
    try:
        head, problem = check(first, 0)
    except FormatError:
        raise too_deep(path, 1, 0) from None
    if problem is not None:
        raise FormatError(
            f"not a jsonltape session: line 1: {problem}", path=path, line=1, offset=0
        )
    assert head is not None
    return check_header(head, path), len(first), head.time


def scan_full(fd: int, path: str) -> TailScan:
    """Check every line of the file (what ``verify`` does)."""
    header, hend, htime = read_header(fd, path)
    size = os.fstat(fd).st_size
    s = TailScan(path, header, hend, size, hend, 1, htime)
    _walk(fd, s, hend)
    return s


def scan_tail(fd: int, path: str) -> TailScan:
    """Check only what follows the last valid checkpoint (writer open and repair)."""
    header, hend, htime = read_header(fd, path)
    size = os.fstat(fd).st_size
    s = TailScan(path, header, hend, size, hend, 1, htime)
    for off, raw in _framing.iter_lines_reverse(fd, size, hend):
        if b'"session/flush"' not in raw:
            continue
        try:
            head, problem = check(raw, None)
        except FormatError:
            raise too_deep(path, None, off) from None
        if problem is not None or head is None:
            continue
        ck = checkpoint_at(head, off)
        if ck is None:
            continue
        s.committed = s.span_from = off + len(raw)
        s.next_seq = head.seq + 1
        s.last_time = head.time
        s.checkpoint_seq, s.checkpoint_offset = head.seq, off
        s.turn = ck.turn
        s.closed = ck.closed
        break
    _walk(fd, s, s.committed)
    return s


def _walk(fd: int, s: TailScan, start: int) -> None:
    """Check the lines from ``start`` on; from the first that is not good, only look for a
    witness after it (which makes the file corrupt)."""
    for item in scan_runs(fd, start, s.next_seq):
        if isinstance(item, Run):
            _track_run(s, item)
            continue
        if isinstance(item, Bad):
            if item.too_deep:
                raise too_deep(s.path, item.line, item.offset)
            s.bad_offset, s.bad_line, s.bad_reason = item.offset, item.line, item.problem
            s.corrupt = witness_after(fd, item.offset + len(item.raw))
            return
        off, body, head = item
        s.committed = off + len(body) + 1
        s.last_time = head.time
        s.next_seq = head.seq + 1
        _track(s, head, off)


def witness_after(fd: int, start: int, end: int | None = None) -> bool:
    """True when a witness (spec §10.2) follows ``start``: the damage before it is corruption.

    Past the first bad line only a good checkpoint matters; lines there are never served.
    """
    return any(is_witness(raw) for _off, raw in _framing.iter_lines(fd, start, end))


_TURN_EDGES = ("turn/start", "turn/end")


def _track_run(s: TailScan, run: Run) -> None:
    """:func:`_track` for a run of lines a span covers: only the last turn edge in it matters,
    and a checkpoint is never inside one from a conforming writer (if one is, every line of
    the run is tracked on its own)."""
    events = run.events
    last = events[-1]
    types = [e.type for e in events]
    if "session/flush" in types:
        for i, event in enumerate(events):
            off = run.offset_of(i)
            s.committed = run.offset_of(i + 1)
            _track(s, event, off)
    else:
        s.committed = run.end
        s.closed = False
        for i in range(len(types) - 1, -1, -1):
            if types[i] in _TURN_EDGES:
                edge = events[i]
                s.turn = TurnRef(edge.seq, run.offset_of(i)) if types[i] == "turn/start" else None
                break
    s.last_time = last.time
    s.next_seq = last.seq + 1


def _track(s: TailScan, head: Event, off: int) -> None:
    """What a good line at ``off`` (ending at ``s.committed``) changes: the last checkpoint,
    where the next span starts, the open turn, ``closed``."""
    t = head.type
    if t == "session/flush":
        s.span_from = s.committed
        ck = checkpoint_at(head, off)
        s.closed = bool(ck and ck.closed)
        if ck is not None:
            s.checkpoint_seq, s.checkpoint_offset = head.seq, off
        return
    s.closed = False
    if t == "turn/start":
        s.turn = TurnRef(head.seq, off)
    elif t == "turn/end":
        s.turn = None
