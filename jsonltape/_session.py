"""A session file's writer lock and its atomic creation.

Exclusion rests on two locks, taken in this order and released in the reverse one:

1. ``.<name>.lock`` beside the session: ``flock`` through filelock's UnixFileLock (never the
   soft fallback). Other tools look at this file, and it is what a waiter queues on.
2. ``flock(LOCK_EX)`` on a descriptor of the session file itself, retried until the same
   deadline. This is the lock that cannot be taken away: deleting or replacing the lock file
   (``git clean -X``, a cleanup script, a checkout) gives a second writer a fresh lock file,
   but not the session's inode, which stays locked as long as its writer lives.

Both are ``flock`` locks: they belong to an open file description, so they die with their
holder (a killed writer never leaves a stale lock) and are unaffected by other descriptors
this process opens or closes on the same file (unlike POSIX ``fcntl`` locks). That holds on
Linux and on macOS/BSD, where flock comes from; on NFS Linux emulates flock with byte-range
locks, which jsonltape does not rely on. A forked child inherits the descriptions: the writer
forgets its tapes in the child, closes its copies without unlocking (:meth:`SessionLock.forget`),
and releases with an explicit ``LOCK_UN`` so no inherited copy can keep a session locked.
Readers take no lock at all.

Creation writes the header into an owner-only temp file, locks that file, syncs it and
hard-links it to the final name, which fails instead of replacing anything; then the directory
is synced. A session file therefore always starts with a complete header, and is locked from
the moment it has a name.

A writer that gives up while opening (missing file, not a session, a failed create, ...)
removes the lock file again if it created it and it is still the one it holds, so a refused
command leaves nothing behind; a lock file it found is left alone.

:func:`create_session` and :func:`open_session` turn a locked file into the
:class:`~jsonltape._commit.WriterState` a Tape composes (:class:`Opened`); opening reads
only the tail, cuts a torn tail into a sidecar and closes a turn a crash left open.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from . import _fs, _repair
from ._commit import Committer, WriterState
from ._framing import CHUNK
from ._fs import publish, write_all
from ._prepare import check_time, encode_event, now_ms
from ._scan import TailScan, scan_tail
from .errors import (
    ConcurrentModificationError,
    CorruptError,
    InvalidArgumentError,
    InvalidEventError,
    JsonltapeError,
    LockedError,
    SessionExistsError,
    StorageError,
    UnsafeFileError,
)
from .events import MINOR, SURFACE_TYPES, VERSION, Event, HeaderData, ParentRef, TurnRef
from .ids import new_session_id, validate_session_id

__all__ = [
    "Opened",
    "SessionLock",
    "check_header_args",
    "check_lock_timeout",
    "check_options",
    "create_file",
    "create_session",
    "lock_path",
    "lock_session",
    "open_session",
    "storage_error",
]

#: Seconds between tries for a session file another writer has locked (filelock's default).
_POLL = 0.05
#: OS errors about what sits at the lock file's name: a policy refusal, not an I/O failure.
_UNSAFE_LOCK = {errno.ELOOP: "is a symlink", errno.EISDIR: "is a directory"}


def lock_path(path: Path) -> Path:
    """The lock file of a session: a dot-file beside it (``.<name>.lock``)."""
    return path.with_name(f".{path.name}.lock")


def check_lock_timeout(value: object) -> None:
    """Refuse a lock timeout that is not a finite number of seconds >= 0 (NaN, inf, -1,
    ``True``, a string) with an error naming ``lock_timeout``."""
    if type(value) not in (int, float) or not 0 <= value < math.inf:  # type: ignore[operator]
        raise InvalidArgumentError(
            f"lock_timeout must be a finite number of seconds >= 0, not {value!r}",
            field="lock_timeout",
        )


def _bad(name: str, what: str, value: object) -> InvalidArgumentError:
    return InvalidArgumentError(f"{name} must be {what}, not {value!r}", field=name)


def _finite(value: object) -> bool:
    """A real, finite number (``True`` is not one)."""
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def check_options(
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


def check_header_args(**members: object) -> None:
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


def storage_error(exc: OSError, what: str, path: Path) -> StorageError:
    """A :class:`StorageError` for an OS error while ``what`` (keeps the errno)."""
    return StorageError(f"{what}: {exc.strerror or exc}", errno=exc.errno, path=path)


class SessionLock:
    """A writer's hold on one session: its lock file plus an flock on the session file.

    Made by :func:`lock_session` or :func:`create_file`; :meth:`release` ends the hold,
    :meth:`abandon` ends it after a failed open (removing a lock file this writer created).
    """

    def __init__(self, path: Path, timeout: float) -> None:
        # Imported here, when a lock is taken: filelock's import is ~20 ms (its core, logging,
        # secrets/hashlib), which a process that loads the writer without writing (`export`,
        # a type annotation) does not pay.
        import filelock

        self.path = path
        self._deadline = time.monotonic() + timeout
        self._fd = -1  # the session descriptor carrying the flock, once held
        self._held_inode: tuple[int, int] | None = None
        lp = lock_path(path)
        existed = os.path.lexists(lp)
        self._file_lock = filelock.FileLock(
            lp,
            timeout=timeout,
            mode=0o600,
            thread_local=False,
            fallback_to_soft=False,
            on_acquired=self._note_inode,
        )
        try:
            self._file_lock.acquire()
        except filelock.Timeout as exc:
            raise LockedError(
                f"another writer holds this session (lock file {lp}); "
                "wait for it to finish or pass a lock timeout",
                path=path,
            ) from exc
        except OSError as exc:
            reason = _UNSAFE_LOCK.get(exc.errno or 0)
            if reason is None and exc.strerror != os.strerror(exc.errno or 0):
                reason = f"is refused by the lock library ({exc.strerror})"  # a planted link
            if reason is not None:
                raise UnsafeFileError(
                    f"the lock file {lp} {reason}; jsonltape only uses a regular file there",
                    path=path,
                ) from exc
            raise storage_error(exc, f"cannot create or open the lock file {lp}", path) from exc
        #: The lock file's (dev, inode) when this writer created it, else None.
        self._created = None if existed else self._held_inode

    def _note_inode(self, fd: int) -> None:
        st = os.fstat(fd)
        self._held_inode = (st.st_dev, st.st_ino)

    def hold(self, fd: int) -> None:
        """Take the flock on session descriptor ``fd`` (retried until the deadline) and keep
        ``fd`` open for as long as the hold lasts; ``fd`` belongs to this lock from now on,
        even when this raises."""
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                if time.monotonic() >= self._deadline:
                    os.close(fd)
                    raise LockedError(
                        "another writer holds the session file itself, though its lock file "
                        f"{lock_path(self.path)} was removed or replaced; wait for that writer "
                        "to finish or pass a lock timeout",
                        path=self.path,
                    ) from exc
            except OSError as exc:
                os.close(fd)
                raise storage_error(exc, "cannot lock the session file", self.path) from exc
            time.sleep(min(_POLL, max(0.0, self._deadline - time.monotonic())))
        if self._fd >= 0:
            self._unlock()
        self._fd = fd

    @property
    def fd(self) -> int:
        """The locked session descriptor (-1 before :meth:`hold`)."""
        return self._fd

    def _unlock(self) -> None:
        fd, self._fd = self._fd, -1
        try:
            # Explicitly: a copy inherited by a forked child must not keep the lock alive.
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def release(self) -> None:
        """End the hold: the session file's flock first, then the lock file (a waiter that
        gets the lock file then finds the session free). Idempotent."""
        try:
            if self._fd >= 0:
                self._unlock()
        finally:
            if self._file_lock.is_locked:
                self._file_lock.release()

    def abandon(self) -> None:
        """:meth:`release` after a failed open, first removing the lock file if this writer
        created it and the name still points at the inode it holds."""
        lp = lock_path(self.path)
        try:
            if self._created is not None and self._file_lock.is_locked:
                st = os.lstat(lp)
                if (st.st_dev, st.st_ino) == self._created:
                    os.unlink(lp)
        except OSError:
            pass  # removed already, or never ours: nothing to clean up
        finally:
            self.release()

    def forget(self) -> None:
        """In a forked child: close this process's copy without unlocking (the parent still
        holds the lock through its own copy)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def lock_session(path: Path, timeout: float) -> SessionLock:
    """Lock an existing session for writing, or raise :class:`LockedError` after ``timeout``.

    The file is checked (exists, regular, not a symlink, owner-only) before the lock file is
    touched, so a refused path leaves no lock file behind.
    """
    fd = _fs.open_for_read(path)
    try:
        _fs.check_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    try:
        lock = SessionLock(path, timeout)
    except BaseException:
        os.close(fd)
        raise
    try:
        lock.hold(fd)
        st = os.stat(path, follow_symlinks=False)
        if not os.path.samestat(st, os.fstat(fd)):
            # Replaced between our open and our lock: we hold the old file, not the session.
            raise ConcurrentModificationError(
                "the session file was replaced while it was being opened; try again", path=path
            )
    except BaseException:
        lock.abandon()
        raise
    return lock


