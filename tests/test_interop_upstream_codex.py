"""Codex rollouts as current Codex writes them (openai/codex codex-rs): record kinds our older
fixtures do not have.

Hand-written from the upstream types: ``RolloutLine`` ``{timestamp, type, payload}``;
``EventMsg::ThreadRolledBack`` ``{"type": "thread_rolled_back", "num_turns"}``, which Codex
applies when it rebuilds the history it resumes (``drop_last_n_user_turns``: the last N user
turns leave the model's context); ``ResponseItem::ToolSearchCall`` ``{call_id, status?,
execution, arguments}`` and ``ToolSearchOutput`` ``{call_id, status, execution, tools}``;
``ResponseItem::ImageGenerationCall`` ``{id, status, revised_prompt?, result}``;
``ResponseItem::GhostSnapshot`` ``{ghost_commit}`` (protocol/src/models.rs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.interop import import_file

from .helpers import import_finished, import_line_by_line

T0 = "2026-11-20T10:00:{:02d}.000Z"


def _line(k: int, type_: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": T0.format(k), "type": type_, "payload": payload})


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _answer(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text}]
    return {"type": "message", "role": "assistant", "content": content}


def _turn(text: str, reply: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("event_msg", {"type": "task_started", "turn_id": text}),
        ("response_item", _user(text)),
        ("response_item", _answer(reply)),
        ("event_msg", {"type": "task_complete", "turn_id": text}),
    ]


def _head() -> list[tuple[str, dict[str, Any]]]:
    meta = {
        "id": "0199aaaa-0000-7000-8000-000000000001",
        "timestamp": T0.format(0),
        "cwd": "/w",
        "originator": "codex_cli_rs",
        "cli_version": "0.160.0",
        "model_provider": "openai",
    }
    env = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
    return [("session_meta", meta), ("response_item", _user(env))]


def _import(tmp: Path, records: list[tuple[str, dict[str, Any]]]) -> tuple[Path, Any]:
    src = tmp / "src" / "rollout-2026-11-20T10-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"
    text = "".join(_line(k, t, p) + "\n" for k, (t, p) in enumerate(records))
    report = import_finished("codex", src, text, tmp / "root")
    return Path(report.sessions[0]), report


def _texts(path: Path) -> list[tuple[str, str]]:
    """(role, text) of each message on the surface."""
    out = []
    for item in fold.messages(path)["messages"]:
        m = item["message"]
        text = "".join(p.get("content", "") for p in m["parts"] if p.get("type") == "text")
        out.append((m["role"], text))
    return out


def test_thread_rolled_back_drops_the_last_turns_from_the_surface(tmp_path: Path) -> None:
    records = _head() + _turn("one", "1") + _turn("two", "2") + _turn("three", "3")
    records.append(("event_msg", {"type": "thread_rolled_back", "num_turns": 2}))
    records += _turn("four", "4")
    path, report = _import(tmp_path, records)
    assert report.problems == [] and report.unknown == {}
    texts = [t for _, t in _texts(path)]
    assert texts[1:] == ["one", "1", "four", "4"]  # after the injected environment context
    retracts = [e for e in jsonltape.read(path) if e.type == "surface/retract"]
    assert [e.data["reason"] for e in retracts] == ["rollback"]


def test_a_rollback_of_more_turns_than_exist_keeps_only_injected_context(
    tmp_path: Path,
) -> None:
    records = _head() + _turn("one", "1")
    records.append(("event_msg", {"type": "thread_rolled_back", "num_turns": 5}))
    path, _ = _import(tmp_path, records)
    assert [r for r, _ in _texts(path)] == ["user"]  # the environment context only


def test_a_rollback_without_a_turn_count_is_a_problem_naming_its_line(tmp_path: Path) -> None:
    records = _head() + _turn("one", "1")
    records.append(("event_msg", {"type": "thread_rolled_back", "num_turns": "all"}))
    path, report = _import(tmp_path, records)
    assert [(n, "num_turns" in why) for n, why in report.problems] == [(len(records), True)]
    assert [t for _, t in _texts(path)][1:] == ["one", "1"]


def test_tool_search_call_and_output_pair_as_a_tool_call_and_its_result(tmp_path: Path) -> None:
    tools = [{"type": "function", "name": "calendar_create", "description": "..."}]
    records = _head() + [
        ("event_msg", {"type": "task_started", "turn_id": "t"}),
        ("response_item", _user("book a meeting")),
        (
            "response_item",
            {
                "type": "tool_search_call",
                "call_id": "ts-1",
                "status": "completed",
                "execution": "client",
                "arguments": {"query": "calendar", "limit": 1},
            },
        ),
        (
            "response_item",
            {
                "type": "tool_search_output",
                "call_id": "ts-1",
                "status": "completed",
                "execution": "client",
                "tools": tools,
            },
        ),
        ("response_item", _answer("done")),
        ("event_msg", {"type": "task_complete", "turn_id": "t"}),
    ]
    path, report = _import(tmp_path, records)
    assert report.unknown == {}
    events = list(jsonltape.read(path))
    calls = [e.data for e in events if e.type == "tool/call"]
    assert [(c["call_id"], c["name"], c["arguments"]) for c in calls] == [
        ("ts-1", "tool_search", {"query": "calendar", "limit": 1})
    ]
    results = [e.data for e in events if e.type == "tool/result"]
    assert [r["message"]["parts"][0]["response"] for r in results] == [tools]
    assert not any(r.get("synthetic") for r in results)  # answered, not closed as interrupted
    roles = [item["message"]["role"] for item in fold.messages(path)["messages"]]
    assert roles == ["user", "user", "assistant", "tool", "assistant"]


def test_image_generation_call_stays_in_the_response_and_ghost_snapshots_are_known(
    tmp_path: Path,
) -> None:
    image = {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "revised_prompt": "a cat",
        "result": "iVBORw0KGgo=",
    }
    records = _head() + [
        ("event_msg", {"type": "task_started", "turn_id": "t"}),
        ("response_item", _user("draw a cat")),
        ("response_item", image),
        ("response_item", _answer("here it is")),
        ("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
        ("event_msg", {"type": "task_complete", "turn_id": "t"}),
    ]
    path, report = _import(tmp_path, records)
    assert report.unknown == {}
    items = fold.messages(path)["messages"]
    reply = items[-1]["message"]
    assert reply["role"] == "assistant"
    assert [p["type"] for p in reply["parts"]] == ["image_generation_call", "text"]
    assert reply["parts"][0]["result"] == "iVBORw0KGgo="


def test_a_rolled_back_rollout_imported_at_each_line_folds_like_one_import(
    tmp_path: Path,
) -> None:
    records = _head() + _turn("one", "1") + _turn("two", "2")
    records.append(("event_msg", {"type": "thread_rolled_back", "num_turns": 1}))
    records += _turn("three", "3")
    whole, _ = _import(tmp_path / "whole", records)
    lines = [_line(k, t, p) + "\n" for k, (t, p) in enumerate(records)]
    src = (
        tmp_path / "grow" / "rollout-2026-11-20T10-00-00-0199aaaa-0000-7000-8000-000000000001.jsonl"
    )
    path = import_line_by_line("codex", src, lines, tmp_path / "grow-root")
    assert _texts(path) == _texts(whole)
    assert import_file("codex", src, tmp_path / "grow-root").status == "unchanged"
