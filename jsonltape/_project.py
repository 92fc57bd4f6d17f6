"""Where sessions live: the one place that decides a command's sessions root.

A command that takes a session root (``sync``, ``import -o``, ``daemon``) uses, in this order:

1. ``flag``: the root named on its command line;
2. ``env``: ``$JSONLTAPE_ROOT``;
3. ``project``: ``DIR/.jsonltape/sessions`` of the nearest ``DIR/.jsonltape/`` at or above the
   current directory (found as git finds ``.git``; ``jsonltape init`` creates one);
4. ``default``: ``<data dir>/sessions``, where the data directory is ``$JSONLTAPE_HOME`` or the
   platform's user data dir (``$XDG_DATA_HOME/jsonltape`` or ``~/.local/share/jsonltape``).

A ``.jsonltape`` that is a symlink, that another user owns, or that group or others may write
into is refused (:class:`~jsonltape.errors.UnsafeFileError`): whoever could swap it would choose
where sessions are read and written. One that is only readable by others (a fresh ``git clone``
leaves 0755) is used; ``jsonltape git install`` and ``init`` tighten it to 0700. A regular file
named ``.jsonltape`` is not a project and the search goes on above it.

This module loads nothing beyond the standard library: ``jsonltape info`` shows the root too.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from .errors import SessionNotFoundError, UnsafeFileError

__all__ = [
    "PROJECT_DIR",
    "SESSIONS_DIR",
    "SessionRoot",
    "data_dir",
    "find_project",
    "init_project",
    "make_sessions_dir",
    "resolve_root",
]

PROJECT_DIR = ".jsonltape"
SESSIONS_DIR = "sessions"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class SessionRoot:
    """A sessions root and where it came from: ``flag``, ``env``, ``project`` or ``default``."""

    __slots__ = ("path", "project", "source")

    def __init__(self, path: Path, source: str, project: Path | None = None) -> None:
        self.path = path
        self.source = source
        #: The ``.jsonltape`` directory the root belongs to (source ``project`` only).
        self.project = project

    def describe(self) -> str:
        """Where the root came from, in words (``info``, ``index status``)."""
        if self.source == "flag":
            return "named on the command line"
        if self.source == "env":
            return "from $JSONLTAPE_ROOT"
        if self.source == "project":
            return f"project: {self.project}"
        return "user default: <data dir>/sessions"

    def as_json(self) -> dict[str, str | None]:
        return {
            "path": str(self.path),
            "from": self.source,
            "project": str(self.project) if self.project else None,
        }

    def __repr__(self) -> str:
        return f"SessionRoot({str(self.path)!r}, {self.source!r})"


def data_dir() -> Path:
    """jsonltape's user data directory: ``$JSONLTAPE_HOME``, else the platform's."""
    env = os.environ.get("JSONLTAPE_HOME")
    if env:
        return Path(env).expanduser().absolute()
    home = Path.home()
    if sys.platform == "darwin":  # pragma: no cover - platform specific
        return home / "Library" / "Application Support" / "jsonltape"
    if sys.platform == "win32":  # pragma: no cover - platform specific
        base = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / "jsonltape"
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else home / ".local" / "share") / "jsonltape"


def resolve_root(
    flag: str | os.PathLike[str] | None = None, *, cwd: Path | None = None
) -> SessionRoot:
    """The sessions root a command uses (module doc: flag > env > project > user default)."""
    if flag is not None:
        return SessionRoot(Path(flag).absolute(), "flag")
    env = os.environ.get("JSONLTAPE_ROOT")
    if env:
        return SessionRoot(Path(env).expanduser().absolute(), "env")
    project = find_project(cwd)
    if project is not None:
        sessions = project / SESSIONS_DIR
        if os.path.islink(sessions):
            raise UnsafeFileError("is a symlink; jsonltape does not follow links", path=sessions)
        return SessionRoot(sessions, "project", project)
    return SessionRoot(data_dir() / "sessions", "default")


def find_project(start: Path | None = None) -> Path | None:
    """The nearest ``.jsonltape`` directory at or above ``start`` (default: the current
    directory), checked as the module doc says; None when there is none up to ``/``."""
    try:
        here = Path(os.path.abspath(start if start is not None else os.getcwd()))
    except FileNotFoundError:  # the current directory was deleted
        return None
    for d in (here, *here.parents):
        candidate = d / PROJECT_DIR
        try:
            st = os.lstat(candidate)
        except OSError:  # missing, or a directory we may not look into: go on above it
            continue
        if stat.S_ISLNK(st.st_mode):
            raise UnsafeFileError(
                "is a symlink; jsonltape does not follow links (a project's .jsonltape must be "
                "a directory)",
                path=candidate,
            )
        if stat.S_ISDIR(st.st_mode):
            _check_project_dir(candidate, st)
            return candidate
    return None


def _check_project_dir(path: Path, st: os.stat_result) -> None:
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UnsafeFileError(f"is owned by uid {st.st_uid}, not by you", path=path)
    if st.st_mode & 0o022:
        raise UnsafeFileError(
            f"directory is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            "chmod 700 it (`jsonltape git install` does it in a git repository)",
            path=path,
        )


def make_sessions_dir(path: Path) -> bool:
    """Create the directory ``path`` 0700 (its parent must exist), never through a symlink; an
    existing one is checked as a project directory is and tightened to 0700. True if created."""
    created = True
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        created = False
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _DIRECTORY)
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFileError(
                "is a symlink; jsonltape does not follow links", path=path
            ) from None
        if os.path.lexists(path):
            raise UnsafeFileError("is not a directory", path=path) from None
        raise SessionNotFoundError(f"cannot create: {exc.strerror or exc}", path=path) from None
    try:
        st = os.fstat(fd)
        _check_project_dir(path, st)
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.fchmod(fd, 0o700)  # mkdir's mode is filtered by the umask; a clone left 0755
    finally:
        os.close(fd)
    if created:
        from . import _fs  # here: every query on the default index looks up the data dir

        _fs.fsync_dir(path.parent)
    return created


def init_project(directory: Path) -> tuple[Path, bool]:
    """Create ``DIRECTORY/.jsonltape/sessions`` (both 0700); return the sessions directory and
    whether anything was created. ``directory`` must exist."""
    directory = Path(os.path.abspath(directory))
    if not directory.is_dir():
        raise SessionNotFoundError("no such directory", path=directory)
    project = directory / PROJECT_DIR
    made = make_sessions_dir(project)
    sessions = project / SESSIONS_DIR
    return sessions, make_sessions_dir(sessions) or made