def create_file(
    path: Path,
    *,
    session_id: str | None,
    title: str | None,
    cwd: str | None,
    agent: str | None,
    parent: ParentRef | None,
    meta: Mapping[str, Any] | None,
    ops: _fs.FileOps,
    lock_timeout: float,
    created: int | None = None,
) -> tuple[HeaderData, int, SessionLock, bytes, int]:
    """Create a session; return (header, fd open for append, held lock, header line, created
    ms). Everything is validated before the lock is taken; nothing is left behind on failure.
    """
    sid = validate_session_id(session_id) if session_id is not None else new_session_id()
    try:
        now = check_time(created, now_ms())
    except JsonltapeError as exc:
        raise exc.at(field="$.data.created") from exc.__cause__
    data: dict[str, Any] = {
        "format": "jsonltape",
        "version": VERSION,
        "minor": MINOR,
        "id": sid,
        "created": now,
    }
    for name, value in (("title", title), ("cwd", cwd), ("agent", agent)):
        if value is not None:
            data[name] = value
    if parent is not None:
        data["parent"] = msgspec.to_builtins(parent)
    if meta is not None:
        data["meta"] = dict(meta)
    line, _event = encode_event(0, "session/start", now, data, None, None, None, False)
    header = msgspec.convert(data, type=HeaderData)
    if os.path.lexists(path):
        raise SessionExistsError("session file already exists", path=path)
    try:
        _fs.make_dirs(path.parent)
    except OSError as exc:
        raise storage_error(exc, "cannot create the session's directory", path) from exc
    _fs.check_dir(path.parent)
    lock = SessionLock(path, lock_timeout)
    tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    try:
        if os.path.lexists(path):
            raise SessionExistsError("session file already exists", path=path)
        try:
            tfd = _fs.create_exclusive(tmp)
            lock.hold(tfd)  # nobody else knows this inode yet: never waits
            write_all(ops, tfd, line)
            ops.sync(tfd)
            publish(tmp, path)
            os.unlink(tmp)
            ops.sync_dir(path.parent)
            fd = _fs.open_for_append(path)
        except JsonltapeError:
            raise
        except OSError as exc:
            raise storage_error(exc, "cannot create the session file", path) from exc
        try:
            if not os.path.samestat(os.fstat(fd), os.fstat(tfd)):
                # No hard links here: publish copied the header into a new inode, which is
                # the one to hold (it was created exclusively, so only a writer that ignored
                # the lock file can have it).
                lock.hold(_fs.open_for_read(path))
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        lock.abandon()
        raise
    return header, fd, lock, line, now


