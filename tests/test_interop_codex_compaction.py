"""A Codex compaction with ``replacement_history``: the folded history after it is the items
Codex itself continues from (issue 32, fidelity defect 1).

Rollouts hand-written from openai/codex codex-rs:

* ``RolloutItem::Compacted(CompactedItem {message, replacement_history})``; remote compaction
  writes ``message: ""`` and the history the compact endpoint returned
  (core/src/compact_remote.rs @ 001cb8e233f250c7086c791c51390286c087faea), which Codex resumes
  with as the whole conversation: ``history.replace(replacement_history)`` in
  ``reconstruct_history_from_rollout`` (core/src/codex/rollout_reconstruction.rs @
  023cedaa25c056edf87e8be2c04190c84c67f966);
* the items are ``ResponseItem`` s (protocol/src/models.rs @ 001cb8e2): ``Message {role,
  content: [InputText | InputImage | OutputText]}`` with role ``user``, ``assistant`` or
  ``developer``, and ``Compaction {encrypted_content}`` (alias ``compaction_summary``), the
  encrypted summary only the Responses API reads. A real remote compaction of a Codex desktop
  0.104 session holds 40 such items: user and assistant (``phase: final_answer``) messages,
  user messages with an ``input_image``, three developer messages and the ``compaction`` item
  last (madshn/localpush @ 219b5397, its src-tauri/tests/fixtures/codex/2026-02-23 rollout
  019c8a59, line 1788; the shapes below follow it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.fold._valid import check_anthropic, check_kept, check_openai

from .helpers import import_finished, import_line_by_line

T0 = "2026-11-20T10:{:02d}:{:02d}.000Z"
NAME = "rollout-2026-11-20T10-00-00-0199bbbb-0000-7000-8000-000000000002.jsonl"
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5E"
    "rkJggg=="
)
ENV = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"


def _line(k: int, type_: str, payload: dict[str, Any]) -> str:
    stamp = T0.format(k // 60, k % 60)
    return json.dumps({"timestamp": stamp, "type": type_, "payload": payload})


def _msg(role: str, *content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": list(content), **extra}


def _in(text: str) -> dict[str, Any]:
    return {"type": "input_text", "text": text}


def _out(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text}


def _head() -> list[tuple[str, dict[str, Any]]]:
    meta = {
        "id": "0199bbbb-0000-7000-8000-000000000002",
        "timestamp": T0.format(0, 0),
        "cwd": "/w",
        "originator": "Codex Desktop",
        "cli_version": "0.104.0",
        "model_provider": "openai",
        "base_instructions": {"text": "You are Codex."},
    }
    return [
        ("session_meta", meta),
        ("response_item", _msg("developer", _in("<permissions instructions>"))),
        ("response_item", _msg("user", _in(ENV))),
    ]


def _turn(prompt: str, answer: str, call: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        ("event_msg", {"type": "task_started", "turn_id": prompt}),
        ("turn_context", {"model": "gpt-5.3-codex", "effort": "high"}),
        ("response_item", _msg("user", _in(prompt))),
    ]
    if call is not None:
        args = json.dumps({"cmd": "ls"})
        out.append(
            ("response_item", {"type": "function_call", "name": "exec_command",
                               "arguments": args, "call_id": call})
        )  # fmt: skip
        output = {"type": "function_call_output", "call_id": call, "output": "a.txt"}
        out.append(("response_item", output))
    out.append(("response_item", _msg("assistant", _out(answer), phase="final_answer")))
    out.append(("event_msg", {"type": "task_complete", "turn_id": prompt}))
    return out


REPLACEMENT = [
    _msg("user", _in("list the files")),
    _msg("assistant", _out("a.txt"), phase="final_answer"),
    _msg("user", _in("what is in this picture?"), {"type": "input_image",
                                                   "image_url": f"data:image/png;base64,{PNG}"}),
    _msg("assistant", _out("A single pixel."), phase="final_answer"),
    _msg("developer", _in("<collaboration_mode>default</collaboration_mode>")),
    _msg("user", _in(ENV)),
    {"type": "compaction", "encrypted_content": "gAAAAABp-encrypted-summary"},
]  # fmt: skip


def _compacted(history: list[dict[str, Any]] | None, message: str = "") -> tuple[str, Any]:
    payload: dict[str, Any] = {"message": message}
    if history is not None:
        payload["replacement_history"] = history
    return ("compacted", payload)


def _import(tmp: Path, records: list[tuple[str, dict[str, Any]]]) -> Path:
    text = "".join(_line(k, t, p) + "\n" for k, (t, p) in enumerate(records))
    report = import_finished("codex", tmp / "src" / NAME, text, tmp / "root")
    assert report.problems == [], report.problems
    return Path(report.sessions[0])


def _shown(path: Path) -> list[tuple[str, str, list[str]]]:
    """(role, text, part types) of each message on the surface."""
    out = []
    for item in fold.messages(path)["messages"]:
        m = item["message"]
        text = "".join(p.get("content", "") for p in m["parts"] if p["type"] == "text")
        out.append((m["role"], text, [p["type"] for p in m["parts"]]))
    return out


def _valid(path: Path) -> None:
    items = fold.messages(path)["messages"]
    openai = fold.messages(path, format="openai")
    anthropic = fold.messages(path, format="anthropic")
    assert check_openai(openai) + check_kept(items, openai) == []
    assert check_anthropic(anthropic) + check_kept(items, anthropic) == []


def _records() -> list[tuple[str, dict[str, Any]]]:
    return [
        *_head(),
        *_turn("list the files", "a.txt", call="call_ls"),
        *_turn("what is in this picture?", "A single pixel."),
        ("event_msg", {"type": "task_started", "turn_id": "compact"}),
        _compacted(REPLACEMENT),
        ("event_msg", {"type": "context_compacted"}),
        ("event_msg", {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 9000}, "last_token_usage": {"input_tokens": 9000}
        }}),
        ("event_msg", {"type": "task_complete", "turn_id": "compact"}),
        *_turn("and now?", "Still one pixel."),
    ]  # fmt: skip


def test_the_history_after_a_remote_compaction_is_the_items_codex_resumes_with(
    tmp_path: Path,
) -> None:
    path = _import(tmp_path, _records())
    image = {"type": "blob", "content": PNG, "mime_type": "image/png", "modality": "image"}
    assert _shown(path) == [
        ("user", "list the files", ["text"]),
        ("assistant", "a.txt", ["text"]),
        ("user", "what is in this picture?", ["text", "blob"]),
        ("assistant", "A single pixel.", ["text"]),
        ("system", "<collaboration_mode>default</collaboration_mode>", ["text"]),
        ("user", ENV, ["text"]),
        ("assistant", "", ["compaction"]),
        ("user", "and now?", ["text"]),
        ("assistant", "Still one pixel.", ["text"]),
    ]
    items = fold.messages(path)["messages"]
    assert items[2]["message"]["parts"][1] == image
    assert items[6]["message"]["parts"][0] == REPLACEMENT[-1]  # the encrypted item, whole
    _valid(path)
    # the OpenAI body sends what Codex sends: the developer message as a system message, the
    # image, and the answers as assistant messages (the encrypted item has nothing to send)
    openai = fold.messages(path, format="openai")["messages"]
    assert [m["role"] for m in openai] == [
        "system", "user", "assistant", "user", "assistant", "system", "user", "user", "assistant",
    ]  # fmt: skip


def test_a_replacement_history_is_a_compaction_of_everything_before_it(tmp_path: Path) -> None:
    path = _import(tmp_path, _records())
    events = list(jsonltape.read(path))
    start = next(e for e in events if e.type == "compaction/start")
    summary = next(e for e in events if e.type == "compaction/summary")
    end = next(e for e in events if e.type == "compaction/end")
    first = next(e for e in events if e.seq == end.data["message"])
    assert first.data["message"]["id"].endswith(".0") and first.type == "user/message"
    assert first.surface.start == start.data["start"] and summary.seq in first.sources
    # every earlier message is compacted, not lost: its event stays, with that status
    versions = fold.messages(path, all_versions=True)["messages"]
    before = [v for v in versions if v["seq"] < start.seq]
    assert before and {v["status"] for v in before} == {"compacted"}
    # the ledger of the replaced calls is kept on the record, not added to Codex's messages
    assert summary.data["count"] == len(before)
    assert all(len(i["message"]["parts"]) <= 2 for i in fold.messages(path)["messages"])


def test_codexs_reasoning_effort_reaches_the_openai_body_only(tmp_path: Path) -> None:
    """``reasoning_effort`` is a Chat Completions member, not a Messages one (issue 32, defect
    3): the Anthropic API refuses a request that has it."""
    path = _import(tmp_path, _records())
    assert fold.messages(path)["header"]["params"] == {"reasoning_effort": "high"}
    assert fold.messages(path, format="openai")["reasoning_effort"] == "high"
    assert "reasoning_effort" not in fold.messages(path, format="anthropic")


def test_usage_after_a_compaction_is_not_given_to_the_replacement_items(tmp_path: Path) -> None:
    path = _import(tmp_path, _records())
    replaced = [
        e
        for e in jsonltape.read(path)
        if e.type == "assistant/message" and "." in e.data["message"]["id"]
    ]
    assert replaced and all("usage" not in e.data for e in replaced)


def test_a_local_compaction_summary_stays_the_last_item_not_an_extra_message(
    tmp_path: Path,
) -> None:
    summary = "Another language model started to solve this problem...\nCreated a.txt"
    history = [_msg("user", _in("list the files")), _msg("user", _in(summary))]
    records = [*_head(), *_turn("list the files", "a.txt"), _compacted(history, summary)]
    path = _import(tmp_path, records)
    assert [(r, t) for r, t, _ in _shown(path)] == [("user", "list the files"), ("user", summary)]
    record = next(e for e in jsonltape.read(path) if e.type == "compaction/summary")
    assert record.data["summary"] == summary


def test_an_empty_replacement_history_leaves_an_empty_history(tmp_path: Path) -> None:
    records = [*_head(), *_turn("list the files", "a.txt"), _compacted([])]
    records += _turn("again", "b")
    path = _import(tmp_path, records)
    assert [(r, t) for r, t, _ in _shown(path)] == [("user", "again"), ("assistant", "b")]
    end = next(e for e in jsonltape.read(path) if e.type == "compaction/end")
    assert end.data["error"]["code"] == "EMPTY_SUMMARY"


def test_a_rollback_after_a_compaction_drops_turns_of_the_replacement_history(
    tmp_path: Path,
) -> None:
    records = [*_head(), *_turn("list the files", "a.txt"), _compacted(REPLACEMENT)]
    records.append(("event_msg", {"type": "thread_rolled_back", "num_turns": 1}))
    path = _import(tmp_path, records)
    # Codex's drop_last_n_user_turns on the replaced history: from its last prompt on
    assert [(r, t) for r, t, _ in _shown(path)] == [
        ("user", "list the files"),
        ("assistant", "a.txt"),
    ]


def test_a_rollout_compacted_midway_imported_at_each_line_folds_like_one_import(
    tmp_path: Path,
) -> None:
    records = _records()
    whole = _import(tmp_path / "whole", records)
    lines = [_line(k, t, p) + "\n" for k, (t, p) in enumerate(records)]
    path = import_line_by_line("codex", tmp_path / "grow" / NAME, lines, tmp_path / "grow-root")
    assert _shown(path) == _shown(whole)
    _valid(path)
