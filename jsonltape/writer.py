"""The single writer of a session: lock, create, append, durability and checkpoints.

Protocol (the spec's "writer" section, kept in this order on purpose):

1. Take the session's lock file (``.<name>.lock`` beside it) for the writer's lifetime.
2. Create a session atomically: header into an owner-only temp file, fsync, ``link`` to the
   final name (never clobbers), fsync the directory. Opening an existing session reads only
   its tail: a torn tail is cut into a sidecar, a turn left open by a crash is closed.
3. Each append is validated and encoded once, then written with one ``write`` (a batch too).
4. ``flush``: fdatasync, and only after it returned, a ``session/flush`` checkpoint line whose
   ``data.offset`` is its own offset. An fsync error poisons the writer for good.
5. ``close``: flush, then a final checkpoint with ``closed: true``, synced. That marker is how
   a later writer tells a deliberate open turn from one a crash left behind.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import filelock
import msgspec

from . import _framing, _fs, _repair
from ._agent import AgentHelpers, TurnHandle
from ._prepare import (
    check_time,
    encode_event,
    load_keys,
    now_ms,
    prepare_event,
    read_line,
    spec_of,
    write_all,
)
from ._scan import TailScan, scan_tail
from ._session import acquire, create_file, lock_path
from .errors import (
    ConcurrentModificationError,
    CorruptError,
    InvalidEventError,
    JsonltapeError,
    WriterFailedError,
)
from .events import (
    SURFACE_TYPES,
    Event,
    FlushData,
    HeaderData,
    ParentRef,
    Replace,
    Retract,
    TurnRef,
)

if TYPE_CHECKING:
    from .fold._surface import SurfaceFold

__all__ = ["Durability", "Tape", "TurnHandle", "lock_path", "open"]

Durability = Literal["always", "group", "manual"]
_decoder = msgspec.json.Decoder(Event)
#: Queued bytes beyond which lines are written out before the next sync.
_MAX_BUFFER = 1 << 20
#: Tapes still open, closed (flushed) at interpreter exit like Python's own files are: a script
#: that forgets close() must not lose its last group-commit window.
_OPEN: weakref.WeakSet[Tape] = weakref.WeakSet()


def _forget_parent_tapes() -> None:
    # A forked child inherits the parent's tapes (and their fds) but not its lock or its
    # thread: it must never flush or close them, least of all at its own exit.
    _OPEN.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_tapes)


@atexit.register
def _close_open_tapes() -> None:
    for tape in list(_OPEN):
        try:
            tape.close()
        except Exception:
            pass


def open(
    path: str | os.PathLike[str],
    *,
    create: bool | Literal["if-missing"] = False,
    session_id: str | None = None,
    title: str | None = None,
    cwd: str | None = None,
    agent: str | None = None,
    parent: ParentRef | None = None,
    meta: Mapping[str, Any] | None = None,
    created: int | None = None,
    durability: Durability = "group",
    group_events: int = 1000,
    group_ms: float = 50.0,
    lock_timeout: float = 0.0,
) -> Tape:
    """Open a session for writing and return its :class:`Tape` (a context manager).

    :param create: ``False`` opens an existing session; ``True`` creates a new one and fails if
        the file exists; ``"if-missing"`` does whichever applies.
    :param durability: ``"group"`` (default) flushes every ``group_events`` events or
        ``group_ms`` milliseconds, whichever comes first; ``"always"`` flushes after every
        append; ``"manual"`` only on :meth:`Tape.flush`. Only a returned flush is a promise.
    :param lock_timeout: seconds to wait for another writer; 0 fails at once.
    :param created: the header's creation time in epoch ms (default now; an import passes the
        source session's).
    """
    p = Path(os.path.abspath(path))
    if durability not in ("always", "group", "manual"):
        raise ValueError(f"durability must be 'always', 'group' or 'manual', not {durability!r}")
    if group_events < 1 or group_ms <= 0:
        raise ValueError("group_events must be >= 1 and group_ms > 0")
    exists = os.path.lexists(p)
    if create == "if-missing":
        create = not exists
    if create:
        return Tape._create(
            p,
            session_id=session_id,
            title=title,
            cwd=cwd,
            agent=agent,
            parent=parent,
            meta=meta,
            created=created,
            durability=durability,
            group_events=group_events,
            group_ms=group_ms,
            lock_timeout=lock_timeout,
        )
    return Tape._open(
        p,
        durability=durability,
        group_events=group_events,
        group_ms=group_ms,
        lock_timeout=lock_timeout,
    )


class Tape(AgentHelpers):
    """An open session with its writer lock held. Thread-safe; one per session at a time."""

    def __init__(
        self,
        path: Path,
        fd: int,
        lock: filelock.BaseFileLock,
        header: HeaderData,
        *,
        size: int,
        next_seq: int,
        last_time: int,
        turn: TurnRef | None,
        durability: Durability,
        group_events: int,
        group_ms: float,
        ops: _fs.FileOps | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self._fd = fd
        self._lock_file = lock
        self._ops = ops or _fs.FileOps()
        self._mutex = threading.RLock()
        self._cond = threading.Condition(self._mutex)
        self._size = size  # logical end: written plus queued
        self._written = size  # bytes handed to the OS
        self._buf: list[bytes] = []
        self._next_seq = next_seq
        self._durable_seq = next_seq - 1
        self._last_time = last_time
        self._turn = turn
        self._step: int | None = None
        self._pending = 0  # events written since the last checkpoint
        self._durability = durability
        self._group_events = group_events
        self._group_s = group_ms / 1000.0
        self._deadline: float | None = None
        self._failed: BaseException | None = None
        self._closed = False
        self._keys: dict[str, int] | None = None  # key -> offset, built on first keyed append
        # The surface is folded from the whole file the first time an append needs it (a
        # replace or retract) and kept up to date after that, so plain appends stay O(1).
        self._surface: SurfaceFold | None = None
        st = os.fstat(fd)
        self._ident = (st.st_dev, st.st_ino)
        self._flusher: threading.Thread | None = None
        self._syncing = False  # a background group commit is between its sync and checkpoint
        #: (offset, covered seq, open turn) of a checkpoint a deferred sync left due.
        self._ckpt_due: tuple[int, int, TurnRef | None] | None = None
        _OPEN.add(self)
        self._opened_from: object = None
        #: Synthetic events this writer appended on open to close a crashed turn.
        self.closers: list[Event] = []
        #: Where opening saved a torn tail it cut off, if it did.
        self.sidecar: Path | None = None

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def _create(
        cls,
        path: Path,
        *,
        session_id: str | None,
        title: str | None,
        cwd: str | None,
        agent: str | None,
        parent: ParentRef | None,
        meta: Mapping[str, Any] | None,
        durability: Durability,
        group_events: int,
        group_ms: float,
        lock_timeout: float,
        ops: _fs.FileOps | None = None,
        created: int | None = None,
    ) -> Tape:
        ops = ops or _fs.FileOps()
        header, fd, lock, size, now = create_file(
            path,
            session_id=session_id,
            title=title,
            cwd=cwd,
            agent=agent,
            parent=parent,
            meta=meta,
            created=created,
            ops=ops,
            lock_timeout=lock_timeout,
        )
        return cls(
            path,
            fd,
            lock,
            header,
            size=size,
            next_seq=1,
            last_time=now,
            turn=None,
            durability=durability,
            group_events=group_events,
            group_ms=group_ms,
            ops=ops,
        )

    @classmethod
    def _open(
        cls,
        path: Path,
        *,
        durability: Durability,
        group_events: int,
        group_ms: float,
        lock_timeout: float,
        ops: _fs.FileOps | None = None,
        lock: filelock.BaseFileLock | None = None,
        scan: TailScan | None = None,
        force: bool = False,
    ) -> Tape:
        """Open an existing session: cut a torn tail, close a crashed turn.

        ``scan`` replaces the O(tail) scan with one the caller made (repair's full scan);
        ``force`` cuts a corrupt file at its first bad line instead of refusing it.
        """
        _fs.check_dir(path.parent)
        own_lock = lock is None
        lock = lock or acquire(path, lock_timeout)
        fd = -1
        try:
            fd = _fs.open_for_append(path)
            ops = ops or _fs.FileOps()
            if scan is None:
                scan = scan_tail(fd, str(path))
            if scan.corrupt and not force:
                raise CorruptError(
                    f"{scan.bad_reason}, and a checkpoint follows it: damage to committed "
                    "history, not a crash tail; nothing is appended (see `jsonltape repair`)",
                    path=path,
                    line=scan.bad_line,
                    offset=scan.bad_offset,
                )
            sidecar = None
            if scan.bad_offset is not None:
                # Never append after garbage: the torn tail goes to a sidecar first.
                sidecar = _repair.cut_tail(fd, path, scan.committed, ops)
            tape = cls(
                path,
                fd,
                lock,
                scan.header,
                size=scan.committed,
                next_seq=scan.next_seq,
                last_time=scan.last_time,
                turn=scan.turn,
                durability=durability,
                group_events=group_events,
                group_ms=group_ms,
                ops=ops,
            )
            tape._opened_from = scan
            tape.sidecar = sidecar
            # Lines a crashed writer left after its last checkpoint are whole but were never
            # synced: count them so the next flush (or close) makes them durable.
            tape._pending = scan.next_seq - 1 - (scan.checkpoint_seq or 0)
            tape._durable_seq = (scan.checkpoint_seq or 1) - 1
            if scan.turn is not None and not scan.closed:
                tape.closers = tape._close_interrupted_turn(scan.turn)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            if own_lock:
                lock.release()
            raise
        return tape

    def _close_interrupted_turn(self, turn: TurnRef) -> list[Event]:
        """Append the closers of a turn a crash left open, stamped with the last event's time."""
        items = _repair.closers(self._fd, turn.offset, self._size)
        if not items:
            return []
        with self._mutex:
            prepared = []
            seq = self._next_seq
            for type_, data, sources in items:
                surface = "append" if type_ in SURFACE_TYPES else None
                prepared.append(
                    encode_event(seq, type_, self._last_time, data, surface, sources, None, False)
                )
                seq += 1
            self._stage(prepared)
            self._flush_locked()
        return [event for _line, event in prepared]

    # -- properties ----------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def next_seq(self) -> int:
        """The seq the next appended event will get."""
        return self._next_seq

    @property
    def durable_seq(self) -> int:
        """Every event with a seq up to this one is durable (covered by a checkpoint)."""
        return self._durable_seq

    @property
    def open_turn(self) -> int | None:
        """Seq of the ``turn/start`` of the turn currently open, if any."""
        return self._turn.seq if self._turn is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    # -- appending -----------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: Mapping[str, Any] | None = None,
        *,
        surface: Any = None,
        sources: Iterable[int] | None = None,
        key: str | None = None,
        ignorable: bool | None = None,
        time: int | None = None,
    ) -> Event:
        """Validate and append one event; return it as written (with seq, time and crc).

        An event whose ``key`` is already in the session is not written again: the existing
        event is returned (safe retries). ``time`` (epoch ms) defaults to now; importers pass
        the source's time. Raises :class:`InvalidEventError` and writes nothing if the event
        breaks a rule.
        """
        if key is not None or time is not None:
            item = {
                "type": type,
                "data": data,
                "surface": surface,
                "sources": sources,
                "key": key,
                "ignorable": ignorable,
                "time": time,
            }
            return self.append_batch([item])[0]
        with self._mutex:
            self._check_usable()
            due = self._ckpt_due is not None  # a due checkpoint takes the next seq first
            try:
                line = prepare_event(
                    type, data, surface, sources, None, ignorable, self._next_seq + due, now_ms()
                )
                event = line[1]
                if self._surface is not None or isinstance(event.surface, (Replace, Retract)):
                    fold = self._surface if self._surface is not None else self._fold_surface([])
                    fold.apply(event)  # validates first: on error the fold is unchanged
                    self._surface = fold
            except JsonltapeError as exc:
                if exc.path is None:
                    exc.path = str(self.path)
                raise
            if due:
                self._emit_due()
            self._stage([line])
            self._after_append()
            return event

    def append_batch(self, items: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Append several events at once: all are validated before any is written, and they
        reach the file in one write.

        Each item is a mapping with ``type`` and optional ``data``, ``surface``, ``sources``,
        ``key``, ``ignorable`` and ``time``. Items whose key already exists return the existing
        event.
        """
        with self._mutex:
            self._check_usable()
            now = now_ms()
            prepared: list[tuple[bytes, Event]] = []
            results: list[Event | None] = []
            batch_keys: set[str] = set()
            due = self._ckpt_due is not None  # a due checkpoint takes the next seq first
            seq = self._next_seq + due
            surface = self._surface.clone() if self._surface is not None else None
            for i, item in enumerate(items):
                try:
                    spec = spec_of(item)
                    key = spec["key"]
                    if key is not None:
                        if not isinstance(key, str) or not key or len(key) > 1024:
                            raise InvalidEventError(
                                "key must be a non-empty string of at most 1024 characters",
                                field="$.key",
                            )
                        if key in batch_keys:
                            raise InvalidEventError(
                                f"key {key!r} appears twice in this batch", field="$.key"
                            )
                        batch_keys.add(key)
                        existing = self._existing(key, spec)
                        if existing is not None:
                            results.append(existing)
                            continue
                    line = prepare_event(
                        spec["type"],
                        spec["data"],
                        spec["surface"],
                        spec["sources"],
                        key,
                        spec["ignorable"],
                        seq,
                        check_time(spec["time"], now),
                    )
                    if surface is None and isinstance(line[1].surface, (Replace, Retract)):
                        surface = self._fold_surface(prepared)
                    if surface is not None:
                        surface.apply(line[1])
                except JsonltapeError as exc:
                    exc.batch_item = i
                    if exc.path is None:
                        exc.path = str(self.path)
                    raise
                prepared.append(line)
                results.append(None)
                seq += 1
            if prepared:
                if due:
                    self._emit_due()
                self._stage(prepared)
                self._surface = surface
                self._after_append()
            fresh = iter(ev for _line, ev in prepared)
            return [r if r is not None else next(fresh) for r in results]

    def _fold_surface(self, pending: list[tuple[bytes, Event]]) -> SurfaceFold:
        """Fold the surface of everything written so far plus ``pending`` (this batch)."""
        # Imported here: the fold package builds on the writer (compaction, forks append).
        from .fold._surface import SurfaceFold

        self._drain()
        fold = SurfaceFold()
        for _off, raw in _framing.iter_lines(self._fd, 0, self._size):
            fold.apply(_decoder.decode(raw))
        for _line, event in pending:
            fold.apply(event)
        return fold

    def _existing(self, key: str, spec: dict[str, Any]) -> Event | None:
        if self._keys is None:
            self._drain()
            self._keys = load_keys(self._fd, self._size)
        off = self._keys.get(key)
        if off is None:
            return None
        self._drain()
        raw = read_line(self._fd, off)
        event = _decoder.decode(raw)
        data = spec["data"] if spec["data"] is not None else {}
        if event.type != spec["type"] or event.data != data:
            raise InvalidEventError(
                f"key {key!r} is already used by seq {event.seq} ({event.type}) with different "
                "data",
                field="$.key",
            )
        return event

    def _check_usable(self) -> None:
        if self._closed:
            raise JsonltapeError("the tape is closed", path=self.path)
        if self._failed is not None:
            raise WriterFailedError(
                f"the writer failed earlier ({self._failed}) and accepts no more events; "
                "reopen the session to recover",
                path=self.path,
            ) from self._failed

    def _stage(self, prepared: list[tuple[bytes, Event]]) -> None:
        """Queue whole lines for the next write and advance the writer's state."""
        start = self._size
        for line, event in prepared:
            self._buf.append(line)
            if self._keys is not None and event.key is not None:
                self._keys[event.key] = start
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
            start += len(line)
        self._size = start
        self._next_seq = prepared[-1][1].seq + 1
        self._last_time = prepared[-1][1].time
        self._pending += len(prepared)
        if self._size - self._written > _MAX_BUFFER:
            self._drain()

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
        append after a foreign truncation or append), and with ``identity`` (before every
        sync) that the path still names our file (a git checkout replaces it by rename)."""
        st = os.fstat(self._fd)
        same = True
        if identity:
            try:
                at_path = os.stat(self.path, follow_symlinks=False)
                same = (at_path.st_dev, at_path.st_ino) == self._ident
            except FileNotFoundError:
                same = False
        if st.st_size != self._written or not same:
            what = (
                "was replaced or removed"
                if not same
                else f"changed size from {self._written} to {st.st_size} bytes"
            )
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
        self._check_unchanged(identity=True)
        offset, covered, pending = self._written, self._next_seq - 1, self._pending
        data = msgspec.to_builtins(FlushData(offset=offset, seq=covered, turn=self._turn))
        line, _ev = encode_event(
            covered + 1, "session/flush", now_ms(), data, None, None, None, True
        )
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

    def drain(self) -> None:
        """Write queued events to the file now, without waiting for them to be durable.

        Readers in other processes see them at once; only :meth:`flush` makes them durable.
        """
        with self._mutex:
            self._check_usable()
            self._drain()

    @contextmanager
    def locked(self) -> Iterator[Tape]:
        """Hold the writer's in-process lock: no other thread appends until the block ends.

        For read-then-append sequences (fold, compact) whose appends name seqs they computed.
        Other processes are already kept out by the session's file lock.
        """
        with self._mutex:
            yield self

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
        self._check_unchanged(identity=True)
        self._sync()
        self._durable_seq = self._next_seq - 1
        if defer:
            self._ckpt_due = (self._written, self._next_seq - 1, self._turn)
            self._pending = 0
            return
        seq = self._next_seq
        data = msgspec.to_builtins(
            FlushData(offset=self._size, seq=seq - 1, turn=self._turn, closed=marker)
        )
        line = encode_event(seq, "session/flush", now_ms(), data, None, None, None, True)
        self._stage([line])
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
        data = msgspec.to_builtins(FlushData(offset=offset, seq=covered, turn=turn))
        line = encode_event(covered + 1, "session/flush", now_ms(), data, None, None, None, True)
        self._stage([line])
        self._pending -= 1  # a checkpoint line needs no sync of its own

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

    def close(self) -> None:
        """Flush, release the lock. Idempotent.

        With a turn still open, the final checkpoint says ``closed: true`` so that the next
        writer leaves the turn open instead of closing it as interrupted.
        """
        with self._mutex:
            if self._closed:
                return
            try:
                if self._failed is None:
                    if self._turn is not None and not self._ends_closed():
                        # The open turn is deliberate: say so, or the next writer would
                        # take it for a crash and close it as interrupted.
                        self._flush_locked(marker=True, final=True)
                    else:
                        self._flush_locked(final=True)
            finally:
                self._closed = True
                _OPEN.discard(self)
                self._cond.notify_all()
                os.close(self._fd)
                self._lock_file.release()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join()

    def _ends_closed(self) -> bool:
        """True when nothing was written since a closing checkpoint (keeps repair idempotent)."""
        if self._pending:
            return False
        scan = self._opened_from
        return bool(isinstance(scan, TailScan) and scan.closed and scan.committed == self._size)

    def __enter__(self) -> Tape:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Tape {str(self.path)!r} id={self.session_id} next_seq={self._next_seq}>"
