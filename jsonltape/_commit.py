"""The write path of a Tape: queue lines, write them, sync, checkpoint (a mixin).

Order is everything here (spec §10.1): lines reach the file in seq order with one write per
batch; a checkpoint is written only after the sync that covers every byte before it returned,
and lands exactly at the offset it records. Group commit runs its sync in a flusher thread
without the lock, so appends go on meanwhile; nothing reaches the file while that sync runs.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from . import _framing, _fs
from ._gate import encoder
from ._prepare import now_ms, write_all
from .errors import ConcurrentModificationError, JsonltapeError, WriterFailedError
from .events import Event, FlushData, TurnRef

__all__ = ["MAX_BUFFER", "Committer"]

#: Queued bytes beyond which lines are written out before the next sync.
MAX_BUFFER = 1 << 20
_TURN_TYPES = frozenset({"turn/start", "turn/end", "step/start", "step/end"})


class _FlushOut(msgspec.Struct, omit_defaults=True):
    """A checkpoint line's envelope in canonical member order (``_Out`` with typed data)."""

    seq: int
    type: str
    time: int
    data: FlushData
    ignorable: bool  # no default: always written, like every ignorable event's flag


def _checkpoint_line(seq: int, now: int, data: FlushData) -> bytes:
    """The framed ``session/flush`` line at ``seq``. The writer's own data needs no lossless
    gate or shape check; this runs once per append in durability "always"."""
    body = encoder.encode(_FlushOut(seq, "session/flush", now, data, True))
    return _framing.frame(body)


