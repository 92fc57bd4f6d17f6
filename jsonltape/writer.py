"""The single writer of a session: lock, create, append, durability and checkpoints.

Protocol (the spec's "writer" section, kept in this order on purpose):

1. Lock the session for the writer's lifetime: its lock file (``.<name>.lock`` beside it)
   and an flock on the session file itself, which deleting the lock file cannot undo (see
   ``_session``). Arguments are checked before either is taken.
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
import math
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from . import _framing, _fs, _repair
from ._agent import AgentHelpers, TurnHandle
from ._commit import Committer
from ._prepare import (
    check_time,
    encode_event,
    load_keys,
    now_ms,
    prepare_event,
    prepare_plain,
    read_line,
    spec_of,
)
from ._scan import TailScan, scan_tail
from ._session import SessionLock, check_lock_timeout, create_file, lock_path, lock_session
from .errors import (
    ConcurrentModificationError,
    CorruptError,
    InvalidArgumentError,
    InvalidEventError,
    JsonltapeError,
    SessionExistsError,
    SurfaceError,
    WriterFailedError,
)
from .events import (
    SURFACE_TYPES,
    Event,
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
#: Tapes still open, closed (flushed) at interpreter exit like Python's own files are: a script
#: that forgets close() must not lose its last group-commit window.
_OPEN: weakref.WeakSet[Tape] = weakref.WeakSet()


def _forget_parent_tapes() -> None:
    # A forked child inherits the parent's tapes (and their fds) but not its lock or its
    # thread: it must never write, flush or close them, least of all at its own exit. Its
    # copies of the descriptors are closed (never unlocked: the parent's lock is the same).
    for tape in list(_OPEN):
        tape._forget_in_child()
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
    :param lock_timeout: seconds to wait for another writer (finite, >= 0); 0 fails at once
        with :class:`LockedError`. A lock file that cannot be created is a
        :class:`StorageError`; wrong arguments are :class:`InvalidEventError` naming them, and
        nothing is created or locked then.
    :param created: the header's creation time in epoch ms (default now; an import passes the
        source session's).
    """
    p = _fs.session_path(path)
    _check_options(create, durability, group_events, group_ms, lock_timeout)
    if create:
        _check_header_args(title=title, cwd=cwd, agent=agent, parent=parent, meta=meta)
    if create == "if-missing" and os.path.lexists(p):
        create = False
    if create:
        try:
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
        except SessionExistsError:
            if create is True:
                raise
            # "if-missing" and another writer created it meanwhile: open what it created.
    return Tape._open(
        p,
        durability=durability,
        group_events=group_events,
        group_ms=group_ms,
        lock_timeout=lock_timeout,
    )


def _bad(name: str, what: str, value: object) -> InvalidArgumentError:
    return InvalidArgumentError(f"{name} must be {what}, not {value!r}", field=name)


def _finite(value: object) -> bool:
    """A real, finite number (``True`` is not one)."""
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _check_options(
    create: object, durability: object, group_events: object, group_ms: object, timeout: object
) -> None:
    """Refuse open()'s options before anything is touched (library errors naming the option)."""
    if not (create is True or create is False or create == "if-missing"):
        raise _bad("create", "True, False or 'if-missing'", create)
    if durability not in ("always", "group", "manual"):
        raise _bad("durability", "'always', 'group' or 'manual'", durability)
    if type(group_events) is not int or group_events < 1:
        raise _bad("group_events", "an integer >= 1", group_events)
    if not _finite(group_ms) or group_ms <= 0:  # type: ignore[operator]
        raise _bad("group_ms", "a finite number of milliseconds > 0", group_ms)
    check_lock_timeout(timeout)


def _check_header_args(**members: object) -> None:
    """The header members a caller passes: right types, or an error naming the member."""
    for name in ("title", "cwd", "agent"):
        value = members[name]
        if value is not None and type(value) is not str:
            raise InvalidEventError(
                f"{name} must be a string, not {type(value).__name__}", field=f"$.data.{name}"
            )
    if members["parent"] is not None and not isinstance(members["parent"], ParentRef):
        raise InvalidEventError(
            f"parent must be a jsonltape.ParentRef, not {type(members['parent']).__name__}",
            field="$.data.parent",
        )
    meta = members["meta"]
    if meta is not None and not isinstance(meta, Mapping):
        raise InvalidEventError(
            f"meta must be a mapping (a JSON object), not {type(meta).__name__}",
            field="$.data.meta",
        )


