"""Which files git treats as sessions (their ``merge`` and ``diff`` attributes), and what to say
about a session file whose attributes leave it to git's text merge.

``git install`` marks ``**/.jsonltape/sessions/**/*.jsonl`` unless ``--pattern`` names other
places; a session kept elsewhere is merged by git as text, which conflicts on every divergent
append. The commit guard, ``git check`` and ``git status`` recognise session files by their
first line too, and say so once per run, with the ``--pattern`` that would cover them.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from .._fs import read_repo_file
from ..errors import UnsafeFileError
from ._objects import git_input
from ._run import git

__all__ = [
    "SESSION_HEADER",
    "covering_patterns",
    "looks_like_session",
    "session_attrs",
    "sniff",
    "unmarked_note",
]

#: How many ``--pattern`` flags the note spells out.
_SHOWN = 8
#: How much of a tracked ``*.jsonl`` is read to see whether its first line is a header.
_SNIFF = 64 << 10
_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


def session_attrs(root: Path, paths: Sequence[str]) -> dict[str, frozenset[str]]:
    """Path -> which of its ``merge`` and ``diff`` attributes are ``jsonltape`` (only the paths
    with at least one)."""
    if not paths:
        return {}
    out = git_input(
        ["check-attr", "-z", "--stdin", "merge", "diff"],
        root,
        b"".join(os.fsencode(p) + b"\0" for p in paths),
    )
    fields = out.split(b"\0")
    found: dict[str, set[str]] = {}
    for i in range(0, len(fields) - 2, 3):
        if fields[i + 2] == b"jsonltape":
            found.setdefault(os.fsdecode(fields[i]), set()).add(os.fsdecode(fields[i + 1]))
    return {p: frozenset(attrs) for p, attrs in found.items()}


#: What the first line of a session holds (its type and format), in any member order.
SESSION_HEADER = (b'"session/start"', b'"jsonltape"')


def looks_like_session(data: bytes) -> bool:
    """Whether ``data`` (a file's bytes, or its first line or more) starts with a line that
    names the session header's type and format."""
    first = data[: data.find(b"\n") + 1 or len(data)]
    return all(mark in first for mark in SESSION_HEADER)


def _escape(text: str) -> str:
    return _GLOB_SPECIAL.sub(r"\\\1", text)


def _pattern(folder: str, name: str) -> str:
    """A .gitattributes pattern: ``/logs/*.jsonl`` or ``/logs/a.jsonl`` (anchored at the top;
    glob characters escaped, blanks matched by ``?``, since a pattern holds none)."""
    return re.sub(r"\s", "?", f"/{_escape(folder) + '/' if folder else ''}{name}")


def covering_patterns(root: Path, paths: Sequence[str]) -> list[str]:
    """Patterns that mark the session files ``paths`` and nothing else git tracks: a folder's
    ``*.jsonl`` when every tracked ``*.jsonl`` there is a session (its first line in the work
    tree), else the files by name."""
    by_folder: dict[str, list[str]] = {}
    for rel in paths:
        parent = str(PurePosixPath(rel).parent)
        by_folder.setdefault("" if parent == "." else parent, []).append(rel)
    specs = [f":(glob){_escape(f) + '/' if f else ''}*.jsonl" for f in by_folder]
    listed = git(["ls-files", "-z", "--cached", "--", *specs], cwd=root)
    tracked: dict[str, set[str]] = {}
    for rel in os.fsdecode(listed).split("\0"):
        if rel:
            parent = str(PurePosixPath(rel).parent)
            tracked.setdefault("" if parent == "." else parent, set()).add(rel)
    patterns: set[str] = set()
    for folder, files in by_folder.items():
        others = tracked.get(folder, set()) - set(files)
        if all(rel.endswith(".jsonl") for rel in files) and all(
            sniff(root / rel) for rel in others
        ):
            patterns.add(_pattern(folder, "*.jsonl"))
        else:
            patterns.update(_pattern(folder, _escape(PurePosixPath(f).name)) for f in files)
    return sorted(patterns)


def sniff(path: Path) -> bool:
    """Whether the work-tree file ``path`` starts with a session header (never followed)."""
    try:
        head = read_repo_file(path, _SNIFF, whole=False)
    except UnsafeFileError:
        return False
    return head is not None and looks_like_session(head)


def unmarked_note(root: Path, paths: Sequence[str], *, staged: bool) -> str | None:
    """One sentence about the session files ``paths`` (relative to the work tree ``root``)
    that have no ``merge=jsonltape`` attribute, naming the ``git install --pattern`` that
    covers them (:func:`covering_patterns`); None when there are none."""
    if not paths:
        return None
    kind = "staged session file" if staged else "session file"
    first = paths[0]
    files = f"{first}" if len(paths) == 1 else f"{first} and {len(paths) - 1} more {kind}s"
    patterns = covering_patterns(root, paths)
    flags = " ".join(f"--pattern {shlex.quote(p)}" for p in patterns[:_SHOWN])
    more = f" (and {len(patterns) - _SHOWN} more patterns)" if len(patterns) > _SHOWN else ""
    verb = "has" if len(paths) == 1 else "have"
    return (
        f"{files} {verb} no merge=jsonltape attribute, so git merges "
        f"{'it' if len(paths) == 1 else 'them'} as text (a conflict on every divergent "
        f"append): run `jsonltape git install {flags}`{more}"
    )