class Committer:
    """Queueing, writing, syncing and checkpointing for :class:`jsonltape.Tape`."""

    if TYPE_CHECKING:
        path: Path
        _fd: int
        _ops: _fs.FileOps
        _mutex: threading.RLock
        _cond: threading.Condition
        _buf: list[bytes]
        _size: int
        _written: int
        _next_seq: int
        _durable_seq: int
        _last_time: int
        _pending: int
        _keys: dict[str, int] | None
        _turn: TurnRef | None
        _step: int | None
        _ident: tuple[int, int]
        _header_line: bytes
        _failed: BaseException | None
        _durability: str
        _group_events: int
        _group_s: float
        _deadline: float | None
        _flusher: threading.Thread | None
        _closed: bool
        _syncing: bool
        _ckpt_due: tuple[int, int, TurnRef | None] | None

        def _check_usable(self) -> None: ...

    def _stage(self, prepared: list[tuple[bytes, Event]]) -> None:
        """Queue whole lines for the next write and advance the writer's state."""
        start = self._size
        for line, event in prepared:
            self._buf.append(line)
            if self._keys is not None and event.key is not None:
                self._keys[event.key] = start
            if event.type in _TURN_TYPES:
                self._track_turn(event, start)
            start += len(line)
        self._size = start
        self._next_seq = prepared[-1][1].seq + 1
        self._last_time = prepared[-1][1].time
        self._pending += len(prepared)
        if self._size - self._written > MAX_BUFFER:
            self._drain()

    def _stage_one(self, line: bytes, event: Event) -> None:
        """:meth:`_stage` for one event without a key (the plain ``append``), unrolled: it
        runs once per event, and the general loop costs a third of an append's bookkeeping."""
        self._buf.append(line)
        if event.type in _TURN_TYPES:
            self._track_turn(event, self._size)
        self._size += len(line)
        self._next_seq = event.seq + 1
        self._last_time = event.time
        self._pending += 1
        if self._size - self._written > MAX_BUFFER:
            self._drain()

    def _track_turn(self, event: Event, start: int) -> None:
        t = event.type
        if t == "turn/start":
            self._turn = TurnRef(event.seq, start)
            self._step = None
        elif t == "turn/end":
            self._turn = None
            self._step = None
        elif t == "step/start":
            self._step = event.seq
        elif t == "step/end":
            self._step = None

    def _drain(self) -> None:
        """Hand the queued lines to the OS in one write (no sync), after checking that nobody
        else changed the file since our last write."""
        if not self._buf:
            return
        while self._syncing:  # a background round owns the file's end until its checkpoint
            self._cond.wait()
        if self._failed is not None:
            self._check_usable()
        self._check_unchanged(identity=False)
        blob = b"".join(self._buf)
        self._buf.clear()
        try:
            write_all(self._ops, self._fd, blob)
        except OSError as exc:
            self._rollback(exc)
            raise WriterFailedError(f"write failed: {exc.strerror or exc}", path=self.path) from exc
        self._written += len(blob)

    def _rollback(self, exc: OSError) -> None:
        """Cut a partial write so the file still ends on a line boundary, and stop: the lost
        events were never reported durable, and a failing write may be a failing device."""
        self._failed = exc
        try:
            self._ops.truncate(self._fd, self._written)
        except OSError as again:
            self._failed = again

    def _check_unchanged(self, *, identity: bool) -> None:
        """Fail if someone else changed the file: its size before every write (so we never
        append after a foreign truncation or append), and with ``identity`` (after the last
        write, before every sync: so a change that raced that write is never reported durable)
        its size, that the path still names our file (a git checkout replaces it by
        rename) and that the header line is still the one we read or wrote (an in-place
        edit of the same size changes neither size nor inode)."""
        if identity:
            # One lstat of the path answers both: when it names our inode, its size is ours.
            try:
                st = os.stat(self.path, follow_symlinks=False)
                same = (st.st_dev, st.st_ino) == self._ident
            except FileNotFoundError:
                same = False
        else:
            st, same = os.fstat(self._fd), True
        what = None
        if not same or st.st_size != self._written:
            what = (
                "was replaced or removed"
                if not same
                else f"changed size from {self._written} to {st.st_size} bytes"
            )
        elif identity and os.pread(self._fd, len(self._header_line), 0) != self._header_line:
            # An in-place edit keeps size and inode; the header is the line a fold trusts
            # most, and one pread per sync costs nothing next to the sync itself.
            what = "had its header (line 1) edited in place"
        if what is not None:
            exc = ConcurrentModificationError(
                f"the session file {what} behind this writer's back (another program, a git "
                "checkout?); nothing more is appended to it",
                path=self.path,
            )
            self._failed = exc
            raise exc

    def _after_append(self) -> None:
        if self._durability == "always":
            self._flush_locked(defer=True)
            return
        if self._durability != "group":
            return
        if self._pending >= self._group_events:
            if self._deadline == 0.0:
                return  # already due; the flusher thread will get to it
            self._deadline = 0.0  # due now; the flusher thread syncs while appends go on
        elif self._deadline is None:
            self._deadline = time.monotonic() + self._group_s
        else:
            return
        if self._flusher is None:
            self._flusher = threading.Thread(
                target=self._flush_loop, daemon=True, name=f"jsonltape-flush:{self.path.name}"
            )
            self._flusher.start()
        self._cond.notify_all()

    def _flush_loop(self) -> None:
        with self._cond:
            while not self._closed and self._failed is None:
                if self._deadline is None or self._syncing:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                try:
                    self._background_round()
                except JsonltapeError:
                    return  # the failure is recorded; the next call reports it

    def _background_round(self) -> None:
        """One group commit whose fsync runs without the lock, so appends go on meanwhile.

        The checkpoint is encoded and its seq and bytes reserved *before* the sync (its offset,
        covered seq and open turn are known then); events appended during the sync queue up
        behind it. Nothing reaches the file while the sync runs (``_drain`` waits), so the
        checkpoint lands exactly at the offset it records, after the sync returned.
        """
        self._deadline = None
        if self._pending == 0:
            return
        self._drain()
        self._check_unchanged(identity=True)  # after the write: it may have raced a change
        offset, covered, pending = self._written, self._next_seq - 1, self._pending
        data = FlushData(offset=offset, seq=covered, turn=self._turn)
        line = _checkpoint_line(covered + 1, now_ms(), data)
        self._next_seq += 1
        self._size += len(line)
        self._syncing = True
        self._cond.release()  # held once by _flush_loop's `with`
        error: OSError | None = None
        try:
            self._ops.sync(self._fd)
        except OSError as exc:
            error = exc
        finally:
            self._cond.acquire()
            self._syncing = False
            self._cond.notify_all()
        if error is not None:
            self._failed = error
            raise WriterFailedError(
                f"fsync failed: {error.strerror or error}; the data since the last checkpoint "
                "may be lost",
                path=self.path,
            ) from error
        try:
            write_all(self._ops, self._fd, line)
        except OSError as exc:
            self._rollback(exc)
            raise WriterFailedError(f"write failed: {exc.strerror or exc}", path=self.path) from exc
        self._written += len(line)
        self._durable_seq = covered
        self._pending -= pending

    # -- durability ----------------------------------------------------------------------

    def flush(self) -> int:
        """Make every appended event durable and checkpoint it; return the durable seq."""
        with self._mutex:
            self._check_usable()
            self._flush_locked()
            return self._durable_seq

    def _flush_locked(
        self, *, marker: bool = False, final: bool = False, defer: bool = False
    ) -> None:
        """Sync, then checkpoint. ``marker``: checkpoint even with nothing pending and say
        ``closed``; ``final``: sync the checkpoint itself too (on close); ``defer``: leave the
        checkpoint due, to go out with the next write (durability "always": one write and
        one fsync per append, like a bare write+fdatasync loop)."""
        self._deadline = None
        while self._syncing:  # let a background round finish and place its checkpoint
            self._cond.wait()
        if self._failed is not None:
            self._check_usable()
        if self._ckpt_due is not None:
            if self._pending == 0:
                self._emit_due()  # it lands exactly at the offset it records
            else:  # pragma: no cover - appends emit a due checkpoint before staging
                self._ckpt_due = None
        if self._pending == 0 and not marker:
            if self._buf:
                self._drain()
                if final:
                    self._sync()
            return
        self._drain()
        self._check_unchanged(identity=True)  # after the write: it may have raced a change
        self._sync()
        self._durable_seq = self._next_seq - 1
        if defer:
            self._ckpt_due = (self._written, self._next_seq - 1, self._turn)
            self._pending = 0
            return
        seq = self._next_seq
        self._stage_checkpoint(
            seq, FlushData(offset=self._size, seq=seq - 1, turn=self._turn, closed=marker)
        )
        self._drain()
        self._pending = 0
        if final:
            self._sync()

    def _emit_due(self) -> None:
        """Queue the checkpoint a deferred sync left due (its bytes were synced already)."""
        assert self._ckpt_due is not None
        offset, covered, turn = self._ckpt_due
        self._ckpt_due = None
        assert offset == self._size, "nothing may be queued between a sync and its checkpoint"
        self._stage_checkpoint(covered + 1, FlushData(offset=offset, seq=covered, turn=turn))

    def _stage_checkpoint(self, seq: int, data: FlushData) -> None:
        """Queue a checkpoint line (it needs no sync of its own, so it adds nothing pending)."""
        now = now_ms()
        line = _checkpoint_line(seq, now, data)
        self._buf.append(line)
        self._last_time = now
        self._size += len(line)
        self._next_seq = seq + 1

    def _sync(self) -> None:
        try:
            self._ops.sync(self._fd)
        except OSError as exc:
            # After a failed fsync the kernel may have dropped the dirty pages and a retry
            # can "succeed" without the data (fsyncgate): never retry, never report durable.
            self._failed = exc
            raise WriterFailedError(
                f"fsync failed: {exc.strerror or exc}; the data since the last checkpoint may "
                "be lost",
                path=self.path,
            ) from exc
