"""One writer per index, and the daemon's pid and status files beside it.

Light on purpose (no watchdog): every command that writes the index or asks about the daemon
imports this, not ``service``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import filelock

from jsonltape_daemon.errors import IndexBusyError
from jsonltape_daemon.paths import ensure_private_dir, lock_file, pid_file, status_file

__all__ = ["daemon_status", "holder", "in_serve", "index_lock", "running_pid", "write_private"]


def index_lock(index: Path, timeout: float = 0.0) -> filelock.BaseFileLock:
    """Take the index's writer lock (daemon or sync); IndexBusyError names the holder."""
    ensure_private_dir(index.parent)
    lock = filelock.FileLock(
        lock_file(index), timeout=timeout, mode=0o600, thread_local=False, fallback_to_soft=False
    )
    try:
        lock.acquire()
    except filelock.Timeout:
        pid = _read_pid(index)
        who = holder(index, pid) if pid is not None else "another sync"
        raise IndexBusyError(
            f"{who} is writing this index; it keeps it up to date (`jsonltape daemon stop` "
            "first, or use another --index)",
            path=index,
        ) from None
    return lock


def write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _read_pid(index: Path) -> int | None:
    try:
        return int(pid_file(index).read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process
        return True
    return True


def running_pid(index: Path) -> int | None:
    """The pid of the daemon serving ``index``, or None (a stale pid file does not count)."""
    pid = _read_pid(index)
    if pid is None or not _alive(pid):
        return None
    lock = filelock.FileLock(lock_file(index), timeout=0, thread_local=False)
    try:
        lock.acquire()
    except filelock.Timeout:
        return pid
    lock.release()
    return None


def daemon_status(index: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(status_file(index).read_text())
    except (OSError, ValueError):
        return None
    return data


def in_serve(index: Path, pid: int) -> str | None:
    """The address of the ``jsonltape serve`` whose process ``pid`` runs the daemon's loop on
    ``index`` in-process (None: a ``daemon run``). The loop says so in its status file before
    it writes its pid file, so a pid that ``running_pid`` gives is described."""
    status = daemon_status(index) or {}
    url = status.get("serve")
    return url if status.get("pid") == pid and isinstance(url, str) else None


def holder(index: Path, pid: int) -> str:
    """Who runs the daemon's loop on ``index`` as process ``pid``, for messages."""
    url = in_serve(index, pid)
    return f"jsonltape serve (pid {pid}, {url})" if url else f"the daemon (pid {pid})"
