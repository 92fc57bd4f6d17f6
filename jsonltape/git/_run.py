"""Running the real ``git`` binary: one place that finds it, builds its environment and reads
its output.

git is not started as jsonltape's Python children are (``jsonltape._spawn``: in ``/``): it runs
in the repository, which is what it reads, and with the caller's environment, which is how git
hands a hook or driver its repository (``GIT_DIR``, ``GIT_INDEX_FILE``: a ``git commit -a`` or
``git commit PATH`` stages into a temporary index the pre-commit guard must read) and how the
user's git settings reach it (``GIT_CONFIG_*``). The commands run here are plumbing that run no
hook, filter or driver; what could make one run from a clone is fixed in :func:`env`, and the
binary itself is found on ``PATH`` without the entries that name the current directory (the
work tree could ship a ``git``: :func:`jsonltape._spawn.program`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .._spawn import program
from ..errors import GitError

__all__ = ["env", "git", "git_ok", "git_program", "toplevel"]


def env() -> dict[str, str]:
    """The environment every git command runs in."""
    env = dict(os.environ)
    # Messages we parse must not be translated; a pager must never wait for a terminal.
    env["LC_ALL"] = "C"
    env["GIT_PAGER"] = "cat"
    env.pop("GIT_EXTERNAL_DIFF", None)
    return env


def git_program() -> str:
    """The absolute path of ``git`` (:func:`jsonltape._spawn.program`)."""
    found = program("git")
    if found is None:
        raise GitError("git is not installed (no `git` on PATH)")
    return found


def git(args: Sequence[str], *, cwd: str | Path, input: bytes | None = None) -> bytes:
    """Run ``git ARGS`` in ``cwd`` and return its stdout; a failure raises :class:`GitError`
    with git's own first line of stderr."""
    try:
        done = subprocess.run(
            [git_program(), *args],
            cwd=cwd,
            input=input,
            capture_output=True,
            env=env(),
            check=False,
        )
    except FileNotFoundError as exc:  # gone between the look-up and the run
        raise GitError("git is not installed (no `git` on PATH)") from exc
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(
            f"git {' '.join(args[:2])} failed: {why[0] if why else f'exit {done.returncode}'}",
            path=str(cwd),
        )
    return done.stdout


def git_ok(args: Sequence[str], *, cwd: str | Path) -> bytes | None:
    """Like :func:`git`, but None where git exits non-zero (a missing config key, no HEAD).
    A missing git is still an error (not "no repository here")."""
    git_program()
    try:
        return git(args, cwd=cwd)
    except GitError:
        return None


def toplevel(path: str | Path) -> Path | None:
    """The work tree root of the repository containing ``path`` (a directory), or None."""
    out = git_ok(["rev-parse", "--show-toplevel"], cwd=path)
    return Path(out.decode().strip()) if out else None
