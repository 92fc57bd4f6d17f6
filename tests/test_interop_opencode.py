"""OpenCode sessions (issue 13): its SQLite database and its JSON storage tree, read-only,
rendered as records and mapped to jsonltape; import, re-import, growth, valid bodies.

Fixtures: tests/fixtures/opencode/storage (written by make_tree.py the way OpenCode's storage
writer lays files out) and schema.sql (OpenCode's tables); the database is built from both
here, the way OpenCode's json-migration.ts fills it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.fold._valid import check_anthropic, check_openai
from jsonltape.interop import import_file
from jsonltape.interop._opencode_store import OpenCodeStoreError, units
from jsonltape.interop._source import Unit

from ._importers import kept_whole

FIX = Path(__file__).parent / "fixtures" / "opencode"
SID = "ses_4f2a9c1e7ffeZ1k2m3n4o5p6q7"


def build_db(tree: Path, db: Path) -> Path:
    """An opencode.db in WAL mode holding the tree's sessions, ids out of ``data`` as
    OpenCode's migration stores them."""
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript((FIX / "schema.sql").read_text())
    for p in sorted((tree / "project").glob("*.json")):
        v = json.loads(p.read_text())
        con.execute("INSERT INTO project VALUES (?,?,?,?,?,?,?)",
                    (p.stem, v["worktree"], v.get("vcs"), None, 1, 1, "[]"))  # fmt: skip
    for p in sorted((tree / "session").glob("*/*.json")):
        v = json.loads(p.read_text())
        con.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,"
            " time_created, time_updated) VALUES (?,?,?,?,?,?,?,?,?)",
            (p.stem, p.parent.name, v.get("parentID"), v["slug"], v["directory"], v["title"],
             v["version"], v["time"]["created"], v["time"]["updated"]),
        )  # fmt: skip
    for p in sorted((tree / "message").glob("*/*.json")):
        insert_message(con, p.parent.name, json.loads(p.read_text()))
        for q in sorted((tree / "part" / p.stem).glob("*.json")):
            insert_part(con, p.parent.name, json.loads(q.read_text()))
    con.commit()
    con.close()
    return db


def insert_message(con: sqlite3.Connection, sid: str, v: dict[str, Any]) -> None:
    data = {k: x for k, x in v.items() if k not in ("id", "sessionID")}
    t = v["time"]["created"]
    con.execute("INSERT INTO message VALUES (?,?,?,?,?)", (v["id"], sid, t, t, json.dumps(data)))


def insert_part(con: sqlite3.Connection, sid: str, v: dict[str, Any]) -> None:
    data = {k: x for k, x in v.items() if k not in ("id", "sessionID", "messageID")}
    con.execute("INSERT INTO part VALUES (?,?,?,?,?,?)",
                (v["id"], v["messageID"], sid, 1, 1, json.dumps(data)))  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return build_db(FIX / "storage", tmp_path / "data" / "opencode.db")


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()


def import_unit(u: Unit, work: Path, root: Path, *, settled: bool = True) -> Any:
    """Import one unit (an OpenCode session) into ``root``."""
    report = import_file("opencode", u, root, settle=0 if settled else None)
    assert report.status in ("imported", "unchanged"), report.error
    return report


def session_path(root: Path) -> Path:
    (path,) = [p for p in root.rglob("*.jsonl")]
    return path


def test_the_database_maps_to_prompts_replies_tools_and_a_compaction(
    db: Path, tmp_path: Path
) -> None:
    (u,) = units(db)
    assert u.name == f"opencode.db#{SID}"
    import_unit(u, tmp_path / "work", tmp_path / "root")
    path = session_path(tmp_path / "root")
    s = list(jsonltape.read(path))
    types = [e.type for e in s]
    assert "compaction/summary" in types and types.count("tool/result") == 2
    header = s[0].data
    assert header["title"].startswith("Fix the failing test") and header["cwd"] == "/home/dev/app"
    results = [e.data for e in s if e.type == "tool/result"]
    assert results[0]["message"]["parts"][0]["response"] == "1 failed"
    assert results[1]["message"]["parts"][0]["is_error"] is True
    first = next(e.data for e in s if e.type == "assistant/message")
    assert first["usage"]["cache_read_input_tokens"] == 900 and first["usage"]["cost"] == 0.0042
    assert [p["type"] for p in first["message"]["parts"]] == ["reasoning", "text", "tool_call",
                                                              "tool_call"]  # fmt: skip
    prompt = next(e.data for e in s if e.type == "user/message")
    assert prompt["message"]["parts"][1]["type"] == "blob"
    raw = next(e.data for e in s if e.type == "import/raw" and e.data["kind"] == "session")
    assert raw["known"] is True


def test_bodies_pass_the_openai_and_anthropic_checks(db: Path, tmp_path: Path) -> None:
    (u,) = units(db)
    import_unit(u, tmp_path / "work", tmp_path / "root")
    path = session_path(tmp_path / "root")
    assert check_openai(fold.messages(path, format="openai")) == []
    assert check_anthropic(fold.messages(path, format="anthropic")) == []
    texts = json.dumps(fold.messages(path, format="openai"))
    assert "off-by-one" in texts and "pytest -q" not in texts  # compacted away


