"""Gemini CLI chat recordings (issue 13): import, re-import, growth, rewind, valid bodies.

The fixtures in tests/fixtures/gemini/ follow what Gemini CLI's ``ChatRecordingService``
appends (google-gemini/gemini-cli packages/core/src/services/chatRecordingService.ts and
chatRecordingTypes.ts): the metadata line ``{sessionId, projectHash, startTime, lastUpdated}``;
``MessageRecord`` s appended again, whole, each time they change (``recordMessage``, then
``recordMessageTokens`` adding ``tokens``, then ``recordToolCalls`` adding ``toolCalls``, first
``scheduled``/``executing`` and then with ``status`` and the ``functionResponse`` ``result``);
a tool call that opens a new ``gemini`` message because thoughts were queued;
``{"$set": {lastUpdated | summary}}`` after each message; an ``info`` message; and
``{"$rewindTo": id}``, which drops the messages from that id on (``loadConversationRecord``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.fold._valid import check_anthropic, check_openai
from jsonltape.interop import import_file
from jsonltape.interop.foreign import scan_file

from ._importers import kept_whole

FIXTURES = Path(__file__).parent / "fixtures" / "gemini"
TOOLS = "session-2026-03-02T10-00-4f1c2b9e.jsonl"  # thoughts, tokens, a good and a failed call
REWIND = "session-2026-03-03T09-00-7e3a9c21.jsonl"  # a $rewindTo and a new branch


def _finished(src: Path) -> None:
    t = time.time() - 7200
    os.utime(src, (t, t))


def _import(src: Path, root: Path) -> Path:
    report = import_file("gemini-cli", src, root)
    assert report.status in ("imported", "unchanged"), report.error
    assert report.problems == [] and report.unknown == {}
    return Path(report.sessions[0])


def imported(name: str, tmp: Path) -> Path:
    src = tmp / "src" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / name, src)
    _finished(src)
    return _import(src, tmp / "root")


def source_lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").splitlines()


def body_messages(path: Path) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = fold.messages(path, format="openai")["messages"]
    return msgs


def test_prompts_replies_thoughts_and_tool_calls_map_to_messages(tmp_path: Path) -> None:
    path = imported(TOOLS, tmp_path)
    msgs = body_messages(path)
    assert [m["role"] for m in msgs] == [
        "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant",
    ]  # fmt: skip
    assert msgs[1]["content"] == "I'll read the file."
    assert msgs[1]["tool_calls"][0]["function"]["name"] == "read_file"
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {
        "absolute_path": "/home/u/proj/notes.txt"
    }
    assert msgs[2] == {
        "role": "tool",
        "tool_call_id": "read_file-1772445607000-a1b2c3",
        "content": "hello from notes\n",
    }
    assert msgs[6]["content"] == "Command exited with code 1"
    events = list(jsonltape.read(path))
    assistants = [e.data for e in events if e.type == "assistant/message"]
    assert assistants[0]["message"]["parts"][0] == {
        "type": "reasoning",
        "content": "Reading the file\n\nI should read notes.txt first.",
    }
    assert assistants[0]["model"] == "gemini-2.5-pro"
    assert assistants[0]["usage"] == {
        "input_tokens": 1200,
        "output_tokens": 25,
        "cache_read_input_tokens": 0,
        "reasoning_tokens": 40,
        "tool_use_prompt_tokens": 0,
        "total_tokens": 1265,
    }
    assert assistants[2]["model"] == "gemini-2.5-flash"
    results = [e.data for e in events if e.type == "tool/result"]
    assert [r["message"]["parts"][0].get("is_error") for r in results] == [None, True]
    assert [r["status"] for r in results] == ["success", "error"]
    header = fold.request_header(path)
    assert header is not None and header["model"] == "gemini-2.5-flash"
    start = events[0].data
    assert start["title"] == "What does notes.txt say?"  # the header: fixed at the first prompt
    assert fold.title(path) == "Read notes and run tests"  # the $set summary, later
    assert start["agent"] == "gemini-cli"


def test_bodies_pass_the_openai_and_anthropic_checks(tmp_path: Path) -> None:
    for name in (TOOLS, REWIND):
        path = imported(name, tmp_path / name)
        assert check_openai(fold.messages(path, format="openai")) == []
        assert check_anthropic(fold.messages(path, format="anthropic")) == []


def test_every_source_line_is_kept_verbatim_exactly_once(tmp_path: Path) -> None:
    for name in (TOOLS, REWIND):
        path = imported(name, tmp_path / name)
        raw: dict[int, list[str]] = {}
        for e in jsonltape.read(path):
            for n, text in kept_whole((e.data.get("import") or {}).get("raw")):
                raw.setdefault(n, []).append(text)
        lines = source_lines(name)
        assert raw == {i + 1: [line] for i, line in enumerate(lines)}


def test_reimport_adds_nothing(tmp_path: Path) -> None:
    path = imported(TOOLS, tmp_path)
    before = path.read_bytes()
    report = import_file("gemini-cli", tmp_path / "src" / TOOLS, tmp_path / "root")
    assert report.status == "unchanged" and report.events == 0
    assert path.read_bytes() == before


def test_a_growing_recording_imported_at_each_line_folds_like_one_import(
    tmp_path: Path,
) -> None:
    """Gemini CLI appends a message again when it changes: imported after every line (the
    message revised in place, results added), the history is the one of a single import."""
    for name in (TOOLS, REWIND):
        whole = body_messages(imported(name, tmp_path / "whole" / name))
        lines = source_lines(name)
        src = tmp_path / "grow" / name
        src.parent.mkdir(parents=True, exist_ok=True)
        root = tmp_path / "grow-root" / name
        path = None
        for i in range(1, len(lines) + 1):
            src.write_text("".join(x + "\n" for x in lines[:i]), encoding="utf-8")
            report = import_file("gemini-cli", src, root, settle=None)
            assert report.status in ("imported", "unchanged"), report.error
            path = Path(report.sessions[0])
            assert check_openai(fold.messages(path, format="openai")) == []
            assert check_anthropic(fold.messages(path, format="anthropic")) == []
        _finished(src)
        assert path is not None
        assert _import(src, root) == path
        assert body_messages(path) == whole


def test_rewind_retracts_the_messages_from_the_named_one_on(tmp_path: Path) -> None:
    msgs = body_messages(imported(REWIND, tmp_path))
    assert [(m["role"], m["content"]) for m in msgs] == [
        ("user", "Write a poem."),
        ("assistant", "Roses are red."),
        ("user", "Make it about the sea."),
        ("assistant", "The sea is wide."),
    ]


def test_read_only_scan_sees_the_same_messages(tmp_path: Path) -> None:
    types = [e.type for _, e in scan_file("gemini-cli", FIXTURES / TOOLS).events()]
    assert types.count("assistant/message") == 4
    assert types.count("tool/result") == 2


def test_other_agents_files_are_refused_with_the_right_source(tmp_path: Path) -> None:
    src = tmp_path / "rollout.jsonl"
    src.write_text(json.dumps({"timestamp": "t", "type": "x", "payload": {}}) + "\n")
    report = import_file("gemini-cli", src, tmp_path / "root")
    assert report.status == "error" and report.error is not None
    assert "--from codex" in report.error
