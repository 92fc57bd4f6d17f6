"""Which sources to import: SOURCE arguments (files, trees, databases) as files and units.

A plain session file is imported as it is; a source whose sessions are not JSONL files of their
own becomes :class:`~._source.Unit` s here (a Gemini CLI legacy ``.json`` chat, every session of
an OpenCode, Goose or Crush database, a Cline task folder). What is which is each agent's
declaration (:class:`~._agent.Agent`). Trees are walked without following symlinks.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import JsonltapeError
from ._agent import Agent
from ._inputs import FileInput, Input, UnitInput
from ._source import Unit

__all__ = ["Item", "SourceError", "as_input", "discover", "inputs_of", "name_of"]

#: What an import takes: a session file, or a unit.
Item = Path | Unit


class SourceError(JsonltapeError):
    """A source file cannot be imported (wrong format, changed since the last import, ...)."""

    code = "bad-source"


def name_of(agent: Agent, path: str | os.PathLike[str]) -> str:
    """The name a session file is known by (its session id derives from it): its file name, or
    what the agent declares (:attr:`Agent.name_of`: Copilot CLI's ``<id>/events.jsonl`` is
    ``<id>.jsonl``), which reads the full path: a bare ``events.jsonl`` given in its folder
    is named by that folder, as its full path is (an import worker is given that)."""
    p = Path(path)
    return agent.name_of(Path(os.path.abspath(p))) if agent.name_of is not None else p.name


def inputs_of(agent: Agent, item: str | os.PathLike[str] | Unit) -> list[Input]:
    """The :class:`~._inputs.Input` s of one item: a unit, a session file, or a file (a
    database) that holds several sessions."""
    if isinstance(item, Unit):
        return [UnitInput(item)]
    p = Path(os.path.expanduser(os.fspath(item)))
    found = agent.units(p) if agent.units is not None else None
    if found is None:
        if agent.reader is not None:
            return [agent.reader(p)]
        title = None if agent.title_of is None else functools.partial(agent.title_of, p)
        return [FileInput(p, name_of(agent, p), title)]
    return [UnitInput(u) for u in found]


def as_input(agent: Agent, item: str | os.PathLike[str] | Unit) -> Input:
    """The :class:`~._inputs.Input` of one item (a path must stand for one session)."""
    found = inputs_of(agent, item)
    if len(found) != 1 and not isinstance(item, Unit):  # a unit is always one
        p = Path(os.path.expanduser(os.fspath(item)))
        raise SourceError(
            f"holds {len(found)} {agent.name} sessions, not one: import the whole of it "
            "(jsonltape import, or import_paths)",
            path=p,
        )
    return found[0]


def discover(
    agent: Agent,
    paths: Iterable[str | os.PathLike[str]],
    *,
    exclude: str | None = None,
) -> tuple[list[Item], list[tuple[Path, str]]]:
    """Items to import from SOURCE arguments: a path that stands for sessions as a whole (a
    database, a store, a task folder: :attr:`Agent.units`), else a file as it is, or a directory
    tree walked without following symlinks for the agent's files (:attr:`Agent.wanted`); also
    files skipped on purpose, with why (:attr:`Agent.skip`). ``exclude`` is a tree left out (the
    import root). A missing argument raises :class:`SourceError`."""
    items: list[Item] = []
    skipped: list[tuple[Path, str]] = []
    ex = os.path.abspath(exclude) if exclude else None
    for arg in paths:
        p = Path(os.path.expanduser(os.fspath(arg)))
        if not p.exists():
            raise SourceError("no such file or directory", path=p)
        whole = agent.units(p) if agent.units is not None else None
        if whole is not None:
            items.extend(whole)
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
            dirnames[:] = sorted(d for d in dirnames if d not in agent.prune)
            # the agent's rules read folder names: "." walked from inside ~/.continue/sessions
            # names its files "x.json", whose folder has no name
            full = Path(os.path.abspath(dirpath))
            for name in sorted(filenames):
                f = Path(dirpath) / name
                why = agent.skip(full / name) if agent.skip is not None else None
                if why is not None:
                    skipped.append((f, why))
                    continue
                if not (agent.wanted(full / name) and f.is_file() and not f.is_symlink()):
                    continue
                found = agent.units(f) if agent.units is not None else None
                items.extend([f] if found is None else found)
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
