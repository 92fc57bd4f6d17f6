"""Claude Code transcripts as Claude Code 2.1.2xx writes them (Claude Code is not open source:
the structure is the one public captures and type packages document, written here by hand).

What these files have that our older fixtures do not: ``atis-latch`` and ``last-prompt``
lines (``{type, sessionId, ...}``, no uuid); ``attachment`` lines inside the uuid chain (the
next assistant line's ``parentUuid`` is an attachment); parallel tool calls whose result lines
each name the call's own assistant line as parent (not the leaf); ``system/stop_hook_summary``;
and ``system/microcompact_boundary`` ``{microcompactMetadata: {trigger, preTokens, tokensSaved,
compactedToolIds}}``, after which Claude Code sends ``[Old tool result content cleared]`` in
place of those tool results.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.interop import import_file

from .helpers import openai_surface

SID = "30499b10-0000-4546-a431-c77d14d042e1"
BASE = {
    "userType": "external",
    "entrypoint": "cli",
    "cwd": "/p",
    "sessionId": SID,
    "version": "2.1.258",
    "gitBranch": "main",
    "isSidechain": False,
}


class Transcript:
    """Claude Code lines, written the way 2.1.2xx chains them."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.k = 0

    def add(self, value: dict[str, Any]) -> None:
        if "uuid" in value:
            self.k += 1
            value = {
                **value,
                **BASE,
                "timestamp": f"2026-09-12T09:{self.k // 60:02d}:{self.k % 60:02d}.000Z",
            }
        self.lines.append(value)

    def user(self, uuid: str, parent: str | None, content: Any) -> None:
        message = {"role": "user", "content": content}
        self.add({"parentUuid": parent, "type": "user", "message": message, "uuid": uuid})

    def assistant(self, uuid: str, parent: str, mid: str, block: dict[str, Any]) -> None:
        message = {
            "model": "claude-haiku-4-5",
            "id": mid,
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 2},
        }
        self.add(
            {
                "parentUuid": parent,
                "type": "assistant",
                "message": message,
                "uuid": uuid,
                "requestId": f"req_{mid}",
            }
        )

    def result(self, uuid: str, parent: str, call: str, text: str, error: bool = False) -> None:
        block = {"tool_use_id": call, "type": "tool_result", "content": text, "is_error": error}
        self.user(uuid, parent, [block])

    def attachment(self, uuid: str, parent: str) -> None:
        attachment = {"type": "total_tokens_reminder", "text": "tokens used"}
        self.add(
            {"parentUuid": parent, "type": "attachment", "attachment": attachment, "uuid": uuid}
        )

    def write(self, tmp: Path) -> tuple[Path, Any]:
        src = tmp / "src" / f"{SID}.jsonl"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text("".join(json.dumps(v) + "\n" for v in self.lines))
        past = time.time() - 7200
        os.utime(src, (past, past))
        report = import_file("claude-code", src, tmp / "root")
        assert report.status == "imported", report.error
        return Path(report.sessions[0]), report


def _tool(call: str, command: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call,
        "name": "Bash",
        "input": {"command": command},
        "caller": {"type": "direct"},
    }


def _parallel_turn(t: Transcript) -> None:
    t.add(
        {
            "type": "queue-operation",
            "operation": "enqueue",
            "sessionId": SID,
            "content": "go",
            "timestamp": "2026-09-12T09:00:00.000Z",
        }
    )
    t.user("u1", None, "go")
    t.attachment("at1", "u1")
    t.add({"type": "atis-latch", "atis": "", "sessionId": SID})
    t.add({"type": "last-prompt", "lastPrompt": "go", "leafUuid": "at1", "sessionId": SID})
    t.assistant("a1", "at1", "msg_1", {"type": "thinking", "thinking": "plan", "signature": "s"})
    t.assistant("a2", "a1", "msg_1", {"type": "text", "text": "Starting."})
    t.assistant("a3", "a2", "msg_1", _tool("T1", "echo ok"))
    t.assistant("a4", "a3", "msg_1", _tool("T2", "exit 7"))
    t.result("r1", "a3", "T1", "ok")  # each result names its own call's line
    t.result("r2", "a4", "T2", "Exit code 7", error=True)
    t.attachment("at2", "r2")
    t.assistant("a5", "at2", "msg_2", {"type": "text", "text": "Done."})
    t.add(
        {
            "parentUuid": "a5",
            "type": "system",
            "subtype": "stop_hook_summary",
            "hookCount": 1,
            "level": "suggestion",
            "uuid": "s1",
        }
    )


_surface = openai_surface


def test_a_2_1_transcript_maps_cleanly_with_its_new_line_types_known(tmp_path: Path) -> None:
    t = Transcript()
    _parallel_turn(t)
    t.user("u2", "s1", "again")
    t.assistant("a6", "u2", "msg_3", {"type": "text", "text": "Again."})
    path, report = t.write(tmp_path)
    assert report.problems == [] and report.unknown == {}
    assert _surface(path) == [
        ("user", "go"),
        ("assistant", "Starting."),
        ("tool", "ok"),
        ("tool", "Exit code 7"),
        ("assistant", "Done."),
        ("user", "again"),
        ("assistant", "Again."),
    ]
    events = list(jsonltape.read(path))
    assert not [e for e in events if e.type == "surface/retract"]
    ends = [e.data["reason"] for e in events if e.type == "turn/end"]
    assert ends == ["completed", "completed"]


def test_a_microcompaction_clears_the_named_tool_results_on_the_surface(tmp_path: Path) -> None:
    t = Transcript()
    _parallel_turn(t)
    meta = {
        "trigger": "auto",
        "preTokens": 50000,
        "tokensSaved": 21000,
        "compactedToolIds": ["T1", "T_unknown"],
    }
    t.add(
        {
            "parentUuid": "s1",
            "type": "system",
            "subtype": "microcompact_boundary",
            "content": "Context microcompacted",
            "microcompactMetadata": meta,
            "uuid": "mc1",
        }
    )
    t.user("u2", "mc1", "again")
    t.assistant("a6", "u2", "msg_3", {"type": "text", "text": "Again."})
    path, report = t.write(tmp_path)
    assert report.problems == [] and report.unknown == {}
    surface = _surface(path)
    assert surface[2:4] == [("tool", "[Old tool result content cleared]"), ("tool", "Exit code 7")]
    assert surface[-2:] == [("user", "again"), ("assistant", "Again.")]
    cleared = [e for e in jsonltape.read(path) if e.data.get("cleared") == "microcompact"]
    assert [e.data["call_id"] for e in cleared] == ["T1"]
    items = fold.messages(path)["messages"]
    assert sum(1 for i in items if i["message"]["role"] == "tool") == 2  # replaced, not added
    again = import_file("claude-code", tmp_path / "src" / f"{SID}.jsonl", tmp_path / "root")
    assert again.status == "unchanged"


def test_a_microcompaction_without_its_tool_ids_is_a_problem_naming_its_line(
    tmp_path: Path,
) -> None:
    t = Transcript()
    _parallel_turn(t)
    t.add(
        {
            "parentUuid": "s1",
            "type": "system",
            "subtype": "microcompact_boundary",
            "microcompactMetadata": {"trigger": "auto"},
            "uuid": "mc1",
        }
    )
    path, report = t.write(tmp_path)
    assert [(n, "compactedToolIds" in why) for n, why in report.problems] == [(len(t.lines), True)]
    assert ("tool", "ok") in _surface(path)