@dataclass(eq=False, slots=True)
class Opened:
    """A session this writer created or opened, locked, ready for a Tape to compose."""

    state: WriterState
    header: HeaderData
    #: The scan an open appends after (None for a new session).
    scan: TailScan | None = None
    #: Synthetic events appended on open to close a crashed turn.
    closers: list[Event] = field(default_factory=list)
    #: Where opening saved a torn tail it cut off, if it did.
    sidecar: Path | None = None


def _state(
    path: Path,
    fd: int,
    lock: SessionLock,
    ops: _fs.FileOps,
    *,
    header_line: bytes,
    size: int,
    next_seq: int,
    last_time: int,
    turn: TurnRef | None,
    durability: str,
    group_events: int,
    group_ms: float,
    span_from: int,
) -> WriterState:
    st = os.fstat(fd)
    return WriterState(
        path=path,
        fd=fd,
        ops=ops,
        lock=lock,
        header_line=header_line,
        ident=(st.st_dev, st.st_ino),
        durability=durability,
        group_events=group_events,
        group_s=group_ms / 1000.0,
        size=size,
        written=size,
        next_seq=next_seq,
        durable_seq=next_seq - 1,
        last_time=last_time,
        turn=turn,
        span_from=span_from,
        span_crc=_crc_of_range(fd, span_from, size),
    )


