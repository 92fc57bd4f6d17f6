"""Gemini CLI legacy whole-file chats (``session-*.json``, issue 13): read as their records.

Before its JSONL recordings, Gemini CLI's ``ChatRecordingService`` kept one
``ConversationRecord`` per session, ``{sessionId, projectHash, startTime, lastUpdated,
messages, summary?, directories?, kind?}``, rewritten whole with ``JSON.stringify(record,
null, 2)`` on every change; ``session-2026-03-02T10-00-5d2e8f1a.json`` is the conversation of
the JSONL fixture ``session-2026-03-02T10-00-4f1c2b9e.jsonl`` saved that way (each message as
its last record, the ``$set`` s folded in). The file is imported as the records it holds, its
last message and the metadata that every save rewrites held back until it is settled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.fold._valid import check_anthropic, check_openai
from jsonltape.interop import discover, import_file, import_paths
from jsonltape.interop.foreign import scan_file

from ._importers import kept_whole

FIXTURES = Path(__file__).parent / "fixtures" / "gemini"
LEGACY = FIXTURES / "legacy" / "session-2026-03-02T10-00-5d2e8f1a.json"
JSONL = FIXTURES / "session-2026-03-02T10-00-4f1c2b9e.jsonl"


def _age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


def _copy(src: Path, tmp: Path, *, finished: bool = True) -> Path:
    dst = tmp / "chats" / src.name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    if finished:
        _age(dst, 7200)
    return dst


def _bodies(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return fold.messages(path, format="openai"), fold.messages(path, format="anthropic")


def test_a_legacy_chat_folds_to_the_same_request_as_its_jsonl_recording(tmp_path: Path) -> None:
    legacy = import_file("gemini-cli", _copy(LEGACY, tmp_path / "a"), tmp_path / "ra")
    jsonl = import_file("gemini-cli", _copy(JSONL, tmp_path / "b"), tmp_path / "rb")
    assert legacy.status == "imported" and jsonl.status == "imported", legacy.error
    assert legacy.held is None and legacy.problems == [] and legacy.unknown == {}
    a, b = Path(legacy.sessions[0]), Path(jsonl.sessions[0])
    assert _bodies(a) == _bodies(b)
    openai, anthropic = _bodies(a)
    assert check_openai(openai) == [] and check_anthropic(anthropic) == []
    head = jsonltape.reader.header(a)
    assert head.id == "gemini-cli-session-2026-03-02T10-00-5d2e8f1a"
    assert head.title == jsonltape.reader.header(b).title
    assert head.meta["import"]["name"] == LEGACY.name
    assert jsonltape.verify(a).state == "clean"


def test_every_message_of_the_file_is_kept_verbatim_as_json(tmp_path: Path) -> None:
    report = import_file("gemini-cli", _copy(LEGACY, tmp_path), tmp_path / "root")
    raws = []
    for line in jsonltape.reader.lines(report.sessions[0]):
        info = line.event.data.get("import") if isinstance(line.event.data, dict) else None
        if isinstance(info, dict):
            raws.extend(t for _n, t in kept_whole(info.get("raw")))
    record = json.loads(LEGACY.read_text(encoding="utf-8"))
    kept = [json.loads(r) for r in raws]
    for message in record["messages"]:
        assert kept.count(message) == 1, message["id"]
    assert {"$set": {"lastUpdated": record["lastUpdated"], "summary": record["summary"]}} in kept


def test_a_chat_still_being_saved_holds_its_last_message_until_settled(tmp_path: Path) -> None:
    src = _copy(LEGACY, tmp_path, finished=False)
    root = tmp_path / "root"
    live = import_file("gemini-cli", src, root)
    assert live.status == "imported" and live.held is not None and live.held.line == 8
    openai, _ = _bodies(Path(live.sessions[0]))
    settled_body, _ = _bodies(
        Path(
            import_file("gemini-cli", _copy(LEGACY, tmp_path / "s"), tmp_path / "s-root").sessions[
                0
            ]
        )
    )
    assert len(openai["messages"]) < len(settled_body["messages"])
    again = import_file("gemini-cli", src, root)
    assert again.status == "unchanged" and again.events == 0 and again.held == live.held
    _age(src, 7200)
    settled = import_file("gemini-cli", src, root)
    assert settled.status == "imported" and settled.events > 0 and settled.held is None
    fresh = import_file("gemini-cli", _copy(LEGACY, tmp_path / "f"), tmp_path / "fresh")
    assert _bodies(Path(settled.sessions[0])) == _bodies(Path(fresh.sessions[0]))
    assert import_file("gemini-cli", src, root).events == 0


def test_a_chat_rewritten_with_a_new_message_adds_only_the_new_events(tmp_path: Path) -> None:
    record = json.loads(LEGACY.read_text(encoding="utf-8"))
    src = tmp_path / "chats" / LEGACY.name
    src.parent.mkdir(parents=True)
    first = dict(record, messages=record["messages"][:3])
    src.write_text(json.dumps(first, indent=2))
    root = tmp_path / "root"
    one = import_file("gemini-cli", src, root)
    assert one.status == "imported" and one.held is not None
    src.write_text(json.dumps(record, indent=2))  # saved whole again, four messages more
    _age(src, 7200)
    two = import_file("gemini-cli", src, root)
    assert two.status == "imported" and two.events > 0
    fresh = import_file("gemini-cli", _copy(LEGACY, tmp_path / "f"), tmp_path / "fresh")
    assert _bodies(Path(two.sessions[0])) == _bodies(Path(fresh.sessions[0]))


def test_a_legacy_chat_beside_its_migrated_recording_is_skipped(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    chats.mkdir()
    shutil.copyfile(LEGACY, chats / LEGACY.name)
    shutil.copyfile(JSONL, chats / (LEGACY.name + "l"))
    items, skipped = discover("gemini-cli", [tmp_path])
    assert items == [chats / (LEGACY.name + "l")]
    assert [(p.name, "migrated" in why) for p, why in skipped] == [(LEGACY.name, True)]


@pytest.mark.parametrize(
    "text",
    ["{not json", '["a list"]', '{"sessionId": "x", "messages": 3}', '{"messages": []}'],
)
def test_a_broken_legacy_chat_is_one_clear_error_and_writes_nothing(
    tmp_path: Path, text: str
) -> None:
    src = tmp_path / "chats" / "session-2026-01-01T00-00-deadbeef.json"
    src.parent.mkdir()
    src.write_text(text)
    root = tmp_path / "root"
    report = import_file("gemini-cli", src, root, settle=0)
    assert report.status == "error" and report.error is not None
    assert str(src) in report.error and "Gemini CLI chat" in report.error
    assert not any(root.rglob("*.jsonl"))
    cli = subprocess.run(
        [sys.executable, "-m", "jsonltape", "import", "--from", "gemini-cli", str(src),
         "--root", str(root)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1


def test_the_read_only_scan_of_a_legacy_chat_gives_the_imported_events(tmp_path: Path) -> None:
    src = _copy(LEGACY, tmp_path)
    report = next(import_paths("gemini-cli", [src], tmp_path / "root", settle=0))
    written = [line.event for line in jsonltape.reader.lines(report.sessions[0])]
    scan = scan_file("gemini-cli", src)
    scanned = [e for _sid, e in scan.events()]
    assert report.held is None and scan.report.held is None  # finished, nothing held
    strip = {"session/flush", "import/sync"}
    kept = [(e.type, e.data) for e in written[1:] if e.type not in strip]
    assert kept[-1][0] == "turn/end"  # the import, settled, ended the last turn; a scan never
    assert [(e.type, e.data) for e in scanned[1:]] == kept[:-1]
    assert scanned[0].data["title"] == written[0].data["title"]


def test_the_index_skips_a_legacy_chat_beside_its_migrated_recording(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    chats.mkdir()
    shutil.copyfile(LEGACY, chats / LEGACY.name)
    shutil.copyfile(JSONL, chats / (LEGACY.name + "l"))
    shutil.copyfile(JSONL.with_name(JSONL.name), chats / JSONL.name)  # another session
    empty = tmp_path / "empty"
    empty.mkdir()
    index = tmp_path / "index.db"
    env = {**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")}
    run = [sys.executable, "-m", "jsonltape"]
    done = subprocess.run(
        [*run, "sync", str(empty), "--index", str(index), "--source", f"gemini-cli:{chats}"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [*run, "sessions", "--index", str(index), "--json"], capture_output=True, text=True,
        env=env,
    )  # fmt: skip
    paths = sorted(Path(json.loads(x)["path"]).name for x in listed.stdout.splitlines())
    assert paths == sorted([LEGACY.name + "l", JSONL.name])
