"""Repair: make a session clean again without losing a byte.

* torn tail: the bytes after the last good line go to an owner-only sidecar, then the file is
  truncated to that line boundary and synced;
* open turn left by a crash: synthetic closers are appended (error tool results for calls
  without a result, step/end, turn/end with reason ``interrupted``);
* corrupt (damage before the last checkpoint): refused unless ``force=True``, which cuts at the
  first damaged line and keeps everything from there on in the sidecar too.

Repair holds the writer's lock, so it never races a live writer, and it is idempotent.
"""

from __future__ import annotations

import os

import msgspec

from . import _fs
from ._scan import State, scan_full
from ._session import check_lock_timeout, lock_session, open_session
from .errors import CorruptError
from .reader import tail_scan
from .writer import Tape

__all__ = ["RepairResult", "repair"]


class RepairResult(msgspec.Struct):
    """What :func:`repair` did; ``jsonltape repair --json`` prints it."""

    path: str
    state_before: State
    state_after: State
    cut_offset: int | None
    cut_bytes: int
    sidecar: str | None
    closers: list[int]


def repair(
    path: str | os.PathLike[str], *, force: bool = False, lock_timeout: float = 0.0
) -> RepairResult:
    """Repair a session in place (see the module docs); return what was done.

    Every line is checked first (like :func:`jsonltape.verify`), so corruption anywhere before
    the last checkpoint is found and refused with :class:`CorruptError` unless ``force``.
    """
    p = _fs.session_path(path)
    check_lock_timeout(lock_timeout)
    _fs.check_dir(p.parent)
    lock = lock_session(p, lock_timeout)
    try:
        fd = _fs.open_for_append(p)
        try:
            scan = scan_full(fd, str(p))
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if scan.corrupt and not force:
            raise CorruptError(
                f"{scan.bad_reason}; this is damage before the last checkpoint, not a crash "
                "tail. Nothing was changed. `jsonltape repair --force` cuts the file at this "
                "line and keeps the rest in a sidecar",
                path=p,
                line=scan.bad_line,
                offset=scan.bad_offset,
            )
        # The full scan, not the writer's tail scan, decides the open turn: it does not depend
        # on checkpoints recording it.
        tape = Tape(
            open_session(
                p,
                durability="manual",
                group_events=1,
                group_ms=1.0,
                lock_timeout=lock_timeout,
                lock=lock,
                scan=scan,
                force=force,
            )
        )
    except BaseException:
        lock.abandon()
        raise
    closers = [ev.seq for ev in tape.closers]
    sidecar = tape.sidecar
    tape.close()
    return RepairResult(
        path=str(p),
        state_before=scan.state,
        state_after=tail_scan(p).state,
        cut_offset=scan.committed if sidecar is not None else None,
        cut_bytes=size - scan.committed if sidecar is not None else 0,
        sidecar=str(sidecar) if sidecar is not None else None,
        closers=closers,
    )
