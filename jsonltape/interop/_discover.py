"""Which sources to import: SOURCE arguments (files, trees, databases) as files and units.

A plain JSONL session file is imported as it is; a source whose sessions are not JSONL files
of their own becomes :class:`~._source.Unit` s here (a Gemini CLI legacy ``.json`` chat, every
session of an OpenCode database or storage tree). Trees are walked without following symlinks.

A source whose importer module declares its *layout* (:data:`LAYOUTS`) says there which files
of a tree it takes, which of them are units, and what a file is named by; the module is loaded
only when that source is imported.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, cast

from ..errors import JsonltapeError
from ._inputs import FileInput, Input, UnitInput
from ._source import Unit

__all__ = [
    "LAYOUTS",
    "Item",
    "Layout",
    "SourceError",
    "as_input",
    "discover",
    "in_place",
    "name_of",
    "units_of",
    "wanted",
]

#: Sources whose importer module declares its layout (a :class:`Layout`): source -> module.
LAYOUTS = {
    "continue": "continue_dev",
    "copilot-cli": "copilot_cli",
    "copilot-vscode": "copilot_vscode",
}


class Layout(Protocol):
    """What an importer module declares about where its sessions are."""

    def take(self, path: Path) -> bool | str:
        """Whether a file found in a tree is imported; a string: it is skipped on purpose, and
        why."""

    def in_place(self, path: Path) -> bool:
        """Whether the index can read a file found in a tree in place as one session
        (``sync --source``): not a database of many sessions."""

    def units(self, path: Path) -> list[Unit] | None:
        """The units a file (or a directory given as a source) stands for; None: a JSONL file
        imported as it is."""

    def name_of(self, path: Path) -> str:
        """The name a session file is known by (its session id derives from it)."""

    def title_of(self, path: Path) -> str | None:
        """The session's own title, when the source keeps it beside a session file."""


#: What an import takes: a JSONL file, or a unit.
Item = Path | Unit
#: Sources whose argument is searched by their own reader (a database, conversation folders),
#: not walked for files.
_WHOLE = frozenset({"opencode", "openhands"})


class SourceError(JsonltapeError):
    """A source file cannot be imported (wrong format, changed since the last import, ...)."""

    code = "bad-source"


def _layout(source: str) -> Layout | None:
    module = LAYOUTS.get(source)
    if module is None:
        return None
    return cast(Layout, importlib.import_module(f".{module}", __package__))


def name_of(source: str, path: str | os.PathLike[str]) -> str:
    """The name a session file is known by: its file name, or what its source's layout says
    (Copilot CLI's ``<id>/events.jsonl`` is ``<id>.jsonl``)."""
    p = Path(path)
    layout = _layout(source)
    return layout.name_of(p) if layout is not None else p.name


def in_place(source: str, path: str | os.PathLike[str]) -> bool | None:
    """Whether the index reads this file of a tree in place (``sync --source``), as the
    source's layout says; None for a source without a layout (the index decides)."""
    layout = _layout(source)
    return layout.in_place(Path(path)) if layout is not None else None


def wanted(source: str, path: Path) -> bool:
    """Whether a file met in a tree is a session of ``source`` (or stands for one): what an
    import of the tree and the index (``sync --source``) take."""
    layout = _layout(source)
    if layout is not None:
        return layout.take(path) is True
    name = path.name
    if source == "codex":
        return name.startswith("rollout-") and name.endswith(".jsonl")
    if source == "gemini-cli" and name.startswith("session-") and name.endswith(".json"):
        return True  # the legacy whole-file chat
    if source == "qwen-code":  # <project>/chats/<session>.jsonl
        return name.endswith(".jsonl") and path.parent.name == "chats"
    if source == "kimi-cli":  # <session>/wire.jsonl, <session>/subagents/<agent>/wire.jsonl
        return name == "wire.jsonl"
    if source == "amp":
        from .amp import is_thread

        return is_thread(path)
    if source == "openhands":
        from ._openhands_store import is_conversation_file

        return is_conversation_file(path)
    return name.endswith(".jsonl")


