"""OpenCode sessions against what current OpenCode sends the model (anomalyco/opencode
packages/opencode/src/session/message-v2.ts, ``toModelMessages``).

Hand-written storage trees (``storage/{project,session,message,part}``) from the upstream
types: an assistant message with an ``error`` is left out of the context unless it is a
``MessageAbortedError`` after some output (a part other than ``step-start``/``reasoning``); a
tool part in state ``error`` whose ``metadata`` has ``interrupted: true`` and an ``output``
text reaches the model as that output (``output-available``), not as an error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.interop import import_file
from jsonltape.interop._opencode_store import units

from .helpers import openai_surface

SID = "ses_5a1b2c3d4e5fZ9y8x7w6v5u4t3"
PRJ = "prj_9z8y7x"


def _write(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def _tree(
    tmp: Path,
    messages: list[tuple[dict[str, Any], list[dict[str, Any]]]],
    title: str | None = "t",
) -> Path:
    root = tmp / "storage"
    _write(root / "project" / f"{PRJ}.json", {"id": PRJ, "worktree": "/w", "time": {"created": 1}})
    session = {
        "id": SID,
        "version": "1.3.0",
        "projectID": PRJ,
        "directory": "/w",
        "title": title,
        "time": {"created": 1764460800000, "updated": 1764460900000},
    }
    if title is None:  # a session OpenCode has not titled: a prompt titles it
        del session["title"]
    _write(root / "session" / PRJ / f"{SID}.json", session)
    for k, (info, parts) in enumerate(messages):
        mid = f"msg_b{k:03d}"
        _write(
            root / "message" / SID / f"{mid}.json",
            {
                "id": mid,
                "sessionID": SID,
                **info,
                "time": {
                    "created": 1764460800000 + 1000 * k,
                    "completed": 1764460800500 + 1000 * k,
                },
            },
        )
        for j, part in enumerate(parts):
            pid = f"prt_b{k:03d}{j:02d}"
            _write(
                root / "part" / mid / f"{pid}.json",
                {"id": pid, "sessionID": SID, "messageID": mid, **part},
            )
    return root


def _user(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return {"role": "user", "agent": "build"}, [{"type": "text", "text": text}]


def _assistant(
    parts: list[dict[str, Any]], error: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    info: dict[str, Any] = {
        "role": "assistant",
        "parentID": "msg_b000",
        "modelID": "m",
        "providerID": "anthropic",
        "mode": "build",
        "agent": "build",
        "cost": 0,
        "tokens": {"input": 1, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    }
    if error is not None:
        info["error"] = error
    return info, [{"type": "step-start"}, *parts]


def _import(tmp: Path, tree: Path) -> Path:
    (u,) = units(tree)
    report = import_file("opencode", u, tmp / "root", settle=0)
    assert report.status == "imported", report.error
    assert report.problems == [] and report.unknown == {}
    (path,) = list((tmp / "root").rglob("*.jsonl"))
    return path


_surface = openai_surface


def test_an_errored_reply_is_left_out_of_the_context_and_ends_the_turn(tmp_path: Path) -> None:
    api_error = {"name": "APIError", "data": {"message": "overloaded", "isRetryable": True}}
    tree = _tree(
        tmp_path,
        [
            _user("hello"),
            _assistant([{"type": "text", "text": "partial answ"}], api_error),
            _user("again"),
            _assistant(
                [{"type": "reasoning", "text": "hm"}],
                {"name": "MessageAbortedError", "data": {"message": "aborted"}},
            ),
            _user("third"),
            _assistant(
                [{"type": "text", "text": "I was say"}],
                {"name": "MessageAbortedError", "data": {"message": "aborted"}},
            ),
        ],
    )
    path = _import(tmp_path, tree)
    assert _surface(path) == [
        ("user", "hello"),
        ("user", "again"),
        ("user", "third"),
        ("assistant", "I was say"),  # an abort after output is sent again
    ]
    ends = [e.data for e in jsonltape.read(path) if e.type == "turn/end"]
    assert [(e["reason"], e.get("error", {}).get("code")) for e in ends] == [
        ("error", "APIError"),
        ("aborted", "MessageAbortedError"),
        ("aborted", "MessageAbortedError"),
    ]


def test_an_interrupted_tool_with_output_reaches_the_model_as_its_output(tmp_path: Path) -> None:
    tool = {
        "type": "tool",
        "callID": "toolu_9",
        "tool": "bash",
        "state": {
            "status": "error",
            "input": {"command": "npm test"},
            "error": "Tool execution aborted",
            "metadata": {"interrupted": True, "output": "3 passed\n(interrupted)"},
            "time": {"start": 1, "end": 2},
        },
    }
    tree = _tree(tmp_path, [_user("run tests"), _assistant([tool])])
    path = _import(tmp_path, tree)
    results = [e.data for e in jsonltape.read(path) if e.type == "tool/result"]
    part = results[0]["message"]["parts"][0]
    assert part["response"] == "3 passed\n(interrupted)" and "is_error" not in part


def test_a_subtask_prompt_is_the_text_opencode_sends_and_names_nothing(tmp_path: Path) -> None:
    subtask = {
        "type": "subtask",
        "prompt": "review the diff",
        "description": "Review",
        "agent": "general",
    }
    task = {
        "type": "tool",
        "callID": "toolu_t",
        "tool": "task",
        "state": {
            "status": "completed",
            "input": {"prompt": "review the diff"},
            "output": "looks fine",
            "time": {"start": 1, "end": 2},
        },
    }
    tree = _tree(
        tmp_path,
        [({"role": "user", "agent": "build"}, [subtask]), _assistant([task]), _user("thanks")],
        title=None,
    )
    path = _import(tmp_path, tree)
    surface = _surface(path)
    assert surface[0] == ("user", "The following tool was executed by the user")
    assert [r for r, _ in surface] == ["user", "assistant", "tool", "user"]
    assert fold.title(path) == "thanks"
