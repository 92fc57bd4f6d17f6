"""A session file's lock and its atomic creation.

The lock is ``flock`` on ``.<name>.lock`` beside the session (filelock's UnixFileLock, never
the soft fallback): it dies with its holder, so a killed writer never leaves a stale lock.
Creation writes the header into an owner-only temp file, syncs it and hard-links it to the
final name, which fails instead of replacing anything; then the directory is synced. A session
file therefore always starts with a complete header.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import filelock
import msgspec

from . import _fs
from ._prepare import check_time, encode_event, now_ms, publish, write_all
from .errors import JsonltapeError, LockedError
from .events import MINOR, VERSION, HeaderData, ParentRef
from .ids import new_session_id, validate_session_id

__all__ = ["acquire", "create_file", "lock_path"]


def lock_path(path: Path) -> Path:
    """The lock file of a session: a dot-file beside it (``.<name>.lock``)."""
    return path.with_name(f".{path.name}.lock")


def acquire(path: Path, timeout: float) -> filelock.BaseFileLock:
    """Take the session's writer lock, or raise :class:`LockedError` after ``timeout`` s."""
    lp = lock_path(path)
    lock = filelock.FileLock(
        lp, timeout=timeout, mode=0o600, thread_local=False, fallback_to_soft=False
    )
    try:
        lock.acquire()
    except filelock.Timeout:
        raise LockedError(
            f"another writer holds this session (lock file {lp}); "
            "wait for it to finish or pass a lock timeout",
            path=path,
        ) from None
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
) -> tuple[HeaderData, int, filelock.BaseFileLock, int, int]:
    """Create a session; return (header, fd open for append, held lock, size, created ms)."""
    sid = validate_session_id(session_id) if session_id is not None else new_session_id()
    now = check_time(created, now_ms())
    _fs.make_dirs(path.parent)
    _fs.check_dir(path.parent)
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
    lock = acquire(path, lock_timeout)
    try:
        if os.path.lexists(path):
            raise JsonltapeError("session file already exists", path=path)
        tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
        tfd = _fs.create_exclusive(tmp)
        try:
            write_all(ops, tfd, line)
            ops.sync(tfd)
            publish(tmp, path)
        finally:
            os.close(tfd)
            if tmp.exists():
                tmp.unlink()
        ops.sync_dir(path.parent)
        fd = _fs.open_for_append(path)
    except BaseException:
        lock.release()
        raise
    return header, fd, lock, len(line), now
