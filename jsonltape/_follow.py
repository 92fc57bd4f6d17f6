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
  last line served is no longer where it was), or another file taking its name (a new
  inode, or none), ends the follow with one :class:`ConcurrentModificationError`: what was
  served can no longer be vouched for, and following the new file from its start is the
  caller's choice.

Waiting is a bounded poll, not a file-system watch: after a wake-up that found nothing the
next sleep doubles, from 10 ms up to 250 ms, and drops back to 10 ms as soon as a line
arrives. A wake-up costs one ``pread`` at the end of the file and two ``stat`` calls, so an
idle follow wakes about four times a second and uses microseconds of CPU. A watch (inotify,
``watchdog``) would need a dependency and falls back to polling on network and container file
systems anyway, where a poll works the same everywhere; a viewer does not notice 250 ms.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path
from typing import Any

from . import _fs
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
    "follow_messages",
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
        pos, expected = start_of(fd, where, min_seq, from_offset)
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
                pos = off + len(body) + 1
                expected = event.seq + 1
                served = True
                last = body[-18:] + b"\n"
                if event.seq >= min_seq:
                    yield Line(off, body + b"\n", event)
            if served:
                idle_since = time.monotonic()
                sleeps = delays()
                continue  # more may have come while those were served: look again at once
            _same_file(p, fd, ident, pos)
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


def _same_file(p: Path, fd: int, ident: tuple[int, int], pos: int) -> None:
    """Raise unless the path still names the file being followed and that file still holds
    every byte already served (repair may cut it back to ``pos``, never below)."""
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
    size = os.fstat(fd).st_size
    if size < pos:
        raise ConcurrentModificationError(
            f"the session file shrank to {size} bytes while it was followed, below the "
            f"{pos} bytes already read: lines that were served are gone",
            path=p,
            offset=size,
        )


def follow_messages(
    path: str | os.PathLike[str],
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
    idle_timeout: float | None = None,
    on_wait: Callable[[], object] | None = None,
) -> Iterator[dict[str, Any]]:
    """The model-visible history of ``path`` as it grows: each message (the neutral item of
    ``messages``) once it becomes visible, and a marker when messages leave the surface.

    The fold is the one ``messages`` runs (``fold.SessionFold``), fed one committed line at a
    time. A message is yielded when its event is folded (a fork's inherited history first).
    A later event that takes shown messages off the surface (a retraction, a revision, a
    compaction) yields ``{"removed": [seq, ...], "status": "retracted" | "superseded" |
    "compacted", "by": seq}`` before the message that replaces them, if any; the replacing
    message takes the place of the removed ones in the history (``messages`` shows the
    resulting order). Nothing shown is ever yielded twice.
    """
    from .fold._convert import neutral_item
    from .fold._fold import SessionFold, _base
    from .fold._stream import Row, header_of

    p = _fs.given_path(path)
    lines = follow_lines(p, idle_timeout=idle_timeout, on_wait=on_wait)
    try:
        first = next(lines, None)
        if first is None:
            return
        row = Row(first.offset, first.raw, first.event)
        header = header_of(row, str(p))
        base = _base(p, header, parents, (), False) if header.parent else None
        fold = SessionFold(str(p), header, base, versions=True)
        fold.apply(row)
        for node in base.nodes if base is not None else ():
            yield neutral_item(node)
        shown: set[int] = set()
        for line in lines:
            event = line.event
            fold.apply(Row(line.offset, line.raw, event))
            if event.surface is not None and event.surface != "append":
                gone: dict[str, list[int]] = {}
                for s in sorted(shown - fold.nodes.keys()):
                    gone.setdefault(fold.status[s][0], []).append(s)
                    shown.discard(s)
                for status, seqs in gone.items():
                    yield {"removed": seqs, "status": status, "by": event.seq}
            now = fold.nodes.get(event.seq)
            if now is not None and event.seq not in shown:
                shown.add(event.seq)
                yield neutral_item(now)
    finally:
        lines.close()
