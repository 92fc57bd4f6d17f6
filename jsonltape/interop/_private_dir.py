"""Private temp directories that a killed process does not leave behind for good.

Reading an agent's live SQLite database copies it (and its ``-wal``) into a 0700 directory of
the temp dir (``jsonltape-db-*`` per read, ``jsonltape-kept-*`` per process): those copies hold
the whole database, a Cursor ``state.vscdb``'s login tokens included. A process removes them when
it is done or exits; a SIGKILLed one cannot. So each such directory is flocked by its process
for as long as it is in use, and the first one a process makes removes the others that no live
process holds (and that are a minute old: the instant between a directory's creation and its
lock). Nothing but regular directories of this user named so is ever removed, never through a
symlink.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["PREFIXES", "STALE_SECONDS", "PrivateDir", "remove_stale_dirs"]

#: The directories made here: a read's snapshot, a process's kept copies.
PREFIXES = ("jsonltape-db-", "jsonltape-kept-")
#: A directory this old whose flock is free was left by a process that died.
STALE_SECONDS = 60.0
_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_swept = threading.Event()


class PrivateDir:
    """A new 0700 directory in the temp dir, flocked until :meth:`remove`."""

    def __init__(self, prefix: str) -> None:
        assert prefix in PREFIXES, prefix
        if not _swept.is_set():
            _swept.set()
            remove_stale_dirs()
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self._fd = os.open(self.path, _O_DIR | os.O_CLOEXEC)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: never waits
        except OSError:
            pass  # no flock on this file system: a sweep cannot take it either (it never guesses)

    def remove(self) -> None:
        """Remove the directory and what it holds, then let go of it. Idempotent."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        try:
            shutil.rmtree(self.path, ignore_errors=True)
        finally:
            os.close(fd)


def remove_stale_dirs(where: str | None = None, *, now: float | None = None) -> int:
    """Remove the directories of :data:`PREFIXES` in ``where`` (the temp dir) that a process
    which died left there; return how many."""
    base = where if where is not None else tempfile.gettempdir()
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(PREFIXES)]
    except OSError:
        return 0  # no temp dir to look at: nothing to clean
    for entry in entries:
        try:
            fd = os.open(entry.path, _O_DIR | os.O_CLOEXEC)
        except OSError:
            continue  # a symlink, a file, gone: left alone
        try:
            st = os.fstat(fd)
            if (
                not stat.S_ISDIR(st.st_mode)
                or st.st_uid != os.getuid()
                or now - st.st_mtime < STALE_SECONDS
            ):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live process's (or no flock here: never guess)
            named = os.lstat(entry.path)
            if (named.st_dev, named.st_ino) != (st.st_dev, st.st_ino):
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += not os.path.lexists(entry.path)
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed
