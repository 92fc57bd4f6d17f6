"""pi sessions as the current pi coding agent writes them (badlogic/pi-mono at 83378aad,
packages/coding-agent/src/core/session-manager.ts and messages.ts).

Hand-written from the upstream types: v3 entries ``{type, id, parentId, timestamp}``; pi's
context is the path from the leaf (the last entry) to the root (``buildSessionContext``), so
an entry of any type appended after a ``/tree`` move (a ``model_change``, a
``thinking_level_change``) already leaves the abandoned branch; ``bashExecution`` messages
reach the model as ``bashExecutionToText`` writes them (``Ran `cmd` ``, the output fenced,
the exit code, cancellation and truncation notes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonltape

from .helpers import import_finished, openai_surface

TS = "2026-11-20T10:00:00.000Z"


def _header() -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
        "timestamp": TS,
        "cwd": "/w",
    }


def _msg(eid: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": TS, "message": message}


def _user(eid: str, parent: str | None, text: str) -> dict[str, Any]:
    return _msg(eid, parent, {"role": "user", "content": text, "timestamp": 1})


def _reply(eid: str, parent: str, text: str) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "anthropic",
        "model": "claude-x",
        "stopReason": "stop",
        "usage": {"input": 1, "output": 1},
        "timestamp": 2,
    }
    return _msg(eid, parent, message)


def _import(tmp: Path, entries: list[dict[str, Any]]) -> Path:
    src = tmp / "src" / "2026-11-20T10-00-00-000Z_0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0.jsonl"
    text = "".join(json.dumps(e) + "\n" for e in entries)
    report = import_finished("pi", src, text, tmp / "root")
    assert report.problems == [] and report.unknown == {}
    return Path(report.sessions[0])


_surface = openai_surface


def test_a_model_change_after_a_tree_move_leaves_the_abandoned_branch(tmp_path: Path) -> None:
    entries = [
        _header(),
        _user("a1", None, "first"),
        _reply("a2", "a1", "one"),
        _user("b1", "a2", "abandoned"),
        _reply("b2", "b1", "lost"),
        # /tree back to a2, then a model switch before the next prompt
        {
            "type": "model_change",
            "id": "m1",
            "parentId": "a2",
            "timestamp": TS,
            "provider": "openai",
            "modelId": "gpt-x",
        },
        _user("c1", "m1", "second"),
        _reply("c2", "c1", "two"),
    ]
    path = _import(tmp_path, entries)
    assert _surface(path) == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
        ("assistant", "two"),
    ]


def test_a_bash_execution_reaches_the_model_as_pi_writes_it(tmp_path: Path) -> None:
    bash = {
        "role": "bashExecution",
        "command": "make test",
        "output": "FAIL x\n",
        "exitCode": 2,
        "cancelled": False,
        "truncated": True,
        "fullOutputPath": "/tmp/pi-bash-1.log",
        "timestamp": 3,
    }
    quiet = {
        "role": "bashExecution",
        "command": "sleep 9",
        "output": "",
        "exitCode": None,
        "cancelled": True,
        "truncated": False,
        "timestamp": 4,
    }
    entries = [
        _header(),
        _user("a1", None, "hi"),
        _reply("a2", "a1", "hello"),
        _msg("x1", "a2", bash),
        _msg("x2", "x1", quiet),
    ]
    path = _import(tmp_path, entries)
    texts = [content for role, content in _surface(path) if role == "user"][1:]
    assert texts == [
        "Ran `make test`\n```\nFAIL x\n\n```\n\nCommand exited with code 2"
        "\n\n[Output truncated. Full output: /tmp/pi-bash-1.log]",
        "Ran `sleep 9`\n(no output)\n\n(command cancelled)",
    ]


def test_a_branch_summary_reaches_the_model_framed_as_pi_sends_it(tmp_path: Path) -> None:
    entries = [
        _header(),
        _user("a1", None, "first"),
        _reply("a2", "a1", "one"),
        _user("b1", "a2", "abandoned"),
        _reply("b2", "b1", "lost"),
        {
            "type": "branch_summary",
            "id": "s1",
            "parentId": "a2",
            "timestamp": TS,
            "fromId": "b2",
            "summary": "Tried a French translation.",
        },
        {
            "type": "branch_summary",
            "id": "s2",
            "parentId": "s1",
            "timestamp": TS,
            "fromId": "s1",
            "summary": "",
        },  # an empty summary: pi sends nothing
        _user("c1", "s2", "second"),
    ]
    path = _import(tmp_path, entries)
    assert _surface(path) == [
        ("user", "first"),
        ("assistant", "one"),
        (
            "user",
            "The following is a summary of a branch that this conversation came back "
            "from:\n\n<summary>\nTried a French translation.</summary>",
        ),
        ("user", "second"),
    ]


def test_a_compaction_summary_reaches_the_model_framed_as_pi_sends_it(tmp_path: Path) -> None:
    entries = [
        _header(),
        _user("a1", None, "first"),
        _reply("a2", "a1", "one"),
        _user("b1", "a2", "second"),
        _reply("b2", "b1", "two"),
        {
            "type": "compaction",
            "id": "k1",
            "parentId": "b2",
            "timestamp": TS,
            "summary": "The user asked twice.",
            "firstKeptEntryId": "b1",
            "tokensBefore": 1200,
        },
        _user("c1", "k1", "third"),
    ]
    path = _import(tmp_path, entries)
    surface = _surface(path)
    assert surface[0][0] == "user"
    first = surface[0][1]
    framed = (
        "The conversation history before this point was compacted into the following "
        "summary:\n\n<summary>\nThe user asked twice.\n</summary>"
    )
    # the summary as pi's convertToLlm sends it (the file ledger, if any, follows)
    assert (first if isinstance(first, str) else first[0]["text"]).startswith(framed), first
    assert surface[1:] == [("user", "second"), ("assistant", "two"), ("user", "third")]
    summaries = [e.data["summary"] for e in jsonltape.read(path) if e.type == "compaction/summary"]
    assert summaries == ["The user asked twice."]  # the summary event keeps pi's own text
