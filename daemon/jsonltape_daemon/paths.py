"""Where things live by default, and the owner-only files beside the index.

Defaults (each overridable by an option or an environment variable):

* data directory: ``$JSONLTAPE_HOME``, else the platform's user data dir
  (``$XDG_DATA_HOME/jsonltape`` or ``~/.local/share/jsonltape`` on Linux,
  ``~/Library/Application Support/jsonltape`` on macOS, ``%LOCALAPPDATA%\\jsonltape`` on Windows);
* sessions root: ``$JSONLTAPE_ROOT``, else ``<data dir>/sessions``;
* index: ``$JSONLTAPE_INDEX``, else ``<data dir>/index.db``.

Beside an index ``X.db`` live ``X.db.lock`` (one writer: daemon or sync), ``X.db.pid`` and
``X.db.status`` (the running daemon), ``X.db.log`` (the log of ``daemon start``), and while a
bulk load runs ``X.db.build`` (the new index) and ``X.db.fts`` (its full-text helper's). The
directory is created 0700 and every file 0600, whatever the umask.

A directory that already exists and that group or others may write into (0777, 0775; a
sticky one such as /tmp is safe, as for session files) could let them swap the index or
its lock: jsonltape's own data directory (and its sessions root) is tightened to 0700 when it
is yours; any other is refused with :class:`~jsonltape.errors.UnsafeFileError`, since its mode
may be on purpose.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jsonltape import _index_api as _api
from jsonltape.errors import UnsafeFileError

__all__ = [
    "build_path",
    "data_dir",
    "ensure_private_dir",
    "fsync_path",
    "helper_path",
    "lock_file",
    "log_file",
    "pid_file",
    "remove_db",
    "status_file",
]


def data_dir() -> Path:
    """jsonltape's user data directory: ``$JSONLTAPE_HOME``, else the platform's (module doc).

    Looked up on first call, not at import: a query given ``--index`` loads neither the
    library's project-root module nor its file helpers.
    """
    return _api.data_dir()


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) 0700, as the library creates session dirs; an
    existing one that others may write into is tightened (ours) or refused (module doc)."""
    _api.fs.make_dirs(path)
    st = os.stat(path)
    if not st.st_mode & 0o022 or st.st_mode & stat.S_ISVTX:
        return
    mode = stat.S_IMODE(st.st_mode)
    ours = Path(path).absolute() in (data_dir(), data_dir() / "sessions")
    if ours and (not hasattr(os, "getuid") or st.st_uid == os.getuid()):
        os.chmod(path, 0o700)  # our data directory, made loose by a umask of 000: tighten it
        return
    raise UnsafeFileError(
        f"directory is writable by group or others (mode {mode:04o}); chmod 700 it, or use "
        "another --index",
        path=path,
    )


def _beside(index: Path, suffix: str) -> Path:
    return index.with_name(index.name + suffix)


def lock_file(index: Path) -> Path:
    return _beside(index, ".lock")


def pid_file(index: Path) -> Path:
    return _beside(index, ".pid")


def status_file(index: Path) -> Path:
    return _beside(index, ".status")


def log_file(index: Path) -> Path:
    return _beside(index, ".log")


def build_path(index: Path | str) -> Path:
    """Where a bulk load of ``index`` is written before it is renamed into place."""
    p = Path(index)
    return p.with_name(p.name + ".build")


def new_path(index: Path | str) -> Path:
    """Where a new index gets its schema before it is given its name."""
    p = Path(index)
    return p.with_name(p.name + ".new")


def helper_path(index: Path | str) -> Path:
    """Where the full-text helper process of a bulk load builds its indexes."""
    p = Path(index)
    return p.with_name(p.name + ".fts")


def remove_db(path: Path | str) -> None:
    """Delete a database file and its WAL, shared-memory and journal files (if any)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass


def fsync_path(path: Path | str, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
