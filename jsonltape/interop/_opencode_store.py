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

The database is opened read-only and never written: with ``mode=ro`` (which reads the WAL),
or, where that would create files (a WAL database whose ``-wal`` and ``-shm`` are
missing), ``immutable=1``: with no ``-wal`` everything is in the database file (a ``-wal`` without
``-shm``, left by a crash, is not read).
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from ..errors import JsonltapeError
from ._source import Unit

__all__ = ["OpenCodeStoreError", "units"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.decode

_COLUMNS = {
    "session": ("id", "project_id", "parent_id", "directory", "version", "time_created",
                "time_updated"),
    "message": ("id", "session_id", "time_created", "time_updated", "data"),
    "part": ("id", "message_id", "session_id", "time_created", "time_updated", "data"),
}  # fmt: skip


class OpenCodeStoreError(JsonltapeError):
    """Not an OpenCode database or storage tree, or one that cannot be read."""

    code = "bad-source"


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


def _with_ids(ids: dict[str, Any], data: Any) -> dict[str, Any]:
    out = dict(ids)
    if isinstance(data, dict):
        out.update((k, v) for k, v in data.items() if k not in ids)
    return out


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
    body = b"".join(line + b"\n" for line in lines)
    if settled or held_from is None:
        return body, 0
    return body, sum(len(line) + 1 for line in lines[held_from:])


def _order(info: dict[str, Any]) -> tuple[float, str]:
    created = (info.get("time") or {}).get("created")
    return (created if isinstance(created, (int, float)) else 0, str(info.get("id")))


# -- the database ---------------------------------------------------------------------------


def connect(db: Path) -> sqlite3.Connection:
    """A read-only connection to an OpenCode database; never creates a file next to it."""
    quoted = urllib.parse.quote(str(db.resolve()))
    wal = db.with_name(db.name + "-wal").exists()
    shm = db.with_name(db.name + "-shm").exists()
    # mode=ro reads the WAL, but on a WAL database it creates -wal and -shm when they are
    # missing: then nothing is un-checkpointed, and immutable=1 reads the same rows.
    mode = "ro" if (wal and shm) or not _wal_mode(db) else None
    try:
        if mode is not None:
            con = sqlite3.connect(f"file:{quoted}?mode=ro", uri=True)
        else:
            con = sqlite3.connect(f"file:{quoted}?immutable=1", uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise OpenCodeStoreError(f"cannot read the database: {exc}", path=db) from None
    return con


def _wal_mode(db: Path) -> bool:
    try:
        with open(db, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


def _check(con: sqlite3.Connection, db: Path) -> None:
    for table, wanted in _COLUMNS.items():
        have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in wanted if c not in have]
        if missing:
            what = f"no {table!r} table" if not have else f"{table!r} lacks {', '.join(missing)}"
            raise OpenCodeStoreError(f"not an OpenCode database ({what})", path=db)


def _db_messages(
    con: sqlite3.Connection, sid: str
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    parts: dict[str, list[dict[str, Any]]] = {}
    for pid, mid, data in con.execute(
        "SELECT id, message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id",
        (sid,),
    ):
        ids = {"id": pid, "sessionID": sid, "messageID": mid}
        parts.setdefault(mid, []).append(_with_ids(ids, _loads(data)))
    out = []
    for mid, data in con.execute(
        "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id", (sid,)
    ):
        out.append((_with_ids({"id": mid, "sessionID": sid}, _loads(data)), parts.get(mid, [])))
    return out


def _loads(data: Any) -> Any:
    try:
        return _decode(data) if isinstance(data, (str, bytes)) else None
    except msgspec.DecodeError:
        return None


def db_units(db: Path) -> list[Unit]:
    """One unit per session of an ``opencode.db``."""
    con = connect(db)
    try:
        _check(con, db)
        rows = con.execute(
            "SELECT s.id, s.project_id, s.parent_id, s.directory, s.version, s.time_created,"
            " s.time_updated,"
            " (SELECT count(*) FROM message m WHERE m.session_id = s.id),"
            " (SELECT max(time_updated) FROM message m WHERE m.session_id = s.id),"
            " (SELECT count(*) FROM part p WHERE p.session_id = s.id),"
            " (SELECT max(time_updated) FROM part p WHERE p.session_id = s.id)"
            " FROM session s ORDER BY s.time_created, s.id"
        ).fetchall()
    except sqlite3.Error as exc:
        raise OpenCodeStoreError(f"cannot read the database: {exc}", path=db) from None
    finally:
        con.close()
    units = []
    for sid, project, parent, directory, version, created, updated, nm, tm, np, tp in rows:
        session = {"id": sid, "projectID": project, "directory": directory, "parentID": parent,
                   "time": {"created": created}, "version": version}  # fmt: skip
        changed = max(int(t) for t in (updated, tm or 0, tp or 0))
        units.append(
            Unit(str(db), f"{db.name}#{sid}", nm + np, changed * 1_000_000,
                 _db_render(db, session))
        )  # fmt: skip
    return units


def _db_render(db: Path, session: dict[str, Any]) -> Callable[[bool], tuple[bytes, int]]:
    def render(settled: bool) -> tuple[bytes, int]:
        con = connect(db)
        try:
            messages = _db_messages(con, session["id"])
        except sqlite3.Error as exc:
            raise OpenCodeStoreError(f"cannot read the database: {exc}", path=db) from None
        finally:
            con.close()
        return _render(session, messages, settled)

    return render


# -- the storage tree -----------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = _decode(path.read_bytes())
    except (OSError, msgspec.DecodeError):
        return None
    return value if isinstance(value, dict) else None


def _json_files(d: Path) -> list[Path]:
    try:
        return sorted(p for p in d.iterdir() if p.suffix == ".json" and p.is_file())
    except OSError:
        return []


def tree_units(storage: Path) -> list[Unit]:
    """One unit per session of an OpenCode ``storage`` directory."""
    units = []
    for project_dir in sorted((storage / "session").glob("*")):
        for info_path in _json_files(project_dir):
            sid = info_path.stem
            files = [info_path]
            for m in _json_files(storage / "message" / sid):
                files.append(m)
                files.extend(_json_files(storage / "part" / m.stem))
            mtime = max(_mtime(f) for f in files)
            units.append(
                Unit(str(info_path), sid, len(files) - 1, mtime,
                     _tree_render(storage, info_path, project_dir.name))
            )  # fmt: skip
    return units


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
                    parts.append(_with_ids(ids, part))
            parts.sort(key=lambda p: str(p["id"]))
            messages.append((_with_ids({"id": m.stem, "sessionID": sid}, info), parts))
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
