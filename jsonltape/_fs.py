"""File-system primitives: owner-only creation, no symlink following, and the sync calls.

All writer I/O goes through :class:`FileOps` so tests can record the exact order of writes and
syncs (ALICE-style) or make a sync fail, without mocking the file system itself away.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from pathlib import Path

from .errors import (
    InvalidArgumentError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    UnsafeFileError,
)

__all__ = [
    "FileOps",
    "check_dir",
    "check_file",
    "fsync_dir",
    "given_path",
    "make_dirs",
    "open_for_append",
    "publish",
    "read_repo_file",
    "session_path",
    "write_all",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
#: What a path argument takes, for :func:`given_path`'s message.
_PATH_KINDS = "a str or os.PathLike[str]"
#: The most bytes jsonltape reads of a small file a repository holds (``.jsonltape-allow``,
#: ``.gitattributes``, ``.gitignore``, a hook): a larger one was not written for it.
MAX_REPO_FILE = 4 << 20


class FileOps:
    """The writer's I/O calls. Subclassed in tests to trace or inject faults."""

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def sync(self, fd: int) -> None:
        """Make everything written to ``fd`` durable (data and the size that covers it)."""
        if sys.platform == "darwin":  # pragma: no cover - fsync() does not flush the drive cache
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
        else:
            os.fdatasync(fd)

    def sync_dir(self, path: Path) -> None:
        fsync_dir(path)

    def truncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)


def write_all(ops: FileOps, fd: int, data: bytes) -> None:
    """Write all of ``data`` through ``ops`` (a regular file takes it in one call)."""
    n = ops.write(fd, data)
    if n == len(data):
        return  # the usual case: a regular file takes the whole write
    view = memoryview(data)[max(n, 0) :]
    while view:
        n = ops.write(fd, view)  # type: ignore[arg-type]
        if n <= 0:  # pragma: no cover - write() returning 0 on a regular file
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def publish(tmp: Path, path: Path, *, keep: bool = False) -> int | None:
    """Give the finished temp file its name without ever replacing an existing file.

    Where the file system has no hard links the name gets a copy (a new inode); with ``keep``
    that copy's descriptor is returned, open for appending and flocked before a byte of it
    was written (a writer that goes on writing must write there); else None."""
    try:
        os.link(tmp, path, follow_symlinks=False)
        return None
    except FileExistsError:
        raise SessionExistsError("session file already exists", path=path) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
    # File systems without hard links: O_EXCL creation is still exclusive.
    fd = create_exclusive(path, append=keep)
    try:
        if keep:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write_all(FileOps(), fd, tmp.read_bytes())
        os.fsync(fd)
    except BaseException:
        try:  # a copy cut short is no session: its name goes again, if it still names it
            if os.path.samestat(os.lstat(path), os.fstat(fd)):
                os.unlink(path)
        finally:
            os.close(fd)
        raise
    if keep:
        return fd
    os.close(fd)
    return None


def given_path(value: object, field: str = "path", *, kinds: str = _PATH_KINDS) -> Path:
    """The file a caller named in the argument ``field``, as given (a relative path stays
    relative, as errors show it), or :class:`InvalidArgumentError` naming ``field`` for what
    names no file: not a ``str``/``os.PathLike[str]`` (``kinds`` says what else the argument
    takes), empty, with a NUL, or with a lone surrogate no file name encodes (the OS would
    refuse each with a bare ValueError or TypeError, or a directory for the empty one)."""
    name = value
    if isinstance(value, os.PathLike):
        try:
            name = os.fspath(value)
        except TypeError:  # its __fspath__ returned neither str nor bytes
            name = value
    if not isinstance(name, str):
        raise InvalidArgumentError(
            f"{field} must be {kinds}, not {type(name).__name__}", field=field
        )
    if not name or "\0" in name:
        raise InvalidArgumentError(
            f"{field} must be a non-empty file name without NUL characters, not {name!r}",
            field=field,
        )
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        raise InvalidArgumentError(
            f"{field} {name!r} is no file name: it holds a lone surrogate, which no file "
            "system name encodes",
            field=field,
        ) from None
    return Path(name)


def session_path(path: object, field: str = "path") -> Path:
    """The absolute path of the session a caller named (:func:`given_path`'s checks)."""
    return Path(os.path.abspath(given_path(path, field)))


