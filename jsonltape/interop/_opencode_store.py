"""OpenCode sessions as :class:`Unit` s: from its SQLite ``opencode.db`` (OpenCode 1.2 on) or
from the older JSON storage tree, rendered as JSONL records the OpenCode mapper reads.

The database (anomalyco/opencode packages/opencode/src/session/session.sql.ts) has a
``session`` table (``id``, ``project_id``, ``parent_id``, ``directory``, ``title``,
``version``, ``time_created``, ``time_updated``, ...), a ``message`` table (``id``,
``session_id``, ``time_created``, ``time_updated``, ``data``: the message info as JSON without
``id`` and ``sessionID``) and a ``part`` table (``id``, ``message_id``, ``session_id``, times,
``data``: the part as JSON without its three ids). The storage tree
(packages/opencode/src/storage/json-migration.ts reads it) holds the same objects whole:
``storage/session/<projectID>/<sessionID>.json``, ``storage/message/<sessionID>/<id>.json``
and ``storage/part/<messageID>/<id>.json``.

A session renders as one ``{"type":"session", ...}`` record of the fields that never change,
then one ``{"type":"message","info":{...},"parts":[...]}`` record per message, in the order
OpenCode reads them back (``time.created``, then id; parts by id), ids first and every other
key as stored, so the database and the tree give the same bytes. The only field OpenCode
rewrites in a finished message, a tool state's ``time.compacted`` (set when it prunes old
outputs), is left out so the rendering only grows. Records from the first assistant message
without ``time.completed`` on may still change: they are ``held``.

The database is read by :mod:`._opencode_db` (its real tables only, every row's types checked,
the work capped); a session it cannot read gets one verdict, and the others import.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from ._opencode_db import ROW_DEPTH, Database, OpenCodeStoreError, SessionRow, with_ids
from ._source import Unit, rendering, too_deep

__all__ = ["OpenCodeStoreError", "units"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


# -- rendering (shared by the database and the tree) ----------------------------------------


def _session_record(s: dict[str, Any]) -> dict[str, Any]:
    rec: dict[str, Any] = {"type": "session", "id": s["id"]}
    for key in ("projectID", "directory", "parentID"):
        if s.get(key) is not None:
            rec[key] = s[key]
    created = (s.get("time") or {}).get("created")
    if created is not None:
        rec["time"] = {"created": created}
    if s.get("version") is not None:
        rec["version"] = s["version"]
    return rec


def _stable_part(part: dict[str, Any]) -> dict[str, Any]:
    state = part.get("state")
    if not isinstance(state, dict) or not isinstance(state.get("time"), dict):
        return part
    if "compacted" in state["time"]:
        t = {k: v for k, v in state["time"].items() if k != "compacted"}
        part = {**part, "state": {**state, "time": t}}
    return part


def _open(info: dict[str, Any]) -> bool:
    t = info.get("time")
    return info.get("role") == "assistant" and not (isinstance(t, dict) and t.get("completed"))


def _render(
    session: dict[str, Any], messages: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]],
    settled: bool,
) -> tuple[bytes, int]:  # fmt: skip
    lines = [_encode(_session_record(session))]
    held_from: int | None = None
    for info, parts in messages:
        if held_from is None and _open(info):
            held_from = len(lines)
        rec = {"type": "message", "info": info, "parts": [_stable_part(p) for p in parts]}
        lines.append(_encode(rec))
    return rendering(lines, None if settled else held_from)


def _order(info: dict[str, Any]) -> tuple[float, str]:
    created = (info.get("time") or {}).get("created")
    return (created if isinstance(created, (int, float)) else 0, str(info.get("id")))


# -- the database ---------------------------------------------------------------------------


def db_units(db: Path) -> list[Unit]:
    """One unit per session of an ``opencode.db`` (a session whose row breaks OpenCode's types
    is a unit too: rendering it raises the verdict)."""
    database = Database(db)
    units = []
    for n, row in enumerate(database.sessions(), 1):
        name = f"{db.name}#{row.sid if row.sid is not None else f'(session row {n})'}"
        # A refused session's change time is unknown: -1 is never the one an import recorded,
        # so the verdict is given again each time, never "unchanged".
        mtime_ns = -1 if row.problem is not None else row.changed_ms * 1_000_000
        render = _db_render(database, row)
        units.append(Unit(str(db), name, row.rows, mtime_ns, render, row.title))
    return units


def _db_render(database: Database, row: SessionRow) -> Callable[[bool], tuple[bytes, int]]:
    def render(settled: bool) -> tuple[bytes, int]:
        if row.problem is not None or row.sid is None:
            raise OpenCodeStoreError(
                f"{row.problem}; nothing of this session is imported", path=database.path
            )
        return _render(row.record, database.messages(row.sid), settled)

    return render


# -- the storage tree -----------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    """A storage file's object, or None for what is not one (half-written: OpenCode's migration
    skips those too); a file nested too deep to decode is refused (:class:`OpenCodeStoreError`)."""
    try:
        fd = os.open(path, _NOFOLLOW)  # never through a symlink
        with open(fd, "rb") as f:
            data = f.read()
    except OSError:
        return None
    deep = too_deep(data, ROW_DEPTH)
    if deep is not None:
        raise OpenCodeStoreError(f"{deep}; nothing of this session is imported", path=path)
    try:
        value = _decode(data)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


def _json_files(d: Path) -> list[Path]:
    if d.is_symlink():
        return []
    try:
        return sorted(
            p for p in d.iterdir() if p.suffix == ".json" and p.is_file() and not p.is_symlink()
        )
    except OSError:
        return []


def tree_units(storage: Path) -> list[Unit]:
    """One unit per session of an OpenCode ``storage`` directory."""
    units = []
    for project_dir in sorted((storage / "session").glob("*")):
        if project_dir.is_symlink():
            continue
        for info_path in _json_files(project_dir):
            sid = info_path.stem
            files = [info_path]
            for m in _json_files(storage / "message" / sid):
                files.append(m)
                files.extend(_json_files(storage / "part" / m.stem))
            mtime = max(_mtime(f) for f in files)
            title = _title(info_path)
            units.append(
                Unit(str(info_path), sid, len(files) - 1, mtime,
                     _tree_render(storage, info_path, project_dir.name),
                     title)
            )  # fmt: skip
    return units


def _title(info_path: Path) -> str | None:
    """A tree session's title (its render gives the verdict on a file it cannot read)."""
    try:
        title = (_read_json(info_path) or {}).get("title")
    except OpenCodeStoreError:
        return None
    return title if isinstance(title, str) else None