def test_every_record_is_kept_verbatim_exactly_once(db: Path, tmp_path: Path) -> None:
    (u,) = units(db)
    body, _ = u.render(True)
    import_unit(u, tmp_path / "work", tmp_path / "root")
    seen: dict[int, str] = {}
    for e in jsonltape.read(session_path(tmp_path / "root")):
        for n, text in kept_whole((e.data.get("import") or {}).get("raw")):
            assert n not in seen
            seen[n] = text
    assert [seen[i + 1] for i in range(len(seen))] == body.decode().splitlines()


def test_the_tree_and_the_database_render_the_same_records(db: Path) -> None:
    (from_db,) = units(db)
    (from_tree,) = units(FIX / "storage")
    assert from_tree.name == SID
    assert from_db.render(True) == from_tree.render(True)


def test_a_data_directory_takes_a_session_in_both_from_the_database(
    db: Path, tmp_path: Path
) -> None:
    shutil.copytree(FIX / "storage", tmp_path / "data" / "storage")
    (u,) = units(tmp_path / "data")
    assert u.path == str(db)


def test_reimport_of_an_unchanged_database_adds_nothing(db: Path, tmp_path: Path) -> None:
    (u,) = units(db)
    import_unit(u, tmp_path / "work", tmp_path / "root")
    report = import_unit(units(db)[0], tmp_path / "work", tmp_path / "root")
    assert report.events == 0


def test_a_streaming_reply_is_held_back_until_it_completes(db: Path, tmp_path: Path) -> None:
    con = sqlite3.connect(db)
    insert_message(con, SID, {"id": "msg_a008", "role": "user", "time": {"created": 1764460808000},
                              "agent": "build", "model": {}})  # fmt: skip
    insert_part(con, SID, {"id": "prt_a008a", "messageID": "msg_a008", "type": "text",
                           "text": "And the README"})  # fmt: skip
    reply = {
        "id": "msg_a009",
        "role": "assistant",
        "time": {"created": 1764460808500},
        "parentID": "msg_a008",
        "modelID": "m",
        "providerID": "p",
        "cost": 0,
        "tokens": {"input": 1, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    }
    insert_message(con, SID, reply)
    insert_part(con, SID, {"id": "prt_a009a", "messageID": "msg_a009", "type": "text",
                           "text": "Writing"})  # fmt: skip
    con.commit()
    (u,) = units(db)
    body, held = u.render(False)
    assert held > 0 and b"Writing" in body[len(body) - held :]
    import_unit(u, tmp_path / "work", tmp_path / "root", settled=False)
    path = session_path(tmp_path / "root")
    assert "Writing" not in path.read_text()
    done = {**reply, "time": {"created": 1764460808500, "completed": 1764460809500}}
    con.execute("UPDATE message SET data = ? WHERE id = 'msg_a009'",
                (json.dumps({k: v for k, v in done.items() if k != "id"}),))  # fmt: skip
    con.commit()
    con.close()
    report = import_unit(units(db)[0], tmp_path / "work", tmp_path / "root")
    assert report.events > 0 and "Writing" in path.read_text()
    assert check_anthropic(fold.messages(path, format="anthropic")) == []


def test_a_new_message_imports_only_new_events(db: Path, tmp_path: Path) -> None:
    (u,) = units(db)
    import_unit(u, tmp_path / "work", tmp_path / "root")
    path = session_path(tmp_path / "root")
    old = list(jsonltape.read(path))
    before = len(old)
    con = sqlite3.connect(db)
    insert_message(con, SID, {"id": "msg_a010", "role": "user", "time": {"created": 1764460808000}})
    insert_part(con, SID, {"id": "prt_a010a", "messageID": "msg_a010", "type": "text",
                           "text": "One more thing"})  # fmt: skip
    con.commit()
    con.close()
    report = import_unit(units(db)[0], tmp_path / "work", tmp_path / "root")
    events = list(jsonltape.read(path))
    assert 0 < report.events < 6 and len(events) > before
    assert [e.data for e in events[:before]] == [e.data for e in old]


def test_a_read_only_directory_is_read_and_nothing_is_created(db: Path, tmp_path: Path) -> None:
    con = sqlite3.connect(db)  # keep the WAL un-checkpointed: the last rows live only in it
    con.execute("PRAGMA wal_autocheckpoint = 0")
    insert_message(con, SID, {"id": "msg_b001", "role": "user", "time": {"created": 1764460808000}})
    con.commit()
    expected = {u.name: u.render(True) for u in units(db)}
    for shm in (True, False):
        if not shm:
            con.close()  # the last close checkpoints and removes -wal and -shm
        listing = sorted(os.listdir(db.parent))
        os.chmod(db.parent, 0o500)
        try:
            got = {u.name: u.render(True) for u in units(db)}
            assert sorted(os.listdir(db.parent)) == listing
        finally:
            os.chmod(db.parent, 0o700)
        assert got == expected


def test_a_database_that_is_not_opencodes_is_one_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE session (id text)").connection.commit()
    with pytest.raises(OpenCodeStoreError, match="not an OpenCode database"):
        units(other)
    not_db = tmp_path / "notes.db"
    not_db.write_text("hello")
    with pytest.raises(OpenCodeStoreError, match="cannot read the database"):
        units(not_db)


def test_verify_is_clean_on_the_import(db: Path, tmp_path: Path) -> None:
    (u,) = units(db)
    import_unit(u, tmp_path / "work", tmp_path / "root")
    path = session_path(tmp_path / "root")
    run = subprocess.run([sys.executable, "-m", "jsonltape", "verify", str(path)],
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
