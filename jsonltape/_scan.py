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
import zlib
from dataclasses import dataclass
from typing import Literal

import msgspec

from . import _framing
from ._gate import MAX_DEPTH
from .errors import FormatError
from .events import Event, FlushData, HeaderData, TurnRef, check_header

__all__ = [
    "TOO_DEEP",
    "State",
    "TailScan",
    "read_header",
    "scan_full",
    "scan_tail",
    "too_deep",
]

State = Literal["clean", "torn-tail", "open-turn", "corrupt"]
_event_decoder = msgspec.json.Decoder(Event)
MAX_HEADER = 1 << 24


@dataclass
class TailScan:
    """What a scan learned about a file. Offsets are bytes from the file start."""

    path: str
    header: HeaderData
    header_end: int
    size: int
    committed: int  #: end of the longest valid prefix (E)
    next_seq: int
    last_time: int
    checkpoint_seq: int | None = None
    checkpoint_offset: int | None = None
    turn: TurnRef | None = None  #: the turn open at ``committed``
    closed: bool = False  #: the valid prefix ends with a clean-close checkpoint
    bad_offset: int | None = None
    bad_line: int | None = None
    bad_reason: str | None = None
    corrupt: bool = False

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
    """The one test of a good line (spec §10.2) that every reader here uses.

    Newline, crc suffix and checksum, then a full decode as an :class:`Event`: valid JSON and
    UTF-8 throughout, integer ``seq`` and ``time``, string ``type``, object ``data``, and
    well-typed optional members; then the expected ``seq``. Returns (event, problem).
    """
    if not raw.endswith(b"\n"):
        return None, "incomplete line (no newline at end of file)"
    if not _framing.frame_ok(raw):
        if _framing.crc_of(raw) is None:
            return None, "line does not end with the crc member"
        return None, "crc mismatch"
    try:
        head = _event_decoder.decode(raw)
    except msgspec.DecodeError as exc:
        return None, f"not a valid event envelope: {exc}"
    except RecursionError:
        # Not damage (repair must not cut it): a line this reader cannot decode (spec §6).
        raise too_deep(None, None, None) from None
    if expected_seq is not None and head.seq != expected_seq:
        return head, f"seq {head.seq} where {expected_seq} was expected"
    return head, None


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


def _checkpoint_at(head: Event, off: int) -> FlushData | None:
    if head.type != "session/flush":
        return None
    try:
        data = msgspec.convert(head.data, type=FlushData)
    except msgspec.ValidationError:
        return None
    return data if data.offset == off else None


def read_header(fd: int, path: str) -> tuple[HeaderData, int, int]:
    """Return ``(header, end_offset, time)`` of line 1, or raise FormatError."""
    first = b""
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
        ck = _checkpoint_at(head, off)
        if ck is None:
            continue
        s.committed = off + len(raw)
        s.next_seq = head.seq + 1
        s.last_time = head.time
        s.checkpoint_seq, s.checkpoint_offset = head.seq, off
        s.turn = ck.turn
        s.closed = ck.closed
        break
    _walk(fd, s, s.committed)
    return s


_CHUNK = 1 << 20


def _walk(fd: int, s: TailScan, start: int) -> None:
    """Check the lines from ``start`` on. Good lines go through the good-line test of
    :func:`check` unrolled over big chunks (as in :mod:`jsonltape.reader`; a call per line
    costs a third of a scan); from the first line that fails it, :func:`_walk_from` takes over
    to name the problem and look for a witness."""
    expected = s.next_seq
    decode = _event_decoder.decode
    crc32 = zlib.crc32
    suffix = _framing.LINE_SUFFIX
    pos = base = start  # base: the offset of the line at hand
    carry = b""
    while True:
        chunk = os.pread(fd, _CHUNK, pos)
        if not chunk:
            break
        pos += len(chunk)
        parts = (carry + chunk if carry else chunk).split(b"\n")
        carry = parts.pop()
        for body in parts:
            head = None
            if body.endswith(suffix % crc32(body[:-18])) and body[0] == 0x7B:  # "{"
                try:
                    head = decode(body)
                except (msgspec.DecodeError, RecursionError):
                    head = None  # _walk_from names the problem (check decodes deeper still)
            if head is None or head.seq != expected:
                s.next_seq = expected
                _walk_from(fd, s, base)
                return
            off = base
            base += len(body) + 1
            s.committed = base
            s.last_time = head.time
            expected += 1
            _track(s, head, off)
    s.next_seq = expected
    if carry:  # a final fragment without a newline
        _walk_from(fd, s, base)


def _track(s: TailScan, head: Event, off: int) -> None:
    """What a good line at ``off`` changes: the last checkpoint, the open turn, ``closed``."""
    t = head.type
    if t == "session/flush":
        ck = _checkpoint_at(head, off)
        s.closed = bool(ck and ck.closed)
        if ck is not None:
            s.checkpoint_seq, s.checkpoint_offset = head.seq, off
        return
    s.closed = False
    if t == "turn/start":
        s.turn = TurnRef(head.seq, off)
    elif t == "turn/end":
        s.turn = None


def _walk_from(fd: int, s: TailScan, start: int) -> None:
    """Line by line with :func:`check`, from a line that may be bad: the first bad line is
    recorded, and a witness after it makes the file corrupt."""
    expected = s.next_seq
    for off, raw in _framing.iter_lines(fd, start):
        if s.bad_offset is not None:
            # Past the first bad line: only look for a valid checkpoint, which proves the
            # damage lies in the committed region. Lines here are never served.
            if is_witness(raw):
                s.corrupt = True
                break
            continue
        try:
            head, problem = check(raw, expected)
        except FormatError:  # too deep to decode: say where
            raise too_deep(s.path, expected + 1, off) from None
        if problem is not None or head is None:
            s.bad_offset, s.bad_line, s.bad_reason = off, expected + 1, problem
            continue
        s.committed = off + len(raw)
        s.last_time = head.time
        expected += 1
        _track(s, head, off)
    s.next_seq = expected
