"""OpenHands conversations as :class:`Unit` s: the folders the OpenHands SDK persists a
conversation in (the CLI's ``~/.openhands/conversations/<id>/``, an agent server's
``<conversations path>/<id>/``), rendered as JSONL records the OpenHands mapper reads.

A conversation folder holds ``base_state.json`` (the conversation's state, rewritten in place
on every change) and ``events/event-<index>-<event id>.json``, one event per file, each
written once (OpenHands/software-agent-sdk openhands-sdk/openhands/sdk/conversation/
event_store.py ``EventLog.append``, persistence_const.py); an agent server adds ``meta.json``
(its ``title``). A conversation renders as one ``{"type": "conversation", "id": <folder>}``
record, then each event as stored, in index order. A file being written (OpenHands writes
them in place) does not parse: until the conversation is settled the records from it, or
from a gap in the indexes, on are held back; once settled, one that still does not parse is
an ``{"type": "unreadable", "file", "error"}`` record (a problem of the import).

Only an event file nested deeper than a JSONL line may be (``_source.MAX_DEPTH``) refuses
the conversation, naming the file and the byte.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import msgspec

from ..errors import FormatError
from ._source import Unit, too_deep

__all__ = ["is_conversation_file", "units"]

_encode = msgspec.json.Encoder().encode
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
#: ``EVENT_FILE_PATTERN`` (``event-{idx:05d}-{event_id}.json``); the index has 5 digits or more.
_EVENT = re.compile(r"^event-(\d{5,})-([0-9A-Za-z\-]{8,})\.json$")
_STATE = "base_state.json"


def is_conversation_file(path: Path) -> bool:
    """The file that stands for a conversation in a tree (what the index watches): its
    ``base_state.json``, which OpenHands rewrites with every event it appends."""
    return path.name == _STATE and (path.parent / "events").is_dir()


def _is_conversation(d: Path) -> bool:
    events = d / "events"
    return events.is_dir() and not events.is_symlink() and (d / _STATE).is_file()


def units(path: Path) -> list[Unit]:
    """The conversations at ``path``: a ``base_state.json``, a conversation folder, or a tree
    holding them (walked without following links)."""
    if path.is_file():
        if path.name != _STATE:
            raise FormatError("not an OpenHands conversation's base_state.json", path=path)
        return [conversation_unit(path.parent)]
    if _is_conversation(path):
        return [conversation_unit(path)]
    found: list[Unit] = []
    for dirpath, dirnames, _files in os.walk(path):
        dirnames.sort()
        here = Path(dirpath)
        if _is_conversation(here):
            found.append(conversation_unit(here))
            dirnames[:] = []  # its events/ and observations/ hold no conversation
            continue
        dirnames[:] = [d for d in dirnames if not (here / d).is_symlink()]
    return found


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder / "events")
    except OSError:
        return []


def _event_files(folder: Path) -> list[tuple[int, str]]:
    """``(index, file name)`` of the event files, in index order."""
    found = []
    for name in _names(folder):
        m = _EVENT.match(name)
        if m is not None:
            found.append((int(m.group(1)), name))
    found.sort()
    return found


def _mtime(p: Path) -> int:
    try:
        return os.stat(p, follow_symlinks=False).st_mtime_ns
    except OSError:
        return 0


def conversation_unit(folder: Path) -> Unit:
    """One conversation folder as a unit: changed when an event file was added (the folder's
    ``events`` changes) or the state was saved (with every event, its ``leaf_event_id``)."""
    # the count is the unit's size: an unchanged conversation is decided without ordering them
    count = sum(1 for name in _names(folder) if _EVENT.match(name))
    mtime = max(_mtime(folder / "events"), _mtime(folder / _STATE), _mtime(folder / "meta.json"))

    def render(settled: bool) -> tuple[bytes, int]:
        return _render(folder, _event_files(folder), settled)

    def title() -> str | None:
        meta = _read(folder / "meta.json")
        value = meta.get("title") if isinstance(meta, dict) else None
        return value if isinstance(value, str) and value.strip() else None

    return Unit(str(folder / _STATE), folder.name, count, mtime, render, title)


def _read(path: str | Path) -> Any:
    """A JSON file's value, or None when it cannot be read or parsed (a file being written)."""
    try:
        fd = os.open(path, _NOFOLLOW)
        with open(fd, "rb") as f:
            data = f.read()
    except OSError:
        return None
    deep = too_deep(data)
    if deep is not None:
        raise FormatError(f"{deep}; nothing of this conversation is imported", path=path)
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None


def _render(folder: Path, files: list[tuple[int, str]], settled: bool) -> tuple[bytes, int]:
    lines = [_encode({"type": "conversation", "id": folder.name})]
    held_from: int | None = None
    expected = files[0][0] if files else 0
    events = os.path.join(folder, "events")  # a str: a Path per event file cost 5% of an import
    for idx, name in files:
        if held_from is None and idx != expected:
            held_from = len(lines)  # a gap: an event not written yet
        expected = idx + 1
        value = _read(os.path.join(events, name))
        if isinstance(value, dict):
            lines.append(_encode(value))
            continue
        if held_from is None:
            held_from = len(lines)
        error = "not a JSON object" if value is not None else "malformed or unreadable JSON"
        lines.append(_encode({"type": "unreadable", "file": name, "error": error}))
    data = b"".join(line + b"\n" for line in lines)
    if settled or held_from is None:
        return data, 0
    return data, sum(len(line) + 1 for line in lines[held_from:])
