"""Owner-only modes after git: git records no mode but the executable bit, so a clone, checkout
or merge writes session files with the umask (usually 0644) and their folders 0755.

The session files are the tracked paths git gives the ``merge=jsonltape`` attribute (so the
patterns live in one place, ``.gitattributes``). Their folders are every directory from the
file's own up to the nearest ``.jsonltape`` above it; for a file outside a ``.jsonltape`` folder
(a custom ``--pattern``) only its own directory, and never the top of the work tree. Files and
folders lose every group and other permission bit (0644 -> 0600, 0755 -> 0700); a symlink is
never followed and a path someone else owns is reported, not changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from .._project import PROJECT_DIR
from ._run import git

__all__ = ["ModeScan", "rebasing", "scan_modes", "session_files"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class ModeScan:
    """What :func:`scan_modes` found (and, with ``fix``, changed): paths relative to the top."""

    __slots__ = ("dirs", "errors", "files", "sessions")

    def __init__(self) -> None:
        self.sessions = 0
        self.files: list[str] = []
        self.dirs: list[str] = []
        self.errors: list[str] = []


def session_files(top: Path) -> list[str]:
    """The tracked session files of the work tree ``top`` (paths relative to it, sorted)."""
    out = git(["ls-files", "-z", "--cached", "--", ":(attr:merge=jsonltape)"], cwd=top)
    return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})


def _folders(rel: str) -> list[str]:
    parts = PurePosixPath(rel).parts[:-1]
    if PROJECT_DIR in parts:
        start = len(parts) - 1 - parts[::-1].index(PROJECT_DIR)
        return ["/".join(parts[: j + 1]) for j in range(start, len(parts))]
    return ["/".join(parts)] if parts else []


def scan_modes(top: Path, *, fix: bool) -> ModeScan:
    """Find (``fix``: and tighten) the session files and folders of ``top`` that group or
    others may access."""
    result = ModeScan()
    files = session_files(top)
    result.sessions = len(files)
    folders: set[str] = set()
    for rel in files:
        if _tighten(top, rel, directory=False, fix=fix, result=result):
            result.files.append(rel)
        folders.update(_folders(rel))
    for rel in sorted(folders):
        if _tighten(top, rel, directory=True, fix=fix, result=result):
            result.dirs.append(rel)
    return result


def _tighten(top: Path, rel: str, *, directory: bool, fix: bool, result: ModeScan) -> bool:
    """True if ``rel`` is loose (and, with ``fix``, was tightened)."""
    flags = os.O_RDONLY | _NOFOLLOW | (_DIRECTORY if directory else _NONBLOCK)
    try:
        fd = os.open(top / rel, flags)
    except FileNotFoundError:
        return False  # in the index but not in the work tree (deleted, sparse)
    except OSError as exc:
        if os.path.islink(top / rel):
            return False  # git checked out a symlink: its target is not ours to change
        result.errors.append(f"{rel}: {exc.strerror or exc}")
        return False
    try:
        st = os.fstat(fd)
        if not (stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)):
            return False
        mode = stat.S_IMODE(st.st_mode)
        if not mode & 0o077:
            return False
        if fix:
            if hasattr(os, "getuid") and st.st_uid != os.getuid():
                result.errors.append(f"{rel}: owned by uid {st.st_uid}, not by you (mode left)")
                return False
            os.fchmod(fd, mode & 0o700)
        return True
    finally:
        os.close(fd)


def rebasing(top: Path) -> bool:
    """True while a rebase of the work tree ``top`` is in progress (git keeps its state in
    ``rebase-merge`` or ``rebase-apply`` of the git directory)."""
    out = git(["rev-parse", "--git-path", "rebase-merge", "--git-path", "rebase-apply"], cwd=top)
    return any((top / p).exists() for p in out.decode().split())
