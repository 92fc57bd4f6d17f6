"""The fixtures of the Aider, Cline / Roo Code / Kilo Code, Goose and Crush importers laid out as
each agent lays out its data (tests/fixtures/interop/<agent>, PROVENANCE.md there), whole or as
the agent had written them part of the way (``keep``): a line log cut at a line, a JSON document
cut at an element (every element up to a moment), a database with only its earlier rows.

Databases are built here from the fixtures' SQL (SQLite files are not byte-stable across library
versions): Goose's from the schema and rows of its writer, Crush's from rows of a real database.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from ._agents import HOUR_AGO

FIXTURES = Path(__file__).parent / "fixtures" / "interop"
AGENTS = ("aider", "cline", "roo-code", "kilo-code", "goose", "crush")
#: Task folders and SDK sessions: JSON documents the agent rewrites whole.
DOCUMENTS = ("cline", "roo-code", "kilo-code")
DATABASES = ("goose", "crush")
_CLINE_SDK = "1784094124598_rruoq"


def _lines(data: bytes, keep: float) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(lines[: max(1, int(len(lines) * keep))])


def _json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=2))


def _task(src: Path, dest: Path, keep: float) -> None:
    """A task folder as it was when ``keep`` of its API history was written: every API and UI
    message up to that moment."""
    shutil.copytree(src, dest)
    api = json.loads((src / "api_conversation_history.json").read_bytes())
    ui = json.loads((src / "ui_messages.json").read_bytes())
    n = max(1, int(len(api) * keep))
    if n < len(api):
        until = api[n - 1].get("ts") or 0
        _json(dest / "api_conversation_history.json", api[:n])
        _json(dest / "ui_messages.json", [m for m in ui if m.get("ts", 0) <= until])


def _sdk(src: Path, session: str, dest: Path, keep: float, manifest: Path | None) -> None:
    dest.mkdir(parents=True)
    doc = json.loads(src.read_bytes())
    doc["messages"] = doc["messages"][: max(1, int(len(doc["messages"]) * keep))]
    _json(dest / f"{session}.messages.json", doc)
    if manifest is not None:
        shutil.copyfile(manifest, dest / f"{session}.json")


def database(agent: str, path: Path, keep: float = 1.0) -> sqlite3.Connection:
    """The agent's database at ``path`` (WAL mode, as both agents keep it), with the first
    ``keep`` of each session's messages; an open connection the caller closes."""
    src = FIXTURES / agent
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    if agent == "goose":
        con.executescript((src / "schema-v17.sql").read_text())
        con.executescript((src / "rows.sql").read_text())
        order, sid = "created_timestamp, id", "session_id"
    else:
        con.executescript((src / "crush-dbos.sql").read_text())
        order, sid = "created_at, rowid", "session_id"
    for (session,) in con.execute("SELECT id FROM sessions").fetchall():
        ids = [
            r[0]
            for r in con.execute(
                f"SELECT rowid FROM messages WHERE {sid} = ? ORDER BY {order}", (session,)
            )
        ]
        gone = ids[max(1, int(len(ids) * keep)) :]
        con.executemany("DELETE FROM messages WHERE rowid = ?", [(r,) for r in gone])
        if agent == "goose":  # stamped as Goose stamps them: its last message, not our clock
            con.execute(
                "UPDATE sessions SET created_at = (SELECT datetime(min(created_timestamp),"
                " 'unixepoch') FROM messages WHERE session_id = sessions.id), updated_at = "
                "(SELECT datetime(max(created_timestamp), 'unixepoch') FROM messages"
                " WHERE session_id = sessions.id) WHERE id = ?",
                (session,),
            )
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return con


def tree(agent: str, dest: Path, *, keep: float = 1.0, finished: bool = True) -> Path:
    """A copy of the agent's fixtures laid out as the agent stores them, ``keep`` of each
    written; every file last modified two hours ago when ``finished``. Returns the root to
    import."""
    src = FIXTURES / agent
    if agent == "aider":
        for repo, name in (
            ("shop", "aider-repo-head.chat.history.md"),
            ("myrepo", "agentsview-synthetic.aider.chat.history.md"),
        ):
            (dest / repo).mkdir(parents=True)
            (dest / repo / ".aider.chat.history.md").write_bytes(
                _lines((src / name).read_bytes(), keep)
            )
        root = dest
    elif agent == "cline":
        root = dest / "data"
        for task in sorted((src / "legacy-v3" / "tasks").iterdir()):
            _task(task, root / "tasks" / task.name, keep)
        shutil.copytree(src / "legacy-v3" / "state", root / "state")
        sdk = src / "sdk-v1"
        _sdk(
            sdk / "session.messages.json",
            _CLINE_SDK,
            root / "sessions" / _CLINE_SDK,
            keep,
            sdk / "session.json",
        )
        _sdk(
            sdk / "success.messages.json",
            "fixture-success-01",
            root / "sessions" / "fixture-success-01",
            keep,
            None,
        )
    elif agent in ("roo-code", "kilo-code"):
        root = dest / "globalStorage"
        for task in sorted((src / "tasks").iterdir()):
            _task(task, root / "tasks" / task.name, keep)
    elif agent == "goose":
        root = dest / "sessions"
        database(agent, root / "sessions.db", keep).close()
        legacy = src / "legacy-jsonl-v1.x.jsonl"
        (root / "20250221_120000.jsonl").write_bytes(_lines(legacy.read_bytes(), keep))
    else:
        root = dest / "shop"
        database(agent, root / ".crush" / "crush.db", keep).close()
    if finished:
        for dirpath, _dirs, files in os.walk(dest):
            for name in [*files, dirpath]:
                os.utime(os.path.join(dirpath, name), (HOUR_AGO, HOUR_AGO))
    return root
