"""``jsonltape git install`` and ``git status``: set up a repository for session files, and say
what is and is not set up.

Installing is idempotent and never clobbers: lines are added to ``.gitattributes`` and
``.gitignore`` only when missing (the rest of the file is kept byte for byte), the local git
config is written only where its value differs, hooks are chained (:mod:`._hooks`), and session
files already checked out are tightened (:mod:`._modes`). Running it twice changes nothing.

Every command written into the config and the hooks is the absolute invocation of the jsonltape
that ran the install (``<python> -P -m jsonltape``, :mod:`jsonltape._spawn`), so it works from a
virtual environment that is not on ``PATH`` when git runs it, and git, which runs drivers and
hooks at the top of the work tree, never imports a ``jsonltape/`` package checked out there.
Git does not clone config or hooks: a fresh clone needs ``jsonltape git install`` once.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from .._fs import read_repo_file
from .._spawn import shell_command
from ..errors import GitError, InvalidArgumentError
from ._attrs import sniff, unmarked_note
from ._hooks import HOOKS, hook_state, hooks_dir, install_hook
from ._modes import ModeScan, scan_modes
from ._run import git, git_ok, toplevel

__all__ = [
    "ATTRIBUTES",
    "DEFAULT_PATTERN",
    "IGNORED",
    "Item",
    "config_values",
    "install",
    "repository",
    "status",
]

#: Session files of every project in the repository (``jsonltape init`` puts them there); a
#: leading ``**/`` also matches a project folder nested below the top of the work tree.
DEFAULT_PATTERN = "**/.jsonltape/sessions/**/*.jsonl"
ATTRIBUTES = "merge=jsonltape diff=jsonltape"
#: Lock files (``.<name>.lock``, spec §3), repair sidecars (``<name>.<stamp>.torn``) and the
#: temporary file a create leaves if it is killed (``.<name>.<hex>.tmp``).
IGNORED = (".*.jsonl.lock", "*.jsonl.*.torn", ".*.jsonl.*.tmp")
_ATTR_HEADER = "# jsonltape session files: merge driver and readable diffs (jsonltape git install)"
_IGNORE_HEADER = "# jsonltape: lock files, repair sidecars (jsonltape git install)"


class Item:
    """One thing install sets up: ``what`` it is and its ``state`` (status: ``configured`` /
    ``missing``; install: ``added`` / ``updated`` / ``chained`` / ``tightened`` /
    ``unchanged``), with a short ``detail``."""

    __slots__ = ("detail", "state", "what")

    def __init__(self, what: str, state: str, detail: str = "") -> None:
        self.what = what
        self.state = state
        self.detail = detail

    def __repr__(self) -> str:
        return f"Item({self.what!r}, {self.state!r}, {self.detail!r})"


def config_values(python: str | None = None) -> dict[str, str]:
    """The local git config install writes."""
    run = shell_command("jsonltape", python=python)
    return {
        "merge.jsonltape.name": "jsonltape session files (appends from both sides kept)",
        "merge.jsonltape.driver": f"{run} git merge-driver %O %A %B %P",
        "merge.jsonltape.recursive": "jsonltape",
        "diff.jsonltape.textconv": f"{run} git textconv",
        "diff.jsonltape.cachetextconv": "true",
    }


def repository(start: Path) -> Path:
    """The top of the work tree containing the directory ``start``."""
    top = toplevel(start)
    if top is None:
        raise GitError("not inside a git work tree (run `git init` first)", path=str(start))
    return top


def _check_pattern(pattern: str) -> str:
    if not pattern or any(c.isspace() for c in pattern) or pattern[0] in '#!"':
        raise InvalidArgumentError(
            f"--pattern must be one .gitattributes pattern without spaces, not {pattern!r}",
            field="pattern",
        )
    return pattern


# -- .gitattributes and .gitignore -----------------------------------------------------------


def _read_text(path: Path) -> str:
    # A clone chooses what is there: a symlink (git itself ignores a symlinked .gitattributes
    # or .gitignore in the work tree), a FIFO, a directory or a huge file is refused.
    data = read_repo_file(path)
    return "" if data is None else data.decode("utf-8", "surrogateescape")


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def _attribute_lines(text: str) -> list[str]:
    """The patterns of ``text`` (a .gitattributes) that carry both of jsonltape's attributes."""
    found = []
    for line in _lines(text):
        words = line.split(" ")
        if words[0] and not words[0].startswith("#") and {*ATTRIBUTES.split()} <= set(words[1:]):
            found.append(words[0])
    return found


def _append(path: Path, text: str, header: str, lines: Sequence[str]) -> None:
    """Write ``text`` + a block of ``lines`` to ``path`` (atomically, its mode kept)."""
    block = ([] if header in _lines(text) else [header]) + list(lines)
    sep = "" if not text or text.endswith("\n") else "\n"
    new = text + sep + ("\n" if text.strip() and block[0] == header else "") + "\n".join(block)
    tmp = path.with_name(f".{path.name}.jsonltape-tmp")
    try:
        mode = os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        data = (new + "\n").encode("utf-8", "surrogateescape")
        while data:
            data = data[os.write(fd, data) :]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# -- install and status ----------------------------------------------------------------------


