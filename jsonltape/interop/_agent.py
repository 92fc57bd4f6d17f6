"""What an importer declares about its agent: the name it is imported by, where the agent keeps
its sessions on each platform, which files of a tree are sessions, and how a path that is not a
JSONL session file becomes sessions. :mod:`._registry` lists every declaration; discovery, the
import command, ``import --from auto`` and the read-only index (``sync --source``) all read them
there, so an agent is added in one place: its own module.

Default paths are templates, expanded for the platform they name: ``~`` is the home directory,
``${NAME}`` and ``%NAME%`` an environment variable, ``${NAME:-fallback}`` the variable or, when it
is unset or empty, the fallback (itself a template). A path whose variable is unset (with no
fallback) is left out.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ._base import Mapper
    from ._inputs import Input
    from ._source import Unit

__all__ = ["PLATFORMS", "Agent", "Home", "expand", "homes_of", "jsonl", "platform", "split_take"]

#: The platforms a default path is declared for, as ``sys.platform`` names them.
PLATFORMS = ("linux", "darwin", "win32")
_VAR = re.compile(r"\$\{(\w+)(?::-((?:[^{}]|\{[^{}]*\})*))?\}|%(\w+)%")


class Home(NamedTuple):
    """A default place of an agent's sessions on some platforms."""

    platforms: tuple[str, ...]
    """Where it applies (names of :data:`PLATFORMS`)."""
    path: str
    """The template (see the module docs)."""


class Agent(NamedTuple):
    """One importable agent, as its importer module declares it."""

    name: str
    """What ``import --from`` and ``sync --source NAME:PATH`` take; the sessions' id prefix."""
    label: str
    """The agent's own name, as ``import --from auto`` reports what it found."""
    mapper: Callable[[str, str, str], Mapper]
    """``mapper(name, path, session_id)``: the importer of one source session."""
    homes: tuple[Home, ...]
    """Where the agent keeps its sessions by default, per platform (``import --from auto``)."""
    pattern: str
    """What a tree is searched for, in words (said when nothing is found)."""
    wanted: Callable[[Path], bool]
    """Whether a file met in a tree is one of the agent's session sources."""
    units: Callable[[Path], list[Unit] | None] | None = None
    """The sessions a path holds that are not JSONL files of their own (a database, a task
    folder, a whole-file JSON chat), or None for a path to walk (a directory) or a file read as
    it is. Asked of each SOURCE argument and of each wanted file."""
    skip: Callable[[Path], str | None] | None = None
    """Why a file met in a tree is left out on purpose (said, not imported), or None."""
    reader: Callable[[Path], Input] | None = None
    """How a session file is read, when it is not JSONL (an Aider Markdown history)."""
    name_of: Callable[[Path], str] | None = None
    """The name a session file is known by when it is not the file's name (the session id
    derives from it: Copilot CLI's ``<id>/events.jsonl`` is ``<id>.jsonl``)."""
    title_of: Callable[[Path], str | None] | None = None
    """The session's own title, when the agent keeps it beside a session file (Copilot CLI's
    ``workspace.yaml``)."""
    in_place: bool = True
    """Whether ``sync --source`` indexes the sessions where they are (else: import them)."""
    projects: tuple[str, ...] = ()
    """Where the agent keeps sessions inside a project (``.crush/crush.db``): ``import --from
    auto`` looks for these below the directories it searches."""
    prune: tuple[str, ...] = ()
    """Directories a tree walk does not enter (Cline's ``checkpoints``: shadow git repos)."""
    keyed: bool = False
    """Whether the read-only index keys each of a wanted file's units by the unit's own change
    counter (:attr:`Unit.size`, :attr:`Unit.mtime_ns`) rather than the file's stat: a
    database's sessions (a change lands in its ``-wal`` first), a task folder's documents. A
    unit that is the file itself (a whole-file JSON chat) is keyed by the file's stat."""
    skip_inputs: Callable[[], tuple[Path, ...]] | None = None
    """Files outside a tree whose change can change what :attr:`skip` says of a file in it
    (Cursor's default ``state.vscdb``: a transcript whose conversation it holds is skipped):
    the read-only index rescans its tree when one of them (or its ``-wal``) changes."""
    documents: tuple[str, ...] = ()
    """Files beside a wanted file that belong to the same session (Cline's
    ``ui_messages.json`` beside ``api_conversation_history.json``): the read-only index takes a
    change of one as a change of the session."""


def jsonl(path: Path) -> bool:
    """The default :attr:`Agent.wanted`: a ``.jsonl`` file."""
    return path.name.endswith(".jsonl")


def split_take(
    take: Callable[[Path], bool | str],
) -> tuple[Callable[[Path], bool], Callable[[Path], str | None]]:
    """An importer's one rule for a file met in a tree (True: a session, a string: left out on
    purpose, and why) as :attr:`Agent.wanted` and :attr:`Agent.skip`."""

    def wanted(path: Path) -> bool:
        return take(path) is True

    def skip(path: Path) -> str | None:
        taken = take(path)
        return taken if isinstance(taken, str) else None

    return wanted, skip


def platform(name: str | None = None) -> str:
    """``name`` (default: this machine's ``sys.platform``) as one of :data:`PLATFORMS` (other
    Unix systems follow Linux)."""
    name = sys.platform if name is None else name
    return name if name in PLATFORMS else "linux"


def expand(template: str, env: Mapping[str, str], home: str) -> str | None:
    """The path ``template`` names with the variables of ``env`` and the home directory
    ``home``; None when a variable it needs is unset."""
    missing = False

    def var(m: re.Match[str]) -> str:
        nonlocal missing
        name = m.group(1) or m.group(3)
        value = env.get(name, "")
        if value:
            return value
        if m.group(2) is not None:
            fallback = expand(m.group(2), env, home)
            if fallback is not None:
                return fallback
        missing = True
        return ""

    out = _VAR.sub(var, template)
    if missing:
        return None
    if out == "~" or out.startswith(("~/", "~\\")):
        out = home + out[1:]
    return out


def homes_of(
    agent: Agent, *, env: Mapping[str, str] | None = None, plat: str | None = None
) -> list[Path]:
    """The agent's default paths on this platform (or ``plat``), expanded, in declared order,
    each once."""
    env = os.environ if env is None else env
    plat = platform(plat)
    home = env.get("USERPROFILE" if plat == "win32" else "HOME") or os.path.expanduser("~")
    seen: list[Path] = []
    for h in agent.homes:
        if plat not in h.platforms:
            continue
        path = expand(h.path, env, home)
        if path is not None and Path(path) not in seen:
            seen.append(Path(path))
    return seen
