"""Committed lines for folding: checked like the reader checks them, decoded only as needed.

Folding a big session mostly meets events it does not look inside (streaming chunks, tool
calls, checkpoints). The envelope is decoded with ``data`` kept as raw JSON bytes, which is
what the fold stores; the line is also decoded once as an Event, the good-line test read and
verify apply, and those objects are dropped at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from .. import _framing
from .._scan import check, too_deep
from ..errors import CorruptError, FormatError
from ..events import Event, HeaderData, Surface, check_header
from ..reader import witness_after

__all__ = ["Head", "Row", "rows"]


class Head(msgspec.Struct, frozen=True):
    """The envelope of a line with ``data`` kept as raw JSON."""

    seq: int
    type: str
    time: int
    data: msgspec.Raw
    surface: Surface | None = None
    sources: list[int] | None = None
    key: str | None = None
    ignorable: bool = False


class Row(NamedTuple):
    """One committed line: where it starts, its bytes and its envelope."""

    offset: int
    raw: bytes
    head: Head


_head = msgspec.json.Decoder(Head)
_event = msgspec.json.Decoder(Event)


def _good(raw: bytes) -> None:
    """Decode ``raw`` as an Event and drop it: the good-line test of read and verify."""
    try:
        _event.decode(raw)
    except RecursionError:
        raise too_deep(None, None, None) from None


def header_of(row: Row, path: str) -> HeaderData:
    """Validate line 1 (seq 0) as the session header."""
    return check_header(_event.decode(row.raw), path)


def rows(fd: int, path: str, stop: int | None = None) -> Iterator[Row]:
    """Yield committed rows in order, through seq ``stop`` if given.

    A bad line followed by a valid checkpoint is damage, not a crash: :class:`CorruptError`
    is raised at that line after every row before it was yielded. A bad line with no
    checkpoint after it starts a torn tail, which is not committed and not served.
    """
    decode = _head.decode
    frame_ok = _framing.frame_ok
    for expected, (off, raw) in enumerate(_framing.iter_lines(fd, 0)):
        head: Head | None = None
        problem: str | None = None
        if frame_ok(raw):
            try:
                # The good-line test is read's (spec §10.2): the whole line decoded as an
                # Event. Skipping ``data`` as raw JSON checks neither that it is an object,
                # nor its UTF-8, nor that its numbers fit a double, nor repeated members.
                _good(raw)
                try:
                    head = decode(raw)
                except RecursionError:
                    raise too_deep(None, None, None) from None
            except msgspec.DecodeError as exc:
                head = None
                problem = f"not a valid event envelope: {exc}"
            except FormatError:
                raise too_deep(path, expected + 1, off) from None
            else:
                if head.seq != expected:
                    problem = f"seq {head.seq} where {expected} was expected"
        else:
            problem = check(raw, None)[1] or "bad line"  # a frame problem: decodes nothing
        if problem is not None:
            if expected == 0:  # line 1: nothing before it can prove damage (spec §7)
                raise FormatError(
                    f"not a jsonltape session: line 1: {problem}", path=path, line=1, offset=0
                )
            if witness_after(fd, off + len(raw)):  # a too-deep line is never a witness
                raise CorruptError(problem, path=path, line=expected + 1, offset=off)
            return
        assert head is not None
        yield Row(off, raw, head)
        if stop is not None and expected >= stop:
            return
