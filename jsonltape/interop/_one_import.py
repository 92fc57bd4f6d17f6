"""One import of a source at a time.

Two imports of the same source into the same root, run at once (a cron job and a hand-typed
``jsonltape import``), would each create the same staged sessions and each find, at naming
time, that the other had named one first: both failed, nothing lost, and the next import
completed. Now the second waits for the first and then finds the source imported.

The lock files live in jsonltape's data directory, not in the archive (no file in a root a
user commits), and there are at most :data:`STRIPES` of them, shared by the sources whose keys
hash alike: a shared stripe only ever makes one import wait for another, never lets two of one
source run at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import _fs
from .._project import data_dir

__all__ = ["STRIPES", "lock_file", "one_import", "taken"]

#: How many lock files there are at most, for every root and source together.
STRIPES = 256
_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: Lock directories this process made or found (an unchanged re-import takes a lock per file).
_MADE: set[Path] = set()


def lock_file(directory: Path, base_id: str) -> Path:
    """The lock file of importing the source whose main session is ``base_id`` (or a name
    derived from it) in ``directory``. The directory is named by its real path: one root
    reached through a symlink, a relative path or ``..`` is still one root (its sessions are
    the same files), so its imports still take turns."""
    key = f"{os.path.realpath(directory)}\0{base_id}".encode("utf-8", "surrogatepass")
    stripe = int.from_bytes(hashlib.sha256(key).digest()[:4], "big") % STRIPES
    return data_dir() / "locks" / f"import-{stripe:03d}.lock"


def _open(path: Path) -> int | None:
    for _ in range(2):  # once more when the directory went away since it was made
        try:
            if path.parent not in _MADE:
                _fs.make_dirs(path.parent)
                _MADE.add(path.parent)
            return os.open(path, _FLAGS, 0o600)
        except FileNotFoundError:  # removed while this process ran (a long `import --follow`)
            _MADE.discard(path.parent)
        except OSError:
            return None
    return None


def taken(path: Path) -> bool:
    """Whether another import holds the lock file ``path`` now (one that cannot be had at
    all is not: an import then runs unlocked)."""
    fd = _open(path)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # releases it
    return False


@contextmanager
def one_import(
    directory: Path, base_id: str, *, waiting: Callable[[Path], None] | None = None
) -> Iterator[None]:
    """Hold the lock of importing that source; another import of it waits here, and
    ``waiting`` is told the lock file's path once before it does (the CLI says so on stderr:
    an import behind one stopped with Ctrl-Z would otherwise wait in silence). Without a
    usable data directory (a read-only home, a symlink at the lock's name) or lock (an NFS
    home without its lock service: ENOLCK) the import runs unlocked, as before: two at once
    may then both fail, with nothing lost."""
    path = lock_file(directory, base_id)
    fd = _open(path)
    if fd is None:
        yield
        return
    try:
        _lock(fd, path, waiting)
        yield
    finally:
        os.close(fd)  # releases the lock, as the holder's death does


def _lock(fd: int, path: Path, waiting: Callable[[Path], None] | None) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    except OSError:
        return  # a lock that cannot be had is not the import's failure
    if waiting is not None:
        waiting(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        pass