def _crc_of_range(fd: int, start: int, end: int) -> int:
    """CRC-32 of the file's bytes ``[start, end)``: what the next checkpoint's span already
    covers when a session is opened (the lines after its last checkpoint)."""
    crc = 0
    while start < end:
        piece = os.pread(fd, min(CHUNK, end - start), start)
        if not piece:
            break
        crc = zlib.crc32(piece, crc)
        start += len(piece)
    return crc


def create_session(
    path: Path,
    *,
    session_id: str | None,
    title: str | None,
    cwd: str | None,
    agent: str | None,
    parent: ParentRef | None,
    meta: Mapping[str, Any] | None,
    durability: str,
    group_events: int,
    group_ms: float,
    lock_timeout: float,
    ops: _fs.FileOps | None = None,
    created: int | None = None,
) -> Opened:
    """Create a new session (:func:`create_file`) and return its writer state."""
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
    state = _state(
        path,
        fd,
        lock,
        ops,
        header_line=line,
        size=len(line),
        next_seq=1,
        last_time=now,
        turn=None,
        durability=durability,
        group_events=group_events,
        group_ms=group_ms,
        span_from=len(line),
    )
    return Opened(state, header)


def open_session(
    path: Path,
    *,
    durability: str,
    group_events: int,
    group_ms: float,
    lock_timeout: float,
    ops: _fs.FileOps | None = None,
    lock: SessionLock | None = None,
    scan: TailScan | None = None,
    force: bool = False,
) -> Opened:
    """Open an existing session: cut a torn tail, close a crashed turn.

    ``lock`` is one the caller already holds (it stays the caller's to abandon on failure);
    ``scan`` replaces the O(tail) scan with one the caller made (repair's full scan);
    ``force`` cuts a corrupt file at its first bad line instead of refusing it.
    """
    _fs.check_dir(path.parent)
    own_lock = lock is None
    lock = lock or lock_session(path, lock_timeout)
    fd = -1
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
        s = _state(
            path,
            fd,
            lock,
            ops,
            header_line=os.pread(fd, scan.header_end, 0),
            size=scan.committed,
            next_seq=scan.next_seq,
            last_time=scan.last_time,
            turn=scan.turn,
            durability=durability,
            group_events=group_events,
            group_ms=group_ms,
            span_from=scan.span_from,
        )
        # Lines a crashed writer left after its last checkpoint are whole but were never
        # synced: count them so the next flush (or close) makes them durable.
        s.pending = scan.next_seq - 1 - (scan.checkpoint_seq or 0)
        s.durable_seq = (scan.checkpoint_seq or 1) - 1
        opened = Opened(s, scan.header, scan, sidecar=sidecar)
        if scan.turn is not None and not scan.closed:
            opened.closers = _close_interrupted_turn(s, scan.turn)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if own_lock:
            lock.abandon()
        raise
    return opened


def _close_interrupted_turn(s: WriterState, turn: TurnRef) -> list[Event]:
    """Append the closers of a turn a crash left open, stamped with the last event's time."""
    items = _repair.closers(s.fd, turn.offset, s.size)
    if not items:
        return []
    with s.mutex:
        prepared = []
        seq = s.next_seq
        for type_, data, sources in items:
            surface = "append" if type_ in SURFACE_TYPES else None
            prepared.append(
                encode_event(seq, type_, s.last_time, data, surface, sources, None, False)
            )
            seq += 1
        committer = Committer(s)
        committer.stage(prepared)
        committer.flush()
    return [event for _line, event in prepared]
