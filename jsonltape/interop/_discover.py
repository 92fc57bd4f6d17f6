"""Which sources to import: SOURCE arguments (files, trees, databases) as files and units.

A plain JSONL session file is imported as it is; a source whose sessions are not JSONL files
of their own becomes :class:`~._source.Unit` s here (a Gemini CLI legacy ``.json`` chat, every
session of an OpenCode database or storage tree). Trees are walked without following symlinks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import JsonltapeError
from ._inputs import FileInput, Input, UnitInput
from ._source import Unit

__all__ = ["Item", "SourceError", "as_input", "discover", "units_of", "wanted"]

#: What an import takes: a JSONL file, or a unit.
Item = Path | Unit
#: Sources whose argument is searched by their own reader (a database, conversation folders),
#: not walked for files.
_WHOLE = frozenset({"opencode", "openhands"})


class SourceError(JsonltapeError):
    """A source file cannot be imported (wrong format, changed since the last import, ...)."""

    code = "bad-source"


def wanted(source: str, path: Path) -> bool:
    """Whether a file met in a tree is a session of ``source`` (or stands for one): what an
    import of the tree and the index (``sync --source``) take."""
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
    return None


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
        return FileInput(p)
    if len(found) != 1:
        raise SourceError(
            f"holds {len(found)} {source} sessions, not one: import the whole of it "
            "(jsonltape import, or import_paths)",
            path=p,
        )
    return UnitInput(found[0])


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
    for arg in paths:
        p = Path(os.path.expanduser(os.fspath(arg)))
        if not p.exists():
            raise SourceError("no such file or directory", path=p)
        if source in _WHOLE:
            items.extend(units_of(source, p) or ())
            continue
        if p.is_file():
            items.append(p)
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
