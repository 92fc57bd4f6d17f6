"""Running the real ``git`` binary: one place that builds its environment and reads its output."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..errors import GitError

__all__ = ["env", "git", "git_ok", "toplevel"]


def env() -> dict[str, str]:
    """The environment every git command runs in."""
    env = dict(os.environ)
    # Messages we parse must not be translated; a pager must never wait for a terminal.
    env["LC_ALL"] = "C"
    env["GIT_PAGER"] = "cat"
    env.pop("GIT_EXTERNAL_DIFF", None)
    return env


def git(args: Sequence[str], *, cwd: str | Path, input: bytes | None = None) -> bytes:
    """Run ``git ARGS`` in ``cwd`` and return its stdout; a failure raises :class:`GitError`
    with git's own first line of stderr."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, input=input, capture_output=True, env=env(), check=False
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed (no `git` on PATH)") from exc
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(
            f"git {' '.join(args[:2])} failed: {why[0] if why else f'exit {done.returncode}'}",
            path=str(cwd),
        )
    return done.stdout


def git_ok(args: Sequence[str], *, cwd: str | Path) -> bytes | None:
    """Like :func:`git`, but None where git exits non-zero (a missing config key, no HEAD)."""
    try:
        return git(args, cwd=cwd)
    except GitError:
        return None


def toplevel(path: str | Path) -> Path | None:
    """The work tree root of the repository containing ``path`` (a directory), or None."""
    out = git_ok(["rev-parse", "--show-toplevel"], cwd=path)
    return Path(out.decode().strip()) if out else None
