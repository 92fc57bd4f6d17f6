"""Live transcripts: new events of a session as server-sent events, as a writer commits them.

The library's follow (``jsonltape.read(path, follow=True)``) reads the file: each committed
event exactly once, across checkpoints and across a crash whose torn tail ``repair`` cuts. It
blocks, so each page that follows gets a thread of its own (not one of the server's worker
threads, which would run out with many open pages); the thread hands each event, rendered
as the page renders it, to the client's queue. The follow is restarted after each second
without news so that a page that left is noticed, and a restart checks that the last event
served is still there, byte for byte (its crc), so a file rewritten between two restarts is
caught as the library's follow catches it within one.

A replaced or deleted file ends the stream with one ``gone`` event the page shows.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import jsonltape
from jsonltape import ConcurrentModificationError, Event, JsonltapeError

__all__ = ["Follower", "stream"]

#: Seconds without a new event after which a follow is restarted (and a gone page noticed).
IDLE = 1.0


class Follower:
    """Follows one file from ``from_seq`` in a thread; calls ``emit(kind, payload)`` with
    ``("events", [Event, ...])`` and at the end ``("gone", reason)``."""

    def __init__(
        self,
        path: str,
        from_seq: int,
        emit: Callable[[str, Any], None],
        *,
        after: tuple[int, str] | None = None,
        idle: float = IDLE,
    ) -> None:
        self.path, self.next_seq, self.emit, self.idle = path, from_seq, emit, idle
        self.stop = threading.Event()
        #: (seq, crc) of the last event served: at first the last one the page drew, which
        #: must still be there (a file replaced before the page connected is caught too)
        self._last: tuple[int, str] | None = after
        self._file = _identity(path)
        self.thread = threading.Thread(target=self._run, name="jsonltape-follow", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            if self._last is not None and not self._still_there(*self._last):
                self.emit("gone", "the session file changed since this page was drawn: reload it")
                return
            while not self.stop.is_set():
                self._follow_once()
                if self.stop.is_set():
                    return
                now = _identity(self.path)
                if now is None:
                    self.emit("gone", "the session file was deleted")
                    return
                if now != self._file:
                    self.emit("gone", "the session file was replaced by another file")
                    return
        except ConcurrentModificationError:
            self.emit("gone", "the session file was replaced or rewritten under the viewer")
        except (JsonltapeError, OSError) as exc:
            self.emit("gone", f"the session can no longer be followed: {exc}")

    def _still_there(self, seq: int, crc: str) -> bool:
        for line in jsonltape.lines(self.path, from_seq=seq):
            return line.event.seq == seq and line.event.crc == crc
        return False

    def _follow_once(self) -> None:
        start = self._last[0] if self._last is not None else self.next_seq
        events = jsonltape.read(self.path, follow=True, from_seq=start, idle_timeout=self.idle)
        try:
            for e in events:
                if self._last is not None and e.seq <= self._last[0]:
                    if e.seq == self._last[0] and e.crc != self._last[1]:
                        raise ConcurrentModificationError(
                            "the last event served changed", path=self.path
                        )
                    continue
                if e.seq < self.next_seq:
                    continue
                self._last = (e.seq, e.crc)
                self.emit("events", [e])
                if self.stop.is_set():
                    return
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


async def stream(
    path: str,
    from_seq: int,
    render: Callable[[list[Event]], list[dict[str, Any]]],
    *,
    after: tuple[int, str] | None = None,
    idle: float = IDLE,
) -> AsyncIterator[dict[str, Any]]:
    """Server-sent events for a page: ``block`` items (one per rendered block, with its seq
    and the call it answers), ``seq`` (the last seq sent) and at the end one ``gone``.
    ``after``: the seq and crc of the last event the page drew. Stops its thread when the
    client leaves (the generator is closed)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def emit(kind: str, payload: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

    follower = Follower(path, from_seq, emit, after=after, idle=idle)
    follower.start()
    try:
        while True:
            kind, payload = await queue.get()
            if kind == "gone":
                yield {"event": "gone", "data": str(payload)}
                return
            for item in await asyncio.to_thread(render, payload):
                yield item
    finally:
        follower.stop.set()
