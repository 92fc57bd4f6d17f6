"""Codex 0.135–0.154 rollouts: per-response usage, content-item tool outputs, failed commands
and titles without ``event_msg user_message`` (issue 13, defects 2, 3, 6 and 8).

The fixtures in tests/fixtures/codex15/ are built from the rollout format: ``RolloutLine``
``{timestamp, type, payload}`` (../shared/research/peers.md §2); ``token_usage_record`` payloads
``{response_id, thread_id, turn_id, usage, turn_token_usage, thread_token_usage}`` one per model
response, with the ``token_count`` event after the tool output; ``FunctionCallOutputContentItem``
lists and ``function_call_output_content_items_to_text`` (openai/codex
codex-rs/protocol/src/models.rs); the injected-message markers of
codex-rs/protocol/src/instruction_markers.rs; Codex's exec output headers (``Exit code: N`` for
shell tools, ``Process exited with code N`` for unified exec, ``metadata.exit_code`` in the
older JSON output) and the ``exec_command_end`` event.
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
from jsonltape.interop import import_file
from jsonltape.interop.export import export

FIXTURES = Path(__file__).parent / "fixtures" / "codex15"
RECORDS = "rollout-0154.jsonl"  # token_usage_record before each output, token_count after
AFTER = "rollout-usage-after-output.jsonl"  # no records: token_count only after the output


def imported(name: str, tmp: Path) -> Path:
    src = tmp / "src" / name
    src.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(FIXTURES / name, src)
    finished = time.time() - 7200
    os.utime(src, (finished, finished))
    report = import_file("codex", src, tmp / "root")
    assert report.status == "imported", report.error
    return Path(report.sessions[0])


def payloads(name: str, type_: str, sub: str | None = None) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in (FIXTURES / name).read_text(encoding="utf-8").splitlines()]
    return [
        v["payload"]
        for v in lines
        if v["type"] == type_ and (sub is None or v["payload"].get("type") == sub)
    ]


def current_assistant_usage(path: Path) -> list[Any]:
    """The usage of each assistant message on the surface (the fold's items name their seq)."""
    data = {e.seq: e.data for e in jsonltape.read(path)}
    items = fold.messages(path)["messages"]
    return [data[i["seq"]].get("usage") for i in items if i["message"]["role"] == "assistant"]


def results(path: Path) -> dict[str, dict[str, Any]]:
    return {e.data["call_id"]: e.data for e in jsonltape.read(path) if e.type == "tool/result"}


def test_token_usage_records_give_each_response_its_usage_once(tmp_path: Path) -> None:
    path = imported(RECORDS, tmp_path)
    records = [p["usage"] for p in payloads(RECORDS, "token_usage_record")]
    messages = [e for e in jsonltape.read(path) if e.type == "assistant/message"]
    assert [e.data.get("usage") for e in messages] == records  # one message each, no revision
    assert current_assistant_usage(path) == records
    raw = [e.data["kind"] for e in jsonltape.read(path) if e.type == "import/raw"]
    assert "token_usage_record" not in raw  # each record is carried by its message
    assert raw.count("event_msg/token_count") == len(payloads(RECORDS, "event_msg", "token_count"))


def test_usage_after_the_tool_output_reaches_the_response_it_belongs_to(tmp_path: Path) -> None:
    path = imported(AFTER, tmp_path)
    counts = [p["info"] for p in payloads(AFTER, "event_msg", "token_count")]
    distinct = [c["last_token_usage"] for k, c in enumerate(counts) if k == 0 or c != counts[k - 1]]
    assert current_assistant_usage(path) == distinct  # the repeat is not counted twice
    raw = [e.data["kind"] for e in jsonltape.read(path) if e.type == "import/raw"]
    assert raw.count("event_msg/token_count") == 1  # the repeat
    assert fold.messages(path, format="openai")["messages"][-1]["content"] == "One: 0041_users.sql."


def test_content_item_output_is_its_text_in_bodies_and_html(tmp_path: Path) -> None:
    path = imported(RECORDS, tmp_path)
    (source,) = [p for p in payloads(RECORDS, "response_item") if p.get("call_id") == "call_js1"
                 and p["type"] == "custom_tool_call_output"]  # fmt: skip
    text = "Script completed\nWall time 0.2 seconds\nOutput:\n\n12:    total = 0"
    text += "  # Exit code: 1 is not this tool's status"  # blank items dropped, as Codex does
    data = results(path)["call_js1"]
    assert data["message"]["parts"][0]["response"] == text
    assert data["output"] == source["output"]  # the structured original stays in the event
    openai = fold.messages(path, format="openai")["messages"]
    assert [m["content"] for m in openai if m.get("tool_call_id") == "call_js1"] == [text]
    blocks = [
        b
        for m in fold.messages(path, format="anthropic")["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("tool_use_id") == "call_js1"
    ]
    assert [b["content"] for b in blocks] == [text]
    html = export(path, "html").text
    assert "input_text" not in html and "Script completed" in html


def test_nonzero_exit_code_marks_the_result_as_an_error(tmp_path: Path) -> None:
    failed = {}
    for name in (RECORDS, AFTER):
        for call, data in results(imported(name, tmp_path / name)).items():
            failed[call] = data["message"]["parts"][0].get("is_error") is True
    assert failed == {
        "call_sh1": True,  # "Exit code: 2" header of a shell tool
        "call_js1": False,  # "Exit code: 1" inside the output is not the status
        "call_ex1": False,  # "Process exited with code 0", exec_command_end exit_code 0
        "call_a": True,  # {"metadata": {"exit_code": 2}}
        "call_b": False,
    }
    path = imported(RECORDS, tmp_path / "again")
    blocks = [
        b
        for m in fold.messages(path, format="anthropic")["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert [b.get("is_error") is True for b in blocks] == [True, False, False]


def test_title_is_the_first_prompt_after_the_injected_messages(tmp_path: Path) -> None:
    assert not payloads(RECORDS, "event_msg", "user_message")  # 0.154 writes none
    assert jsonltape.header(imported(RECORDS, tmp_path / "a")).title == (
        "Why does the checkout test fail?"
    )
    assert jsonltape.header(imported(AFTER, tmp_path / "b")).title == "list the migrations"
