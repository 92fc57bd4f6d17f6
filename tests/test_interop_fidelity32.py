"""Import fidelity on real agents' files (issue 32, fidelity defects 5, 7, 8 and 9).

Sources, each hand-written from the agent's own format:

* Claude Code (no public source): its JSONL as ``/work/shared/samples`` and the docs show it;
  ``summary`` lines ``{type, summary, leafUuid}`` carry no time, a ``file-history-snapshot``
  carries its own in ``snapshot.timestamp``; a response streamed as several lines shares one
  ``message.id`` and one ``requestId``, each line repeating the response's usage
  (``claude21/streamed-tool-results.jsonl``); a model or proxy that reuses message ids gives two
  responses one ``message.id`` but their own request ids and usage.
* Gemini CLI legacy chats: ``{sessionId, projectHash, startTime, lastUpdated, messages}``
  (``fixtures/gemini/legacy``, google-gemini/gemini-cli packages/core/src/services/
  chatRecordingService.ts, whose ``startTime`` is the session's start).
* OpenCode: the ``session`` row's ``time_created`` and ``title`` (anomalyco/opencode
  packages/opencode/src/session/session.sql.ts @ 063e8306d9895af9bdd175306cfa4fa3291fd83a:
  ``title text NOT NULL``, the title its UI shows, which it generates after the first prompt and
  the user may rename: rewritten in place).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import jsonltape
from jsonltape import fold
from jsonltape.cli import cli as main
from jsonltape.interop import import_file
from jsonltape.interop._opencode_store import units
from jsonltape.interop.foreign import scan

from .helpers import import_finished

FIXTURES = Path(__file__).parent / "fixtures"
HOUR_AGO = time.time() - 7200
SESSION = "4d7e1c2a-9b3f-4e8d-a6c5-0f1e2d3c4b5a"


def _ms(stamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def _times(path: Path) -> list[tuple[str, int]]:
    """(type, time) of every event the source's lines made (the header and the import's own
    bookkeeping aside)."""
    return [
        (e.type, e.time)
        for e in jsonltape.read(path)
        if e.seq > 0 and e.type not in ("session/flush", "import/sync")
    ]


# -- defect 5: untimed lines take their timed neighbour's time -------------------------------


def _claude(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(v) + "\n" for v in lines)


def _cc_line(kind: str, uuid: str, parent: str | None, stamp: str, message: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SESSION,
            "timestamp": stamp, "cwd": "/w", "version": "2.1.258", "message": message}  # fmt: skip


def _old_claude_session(year: int) -> str:
    t1, t2 = f"{year}-03-01T09:00:00.000Z", f"{year}-03-01T09:00:05.000Z"
    reply = {"id": f"msg_{year}", "role": "assistant", "model": "claude-x",
             "content": [{"type": "text", "text": "hi"}],
             "usage": {"input_tokens": 3, "output_tokens": 1}}  # fmt: skip
    return _claude(
        {"type": "summary", "summary": "Greeting", "leafUuid": "a1"},
        {"type": "file-history-snapshot", "messageId": "u1", "isSnapshotUpdate": False,
         "snapshot": {"messageId": "u1", "trackedFileBackups": {},
                      "timestamp": f"{year}-03-01T08:59:59.000Z"}},
        _cc_line("user", "u1", None, t1, {"role": "user", "content": "hello"}),
        _cc_line("assistant", "a1", "u1", t2, reply),
    )  # fmt: skip


def test_lines_before_the_first_timed_one_never_take_the_imports_clock(tmp_path: Path) -> None:
    report = import_finished(
        "claude-code", tmp_path / "src" / f"{SESSION}.jsonl", _old_claude_session(2025),
        tmp_path / "root",
    )  # fmt: skip
    path = Path(report.sessions[0])
    times = _times(path)
    snapshot = _ms("2025-03-01T08:59:59.000Z")
    # summary: no time of its own, its nearest timed neighbour's (the snapshot line after it)
    assert times[0] == ("import/raw", snapshot) and times[1] == ("import/raw", snapshot)
    assert [t for _k, t in times] == sorted(t for _k, t in times)  # time never runs backwards
    assert max(t for _k, t in times) == _ms("2025-03-01T09:00:05.000Z")
    assert jsonltape.header(path).created == snapshot  # the first time the source gives
    # a read-only scan (sync --source) gives every event the same time (it closes no turn)
    source = tmp_path / "src" / f"{SESSION}.jsonl"
    scanned = [(e.type, e.time) for _s, e in scan("claude-code", source) if e.seq > 0]
    assert scanned == [x for x in times if x[0] != "turn/end"]


def test_a_source_with_no_time_at_all_takes_its_change_time(tmp_path: Path) -> None:
    src = tmp_path / "src" / f"{SESSION}.jsonl"
    report = import_finished(
        "claude-code", src, _claude({"type": "summary", "summary": "x", "leafUuid": "u"}),
        tmp_path / "root",
    )  # fmt: skip
    mtime = src.stat().st_mtime_ns // 1_000_000
    assert {t for _k, t in _times(Path(report.sessions[0]))} == {mtime}


def test_an_old_imported_session_sorts_below_a_new_one(tmp_path: Path) -> None:
    root, index = tmp_path / "sessions", tmp_path / "index.db"
    for year, sid in ((2024, SESSION), (2026, SESSION.replace("4d7e", "5e8f"))):
        text = _old_claude_session(year).replace(SESSION, sid)
        import_finished("claude-code", tmp_path / "src" / f"{sid}.jsonl", text, root)
    env = {**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")}

    def jt(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "jsonltape", *args], capture_output=True,
                              text=True, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    jt("sync", str(root), "--index", str(index))
    rows = [json.loads(x) for x in jt("sessions", "--index", str(index), "--json").splitlines()]
    assert [r["updated"] for r in rows] == [
        _ms("2026-03-01T09:00:05.000Z"),
        _ms("2024-03-01T09:00:05.000Z"),
    ]


def _placed(src: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / src.name
    if src.is_dir():
        shutil.copytree(src, target)
    else:
        shutil.copyfile(src, target)
    for p in [target, *target.rglob("*")]:
        os.utime(p, (HOUR_AGO, HOUR_AGO))
    return target


def test_a_gemini_legacy_chats_metadata_record_has_its_start_time(tmp_path: Path) -> None:
    legacy = FIXTURES / "gemini" / "legacy" / "session-2026-03-02T10-00-5d2e8f1a.json"
    start = _ms(json.loads(legacy.read_text())["startTime"])
    report = import_file("gemini-cli", _placed(legacy, tmp_path / "chats"), tmp_path / "root")
    assert report.status == "imported", report.error
    times = _times(Path(report.sessions[0]))
    assert times[0] == ("import/raw", start)
    assert all(t >= start for _k, t in times)


def test_an_opencode_session_record_has_its_creation_time(tmp_path: Path) -> None:
    storage = _placed(FIXTURES / "opencode" / "storage", tmp_path)
    (unit,) = units(storage)
    report = import_file("opencode", unit, tmp_path / "root", settle=0)
    assert report.status == "imported", report.error
    info = json.loads(next((storage / "session").rglob("*.json")).read_text())
    assert _times(Path(report.sessions[0]))[0] == ("import/raw", info["time"]["created"])


# -- defect 7: the import summary says how the turns were closed -----------------------------


def test_the_import_summary_says_a_turn_that_ended_with_a_reply_was_completed(
    tmp_path: Path,
) -> None:
    src = tmp_path / "src" / f"{SESSION}.jsonl"
    src.parent.mkdir(parents=True)
    src.write_text(_old_claude_session(2025))
    os.utime(src, (HOUR_AGO, HOUR_AGO))
    result = CliRunner().invoke(
        main, ["import", "--from", "claude-code", str(src), "-o", str(tmp_path / "root")]
    )
    assert result.exit_code == 0, result.output
    (path,) = (tmp_path / "root").rglob("*.jsonl")
    ends = [e.data["reason"] for e in jsonltape.read(path) if e.type == "turn/end"]
    assert ends == ["completed"]
    assert "closed 1 open turn of 1 finished source (1 completed)" in result.output
    assert "interrupted" not in result.output
    cut = _claude(_cc_line("user", "u1", None, "2025-03-01T09:00:00.000Z",
                           {"role": "user", "content": "hello"}))  # fmt: skip
    other = tmp_path / "src2" / f"{SESSION.replace('4d7e', '6f90')}.jsonl"
    other.parent.mkdir()
    other.write_text(cut)
    os.utime(other, (HOUR_AGO, HOUR_AGO))
    result = CliRunner().invoke(
        main, ["import", "--from", "claude-code", str(other), "-o", str(tmp_path / "root2")]
    )
    assert "closed 1 open turn of 1 finished source (1 interrupted)" in result.output


# -- defect 8: OpenCode's own titles ---------------------------------------------------------


def _opencode_db(tmp: Path, title: str) -> Path:
    """The fixture tree stored as OpenCode 1.2 stores it (schema.sql), titled ``title``."""
    storage = FIXTURES / "opencode" / "storage"
    db = tmp / "opencode.db"
    con = sqlite3.connect(db)
    con.executescript((FIXTURES / "opencode" / "schema.sql").read_text())
    info = json.loads(next((storage / "session").rglob("*.json")).read_text())
    con.execute(
        "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,"
        " time_created, time_updated) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?)",
        (info["id"], info["projectID"], info.get("slug", "s"), info["directory"], title,
         info["version"], info["time"]["created"], info["time"]["updated"]),
    )  # fmt: skip
    for m in sorted((storage / "message" / info["id"]).glob("*.json")):
        data = json.loads(m.read_text())
        mid = data.pop("id")
        data.pop("sessionID")
        created = data["time"]["created"]
        con.execute("INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                    (mid, info["id"], created, created, json.dumps(data)))  # fmt: skip
        for p in sorted((storage / "part" / mid).glob("*.json")):
            part = json.loads(p.read_text())
            pid = part.pop("id")
            part.pop("sessionID"), part.pop("messageID")
            con.execute("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                        (pid, mid, info["id"], created, created, json.dumps(part)))  # fmt: skip
    con.commit()
    con.close()
    return db


def test_an_opencode_session_is_titled_as_opencode_shows_it(tmp_path: Path) -> None:
    for kind, unit in (
        ("tree", units(FIXTURES / "opencode" / "storage")[0]),
        ("db", units(_opencode_db(tmp_path, "Fix the failing test"))[0]),
    ):
        report = import_file("opencode", unit, tmp_path / kind, settle=0)
        assert report.status == "imported", report.error
        path = Path(report.sessions[0])
        assert jsonltape.header(path).title == "Fix the failing test", kind
        assert fold.title(path) == "Fix the failing test"


def test_a_rename_in_opencode_reaches_the_imported_session(tmp_path: Path) -> None:
    db = _opencode_db(tmp_path, "New session - 2026-01-01T10:00:00.000Z")
    first = import_file("opencode", units(db)[0], tmp_path / "root", settle=0)
    path = Path(first.sessions[0])
    assert fold.title(path) == "New session - 2026-01-01T10:00:00.000Z"
    # OpenCode names it (its title agent, or the user): the row is updated in place
    con = sqlite3.connect(db)
    con.execute(
        "UPDATE session SET title = 'Fix the failing test', time_updated = time_updated + 1"
    )
    con.commit()
    con.close()
    again = import_file("opencode", units(db)[0], tmp_path / "root", settle=0)
    assert again.status == "imported" and again.error is None
    assert fold.title(path) == "Fix the failing test"
    titles = [e.data["title"] for e in jsonltape.read(path) if e.type == "session/title"]
    assert titles == ["Fix the failing test"]
    # nothing new, nothing appended
    assert import_file("opencode", units(db)[0], tmp_path / "root", settle=0).status == "unchanged"


# -- defect 9: one message id, two responses -------------------------------------------------


def _response(uuid: str, parent: str, msg_id: str, request: str | None, block: Any,
              usage: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    line = _cc_line("assistant", uuid, parent, "2025-03-01T09:00:01.000Z",
                    {"id": msg_id, "role": "assistant", "model": "claude-x",
                     "content": [block], "usage": usage})  # fmt: skip
    if request is not None:
        line["requestId"] = request
    return line


def _reused_id(request2: str | None, usage2: dict[str, int]) -> str:
    usage1 = {"input_tokens": 100, "output_tokens": 20}
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a"}}
    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"}]
    return _claude(
        _cc_line("user", "u1", None, "2025-03-01T09:00:00.000Z",
                 {"role": "user", "content": "read a"}),
        _response("a1", "u1", "msg_same", "req_1", call, usage1),
        _cc_line("user", "r1", "a1", "2025-03-01T09:00:02.000Z",
                 {"role": "user", "content": result}),
        _response("a2", "r1", "msg_same", request2, {"type": "text", "text": "a says A"}, usage2),
    )  # fmt: skip


def test_two_responses_sharing_a_message_id_stay_two_messages_in_order(tmp_path: Path) -> None:
    second = {"input_tokens": 140, "output_tokens": 8}
    for case, request in (("other-request", "req_2"), ("no-request-id", None)):
        src = tmp_path / case / f"{SESSION}.jsonl"
        text = _reused_id(request, second)
        if request is None:  # a proxy that gives no request ids: the usage tells them apart
            text = text.replace(', "requestId": "req_1"', "")
        report = import_finished("claude-code", src, text, tmp_path / case)
        items = fold.messages(Path(report.sessions[0]))["messages"]
        assert [(i["type"], [p["type"] for p in i["message"]["parts"]]) for i in items] == [
            ("user/message", ["text"]),
            ("assistant/message", ["tool_call"]),
            ("tool/result", ["tool_call_response"]),
            ("assistant/message", ["text"]),
        ], case
        usages = [e.data.get("usage") for e in jsonltape.read(Path(report.sessions[0]))
                  if e.type == "assistant/message"]  # fmt: skip
        assert usages == [{"input_tokens": 100, "output_tokens": 20}, second], case


def test_lines_of_one_streamed_response_around_its_tool_result_stay_one_message(
    tmp_path: Path,
) -> None:
    """Claude Code 2.x writes a tool's result while the response still streams: the same
    request id (or, when the provider gives none, the same input usage) proves the later line
    is the same response, whose usage is then counted once."""
    same = {"input_tokens": 100, "output_tokens": 20}
    for case, request in (("request-id", "req_1"), ("no-request-id", None)):
        text = _reused_id(request, same)
        if request is None:
            text = text.replace(', "requestId": "req_1"', "")
        report = import_finished(
            "claude-code", tmp_path / case / f"{SESSION}.jsonl", text, tmp_path / case
        )
        path = Path(report.sessions[0])
        items = fold.messages(path)["messages"]
        assert [(i["type"], [p["type"] for p in i["message"]["parts"]]) for i in items] == [
            ("user/message", ["text"]),
            ("assistant/message", ["tool_call", "text"]),
            ("tool/result", ["tool_call_response"]),
        ], case
        usages = [e.data["usage"] for e in jsonltape.read(path) if e.type == "assistant/message"]
        assert usages == [same], case


def test_a_session_an_earlier_mapping_wrote_is_not_appended_to(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """These fixes map the same lines to other events: a replay over a session the earlier
    mapping (version 1) wrote would mix both, so the import refuses it."""
    from jsonltape.interop import _base, _engine, _sink

    src = tmp_path / "src" / f"{SESSION}.jsonl"
    for module in (_engine, _sink):  # the engine's markers, the sessions' headers
        monkeypatch.setattr(module, "MAPPER_VERSION", 1)
    import_finished("claude-code", src, _old_claude_session(2025), tmp_path / "root")
    for module in (_engine, _sink):
        monkeypatch.setattr(module, "MAPPER_VERSION", _base.MAPPER_VERSION)
    src.write_text(_old_claude_session(2025) + _claude({"type": "summary", "summary": "more"}))
    os.utime(src, (HOUR_AGO, HOUR_AGO))
    report = import_file("claude-code", src, tmp_path / "root")
    assert report.status == "error"
    assert "imported by importer version 1; this is version 2" in str(report.error)
