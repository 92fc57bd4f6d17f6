"""Streaming reads and verification. Readers never write and never take the writer's lock.

``read`` yields the committed events in constant memory. A torn last line is simply not yet
committed and is not served; damage before a checkpoint raises :class:`CorruptError` at the
line where it starts, after every good event before it was yielded.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from pathlib import Path

import msgspec

from . import _framing, _fs
from ._scan import (
    State,
    TailScan,
    check,
    is_witness,
    read_header,
    scan_full,
    scan_tail,
    too_deep,
)
from .errors import CorruptError, FormatError
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
    expected seq. Nothing else about the data is checked.
    """
    p = Path(path)
    fd = _fs.open_for_read(p)
    try:
        return Report.from_scan(scan_full(fd, str(p)))
    finally:
        os.close(fd)


def header(path: str | os.PathLike[str]) -> HeaderData:
    """Return the session header (line 1) without reading the rest of the file."""
    p = Path(path)
    fd = _fs.open_for_read(p)
    try:
        return read_header(fd, str(p))[0]
    finally:
        os.close(fd)


def tail_scan(path: str | os.PathLike[str]) -> TailScan:
    """O(tail) scan: header, last checkpoint, and the lines after it."""
    p = Path(path)
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
    return _lines(Path(path), from_seq, from_offset)


def read(
    path: str | os.PathLike[str], *, from_seq: int = 0, from_offset: int | None = None
) -> Iterator[Event]:
    """Yield the committed events of a session in seq order, in constant memory."""
    return _events(Path(path), from_seq, from_offset)


_READ_CHUNK = 1 << 20

# The two loops below are the hot path of every read, so the good-line test of
# jsonltape._scan.check is unrolled into them (a call per line costs a third of the time):
# the line ends with exactly the suffix its own CRC gives (one format and one compare check
# the crc member's place, spelling and value at once; anything shorter than a suffix fails),
# starts with "{" and decodes as an Event with the expected seq. ``check`` runs only to name
# the problem of a line that fails. The loops differ only in keeping each line's offset,
# which ``read`` needs only when a line is bad.


def _events(p: Path, min_seq: int, from_offset: int | None) -> Iterator[Event]:
    fd = _fs.open_for_read(p)
    try:
        start, expected = _start(fd, str(p), min_seq, from_offset)
        decode = _decoder.decode
        crc32 = zlib.crc32
        suffix = _framing.LINE_SUFFIX
        pos = base = start  # base: the file offset of parts[0]
        carry = b""
        while True:
            chunk = os.pread(fd, _READ_CHUNK, pos)
            if not chunk:
                return  # a leftover fragment without a newline is a torn tail: never served
            pos += len(chunk)
            parts = (carry + chunk if carry else chunk).split(b"\n")
            carry = parts.pop()
            for body in parts:
                if body.endswith(suffix % crc32(body[:-18])) and body[0] == 0x7B:  # "{"
                    try:
                        event = decode(body)
                    except (msgspec.DecodeError, RecursionError):
                        pass  # _stop names the problem (check decodes deeper still)
                    else:
                        if event.seq == expected or expected is None:
                            expected = event.seq + 1
                            if expected > min_seq:
                                yield event
                            continue
                at = base + sum(len(b) + 1 for b in parts[: _index(parts, body)])
                _stop(fd, str(p), body, expected, at)
                return
            base = pos - len(carry)
    finally:
        os.close(fd)


def _lines(p: Path, min_seq: int, from_offset: int | None) -> Iterator[Line]:
    fd = _fs.open_for_read(p)
    try:
        start, expected = _start(fd, str(p), min_seq, from_offset)
        decode = _decoder.decode
        crc32 = zlib.crc32
        suffix = _framing.LINE_SUFFIX
        pos = base = start  # base: the file offset of the line at hand
        carry = b""
        while True:
            chunk = os.pread(fd, _READ_CHUNK, pos)
            if not chunk:
                return
            pos += len(chunk)
            parts = (carry + chunk if carry else chunk).split(b"\n")
            carry = parts.pop()
            for body in parts:
                if body.endswith(suffix % crc32(body[:-18])) and body[0] == 0x7B:
                    try:
                        event = decode(body)
                    except (msgspec.DecodeError, RecursionError):
                        pass
                    else:
                        if event.seq == expected or expected is None:
                            expected = event.seq + 1
                            if expected > min_seq:
                                yield Line(base, body + b"\n", event)
                            base += len(body) + 1
                            continue
                _stop(fd, str(p), body, expected, base)
                return
    finally:
        os.close(fd)


def _start(fd: int, path: str, min_seq: int, from_offset: int | None) -> tuple[int, int | None]:
    """Where a read starts and the seq expected there (None: whatever the first line has)."""
    _hdr, hend, _ = read_header(fd, path)
    if from_offset is not None:
        return from_offset, None
    if min_seq <= 0:
        return 0, 0
    return _seek_seq(fd, min_seq, hend)


def _line_of(expected: int | None) -> int | None:
    return None if expected is None else expected + 1


def _index(parts: list[bytes], body: bytes) -> int:
    return next(i for i, b in enumerate(parts) if b is body)


def _stop(fd: int, path: str, body: bytes, expected: int | None, at: int) -> None:
    """A bad line at offset ``at``: raise if a witness proves it corruption; otherwise it is
    a torn tail, not committed, and the read simply ends before it."""
    raw = body + b"\n"
    try:
        problem = check(raw, expected)[1] or "bad line"
    except FormatError:  # the line itself is too deep to decode (not damage)
        raise too_deep(path, _line_of(expected), at) from None
    if witness_after(fd, at + len(raw)):  # a too-deep line is never a witness
        raise CorruptError(problem, path=path, line=_line_of(expected), offset=at)


def witness_after(fd: int, start: int) -> bool:
    """True when a witness (spec §10.2) follows ``start``: the damage before it is corruption."""
    return any(is_witness(raw) for _off, raw in _framing.iter_lines(fd, start))


def _line_at(fd: int, pos: int, limit: int) -> tuple[int, bytes] | None:
    """Return the first complete line that starts after ``pos`` (skipping a partial one)."""
    buf = b""
    at = pos
    while at < limit:
        chunk = os.pread(fd, min(_framing.CHUNK, limit - at), at)
        if not chunk:
            return None
        buf += chunk
        at += len(chunk)
        i = buf.find(b"\n")
        if i < 0:
            continue
        j = buf.find(b"\n", i + 1)
        if j >= 0:
            return pos + i + 1, buf[i + 1 : j + 1]
    return None


def _seek_seq(fd: int, target: int, hend: int) -> tuple[int, int]:
    """Find (offset, seq) of a committed line with seq <= target, as close to it as cheap."""
    lo, lo_seq = hend, 1
    hi = os.fstat(fd).st_size
    while hi - lo > _framing.CHUNK:
        mid = (lo + hi) // 2
        found = _line_at(fd, mid - 1, hi)
        if found is None:
            hi = mid
            continue
        off, raw = found
        try:
            head, problem = check(raw, None)
        except FormatError:  # too deep to decode: the read itself will say where
            head, problem = None, "too deep"
        if problem is not None or head is None or head.seq > target:
            hi = mid
            continue
        lo, lo_seq = off, head.seq
        if head.seq == target:
            break
    return lo, lo_seq
