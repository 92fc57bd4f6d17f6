"""The good-line rule of spec §10.2, in one place: every reader's lines come from here.

:func:`decode` is the one decode that judges a line's JSON (every byte of it, unknown members
included); a ``branch/start`` or ``branch/event`` line must also have the shape of spec
§8.7.14 (format 1.2: their data is acted on by merges, and a fold skips them, so nothing else
would ever judge it). :func:`scan` walks a file from an offset and yields its good lines until
the first line that is not good, which it yields as a :class:`Bad` and stops. ``verify``, ``read``,
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

from . import _framing, _records
from ._records import BRANCH_TYPES
from .events import Event, FlushData, Replace, Retract, SeqInt, TimeInt

__all__ = [
    "Bad",
    "Good",
    "Run",
    "branch_problem",
    "checkpoint_at",
    "decode",
    "problem_of",
    "scan",
    "scan_events",
    "scan_runs",
]

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
    if event.type in BRANCH_TYPES:
        return event, branch_problem(event, raw)
    return event, None


def branch_problem(event: Event, body: bytes) -> str | None:
    """What makes the ``branch/start`` or ``branch/event`` ``event`` (its line ``body``, with
    or without the newline, a good envelope) break the shape of spec §8.7.14, or None.

    A ``branch/event``'s ``line`` must be a good line on its own (its own checksum, the
    envelope; its seq is not compared with its position). ``RecursionError`` propagates.
    """
    if event.ignorable is not True or event.surface is not None:
        return f"a {event.type} is ignorable and takes no surface (spec §8.7.14)"
    try:
        if event.type == "branch/start":
            return _records.start_problem(event.seq, _records.start_data(body))
        rec = _records.recorded(body)
    except msgspec.DecodeError as exc:
        return f"not a {event.type} of spec §8.7.14: {exc}"
    if not _framing.frame_ok(rec.line + b"\n"):
        return "branch/event: the recorded line fails its own checksum - at `$.data.line`"
    try:
        line = decode(rec.line)
    except msgspec.DecodeError as exc:
        return f"branch/event: the recorded line is not a valid event envelope: {exc}"
    return _records.event_problem(event.seq, rec, line.seq, line.type)


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
    return _walk(fd, start, expected, end, _LINES)  # type: ignore[return-value]


class Run:
    """Good lines that a span vouched for (spec §10.2), decoded by one call: ``events`` are
    the lines from offset ``start`` up to ``end``. Where one of them starts is worked out
    only when asked (:meth:`offset_of`), since a verify needs few such offsets."""

    __slots__ = ("_at", "_buf", "end", "events", "start")

    def __init__(self, buf: bytes, at: int, start: int, end: int, events: list[Event]) -> None:
        self._buf, self._at = buf, at
        self.start, self.end, self.events = start, end, events

    def offset_of(self, index: int) -> int:
        """The offset at which the line of ``events[index]`` starts."""
        p = self._at
        for _ in range(index):
            p = self._buf.find(b"\n", p) + 1
        return self.start + p - self._at


def scan_runs(fd: int, start: int, expected: int | None) -> Iterator[Good | Run | Bad]:
    """:func:`scan` for a caller that needs few offsets (``verify``): the lines a span covers
    come as :class:`Run` items, the others as :data:`Good` tuples, in file order."""
    return _walk(fd, start, expected, None, _RUNS)  # type: ignore[return-value]


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
    return _walk(0, 0, None, None, _EVENTS, min_seq, on_bad, open_)  # type: ignore[return-value]


# What a walk yields: events (read), (offset, line, event) tuples (every other reader), or
# runs of events for the lines a span covers and tuples for the others (verify).
_EVENTS, _LINES, _RUNS = 0, 1, 2


def _walk(
    fd: int,
    start: int,
    expected: int | None,
    end: int | None,
    mode: int,
    min_seq: int = 0,
    on_bad: Callable[[int, Bad], None] | None = None,
    open_: Callable[[], tuple[int, int, int | None]] | None = None,
) -> Iterator[Good | Event | Run | Bad]:
    if open_ is not None:
        fd, start, expected = open_()
    try:
        bad = yield from _lines_of(fd, start, expected, end, mode, min_seq)
        if bad is not None:
            if on_bad is None:
                yield bad
            else:
                on_bad(fd, bad)
    finally:
        if open_ is not None:
            os.close(fd)


#: How a checkpoint line written by a writer spells its type; a span is looked for only there
#: (one spelled with JSON escapes is still a checkpoint, its lines are checked one by one).
_FLUSH = b'"type":"session/flush"'
#: The most bytes held back waiting for the checkpoint whose span covers them; past it the
#: held lines are checked by their own CRCs. A span that long holds lines of kilobytes, where
#: a line's own CRC costs little next to its decode.
HOLD_MAX = 2 << 20
#: Bytes of a span decoded by one ``decode_lines`` call: small enough that the events it
#: returns at once do not set off the garbage collector, big enough to save the split.
_BLOCK = 1 << 15
_strict_lines = msgspec.json.Decoder(Event).decode_lines


def _lines_of(
    fd: int, start: int, expected: int | None, end: int | None, mode: int, min_seq: int
) -> Generator[Good | Event | Run, None, Bad | None]:
    """The walk: chunks of the file, each judged line by line.

    Lines are judged only up to the last checkpoint in what was read (the rest is held for
    the next chunk), so that a span (format 1.1) is checked before any line it covers is
    served. Files without spans are judged chunk by chunk, as before spans existed.
    """
    crc32 = zlib.crc32
    suffix = _framing.LINE_SUFFIX
    dec = _strict
    dec_lines = _strict_lines
    keep = mode != _EVENTS
    chunk_size = _framing.CHUNK
    pos = base = start  # base: the offset of the line at hand
    span_from = start  # where a span must start to be used: after the last checkpoint line
    spans = True  # the last checkpoint seen had a span (or none was seen yet): hold for it
    # The bytes from `base` not judged yet, in pieces: a long line is joined once when its
    # newline arrives, not copied again with every chunk (O(L), not O(L²/CHUNK)).
    held: list[bytes] = []
    held_len = 0
    eof = False
    while not eof:
        want = chunk_size if end is None else min(chunk_size, end - pos)
        chunk = os.pread(fd, want, pos) if want > 0 else b""
        if chunk:
            pos += len(chunk)
            held.append(chunk)
            held_len += len(chunk)
            last = chunk.rfind(b"\n")
            if last < 0:
                continue
            # Only the new chunk is searched: what is held had no checkpoint (one whose type
            # straddles two chunks is found when a later checkpoint makes the buffer whole).
            if spans and chunk.rfind(_FLUSH, 0, last) < 0 and held_len < HOLD_MAX:
                continue
        elif not held:
            return None
        else:
            eof = True  # judge what is held, whatever spans it waited for
        buf = b"".join(held) if len(held) > 1 else held[0]
        cut = buf.rfind(b"\n") + 1
        if spans and not eof:
            flush = buf.rfind(_FLUSH, 0, cut)
            if flush >= 0:
                cut = buf.find(b"\n", flush) + 1
        held = [buf[cut:]] if cut < len(buf) else []
        held_len = len(buf) - cut
        if not cut:
            break  # only a fragment without a newline is left
        buf_at = base  # buf[:cut] is judged now (not copied: the copy would double the hold)
        ranges, span_from, had_span = _spans_in(buf, cut, buf_at, span_from)
        if had_span is not None:
            spans = had_span
        huge = _huge_int_lines(buf) if _SAMPLED_RUN.search(buf[::_STEP]) else None
        view = memoryview(buf)
        # The chunk in segments: lines a span covers (no CRC of their own needed) and the
        # lines between spans (their checkpoints included), each judged by its own CRC.
        segments: list[tuple[int, int, bool]] = []
        at = 0
        for first, stop in ranges:
            if first - buf_at > at:
                segments.append((at, first - buf_at, False))
            segments.append((first - buf_at, stop - buf_at, True))
            at = stop - buf_at
        if at < cut:
            segments.append((at, cut, False))
        whole_tail = buf.find(b"\n", cut) < 0
        for a, b, covered in segments:
            if covered and mode != _LINES and (huge is None or not any(a <= h < b for h in huge)):
                # `read` over a span: msgspec decodes the lines of a block in one call (every
                # line strictly, as `dec` would); a block it refuses, or whose seqs are not
                # dense, is judged line by line below.
                while a < b:
                    e = buf.find(b"\n", min(a + _BLOCK, b) - 1) + 1
                    try:
                        events = dec_lines(view[a:e])
                    except (msgspec.DecodeError, RecursionError):
                        break
                    n = len(events)
                    if (
                        not n
                        or (expected is not None and events[0].seq != expected)
                        or [item.seq for item in events]
                        != list(range(events[0].seq, events[0].seq + n))
                        or not BRANCH_TYPES.isdisjoint([item.type for item in events])
                    ):
                        break  # a seq out of place or a branch record: judged line by line
                    expected = events[-1].seq + 1
                    if mode == _RUNS:
                        yield Run(buf, a, buf_at + a, buf_at + e, events)
                    elif expected - n >= min_seq:
                        yield from events
                    else:
                        for item in events:
                            if item.seq >= min_seq:
                                yield item
                    base = buf_at + e
                    a = e
                if a >= b:
                    continue
            # A segment ends with "\n"; the last one is split with the fragment after it when
            # that holds no line (the usual chunk), which saves copying the segment.
            if b == cut and whole_tail:
                parts = (buf[a:] if a else buf).split(b"\n")
            else:
                parts = buf[a:b].split(b"\n")
            parts.pop()
            for body in parts:
                # The line ends with exactly the suffix its own CRC gives (one format and one
                # compare check the crc member's place, spelling and value), or a span that
                # matched covers it (its crc member included); and it starts with "{".
                checked = (covered and body) or body.endswith(suffix % crc32(body[:-18]))
                if checked and body[0] == 0x7B:
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
                        and (event.type not in BRANCH_TYPES or _branch_ok(event, body))
                    ):
                        expected = event.seq + 1
                        if keep:
                            yield (base, body, event)
                        elif expected > min_seq:
                            yield event
                        base += len(body) + 1
                        continue
                return _bad(body + b"\n", base, expected)
    return _bad(b"".join(held), base, expected) if held else None


def _branch_ok(event: Event, body: bytes) -> bool:
    try:
        return branch_problem(event, body) is None
    except RecursionError:
        return False  # judged again by problem_of, which names the line too deep


def checkpoint_at(event: Event, off: int) -> FlushData | None:
    """The data of ``event`` when it is a valid checkpoint at offset ``off`` (spec §10.2: a
    ``session/flush`` whose data has the shape of §8.5, its span included, and records its own
    offset); None for any other event."""
    if event.type != "session/flush":
        return None
    try:
        data = msgspec.convert(event.data, type=FlushData)
    except msgspec.ValidationError:
        return None
    if data.offset != off or (data.span is not None and data.span.from_ > off):
        return None
    return data


def _spans_in(
    buf: bytes, cut: int, at: int, span_from: int
) -> tuple[list[tuple[int, int]], int, bool | None]:
    """The spans that matched among the checkpoints in ``buf[:cut]`` (whole lines from offset
    ``at``): ``([(from, end)...] in order, where the next span must start, whether the last
    checkpoint had a span)`` (None: no checkpoint in ``buf``). A span is used when its
    checkpoint line is good on its own, its ``from`` is where the previous checkpoint line
    ended, and the CRC-32 of its bytes matches; the lines it covers then need no CRC of
    their own (spec §10.2)."""
    verified: list[tuple[int, int]] = []
    had_span: bool | None = None
    view = memoryview(buf)
    i = buf.find(_FLUSH, 0, cut)
    while i >= 0:
        start = buf.rfind(b"\n", 0, i) + 1
        stop = buf.find(b"\n", i) + 1
        i = buf.find(_FLUSH, stop, cut)
        line = buf[start:stop]
        try:
            event, problem = problem_of(line, None)
        except RecursionError:
            continue
        if problem is not None or event is None or event.type != "session/flush":
            continue
        off = at + start
        ck = checkpoint_at(event, off)
        span = ck.span if ck is not None else None
        had_span = span is not None
        if (
            span is not None
            and span.from_ == span_from
            and at <= span_from < off
            and f"{zlib.crc32(view[span_from - at : start]):08x}" == span.crc
        ):
            verified.append((span_from, off))
        span_from = at + stop
    return verified, span_from, had_span
