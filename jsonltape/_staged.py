"""Staged creation: a new session written whole under a temporary name, given its name at close.

A session created the usual way costs four syncs before it is closed (its header, the
directory, its events, the closing checkpoint) and a lock file, whatever it holds. A writer that
creates many sessions and writes each one in one go (an import: a source of a thousand runs is
a thousand sessions) pays that per session. A staged session is instead written into an
owner-only temp file beside its final name (``.<name>.<12 hex>.tmp``, the same pattern as a
usual creation's temp file, which git's ignore rules and the index's walk already leave alone).
Nobody else knows that file, so it needs no lock file; an flock on it tells a live writer's
from a dead one's. At close everything, its closing checkpoint included, is synced *once*, and
only then is the file linked to its final name (never replacing one), then the directory is
synced (:func:`jsonltape.writer.close_all` syncs each directory once for all its tapes).

What the spec's atomic creation promises still holds, more strongly: a session file never
appears without its header, and a staged one appears with every event it will hold, synced. A
crash before close leaves only the temp file: nothing was reported durable, and nothing has
the session's name. Such a leftover is removed by :func:`remove_stale_temps` (a later import of the
same directory calls it), which removes only temp files no live writer holds.
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from pathlib import Path

from . import _fs
from .errors import JsonltapeError, StorageError

__all__ = ["StagedHold", "publish", "remove_stale_temps", "stage"]

#: The temp files of session creation, usual or staged (``create_file`` and :func:`stage`).
_TEMP = re.compile(r"\A\..+\.jsonl\.[0-9a-f]{12}\.tmp\Z")
#: A temp file this old whose flock is free was left by a writer that died. The age keeps a
#: sweep off the instant between a writer creating its temp file and locking it.
STALE_SECONDS = 60.0


class StagedHold:
    """A staged session's hold: an flock on its temp file (a descriptor of its own), and the
    temp file itself, removed on release unless the session was published."""

    def __init__(self, tmp: Path, fd: int) -> None:
        self.tmp: Path | None = tmp
        self._fd = fd
        st = os.fstat(fd)
        self._ident = (st.st_dev, st.st_ino)

    @property
    def fd(self) -> int:
        """The descriptor carrying the flock (-1 once released)."""
        return self._fd

    def published(self, copy: int | None = None) -> None:
        """The session has its name now: the temp name is gone, nothing to remove. ``copy``:
        the name was given to a copy (no hard links), locked through ``copy``, which the hold
        keeps from now on instead of the temp file's descriptor."""
        self.tmp = None
        if copy is not None:
            old, self._fd = self._fd, copy
            try:
                fcntl.flock(old, fcntl.LOCK_UN)
            finally:
                os.close(old)

    def release(self) -> None:
        """Remove the temp file if the session never got its name, then unlock. Idempotent."""
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        try:
            if self.tmp is not None:
                try:
                    st = os.lstat(self.tmp)
                    if (st.st_dev, st.st_ino) == self._ident:
                        os.unlink(self.tmp)
                except OSError:
                    pass  # gone already: nothing to clean up
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)  # a forked child's copy must not keep it
            finally:
                os.close(fd)

    def forget(self) -> None:
        """In a forked child: close this process's copy without unlocking or removing."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


def stage(path: Path, line: bytes, ops: _fs.FileOps) -> tuple[int, StagedHold]:
    """Create the temp file of staged session ``path`` holding the header ``line`` (not
    synced); return the descriptor to append to and the hold. The caller made the directory
    and refused an existing session (``_session._stage_file``)."""
    tmp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
    fd = _fs.create_exclusive(tmp, append=True)
    try:
        hold = StagedHold(tmp, os.dup(fd))
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        fcntl.flock(hold.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new inode: never waits
        _fs.write_all(ops, fd, line)
    except BaseException:
        os.close(fd)
        hold.release()
        raise
    return fd, hold


def publish(path: Path, hold: StagedHold, ops: _fs.FileOps, *, sync_dir: bool) -> bool:
    """Give the synced temp file of ``hold`` its name ``path`` (never replacing a file), drop
    the temp name and, with ``sync_dir``, sync the directory. True when the name was given to
    a copy (no hard links): the writer goes on in that file, through the hold's descriptor."""
    tmp = hold.tmp
    assert tmp is not None, "published twice"
    copy = _fs.publish(tmp, path, keep=True)
    hold.published(copy)
    os.unlink(tmp)
    if sync_dir:
        ops.sync_dir(path.parent)
    return copy is not None


def remove_stale_temps(directory: Path, *, now: float | None = None) -> int:
    """Remove the creation temp files in ``directory`` that a writer which died left there
    (regular, yours, unchanged for :data:`STALE_SECONDS` and not flocked by anyone); return how
    many. A missing directory has none."""
    now = time.time() if now is None else now
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    except OSError as exc:
        raise StorageError(
            f"cannot list the directory: {exc.strerror or exc}", errno=exc.errno, path=directory
        ) from exc
    for entry in entries:
        if _TEMP.match(entry.name) and _remove_if_dead(Path(entry.path), now):
            removed += 1
    return removed


def _remove_if_dead(path: Path, now: float) -> bool:
    try:
        fd = _fs.open_for_read(path)
    except (OSError, JsonltapeError):
        return False  # a symlink, not a file, gone: left alone
    try:
        st = os.fstat(fd)
        try:
            _fs.check_file(path, st)
        except JsonltapeError:
            return False  # not yours, or open to others: not a temp file jsonltape made
        if now - st.st_mtime < STALE_SECONDS:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a live writer's (or no flock on this file system: never guess)
        try:
            named = os.lstat(path)
        except FileNotFoundError:
            return False
        if (named.st_dev, named.st_ino) != (st.st_dev, st.st_ino):
            return False  # the name was reused meanwhile
        os.unlink(path)
        return True
    finally:
        os.close(fd)
