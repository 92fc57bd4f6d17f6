"""The good-line rule of spec §10.2, in one place: every reader's lines come from here.

:func:`decode` is the one decode that judges a line's JSON (every byte of it, unknown members
included); :func:`scan` walks a file from an offset and yields its good lines until the first
line that is not good, which it yields as a :class:`Bad` and stops. ``verify``, ``read``,
``lines``, the fold, repair's tail check and the index's ingest all read through ``scan``, so a
line is good or bad for all of them alike.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple

import msgspec

from . import _framing
from .events import Event, Replace, Retract, SeqInt, TimeInt

__all__ = ["Bad", "Good", "decode", "problem_of", "scan", "scan_events"]

_strict = msgspec.json.Decoder(Event).decode
_any = msgspec.json.Decoder().decode


class _LooseReplace(msgspec.Struct, tag_field="op", tag="replace"):
    start: SeqInt
    end: SeqInt


class _LooseRetract(msgspec.Struct, tag_field="op", tag="retract"):
    start: SeqInt
    end: SeqInt


class _LooseEvent(msgspec.Struct):
    """The envelope with unknown members allowed (they are checked by a generic decode)."""

    seq: SeqInt
    type: str
    time: TimeInt
    data: dict[str, Any]
    surface: Any = None
    sources: list[SeqInt] | None = None
    key: str | None = None
    ignorable: bool = False
    crc: str = ""


_SurfaceIn = _LooseReplace | _LooseRetract | None
_loose = msgspec.json.Decoder(_LooseEvent)
_surface = msgspec.json.Decoder(_SurfaceIn)


def decode(body: bytes) -> Event:
    """Decode one line (with or without its ``\\n``) as an :class:`Event`.

    Raises ``msgspec.DecodeError`` when the line is not a good envelope (spec §4, §6): invalid
    UTF-8 or a lone surrogate anywhere, a number no double holds, a member of the wrong type or
    out of its range. ``RecursionError`` means the line nests too deep for this call stack
    (not damage: the caller names the line, spec §6).
    """
    try:
        event = _strict(body)
    except msgspec.ValidationError:
        event = _loose_event(body)  # an unknown member, or a real problem it names
    if _DIGIT_RUN.search(body) is not None and _holds_huge_int(body):
        raise msgspec.ValidationError("Number out of range (an integer no double can hold)")
    return event


def _loose_event(body: bytes) -> Event:
    loose = _loose.decode(body)
    _any(body)  # the bytes of the unknown members: UTF-8, numbers a double holds
    return Event(
        seq=loose.seq,
        type=loose.type,
        time=loose.time,
        data=loose.data,
        surface=_surface_of(loose.surface),
        sources=loose.sources,
        key=loose.key,
        ignorable=loose.ignorable,
        crc=loose.crc,
    )


# msgspec keeps an integer literal exactly, however long, where a double parser would overflow;
# spec §4 makes a number no double can hold a bad line, so such integers are looked for. Any
# such literal has at least 309 digits, and a run of 309 digits covers at least 4 consecutive
# points of a grid with a 77-byte step: a chunk whose sample shows no 4 digits in a row holds
# none. The screen costs one strided copy and a search over 1/77 of the bytes.
_STEP = 77
_SAMPLED_RUN = re.compile(rb"(?=[0-9]{4})")  # a lookahead: every start, overlaps included
_DIGIT_RUN = re.compile(rb"[0-9]{309}")


def _holds_huge_int(line: bytes) -> bool:
    """True when the JSON text ``line`` holds an integer that no double can hold."""
    try:
        stack = [_any(line)]
    except (msgspec.DecodeError, RecursionError):
        return False  # not JSON at all: the decode that judges the line says why
    while stack:
        value = stack.pop()
        if type(value) is int:
            try:
                float(value)
            except OverflowError:
                return True
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _huge_int_lines(buf: bytes) -> set[int]:
    """Where (offsets in ``buf``) the complete lines holding an integer no double holds start."""
    found: set[int] = set()
    seen: set[int] = set()
    for m in _SAMPLED_RUN.finditer(buf[::_STEP]):
        at = m.start() * _STEP
        start = buf.rfind(b"\n", 0, at) + 1
        end = buf.find(b"\n", at)
        if end < 0 or start in seen:
            continue  # a line that runs past the chunk is judged with the next one
        seen.add(start)
        line = buf[start:end]
        if _DIGIT_RUN.search(line) is not None and _holds_huge_int(line):
            found.add(start)
    return found


def _surface_of(value: Any) -> Any:
    if value is None or value == "append":
        return value
    if isinstance(value, dict):
        try:
            got = msgspec.convert(value, type=_SurfaceIn)
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(str(exc).replace("`$", "`$.surface")) from None
        if isinstance(got, _LooseReplace):
            return Replace(got.start, got.end)
        if isinstance(got, _LooseRetract):
            return Retract(got.start, got.end)
    raise msgspec.ValidationError(
        "Expected `str` equal to 'append' or an object with op replace/retract - at `$.surface`"
    )


#: A good line: (offset where it starts, its bytes without the ``\n``, its event). A plain
#: tuple, since a NamedTuple's constructor is a Python call per line.
Good = tuple[int, bytes, Event]


class Bad(NamedTuple):
    """The first line that is not good. ``raw`` keeps its ``\\n`` if it had one; ``line`` is
    the 1-based line number it should have had (None when a read started at an offset)."""

    offset: int
    raw: bytes
    line: int | None
    problem: str
    #: The line nests deeper than the decoder can follow: intact as far as we know (spec §6).
    too_deep: bool = False


def problem_of(raw: bytes, expected: int | None) -> tuple[Event | None, str | None]:
    """Judge one line on its own: ``(event, None)`` if good, else ``(event or None, problem)``.

    ``RecursionError`` propagates for a line too deep to decode.
    """
    if not raw.endswith(b"\n"):
        return None, "incomplete line (no newline at end of file)"
    if not _framing.frame_ok(raw):
        if _framing.crc_of(raw) is None:
            return None, "line does not end with the crc member"
        return None, "crc mismatch"
    try:
        event = decode(raw)
    except msgspec.DecodeError as exc:
        return None, f"not a valid event envelope: {exc}"
    if expected is not None and event.seq != expected:
        return event, f"seq {event.seq} where {expected} was expected"
    return event, None


def _bad(raw: bytes, offset: int, expected: int | None) -> Bad:
    line = None if expected is None else expected + 1
    try:
        problem = problem_of(raw, expected)[1] or "bad line"
    except RecursionError:
        return Bad(offset, raw, line, "", too_deep=True)
    return Bad(offset, raw, line, problem)


def scan(fd: int, start: int, expected: int | None, end: int | None = None) -> Iterator[Good | Bad]:
    """Yield the good lines of ``fd`` from offset ``start`` (up to ``end``), then the first line
    that is not good, if any, as :class:`Bad` — a final fragment without ``\\n`` included.

    ``expected`` is the seq the first line must have (None: whatever it has; the seqs after it
    must follow densely). The lines are checked over big chunks with the CRC suffix test
    inlined: a call per line would cost a third of a read.
    """
    return _walk(fd, start, expected, end, True)  # type: ignore[return-value]


def scan_events(
    open_: Callable[[], tuple[int, int, int | None]],
    *,
    min_seq: int,
    on_bad: Callable[[int, Bad], None],
) -> Iterator[Event]:
    """:func:`scan` as ``read`` serves it. ``open_`` runs at the first ``next`` and gives
    ``(fd, start, expected)``; the walk owns the fd and closes it when it ends. Only events
    with seq >= ``min_seq`` are yielded; the first line that is not good goes to
    ``on_bad(fd, bad)``, which raises or returns to end the walk. The same walk as
    :func:`scan`, without a tuple per line or a second generator around it."""
    return _walk(0, 0, None, None, False, min_seq, on_bad, open_)  # type: ignore[return-value]


def _walk(
    fd: int,
    start: int,
    expected: int | None,
    end: int | None,
    keep: bool,
    min_seq: int = 0,
    on_bad: Callable[[int, Bad], None] | None = None,
    open_: Callable[[], tuple[int, int, int | None]] | None = None,
) -> Iterator[Good | Event | Bad]:
    if open_ is not None:
        fd, start, expected = open_()
    try:
        bad = yield from _lines_of(fd, start, expected, end, keep, min_seq)
        if bad is not None:
            if on_bad is None:
                yield bad
            else:
                on_bad(fd, bad)
    finally:
        if open_ is not None:
            os.close(fd)


def _lines_of(
    fd: int, start: int, expected: int | None, end: int | None, keep: bool, min_seq: int
) -> Generator[Good | Event, None, Bad | None]:
    crc32 = zlib.crc32
    suffix = _framing.LINE_SUFFIX
    dec = _strict
    chunk_size = _framing.CHUNK
    pos = base = start  # base: the offset of the line at hand
    # The start of a line that has not ended yet, in pieces: a line of L bytes is joined once
    # when its newline arrives, not copied again with every chunk (O(L), not O(L²/CHUNK)).
    pending: list[bytes] = []
    while True:
        want = chunk_size if end is None else min(chunk_size, end - pos)
        chunk = os.pread(fd, want, pos) if want > 0 else b""
        if not chunk:
            break
        pos += len(chunk)
        if pending:
            pending.append(chunk)
            if chunk.find(b"\n") < 0:
                continue
            buf = b"".join(pending)
            pending = []
        elif chunk.find(b"\n") < 0:
            pending.append(chunk)
            continue
        else:
            buf = chunk
        buf_at = base
        huge = _huge_int_lines(buf) if _SAMPLED_RUN.search(buf[::_STEP]) else None
        parts = buf.split(b"\n")
        carry = parts.pop()
        if carry:
            pending.append(carry)
        for body in parts:
            # The line ends with exactly the suffix its own CRC gives (one format and one
            # compare check the crc member's place, spelling and value) and starts with "{".
            if body.endswith(suffix % crc32(body[:-18])) and body[0] == 0x7B:
                try:
                    event = dec(body)
                except msgspec.DecodeError:
                    try:
                        event = decode(body)  # unknown members: checked the slow way
                    except (msgspec.DecodeError, RecursionError):
                        event = None
                except RecursionError:
                    event = None
                if (
                    event is not None
                    and (expected is None or event.seq == expected)
                    and (huge is None or base - buf_at not in huge)
                ):
                    expected = event.seq + 1
                    if keep:
                        yield (base, body, event)
                    elif expected > min_seq:
                        yield event
                    base += len(body) + 1
                    continue
            return _bad(body + b"\n", base, expected)
    return _bad(b"".join(pending), base, expected) if pending else None