def _sources(value: Any) -> Any:
    """An event's ``sources`` as a list (the rules on its seqs are checked with the event)."""
    if value is None or type(value) is list:
        return value
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SurfaceError(
            f"sources must be a list of earlier seqs, not {type(value).__name__}",
            field="$.sources",
        )
    return list(value)


class Tape(AgentHelpers, Committer):
    """An open session with its writer lock held. Thread-safe; one per session at a time."""

    def __init__(
        self,
        path: Path,
        fd: int,
        lock: SessionLock,
        header: HeaderData,
        *,
        header_line: bytes,
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
        #: The header line's bytes: each flush checks the file still starts with them.
        self._header_line = header_line
        self._closed_why = "the tape is closed"
        self._owner_pid = os.getpid()
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
        header, fd, lock, line, now = create_file(
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
            header_line=line,
            size=len(line),
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
        lock: SessionLock | None = None,
        scan: TailScan | None = None,
        force: bool = False,
    ) -> Tape:
        """Open an existing session: cut a torn tail, close a crashed turn.

        ``scan`` replaces the O(tail) scan with one the caller made (repair's full scan);
        ``force`` cuts a corrupt file at its first bad line instead of refusing it.
        """
        _fs.check_dir(path.parent)
        own_lock = lock is None
        lock = lock or lock_session(path, lock_timeout)
        fd = -1
        tape: Tape | None = None
        try:
            fd = _fs.open_for_append(path)
            if not os.path.samestat(os.fstat(fd), os.fstat(lock.fd)):
                raise ConcurrentModificationError(
                    "the session file was replaced while it was being opened; try again",
                    path=path,
                )
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
                header_line=os.pread(fd, scan.header_end, 0),
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
            if tape is not None:  # never closed at exit: its fd and lock go right here
                tape._closed = True
                _OPEN.discard(tape)
            if fd >= 0:
                os.close(fd)
            if own_lock:
                lock.abandon()
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
                seq = self._next_seq + due
                if surface is None and sources is None and ignorable is None:
                    line, event = prepare_plain(type, data, seq)
                else:
                    line, event = prepare_event(
                        type, data, surface, _sources(sources), None, ignorable, seq, now_ms()
                    )
                # Only a given surface can be a replace or retract; a plain append just keeps
                # an already folded surface current.
                if self._surface is not None or (
                    surface is not None and isinstance(event.surface, (Replace, Retract))
                ):
                    fold = self._surface if self._surface is not None else self._fold_surface([])
                    fold.apply(event)  # validates first: on error the fold is unchanged
                    self._surface = fold
            except JsonltapeError as exc:
                if exc.path is None:
                    raise exc.at(path=self.path) from exc.__cause__
                raise
            if due:
                self._emit_due()
            self._stage_one(line, event)
            self._after_append()
            return event

    def append_batch(self, items: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Append several events at once: all are validated before any is written, and they
        reach the file in one write.

        Each item is a mapping with ``type`` and optional ``data``, ``surface``, ``sources``,
        ``key``, ``ignorable`` and ``time``. Items whose key already exists return the existing
        event.
        """
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidEventError(
                f"append_batch takes a list of event mappings, not {type(items).__name__}",
                path=self.path,
            )
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
                        _sources(spec["sources"]),
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
                    path = self.path if exc.path is None else exc.path
                    raise exc.at(batch_item=i, path=path) from exc.__cause__
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
            raise JsonltapeError(self._closed_why, path=self.path)
        if self._failed is not None:
            raise WriterFailedError(
                f"the writer failed earlier ({self._failed}) and accepts no more events; "
                "reopen the session to recover",
                path=self.path,
            ) from self._failed

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

    def _forget_in_child(self) -> None:
        """In a forked child: refuse every further call and close this process's copies of
        the descriptors, without flushing or unlocking (they are the parent's)."""
        self._closed = True
        self._closed_why = (
            f"this tape was opened by process {self._owner_pid}, and this is a forked child; "
            "open the session in the child itself (after the parent closed it)"
        )
        self._lock_file.forget()
        try:
            os.close(self._fd)
        except OSError:
            pass

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
