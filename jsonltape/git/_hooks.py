"""The git hooks ``jsonltape git install`` writes, chained to the hooks already there.

A hook that is already in place and is not jsonltape's is never replaced: it is moved beside
ours as ``<hook>.jsonltape-previous`` (a numbered name if that one is taken) and ours runs it
first, with the same arguments and standard input (pre-commit: its failure blocks the commit as
before). This is the pre-commit framework's own convention (it keeps ``<hook>.legacy``), and a
hook of ours that the framework moved to ``<hook>.legacy`` counts as installed. Installing again
rewrites only a hook of ours whose text differs (another jsonltape, a newer template), so a
second install changes nothing, byte for byte. The hooks folder is git's: ``core.hooksPath``
when set, else ``.git/hooks``.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from .._fs import read_repo_file
from .._spawn import command
from ..errors import UnsafeFileError
from ._run import git

__all__ = ["HOOKS", "HookState", "hook_state", "hooks_dir", "install_hook"]

#: hook -> the jsonltape command it runs after the chained hook.
HOOKS: dict[str, str] = {
    "pre-commit": "git pre-commit",
    # A rebase checks the work tree against its in-memory index after its first checkout: a
    # chmod then (it changes the ctime git remembers) would look like a local change and stop
    # the rebase. Its post-rewrite hook tightens the files when it is done.
    "post-checkout": "git fix-modes --quiet --unless-rebasing",
    "post-merge": "git fix-modes --quiet",
    "post-rewrite": "git fix-modes --quiet",
}

_MARK = "# jsonltape git hook"
_PREVIOUS = re.compile(r'^previous="\$\(dirname "\$0"\)/([^"/$`\\]+)"$', re.MULTILINE)
_PYTHON = re.compile(r"^python=(.*)$", re.MULTILINE)


def hooks_dir(top: Path) -> Path:
    """Where git looks for the hooks of the work tree ``top`` (``core.hooksPath`` included)."""
    out = git(["rev-parse", "--git-path", "hooks"], cwd=top).decode().strip()
    return top / out  # an absolute core.hooksPath stays absolute


def _text(name: str, previous: str, python: str | None) -> str:
    # git runs hooks at the top of the work tree: the interpreter's options keep it off sys.path
    python, *words = command("jsonltape", *HOOKS[name].split(), python=python)
    run = shlex.join(words)
    head = (
        "#!/bin/sh\n"
        f"{_MARK} ({name}), written by `jsonltape git install`; installing again rewrites it.\n"
        "# The hook that was here before is kept beside it (the `previous` file) and runs "
        "first.\n"
        f"python={shlex.quote(python)}\n"
        f'previous="$(dirname "$0")/{previous}"\n'
    )
    if name == "pre-commit":
        return head + (
            'if [ -x "$previous" ]; then\n'
            '\t"$previous" "$@" || exit $?\n'
            "fi\n"
            'if [ ! -x "$python" ]; then\n'
            '\techo "jsonltape: $python is gone; run \\`jsonltape git install\\` again" >&2\n'
            "\texit 1\n"
            "fi\n"
            f'exec "$python" {run}\n'
        )
    # A post-* hook cannot undo what git did: it runs both, and reports the first failure.
    return head + (
        "status=0\n"
        'if [ -x "$previous" ]; then\n'
        '\t"$previous" "$@" || status=$?\n'
        "fi\n"
        'if [ -x "$python" ]; then\n'
        f'\t"$python" {run} || status=$?\n'
        "else\n"
        '\techo "jsonltape: $python is gone; session files keep the modes git gave them; '
        'run \\`jsonltape git install\\` again" >&2\n'
        "fi\n"
        "exit $status\n"
    )


def _read(path: Path) -> str | None:
    """The text of the hook file ``path``; None when there is none or it cannot be ours (a
    symlink, a FIFO, a directory, a file over 4 MiB: never followed, blocked on or read whole,
    since ``core.hooksPath`` may name a folder of the repository)."""
    try:
        data = read_repo_file(path)
    except UnsafeFileError:
        return None
    return None if data is None else data.decode("utf-8", "surrogateescape")


def _ours(text: str | None) -> bool:
    return text is not None and _MARK in text.split("\n", 3)[1]


class HookState:
    """Whether jsonltape's hook ``name`` runs, and from which file."""

    __slots__ = ("configured", "detail", "path")

    def __init__(self, configured: bool, detail: str, path: Path) -> None:
        self.configured = configured
        self.detail = detail
        self.path = path


def _our_file(hooks: Path, name: str) -> Path | None:
    """The file that holds our hook in the chain of ``name``: the hook itself, or the
    ``.legacy`` file the pre-commit framework moved it to."""
    for candidate in (hooks / name, hooks / f"{name}.legacy"):
        if _ours(_read(candidate)):
            return candidate
    return None


def hook_state(hooks: Path, name: str) -> HookState:
    ours = _our_file(hooks, name)
    if ours is None:
        return HookState(False, "not installed", hooks / name)
    m = _PYTHON.search(_read(ours) or "")
    python = shlex.split(m.group(1))[0] if m and shlex.split(m.group(1)) else ""
    if not os.access(python, os.X_OK):
        return HookState(False, f"runs {python or '?'}, which is gone", ours)
    if not os.access(ours, os.X_OK):
        return HookState(False, "not executable (git skips it)", ours)
    return HookState(True, f"runs {python}", ours)


def install_hook(hooks: Path, name: str, python: str | None = None) -> str:
    """Install (or refresh) hook ``name``, run by ``python`` (default: this interpreter);
    returns what was done: ``added``, ``chained``
    (an existing hook moved beside ours), ``updated`` or ``unchanged``."""
    hooks.mkdir(parents=True, exist_ok=True)
    ours = _our_file(hooks, name)
    if ours is not None:
        old = _read(ours) or ""
        m = _PREVIOUS.search(old)
        text = _text(name, m.group(1) if m else f"{name}.jsonltape-previous", python)
        if text == old and os.access(ours, os.X_OK):
            return "unchanged"
        _write(ours, text)
        return "updated"
    target = hooks / name
    previous = f"{name}.jsonltape-previous"
    n = 2
    while os.path.lexists(hooks / previous):
        previous = f"{name}.jsonltape-previous-{n}"
        n += 1
    action = "added"
    if os.path.lexists(target):
        os.rename(target, hooks / previous)  # a symlinked hook moves as the link it is
        action = "chained"
    _write(target, _text(name, previous, python))
    return action


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.jsonltape-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o755)
    try:
        os.write(fd, text.encode("utf-8", "surrogateescape"))
        os.fchmod(fd, 0o755)
    finally:
        os.close(fd)
    os.replace(tmp, path)
