"""The write path of a Tape: queue lines, write them, sync, checkpoint.

Order is everything here (spec §10.1): lines reach the file in seq order with one write per
batch; a checkpoint is written only after the sync that covers every byte before it returned,
and lands exactly at the offset it records. Group commit runs its sync in a flusher thread
without the lock, so appends go on meanwhile; nothing reaches the file while that sync runs.

A writer is one :class:`WriterState` (everything it knows about its session, like filelock's
``FileLockContext``) shared by :class:`jsonltape.Tape`, the API, and :class:`Committer`, which
owns the order of writes, syncs and checkpoints. The state holds the writer's lock as a
:class:`Hold` (what the Tape does with it); :mod:`jsonltape._session` takes the lock and builds
the state, so it imports this module and never the reverse.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import msgspec

from . import _framing, _fs
from ._gate import encoder
from ._prepare import now_ms
from ._staged import StagedHold, publish
from .errors import ConcurrentModificationError, JsonltapeError, WriterFailedError
from .events import Event, FlushData, Span, TurnRef

if TYPE_CHECKING:
    from ._surface import SurfaceFold

__all__ = ["MAX_BUFFER", "Committer", "Hold", "WriterState", "checkpoint_line"]

#: Queued bytes beyond which lines are written out before the next sync.
MAX_BUFFER = 1 << 20
_TURN_TYPES = frozenset({"turn/start", "turn/end", "step/start", "step/end"})


class Hold(Protocol):
    """A writer's hold on its session, as the Tape ends it (:class:`jsonltape._session.SessionLock`
    is the one)."""

    def release(self) -> None:
        """End the hold (on close). Idempotent."""

    def forget(self) -> None:
        """In a forked child: close this process's copy without unlocking the parent's."""


@dataclass(eq=False, slots=True)
class WriterState:
    """Everything one writer knows about its session file. Guarded by ``mutex``."""

    path: Path
    fd: int
    ops: _fs.FileOps
    lock: Hold
    #: The header line's bytes: each sync checks the file still starts with them.
    header_line: bytes
    #: (st_dev, st_ino) of the session file: each sync checks the path still names it.
    ident: tuple[int, int]
    durability: str
    group_events: int
    group_s: float
    size: int  # logical end: written plus queued
    written: int  # bytes handed to the OS
    next_seq: int
    durable_seq: int
    last_time: int
    turn: TurnRef | None
    step: int | None = None
    pending: int = 0  # events written since the last checkpoint
    #: Bytes the last sync covered (what was written then): a close syncs what lies beyond
    #: (a background round's checkpoint, written after its sync). -1: the opening size.
    synced: int = -1
    #: The next checkpoint's span (spec §10.2): the offset where it starts (just after the
    #: last checkpoint line, or the header) and the CRC-32 of the bytes written since then.
    span_from: int = 0
    span_crc: int = 0
    buf: list[bytes] = field(default_factory=list)
    keys: dict[str, int] | None = None  # key -> offset, built on first keyed append
    #: The surface, folded from the whole file the first time an append needs it (a replace
    #: or retract) and kept current after that, so plain appends stay O(1).
    surface: SurfaceFold | None = None
    deadline: float | None = None
    failed: BaseException | None = None
    closed: bool = False
    closed_why: str = "the tape is closed"
    syncing: bool = False  # a background group commit is between its sync and checkpoint
    #: (offset, covered seq, open turn) of a checkpoint a deferred sync left due.
    ckpt_due: tuple[int, int, TurnRef | None] | None = None
    flusher: threading.Thread | None = None
    #: A staged session's hold while the session has no name yet (:mod:`._staged`): the first
    #: flush, at close, syncs once and gives it its name.
    staged: StagedHold | None = None
    #: Whether that publication syncs the directory (:func:`~jsonltape.writer.close_all` syncs
    #: each directory once for all the tapes it closed).
    sync_dir: bool = True
    mutex: threading.RLock = field(default_factory=threading.RLock)
    cond: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.mutex)
        if self.synced < 0:
            self.synced = self.written


class _FlushOut(msgspec.Struct, omit_defaults=True):
    """A checkpoint line's envelope: :class:`Event`'s members and order, ``data`` typed."""

    seq: int
    type: str
    time: int
    data: FlushData
    ignorable: bool  # no default: always written, like every ignorable event's flag


def checkpoint_line(seq: int, now: int, data: FlushData) -> bytes:
    """The framed ``session/flush`` line at ``seq``. The writer's own data needs no lossless
    gate or shape check; this runs once per append in durability "always"."""
    body = encoder.encode(_FlushOut(seq, "session/flush", now, data, True))
    return _framing.frame(body)


class Committer:
    """Queueing, writing, syncing and checkpointing for one :class:`WriterState`."""

    __slots__ = ("s",)

    def __init__(self, state: WriterState) -> None:
        self.s = state

    def check_usable(self) -> None:
        s = self.s
        if s.closed:
            raise JsonltapeError(s.closed_why, path=s.path)
        if s.failed is not None:
            raise WriterFailedError(
                f"the writer failed earlier ({s.failed}) and accepts no more events; "
                "reopen the session to recover",
                path=s.path,
            ) from s.failed

    def stage(self, prepared: list[tuple[bytes, Event]]) -> None:
        """Queue whole lines for the next write and advance the writer's state."""
        s = self.s
        start = s.size
        for line, event in prepared:
            s.buf.append(line)
            if s.keys is not None and event.key is not None:
                s.keys[event.key] = start
            if event.type in _TURN_TYPES:
                self._track_turn(event, start)
            start += len(line)
        s.size = start
        s.next_seq = prepared[-1][1].seq + 1
        s.last_time = prepared[-1][1].time
        s.pending += len(prepared)
        if s.size - s.written > MAX_BUFFER:
            self.drain()

    def commit_one(self, line: bytes, event: Event) -> None:
        """:meth:`stage` and :meth:`after_append` for one event without a key (``append``),
        unrolled: it runs once per event, and the general loop costs a third of an append's
        bookkeeping. In group commit, most appends find the window open and only queue."""
        s = self.s
        s.buf.append(line)
        if event.type in _TURN_TYPES:
            self._track_turn(event, s.size)
        s.size += len(line)
        s.next_seq = event.seq + 1
        s.last_time = event.time
        s.pending += 1
        if s.size - s.written > MAX_BUFFER:
            self.drain()
        if s.deadline is None or s.pending >= s.group_events or s.durability != "group":
            self.after_append()

    def _track_turn(self, event: Event, start: int) -> None:
        s, t = self.s, event.type
        if t == "turn/start":
            s.turn = TurnRef(event.seq, start)
            s.step = None
        elif t == "turn/end":
            s.turn = None
            s.step = None
        elif t == "step/start":
            s.step = event.seq
        elif t == "step/end":
            s.step = None

    def drain(self) -> None:
        """Hand the queued lines to the OS in one write (no sync), after checking that nobody
        else changed the file since our last write."""
        blob = self._take()
        if blob is None:
            return
        s = self.s
        try:
            _fs.write_all(s.ops, s.fd, blob)
        except OSError as exc:
            self._rollback(exc)
            raise WriterFailedError(f"write failed: {exc.strerror or exc}", path=s.path) from exc
        # The blob may start with a checkpoint staged for it; the span starts after that.
        skip = s.span_from - s.written
        s.span_crc = zlib.crc32(memoryview(blob)[skip:] if skip > 0 else blob, s.span_crc)
        s.written += len(blob)

    def _span(self, offset: int) -> Span:
        """The span of a checkpoint at ``offset``: every byte before it is written (and so
        folded into ``span_crc``) when a checkpoint is made."""
        s = self.s
        assert s.written == offset, "a checkpoint is made only when all before it is written"
        return Span(s.span_from, f"{s.span_crc:08x}")

    def _span_restart(self, end: int) -> None:
        """The next span starts at ``end``, just after a checkpoint line."""
        s = self.s
        s.span_from, s.span_crc = end, 0

    def _take(self) -> bytes | None:
        """The queued lines as one blob, once the file's end is ours to write (None: none)."""
        s = self.s
        if not s.buf:
            return None
        while s.syncing:  # a background round owns the file's end until its checkpoint
            s.cond.wait()
        if s.failed is not None:
            self.check_usable()
        self._check_unchanged(identity=False)
        blob = b"".join(s.buf)
        s.buf.clear()
        return blob

    def _rollback(self, exc: OSError) -> None:
        """Cut a partial write so the file still ends on a line boundary, and stop: the lost
        events were never reported durable, and a failing write may be a failing device."""
        s = self.s
        s.failed = exc
        try:
            s.ops.truncate(s.fd, s.written)
        except OSError as again:
            s.failed = again

    def _check_unchanged(self, *, identity: bool) -> None:
        """Fail if someone else changed the file: its size before every write (so we never
        append after a foreign truncation or append), and with ``identity`` (after the last
        write, before anything is reported durable) its size, that the path still names our
        file (a git checkout replaces it by rename) and that the header line is still the one
        we read or wrote (an in-place edit of the same size changes neither size nor inode)."""
        s = self.s
        if identity:
            # One lstat of the path answers both: when it names our inode, its size is ours.
            try:
                st = os.stat(
                    s.path if s.staged is None or s.staged.tmp is None else s.staged.tmp,
                    follow_symlinks=False,
                )
                same = (st.st_dev, st.st_ino) == s.ident
            except FileNotFoundError:
                same = False
        else:
            st, same = os.fstat(s.fd), True
        what = None
        if not same or st.st_size != s.written:
            what = (
                "was replaced or removed"
                if not same
                else f"changed size from {s.written} to {st.st_size} bytes"
            )
        elif identity and os.pread(s.fd, len(s.header_line), 0) != s.header_line:
            # An in-place edit keeps size and inode; the header is the line a fold trusts
            # most, and one pread per sync costs nothing next to the sync itself.
            what = "had its header (line 1) edited in place"
        if what is not None:
            exc = ConcurrentModificationError(
                f"the session file {what} behind this writer's back (another program, a git "
                "checkout?); nothing more is appended to it",
                path=s.path,
            )
            s.failed = exc
            raise exc

    def after_append(self) -> None:
        s = self.s
        if s.durability == "always":
            self.flush(defer=True)
            return
        if s.durability != "group":
            return
        if s.pending >= s.group_events:
            if s.deadline == 0.0:
                return  # already due; the flusher thread will get to it
            s.deadline = 0.0  # due now; the flusher thread syncs while appends go on
        elif s.deadline is None:
            s.deadline = time.monotonic() + s.group_s
        else:
            return
        if s.flusher is None:
            s.flusher = threading.Thread(
                target=self._flush_loop, daemon=True, name=f"jsonltape-flush:{s.path.name}"
            )
            s.flusher.start()
        s.cond.notify_all()

    def _flush_loop(self) -> None:
        s = self.s
        with s.cond:
            while not s.closed and s.failed is None:
                if s.deadline is None or s.syncing:
                    s.cond.wait()
                    continue
                remaining = s.deadline - time.monotonic()
                if remaining > 0:
                    s.cond.wait(remaining)
                    continue
                try:
                    self._background_round()
                except JsonltapeError:
                    return  # the failure is recorded; the next call reports it

    def _background_round(self) -> None:
        """One group commit whose fsync runs without the lock, so appends go on meanwhile.

        The checkpoint is encoded and its seq and bytes reserved *before* the sync (its offset,
        covered seq and open turn are known then); events appended during the sync queue up
        behind it. Nothing reaches the file while the sync runs (``drain`` waits), so the
        checkpoint lands exactly at the offset it records, after the sync returned.
        """
        s = self.s
        s.deadline = None
        if s.pending == 0:
            return
        self.drain()
        self._check_unchanged(identity=True)  # after the write: it may have raced a change
        offset, covered, pending = s.written, s.next_seq - 1, s.pending
        data = FlushData(offset=offset, seq=covered, turn=s.turn, span=self._span(offset))
        line = checkpoint_line(covered + 1, now_ms(), data)
        self._span_restart(offset + len(line))
        s.next_seq += 1
        s.size += len(line)
        s.syncing = True
        s.cond.release()  # held once by _flush_loop's `with`
        error: OSError | None = None
        try:
            s.ops.sync(s.fd)
        except OSError as exc:
            error = exc
        finally:
            s.cond.acquire()
            s.syncing = False
            s.cond.notify_all()
        if error is not None:
            s.failed = error
            raise WriterFailedError(
                f"fsync failed: {error.strerror or error}; the data since the last checkpoint "
                "may be lost",
                path=s.path,
            ) from error
        s.synced = offset  # nothing reached the file while it ran
        try:
            _fs.write_all(s.ops, s.fd, line)
        except OSError as exc:
            self._rollback(exc)
            raise WriterFailedError(f"write failed: {exc.strerror or exc}", path=s.path) from exc
        s.written += len(line)
        s.durable_seq = covered
        s.pending -= pending

    # -- durability ----------------------------------------------------------------------

    def flush(self, *, marker: bool = False, final: bool = False, defer: bool = False) -> None:
        """Sync, then checkpoint (the lock held). ``marker``: checkpoint even with nothing
        pending and say ``closed``; ``final``: sync the checkpoint itself too (on close);
        ``defer``: leave the checkpoint due, to go out with the next write (durability
        "always": one write and one sync per append, like a bare write+fdatasync loop)."""
        s = self.s
        if s.staged is not None:
            self._publish(marker)
            return
        s.deadline = None
        while s.syncing:  # let a background round finish and place its checkpoint
            s.cond.wait()
        if s.failed is not None:
            self.check_usable()
        if s.ckpt_due is not None:
            if s.pending == 0:
                self.emit_due()  # it lands exactly at the offset it records
            else:  # pragma: no cover - appends emit a due checkpoint before staging
                s.ckpt_due = None
        if s.pending == 0 and not marker:
            if s.buf:
                self.drain()
            if final and s.written > s.synced:  # the last checkpoint too, whoever wrote it
                self._sync()
            return
        self.drain()
        self._check_unchanged(identity=True)  # after the write: it may have raced a change
        self._sync()
        s.durable_seq = s.next_seq - 1
        if defer:
            s.ckpt_due = (s.written, s.next_seq - 1, s.turn)
            s.pending = 0
            return
        self._stage_checkpoint(s.next_seq - 1, s.turn, closed=marker)
        self.drain()
        s.pending = 0
        if final:
            self._sync()

    def _publish(self, marker: bool) -> None:
        """A staged session's flush: everything, a checkpoint at its end, synced once under the
        temp name, then the session's name given. No reader saw the file before it has its
        name, so the one sync makes true what the checkpoint claims."""
        s = self.s
        hold = s.staged
        assert hold is not None
        self.drain()
        self._check_unchanged(identity=True)
        covered = s.next_seq - 1
        if s.pending or marker:
            self._stage_checkpoint(covered, s.turn, closed=marker)
            self.drain()
        self._sync()
        try:
            copied = publish(s.path, hold, s.ops, sync_dir=s.sync_dir)
        except JsonltapeError as exc:
            s.failed = exc
            raise
        except OSError as exc:
            s.failed = exc
            if hold.tmp is None:  # named: its bytes were synced, but maybe not its name
                raise WriterFailedError(
                    "the session has its name, every event in it synced, but its directory "
                    f"was not: {exc.strerror or exc}; the name may be gone after a power cut",
                    path=s.path,
                ) from exc
            raise WriterFailedError(
                f"cannot give the staged session its name: {exc.strerror or exc}; nothing of "
                "it was saved",
                path=s.path,
            ) from exc
        if copied:
            # No hard links: the name holds a copy, a new inode (locked by the hold); what
            # comes next goes there, not into the unlinked temp file.
            fd, old = os.dup(hold.fd), s.fd
            st = os.fstat(fd)
            s.fd, s.ident = fd, (st.st_dev, st.st_ino)
            os.close(old)
        s.staged = None
        s.pending = 0
        s.durable_seq = covered

    def emit_due(self) -> None:
        """Queue the checkpoint a deferred sync left due (its bytes were synced already)."""
        s = self.s
        assert s.ckpt_due is not None
        offset, covered, turn = s.ckpt_due
        s.ckpt_due = None
        assert offset == s.size, "nothing may be queued between a sync and its checkpoint"
        self._stage_checkpoint(covered, turn)

    def _stage_checkpoint(self, covered: int, turn: TurnRef | None, closed: bool = False) -> None:
        """Queue the checkpoint after seq ``covered`` at the end of the file (it needs no sync
        of its own, so it adds nothing pending)."""
        s = self.s
        now, offset, seq = now_ms(), s.size, covered + 1
        data = FlushData(offset, covered, turn, closed, self._span(offset))
        line = checkpoint_line(seq, now, data)
        self._span_restart(offset + len(line))
        s.buf.append(line)
        s.last_time = now
        s.size += len(line)
        s.next_seq = seq + 1

    def _sync(self) -> None:
        s = self.s
        upto = s.written
        try:
            s.ops.sync(s.fd)
            s.synced = upto
        except OSError as exc:
            # After a failed fsync the kernel may have dropped the dirty pages and a retry
            # can "succeed" without the data (fsyncgate): never retry, never report durable.
            s.failed = exc
            raise WriterFailedError(
                f"fsync failed: {exc.strerror or exc}; the data since the last checkpoint may "
                "be lost",
                path=s.path,
            ) from exc