def fsync_dir(path: Path) -> None:
    """fsync a directory so a new or renamed entry in it survives a power cut."""
    fd = os.open(path, os.O_RDONLY | _CLOEXEC | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """Create missing directories 0700 (whatever the umask), fsyncing each parent."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)  # mkdir's mode is filtered by the umask
        fsync_dir(d.parent)


def check_dir(path: Path) -> None:
    """Refuse a parent directory that others can write into (they could swap the file)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise SessionNotFoundError("no such directory", path=path) from None
    except OSError as exc:
        raise StorageError(
            f"cannot look at the directory: {exc.strerror or exc}", errno=exc.errno, path=path
        ) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise SessionNotFoundError("not a directory", path=path)
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise UnsafeFileError(
            f"directory is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            "chmod go-w it",
            path=path,
        )


def check_file(path: Path, st: os.stat_result) -> None:
    """Refuse a file we must not trust: not regular, foreign owner, or writable by others."""
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError("not a regular file", path=path)
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UnsafeFileError(f"file is owned by uid {st.st_uid}, not by you", path=path)
    if st.st_mode & 0o022:
        raise UnsafeFileError(
            f"file is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            "chmod 600 it",
            path=path,
        )


def open_for_append(path: Path) -> int:
    """Open an existing session for reading and appending, never through a symlink."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | _NOFOLLOW | _CLOEXEC)
    except FileNotFoundError:
        raise SessionNotFoundError("no such session file", path=path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(
                "is a symlink; jsonltape does not follow links", path=path
            ) from None
        if exc.errno == errno.EISDIR:
            raise SessionNotFoundError("is a directory, not a session file", path=path) from None
        if exc.errno == errno.ENXIO:  # a socket (or a device with nothing behind it)
            raise UnsafeFileError("not a regular file", path=path) from None
        raise
    try:
        check_file(path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_for_read(path: Path) -> int:
    """Open a session read-only without following a symlink at the final component.

    Only a regular file is accepted. O_NONBLOCK keeps a FIFO from blocking the open until
    some writer appears (it changes nothing for a regular file); a directory opens fine
    read-only and would fail only at the first read, without naming itself.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    except FileNotFoundError:
        raise SessionNotFoundError("no such session file", path=path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(
                "is a symlink; jsonltape does not follow links", path=path
            ) from None
        if exc.errno == errno.EISDIR:
            raise SessionNotFoundError("is a directory, not a session file", path=path) from None
        if exc.errno == errno.ENXIO:  # a socket (or a device with nothing behind it)
            raise UnsafeFileError("not a regular file", path=path) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise SessionNotFoundError("is a directory, not a session file", path=path)
        raise UnsafeFileError("not a regular file", path=path)
    return fd


def create_exclusive(path: Path, mode: int = 0o600, *, append: bool = False) -> int:
    """Create a new file ``mode`` regardless of umask; fail if anything exists at ``path``
    (``append``: opened for appending, as a writer's session descriptor is)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    fd = os.open(path, (flags | os.O_APPEND) if append else flags, mode)
    os.fchmod(fd, mode)
    return fd


def read_repo_file(path: Path, cap: int = MAX_REPO_FILE, *, whole: bool = True) -> bytes | None:
    """The bytes of the small file ``path`` found in a repository, or None when there is none.

    A clone chooses what is at ``path``: it is opened without following a symlink (a link to
    ``/dev/zero`` would be read without end) and without blocking (a FIFO would wait for a
    writer forever), and only a regular file of at most ``cap`` bytes is read (``whole=False``:
    its first ``cap`` bytes, whatever its size). Anything else is refused with
    :class:`~jsonltape.errors.UnsafeFileError` naming the path.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFileError(
                "is a symlink; jsonltape does not follow links", path=path
            ) from None
        if exc.errno == errno.ENXIO:  # a socket
            raise UnsafeFileError("is not a regular file", path=path) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UnsafeFileError("is a directory, not a file", path=path)
        if not stat.S_ISREG(mode):
            raise UnsafeFileError("is not a regular file", path=path)
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            chunk = os.read(fd, cap + 1 - size)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
        if not whole:
            return b"".join(chunks)[:cap]
        raise UnsafeFileError(
            f"is larger than {cap} bytes, more than jsonltape reads of such a file", path=path
        )
    finally:
        os.close(fd)