def _mtime(p: Path) -> int:
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return 0


def _tree_render(
    storage: Path, info_path: Path, project: str
) -> Callable[[bool], tuple[bytes, int]]:
    def render(settled: bool) -> tuple[bytes, int]:
        sid = info_path.stem  # ids come from the paths, as OpenCode's migration takes them
        data = _read_json(info_path)
        if data is None:
            raise OpenCodeStoreError("not an OpenCode session info file", path=info_path)
        session = {**data, "id": sid, "projectID": project}
        messages = []
        for m in _json_files(storage / "message" / sid):
            info = _read_json(m)
            if info is None:
                continue  # half-written: OpenCode's migration skips it too
            parts = []
            for p in _json_files(storage / "part" / m.stem):
                part = _read_json(p)
                if part is not None:
                    ids = {"id": p.stem, "sessionID": sid, "messageID": m.stem}
                    parts.append(with_ids(ids, part))
            parts.sort(key=lambda p: str(p["id"]))
            messages.append((with_ids({"id": m.stem, "sessionID": sid}, info), parts))
        messages.sort(key=lambda mp: _order(mp[0]))
        return _render(session, messages, settled)

    return render


# -- entry point ----------------------------------------------------------------------------


def units(path: Path) -> list[Unit]:
    """The sessions under ``path``: an ``opencode.db``, a ``storage`` directory, or an OpenCode
    data directory holding either or both (a session in both is taken from the database, the
    newer store; OpenCode migrates the tree into it once)."""
    if path.is_file():
        return db_units(path)
    if (path / "session").is_dir() and (path / "message").is_dir():
        return tree_units(path)
    found: list[Unit] = []
    db = path / "opencode.db"
    if db.is_file():
        found = db_units(db)
    have = {u.name.split("#", 1)[1] for u in found}
    if (path / "storage" / "session").is_dir():
        found.extend(u for u in tree_units(path / "storage") if u.name not in have)
    if not found and not db.is_file() and not (path / "storage").is_dir():
        raise OpenCodeStoreError(
            "not an OpenCode data directory (no opencode.db, no storage/session)", path=path
        )
    return found
