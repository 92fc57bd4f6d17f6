"""A session file's atomic creation, and the opening of an existing one for its writer.

Exclusion is :mod:`._lock`'s: a lock file and an flock on the session file itself.

Creation writes the header into an owner-only temp file, locks that file, syncs it and
hard-links it to the final name, which fails instead of replacing anything; then the directory
is synced. A session file therefore always starts with a complete header, and is locked from
the moment it has a name. A staged creation (:mod:`._staged`) writes the whole session under
the temp name and gives it its name when it is closed.

A writer that gives up while opening (missing file, not a session, a failed create, ...)
removes the lock file again if it created it and it is still the one it holds, so a refused
command leaves nothing behind; a lock file it found is left alone.

:func:`create_session` and :func:`open_session` turn a locked file into the
:class:`~jsonltape._commit.WriterState` a Tape composes (:class:`Opened`); opening reads
only the tail, cuts a torn tail into a sidecar and closes a turn a crash left open.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from . import _fs, _repair, _staged
from ._commit import Committer, Hold, WriterState
from ._framing import CHUNK
from ._fs import publish, write_all
from ._lock import SessionLock, lock_path, lock_session, storage_error
from ._prepare import check_time, encode_event, now_ms
from ._scan import TailScan, scan_tail
from .errors import (
    ConcurrentModificationError,
    CorruptError,
    InvalidArgumentError,
    InvalidEventError,
    JsonltapeError,
    SessionExistsError,
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
    create: object,
    durability: object,
    group_events: object,
    group_ms: object,
    timeout: object,
    staged: object = False,
) -> None:
    """Refuse open()'s options before anything is touched (library errors naming the option)."""
    if not (create is True or create is False or create == "if-missing"):
        raise _bad("create", "True, False or 'if-missing'", create)
    if durability not in ("always", "group", "manual"):
        raise _bad("durability", "'always', 'group' or 'manual'", durability)
    if staged is not False and (staged is not True or create is not True or durability != "manual"):
        # synced once, when it gets its name: only a new session, only on the writer's word
        raise _bad("staged", "False, or True with create=True and durability='manual'", staged)
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


def create_file(
    path: Path, line: bytes, *, ops: _fs.FileOps, lock_timeout: float
) -> tuple[int, SessionLock]:
    """Create a session starting with the header ``line`` (:func:`_header`, which validated
    everything before this takes a lock); return (fd open for append, held lock). Nothing is
    left behind on failure."""
    if os.path.lexists(path):
        raise SessionExistsError("session file already exists", path=path)
    _make_dir(path)
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
    return fd, lock


def _header(
    session_id: str | None,
    title: str | None,
    cwd: str | None,
    agent: str | None,
    parent: ParentRef | None,
    meta: Mapping[str, Any] | None,
    created: int | None,
) -> tuple[HeaderData, bytes, int]:
    """A new session's header: (its data, its line, its creation time in ms)."""
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
    return msgspec.convert(data, type=HeaderData), line, now


def _make_dir(path: Path) -> None:
    """Make and check the directory a new session goes into."""
    try:
        _fs.make_dirs(path.parent)
    except OSError as exc:
        raise storage_error(exc, "cannot create the session's directory", path) from exc
    _fs.check_dir(path.parent)


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
    lock: Hold,
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
    staged: bool = False,
) -> Opened:
    """Create a new session (:func:`create_file`, or :func:`_stage_file` when ``staged``)
    and return its writer state."""
    ops = ops or _fs.FileOps()
    header, line, now = _header(session_id, title, cwd, agent, parent, meta, created)
    hold: _staged.StagedHold | None = None
    if staged:
        fd, hold = _stage_file(path, line, ops)
        lock: Hold = hold
    else:
        fd, lock = create_file(path, line, ops=ops, lock_timeout=lock_timeout)
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
    if hold is not None:
        state.staged = hold
        state.durable_seq = -1  # not even the header: a crash now leaves no session at all
    return Opened(state, header)


def _stage_file(path: Path, line: bytes, ops: _fs.FileOps) -> tuple[int, _staged.StagedHold]:
    """A staged session (:mod:`._staged`) starting with the header ``line``, not named until
    its first flush: (the descriptor to append to, its hold)."""
    if os.path.lexists(path):
        raise SessionExistsError("session file already exists", path=path)
    _make_dir(path)
    try:
        return _staged.stage(path, line, ops)
    except OSError as exc:
        raise storage_error(exc, "cannot create the session file", path) from exc


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