def install(start: Path, patterns: Sequence[str] = (), *, python: str | None = None) -> list[Item]:
    """Set up the repository containing ``start``; returns what was done, item by item."""
    top = repository(start)
    chosen = [_check_pattern(p) for p in patterns] or [DEFAULT_PATTERN]
    items: list[Item] = []

    # Both files are read before either is written: a refused one leaves everything as it was.
    attributes, ignore = top / ".gitattributes", top / ".gitignore"
    text, ignore_text = _read_text(attributes), _read_text(ignore)
    have = set(_attribute_lines(text))
    missing = [p for p in chosen if p not in have]
    if missing:
        _append(attributes, text, _ATTR_HEADER, [f"{p} {ATTRIBUTES}" for p in missing])
    for p in chosen:
        state = "added" if p in missing else "unchanged"
        items.append(Item(".gitattributes", state, f"{p} {ATTRIBUTES}"))

    present = set(_lines(ignore_text))
    lacking = [line for line in IGNORED if line not in present]
    if lacking:
        _append(ignore, ignore_text, _IGNORE_HEADER, lacking)
    items.append(
        Item(".gitignore", "added" if lacking else "unchanged", " ".join(lacking or IGNORED))
    )

    for key, value in config_values(python).items():
        now = git_ok(["config", "--local", "--get", key], cwd=top)
        if now is not None and now.decode("utf-8", "replace").rstrip("\n") == value:
            items.append(Item(f"git config {key}", "unchanged", value))
            continue
        git(["config", "--local", "--replace-all", key, value], cwd=top)
        items.append(Item(f"git config {key}", "updated" if now else "added", value))

    hooks = hooks_dir(top)
    for name in HOOKS:
        action = install_hook(hooks, name, python)
        items.append(Item(f"hook {name}", action, str(hooks / name)))

    modes = scan_modes(top, fix=True)
    items.append(_modes_item(modes, fixed=True))
    return items


def status(start: Path, patterns: Sequence[str] = ()) -> list[Item]:
    """What :func:`install` would set up, each ``configured`` or ``missing``. With no
    ``patterns``, any pattern that carries jsonltape's attributes counts."""
    top = repository(start)
    items: list[Item] = []
    have = _attribute_lines(_read_text(top / ".gitattributes"))
    wanted = [_check_pattern(p) for p in patterns]
    if wanted:
        for p in wanted:
            state = "configured" if p in have else "missing"
            items.append(Item(".gitattributes", state, f"{p} {ATTRIBUTES}"))
    elif have:
        items.extend(Item(".gitattributes", "configured", f"{p} {ATTRIBUTES}") for p in have)
    else:
        items.append(Item(".gitattributes", "missing", f"{DEFAULT_PATTERN} {ATTRIBUTES}"))

    items.append(_unmarked_item(top))

    present = set(_lines(_read_text(top / ".gitignore")))
    lacking = [line for line in IGNORED if line not in present]
    items.append(
        Item(".gitignore", "missing" if lacking else "configured", " ".join(lacking or IGNORED))
    )

    for key in config_values():
        raw = git_ok(["config", "--get", key], cwd=top)
        if raw is None:
            items.append(Item(f"git config {key}", "missing", "not set (git does not clone it)"))
            continue
        value = raw.decode("utf-8", "replace").rstrip("\n")
        gone = _missing_program(key, value)
        state = "missing" if gone else "configured"
        items.append(
            Item(f"git config {key}", state, f"{value} ({gone} is gone)" if gone else value)
        )

    hooks = hooks_dir(top)
    for name in HOOKS:
        h = hook_state(hooks, name)
        items.append(Item(f"hook {name}", "configured" if h.configured else "missing", h.detail))

    items.append(_modes_item(scan_modes(top, fix=False), fixed=False))
    return items


def _unmarked_item(top: Path) -> Item:
    """Tracked session files (by their first line in the work tree) that git merges as text."""
    out = git(
        [
            *("ls-files", "-z", "--cached", "--"),
            *(":(glob)**/*.jsonl", ":(exclude,attr:merge=jsonltape)"),
        ],
        cwd=top,
    )
    names = sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})
    note = unmarked_note(top, [rel for rel in names if sniff(top / rel)], staged=False)
    what = "session files outside the patterns"
    if note is None:
        return Item(what, "configured", "every tracked session file has merge=jsonltape")
    return Item(what, "missing", note)


def _missing_program(key: str, value: str) -> str | None:
    """For a key that names a command: its program, if it does not exist."""
    if not key.endswith((".driver", ".textconv")):
        return None
    try:
        words = shlex.split(value)
    except ValueError:
        return value
    if not words or "/" not in words[0]:
        return None  # a command looked up on PATH when git runs it
    return None if os.access(words[0], os.X_OK) else words[0]


def _modes_item(scan: ModeScan, *, fixed: bool) -> Item:
    loose = len(scan.files) + len(scan.dirs)
    what = "session file modes"
    counted = f"{scan.sessions} session files"
    errors = "; ".join(scan.errors)
    if fixed:
        detail = (
            f"{counted}: {len(scan.files)} files set to owner-only, {len(scan.dirs)} folders"
            if loose
            else f"{counted}, all owner-only"
        )
        return Item(what, "tightened" if loose else "unchanged", _join(detail, errors))
    if loose:
        detail = (
            f"{len(scan.files)} of {counted} and {len(scan.dirs)} folders readable by group or "
            "others (git keeps no modes)"
        )
        return Item(what, "missing", _join(detail, errors))
    return Item(
        what, "missing" if errors else "configured", _join(f"{counted}, all owner-only", errors)
    )


def _join(detail: str, errors: str) -> str:
    return f"{detail}; {errors}" if errors else detail
