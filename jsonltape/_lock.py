"""A session file's writer lock.

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
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from . import _fs
from .errors import ConcurrentModificationError, LockedError, StorageError, UnsafeFileError

__all__ = ["SessionLock", "lock_path", "lock_session", "storage_error"]

#: Seconds between tries for a session file another writer has locked (filelock's default).
_POLL = 0.05
#: OS errors about what sits at the lock file's name: a policy refusal, not an I/O failure.
_UNSAFE_LOCK = {errno.ELOOP: "is a symlink", errno.EISDIR: "is a directory"}


def lock_path(path: Path) -> Path:
    """The lock file of a session: a dot-file beside it (``.<name>.lock``)."""
    return path.with_name(f".{path.name}.lock")


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
