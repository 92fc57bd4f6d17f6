"""Follow a live session: yield its committed lines as a writer appends them.

``read(path, follow=True)`` and ``jsonltape cat/messages --follow`` read through
:func:`follow_lines`. The verdict on each line is the one every reader gives (``_lines.scan``,
spec §10.2): a line is served once it is complete and good, in seq order, each exactly once.
What differs is the end of the file:

- a final fragment without its newline, or a bad line with no checkpoint after it (a torn
  tail), is not served and not reported: a writer may still finish it, or a crash left it and
  ``repair`` (or the next writer) will cut it. The follow waits at the last good line;
- a bad line with a valid checkpoint after it is damage (spec §10.2, corrupt):
  :class:`CorruptError`, as ``read`` raises it;
- the file shrinking back to the end of the last good line (repair cutting a torn tail) and
  growing again is how a crash is recovered, and the follow goes on from there;
- the file shrinking below what was served (or cut and rewritten between two wake-ups: the
  last line served is no longer where it was), rewritten in place (below), or another file
  taking its name (a new inode, or none), ends the follow with one
  :class:`ConcurrentModificationError`: what was served can no longer be vouched for, and
  following the new file from its start is the caller's choice.

A rewrite in place that leaves the size as it was (an editor saving over the file, a patched
byte) is found from the file's stamp: a writer only appends, so a file whose mtime or ctime
changed between two idle wake-ups while its size did not was written to in place (or only
touched or chmodded). Then the bytes served are read again and their CRC-32 compared with the
one kept while serving them (a rewrite that keeps every served byte, a ``touch``, goes on);
that re-read costs O(bytes served), and only a write that does not grow the file pays it. Not
seen: a rewrite between the same two wake-ups as an append that grows the file, when what
follows the last line served still reads as its next line; and, on a kernel with coarse
timestamps (Linux before 6.13), a rewrite within the same clock tick (a few ms) as the write
before it.

Waiting is a bounded poll, not a file-system watch: after a wake-up that found nothing the
next sleep doubles, from 10 ms up to 250 ms, and drops back to 10 ms as soon as a line
arrives. A wake-up costs one ``pread`` at the end of the file, a ``stat`` and an ``fstat``, so
an idle follow wakes about four times a second and uses microseconds of CPU. A watch (inotify,
``watchdog``) would need a dependency and falls back to polling on network and container file
systems anyway, where a poll works the same everywhere; a viewer does not notice 250 ms.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

from . import _framing, _fs
from ._lines import Bad, scan
from ._scan import too_deep, witness_after
from ._seek import start_of
from .errors import ConcurrentModificationError, CorruptError, InvalidArgumentError
from .events import Event, Line

__all__ = [
    "MAX_DELAY",
    "MIN_DELAY",
    "delays",
    "follow_events",
    "follow_lines",
]

#: The first sleep after a wake-up that found nothing new, and the longest (seconds).
MIN_DELAY = 0.01
MAX_DELAY = 0.25


def delays() -> Iterator[float]:
    """The sleeps of an idle follow: 10 ms, doubling each time, then 250 ms for ever."""
    delay = MIN_DELAY
    while True:
        yield delay
        delay = min(delay * 2, MAX_DELAY)


def follow_events(
    path: str | os.PathLike[str],
    *,
    from_seq: int = 0,
    from_offset: int | None = None,
    idle_timeout: float | None = None,
) -> Iterator[Event]:
    """The events of :func:`follow_lines` (what ``read(path, follow=True)`` returns)."""
    lines = follow_lines(
        path, from_seq=from_seq, from_offset=from_offset, idle_timeout=idle_timeout
    )
    return _events_of(lines)  # not a generator itself: a bad idle_timeout raises at the call


def _events_of(lines: Generator[Line, None, None]) -> Generator[Event, None, None]:
    try:
        for line in lines:
            yield line.event
    finally:
        lines.close()  # the file is closed when the caller closes this iterator, not later


def follow_lines(
    path: str | os.PathLike[str],
    *,
    from_seq: int = 0,
    from_offset: int | None = None,
    idle_timeout: float | None = None,
    on_wait: Callable[[], object] | None = None,
) -> Generator[Line, None, None]:
    """Yield the committed lines of ``path`` from ``from_seq`` (or ``from_offset``) on, then
    each new one as it is committed, until ``idle_timeout`` seconds pass without a new line
    (None: for ever; the caller stops by closing the iterator or on KeyboardInterrupt).

    ``on_wait`` is called before each sleep (the command line flushes its output there, so
    a batch of lines is written with one write, not one per line).
    """
    if idle_timeout is not None and not idle_timeout >= 0:  # `not >=` also refuses nan
        raise InvalidArgumentError(
            f"idle_timeout must be None or a number of seconds >= 0, got {idle_timeout!r}",
            field="idle_timeout",
        )
    return _follow(_fs.given_path(path), from_seq, from_offset, idle_timeout, on_wait)


def _follow(
    p: Path,
    min_seq: int,
    from_offset: int | None,
    idle_timeout: float | None,
    on_wait: Callable[[], object] | None,
) -> Generator[Line, None, None]:
    where = str(p)
    fd = _fs.open_for_read(p)
    try:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        stamp = _stamp(st)
        pos, expected = start_of(fd, where, min_seq, from_offset)
        start, crc = pos, 0  # the bytes read from start to pos, and their CRC-32
        idle_since = time.monotonic()
        sleeps = delays()
        last = b""  # the end of the last line served: its crc member and newline
        while True:
            served = False
            for item in scan(fd, pos, expected):
                if isinstance(item, Bad):
                    if last and item.offset == pos:
                        _still_there(p, fd, pos, last)
                    _judge(fd, where, item)
                    break  # a torn tail or a fragment: wait for a writer or a repair
                off, body, event = item
                raw = body + b"\n"
                pos = off + len(raw)
                expected = event.seq + 1
                crc = zlib.crc32(raw, crc)
                served = True
                last = raw[-19:]
                if event.seq >= min_seq:
                    yield Line(off, raw, event)
            if served:
                idle_since = time.monotonic()
                sleeps = delays()
                continue  # more may have come while those were served: look again at once
            now = _stamp(_same_file(p, fd, ident, pos))
            if now[0] == stamp[0] and now != stamp:  # written to, yet no bigger
                _unchanged(p, fd, start, pos, crc)
            stamp = now
            wait = next(sleeps)
            if idle_timeout is not None:
                left = idle_since + idle_timeout - time.monotonic()
                if left <= 0:
                    return
                wait = min(wait, left)
            if on_wait is not None:
                on_wait()
            time.sleep(wait)
    finally:
        os.close(fd)


def _judge(fd: int, path: str, bad: Bad) -> None:
    """A line that is not good: raise if it is damage, return if it may be a torn tail."""
    if bad.too_deep:
        raise too_deep(path, bad.line, bad.offset)
    if bad.raw.endswith(b"\n") and witness_after(fd, bad.offset + len(bad.raw)):
        raise CorruptError(bad.problem, path=path, line=bad.line, offset=bad.offset)


def _still_there(p: Path, fd: int, pos: int, end: bytes) -> None:
    """Raise unless the last line served still ends at ``pos`` with the same crc member: a
    file cut below it and rewritten between two wake-ups has the size to pass for grown, not
    the bytes (its CRC matches by chance with probability 2⁻³²)."""
    if os.pread(fd, len(end), pos - len(end)) != end:
        raise ConcurrentModificationError(
            "the session file was rewritten while it was followed: the last line served,"
            f" which ended at offset {pos}, is no longer there",
            path=p,
            offset=pos,
        )


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    """What changes when a file is written to: its size, mtime and ctime (the ctime too, since
    a program may set the mtime back after rewriting the file)."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _unchanged(p: Path, fd: int, start: int, end: int, crc: int) -> None:
    """Raise unless the bytes from ``start`` to ``end`` still have the CRC-32 they had when
    they were served: the file was written to without growing (rewritten in place, or only
    touched or chmodded, which this tells apart)."""
    now = 0
    for at in range(start, end, _framing.CHUNK):
        now = zlib.crc32(os.pread(fd, min(_framing.CHUNK, end - at), at), now)
    if now != crc:
        raise ConcurrentModificationError(
            "the session file was rewritten in place while it was followed: the bytes already"
            f" served, from offset {start} to {end}, are no longer the same",
            path=p,
            offset=start,
        )


def _same_file(p: Path, fd: int, ident: tuple[int, int], pos: int) -> os.stat_result:
    """Raise unless the path still names the file being followed and that file still holds
    every byte already served (repair may cut it back to ``pos``, never below); return the
    file's stat."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise ConcurrentModificationError(
            "the session file was removed while it was followed", path=p
        ) from None
    if (st.st_dev, st.st_ino) != ident:
        raise ConcurrentModificationError(
            "the session file was replaced by another file while it was followed; "
            "follow it again to read the new file from its start",
            path=p,
        )
    now = os.fstat(fd)
    size = now.st_size
    if size < pos:
        raise ConcurrentModificationError(
            f"the session file shrank to {size} bytes while it was followed, below the "
            f"{pos} bytes already read: lines that were served are gone",
            path=p,
            offset=size,
        )
    return now
