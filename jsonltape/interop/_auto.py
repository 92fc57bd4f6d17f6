"""``import --from auto``: where every known agent keeps sessions on this machine.

Each agent's default places (:attr:`~._agent.Agent.homes`, expanded for this platform) that
exist, and its per-project files (:attr:`~._agent.Agent.projects`: Aider's history, Crush's
database) found below the directories given. Nothing here knows an agent: it walks the
registry (:mod:`._registry`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from ._agent import Agent, homes_of
from ._registry import AGENTS

__all__ = ["MAX_DEPTH", "MAX_DIRS", "Found", "find"]

#: How deep below a searched directory per-project files are looked for.
MAX_DEPTH = 8
#: Directories a search visits at most (a home directory can hold millions).
MAX_DIRS = 200_000
#: Directories never entered: they hold no agent's per-project files, and can be huge.
_PRUNE = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".cache"})


class Found(NamedTuple):
    """An agent whose sessions are on this machine, and where."""

    agent: Agent
    paths: tuple[Path, ...]


class _Walk(NamedTuple):
    per_agent: dict[str, list[Path]]
    capped: bool


def _projects(dirs: Iterable[Path], agents: list[Agent], exclude: str | None) -> _Walk:
    """Per-project files of ``agents`` below ``dirs`` (no symlink followed, at most
    :data:`MAX_DEPTH` deep and :data:`MAX_DIRS` directories)."""
    found: dict[str, list[Path]] = {}
    # a hidden directory is entered only when a project file lives in it (Crush's .crush)
    hidden = {Path(rel).parts[0] for a in agents for rel in a.projects if len(Path(rel).parts) > 1}
    visited = 0
    for top in dirs:
        base = len(Path(top).parts)
        for dirpath, dirnames, _files in os.walk(top):
            visited += 1
            if visited > MAX_DIRS:
                return _Walk(found, True)
            here = Path(dirpath)
            for a in agents:
                for rel in a.projects:
                    f = here / rel
                    if f.is_file() and not f.is_symlink():
                        found.setdefault(a.name, []).append(f)
            if len(here.parts) - base >= MAX_DEPTH:
                dirnames[:] = []
                continue
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in _PRUNE
                and (not d.startswith(".") or d in hidden)
                and (exclude is None or os.path.abspath(os.path.join(dirpath, d)) != exclude)
                and not os.path.islink(os.path.join(dirpath, d))
            )
    return _Walk(found, False)


def find(
    dirs: Iterable[str | os.PathLike[str]] = (),
    *,
    exclude: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    plat: str | None = None,
) -> tuple[list[Found], bool]:
    """Every agent with sessions on this machine, in registry order: its default places that
    exist, and its per-project files below ``dirs``; also whether the search of ``dirs`` was
    cut short (:data:`MAX_DIRS`). ``exclude`` is a tree left out (the import root)."""
    agents = list(AGENTS.values())
    ex = os.path.abspath(exclude) if exclude is not None else None
    tops = [Path(os.path.abspath(os.path.expanduser(os.fspath(d)))) for d in dirs]
    walk = _projects([t for t in tops if t.is_dir()], [a for a in agents if a.projects], ex)
    out: list[Found] = []
    for a in agents:
        paths = [p for p in homes_of(a, env=env, plat=plat) if p.exists()]
        for p in walk.per_agent.get(a.name, ()):
            if not any(p.is_relative_to(h) for h in paths):
                paths.append(p)
        if paths:
            out.append(Found(a, tuple(paths)))
    return out, walk.capped