def units_of(source: str, path: Path) -> list[Unit] | None:
    """The units ``path`` stands for, or None when it is a JSONL file imported as it is."""
    if source == "gemini-cli" and path.name.endswith(".json"):
        from .gemini import legacy_unit

        return [legacy_unit(path)]
    if source == "opencode":
        from ._opencode_store import units

        return units(path)
    if source == "amp":
        from .amp import thread_unit

        return [thread_unit(path)]
    if source == "openhands":
        from ._openhands_store import units as conversations

        return conversations(path)
    layout = _layout(source)
    return layout.units(path) if layout is not None else None


def as_input(source: str, item: str | os.PathLike[str] | Unit) -> Input:
    """The :class:`~._inputs.Input` of one item (a path must stand for one session)."""
    if isinstance(item, Unit):
        return UnitInput(item)
    p = Path(os.path.expanduser(os.fspath(item)))
    found = units_of(source, p)
    if found is None:
        if source == "kimi-cli":
            from .kimi import wire_input

            return wire_input(p)
        layout = _layout(source)
        title = None if layout is None else functools.partial(layout.title_of, p)
        return FileInput(p, name_of(source, p), title)
    if len(found) != 1:
        raise SourceError(
            f"holds {len(found)} {source} sessions, not one: import the whole of it "
            "(jsonltape import, or import_paths)",
            path=p,
        )
    return UnitInput(found[0])


def _take(layout: Layout, f: Path, items: list[Item], skipped: list[tuple[Path, str]]) -> None:
    """One file of a tree, as its source's layout says."""
    if f.is_symlink() or not f.is_file():
        return
    taken = layout.take(f)
    if isinstance(taken, str):
        skipped.append((f, taken))
    elif taken:
        found = layout.units(f)
        items.extend([f] if found is None else found)


def discover(
    source: str,
    paths: Iterable[str | os.PathLike[str]],
    *,
    exclude: str | None = None,
    known: Iterable[str] = (),
) -> tuple[list[Item], list[tuple[Path, str]]]:
    """Items to import from SOURCE arguments (files, or directory trees walked without following
    symlinks; for OpenCode a database, storage tree or data directory); also files skipped on
    purpose, with why. ``exclude`` is a tree left out (the import root). A missing argument
    raises :class:`SourceError`."""
    if known and source not in known:
        raise SourceError(f"unknown source {source!r}; use one of {', '.join(known)}")
    items: list[Item] = []
    skipped: list[tuple[Path, str]] = []
    ex = os.path.abspath(exclude) if exclude else None
    layout = _layout(source)
    for arg in paths:
        p = Path(os.path.expanduser(os.fspath(arg)))
        if not p.exists():
            raise SourceError("no such file or directory", path=p)
        if source in _WHOLE:
            items.extend(units_of(source, p) or ())
            continue
        if p.is_file():
            found = layout.units(p) if layout is not None else None
            items.extend([p] if found is None else found)
            continue
        if not p.is_dir():
            raise SourceError("not a regular file or directory", path=p)
        for dirpath, dirnames, filenames in os.walk(p):
            if ex is not None:
                dirnames[:] = [
                    d for d in dirnames if os.path.abspath(os.path.join(dirpath, d)) != ex
                ]
            dirnames.sort()
            names = set(filenames)
            for name in sorted(filenames):
                f = Path(dirpath) / name
                if layout is not None:
                    _take(layout, f, items, skipped)
                    continue
                if not (wanted(source, f) and f.is_file() and not f.is_symlink()):
                    if source == "codex" and name.endswith(".jsonl.zst"):
                        skipped.append(
                            (f, "compressed rollout (zstd) not supported; decompress it")
                        )
                    continue
                if name.endswith(".json") and f"{name}l" in names:
                    skipped.append((f, f"migrated by Gemini CLI to {name}l, which is imported"))
                    continue
                items.append(f)
    seen: set[str] = set()
    unique: list[Item] = []
    for item in items:
        key = (
            f"{os.path.realpath(item.path)}#{item.name}"
            if isinstance(item, Unit)
            else os.path.realpath(item)
        )
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique, skipped
