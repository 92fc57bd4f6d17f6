"""File edits in tool calls, shown as diffs: what each agent's edit and write tools change.

One table of tool shapes, one diff routine. A call whose arguments fit no shape is shown as
its pretty-printed arguments instead (nothing is guessed).

| agent | tool | arguments |
| --- | --- | --- |
| Claude Code | Edit · MultiEdit · Write | file_path, old_string/new_string · edits[] · content |
| Codex | apply_patch | its patch text (``input``, or the command's last argument) |
| pi | edit · write | path, oldText/newText · content |
| Gemini CLI | replace · write_file | file_path, old_string/new_string · content |
| OpenCode | edit · write · patch | filePath, oldString/newString · content · patchText |
"""

from __future__ import annotations

import difflib
from typing import Any, NamedTuple

__all__ = ["Diff", "DiffLine", "edit_diff"]

#: Lines of one diff shown at most (a huge write is cut, and says so).
MAX_LINES = 2000


class DiffLine(NamedTuple):
    kind: str  #: "add", "del", "hunk", "ctx" or "file"
    text: str


class Diff(NamedTuple):
    path: str
    lines: list[DiffLine]
    cut: int  #: lines left out past MAX_LINES


_PATH_KEYS = ("file_path", "path", "filePath", "absolute_path")
_OLD_NEW = (("old_string", "new_string"), ("oldText", "newText"), ("oldString", "newString"))
_WRITE_TOOLS = frozenset({"Write", "write", "write_file", "create_file"})
_PATCH_TOOLS = frozenset({"apply_patch", "patch"})


def _path(args: dict[str, Any]) -> str | None:
    for k in _PATH_KEYS:
        if isinstance(args.get(k), str):
            return str(args[k])
    return None


def _pairs(args: dict[str, Any]) -> list[tuple[str, str]] | None:
    edits = args.get("edits")
    if isinstance(edits, list):
        found = [_pair(e) for e in edits if isinstance(e, dict)]
        return [p for p in found if p is not None] or None
    one = _pair(args)
    return [one] if one is not None else None


def _pair(args: dict[str, Any]) -> tuple[str, str] | None:
    for old, new in _OLD_NEW:
        if isinstance(args.get(old), str) and isinstance(args.get(new), str):
            return str(args[old]), str(args[new])
    return None


def _unified(old: str, new: str) -> list[DiffLine]:
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        kind = {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "ctx")
        out.append(DiffLine(kind, line))
    return out


def _patch_text(args: Any) -> str | None:
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        for k in ("input", "patch", "patchText"):
            if isinstance(args.get(k), str):
                return str(args[k])
        command = args.get("command") or args.get("cmd")
        if isinstance(command, list) and command and isinstance(command[-1], str):
            return str(command[-1])
    return None


def _patch(text: str) -> list[Diff]:
    """A Codex/OpenCode patch (``*** Update File: p`` then ``@@`` hunks of ``+``/``-``/`` ``
    lines; ``*** Add File`` holds ``+`` lines) as one diff per file."""
    diffs: list[Diff] = []
    lines: list[DiffLine] = []
    path = None
    for raw in text.splitlines():
        for marker in ("*** Update File: ", "*** Add File: ", "*** Delete File: "):
            if raw.startswith(marker):
                if path is not None:
                    diffs.append(Diff(path, lines, 0))
                path, lines = raw[len(marker) :], []
                if marker.startswith("*** Delete"):
                    lines.append(DiffLine("file", "file deleted"))
                break
        else:
            if path is None or raw.startswith("*** "):
                continue
            kind = {"@": "hunk", "+": "add", "-": "del"}.get(raw[:1], "ctx")
            lines.append(DiffLine(kind, raw))
    if path is not None:
        diffs.append(Diff(path, lines, 0))
    return diffs


def edit_diff(name: str, args: Any) -> list[Diff]:
    """The diffs a call of tool ``name`` with ``args`` makes (empty: not a file edit)."""
    diffs: list[Diff]
    if name in _PATCH_TOOLS or (
        isinstance(args, dict)
        and isinstance(args.get("command"), list)
        and args["command"][:1] == ["apply_patch"]
    ):
        text = _patch_text(args)
        diffs = _patch(text) if text and "*** Begin Patch" in text else []
    elif not isinstance(args, dict) or _path(args) is None:
        return []
    elif name in _WRITE_TOOLS and isinstance(args.get("content"), str):
        diffs = [Diff(str(_path(args)), _unified("", str(args["content"])), 0)]
    else:
        pairs = _pairs(args)
        if pairs is None:
            return []
        lines = [line for old, new in pairs for line in _unified(old, new)]
        diffs = [Diff(str(_path(args)), lines, 0)]
    return [Diff(d.path, d.lines[:MAX_LINES], max(0, len(d.lines) - MAX_LINES)) for d in diffs]
