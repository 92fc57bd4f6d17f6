"""The OpenAI Agents SDK seam: ``JsonltapeSession`` against the SDK's own ``SQLiteSession``.

Real SDK objects throughout: items the SDK's ``Runner`` produces, ``SQLiteSession`` as the
reference for limit, pop, clear and concurrency, and a ``Model`` subclass returning canned
``ModelResponse`` objects (no network, tracing disabled per run).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Content, Summary

import jsonltape
from jsonltape.adapters.openai_agents import JsonltapeSession

ROOT = Path(__file__).resolve().parents[1]
NO_TRACING = RunConfig(tracing_disabled=True)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def dumps(items: Any) -> str:
    return json.dumps(items, ensure_ascii=False)


# -- a fake model and the items the Runner makes -----------------------------------------------


class CannedModel(Model):
    """Returns the next canned output per call and records every input it was sent."""

    def __init__(self, outputs: list[list[Any]]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[Any] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.outputs.pop(0), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def reply(mid: str, text: str) -> ResponseOutputMessage:
    content = [ResponseOutputText(text=text, type="output_text", annotations=[])]
    return ResponseOutputMessage(
        id=mid, role="assistant", status="completed", type="message", content=content
    )


def script() -> list[list[Any]]:
    """Turn 1: reasoning and two parallel tool calls, then a reply; turn 2: a reply."""
    reasoning = ResponseReasoningItem(
        id="rs_1",
        type="reasoning",
        summary=[Summary(text="two cities", type="summary_text")],
        content=[Content(text="look both up", type="reasoning_text")],
        encrypted_content="opaque==",
    )
    calls = [
        ResponseFunctionToolCall(
            id=f"fc_{i}",
            call_id=f"call_{i}",
            name="weather",
            arguments=json.dumps({"city": city}),
            type="function_call",
            status="completed",
        )
        for i, city in ((1, "Oslo"), (2, "Bergen"))
    ]
    refusal = ResponseOutputMessage(
        id="msg_r",
        role="assistant",
        status="completed",
        type="message",
        content=[ResponseOutputRefusal(refusal="not that", type="refusal")],
    )
    return [
        [reasoning, *calls],
        [refusal, reply("msg_1", "Sunny in both quokkafestival towns")],
        [reply("msg_2", "Bye")],
    ]


async def two_turns(session: Any) -> CannedModel:
    model = CannedModel(script())
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[weather])
    await Runner.run(agent, "Weather in Oslo and Bergen?", session=session, run_config=NO_TRACING)
    await Runner.run(agent, "Thanks!", session=session, run_config=NO_TRACING)
    return model


def every_kind() -> list[Any]:
    """Input items of every kind the SDK can store, plus one no SDK version has (yet)."""
    return [
        {"role": "user", "content": "plain text, ünïcode ✓"},
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": [{"type": "input_text", "text": "dev note"}]},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look:"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
                {"type": "input_image", "file_id": "file-img", "detail": "low"},
                {"type": "input_file", "file_id": "file-pdf"},
                {"type": "input_file", "file_url": "https://example.com/b.pdf"},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_9",
            "summary": [{"type": "summary_text", "text": "hm"}],
            "encrypted_content": "xyz",
        },
        {
            "type": "function_call",
            "id": "fc_9",
            "call_id": "c9",
            "name": "f",
            "arguments": '{"n": 1.5, "big": 9007199254740993}',
        },
        {"type": "function_call_output", "call_id": "c9", "output": "ok"},
        {
            "type": "function_call",
            "call_id": "c10",
            "name": "g",
            "arguments": "not json",
        },
        {
            "type": "function_call_output",
            "call_id": "c10",
            "output": [{"type": "input_text", "text": "list output"}],
        },
        {"type": "custom_tool_call", "call_id": "c11", "name": "patch", "input": "*** raw"},
        {"type": "custom_tool_call_output", "call_id": "c11", "output": "applied"},
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "c12",
            "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
            "pending_safety_checks": [],
            "status": "completed",
        },
        {
            "type": "computer_call_output",
            "call_id": "c12",
            "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"},
        },
        {
            "type": "message",
            "id": "msg_9",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "answer", "annotations": []},
                {"type": "refusal", "refusal": "no"},
            ],
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": None},
        {"type": "item_reference", "id": "msg_0"},
        {"type": "hologram_call", "id": "h1", "payload": {"depth": [1, [2, [3]]], "x": -0.5}},
        {"role": "user", "type": "future_prompt", "stuff": None},
    ]


# -- the contract ---------------------------------------------------------------------------


def test_every_item_kind_reads_back_byte_exact(tmp_path: Path) -> None:
    session = JsonltapeSession("kinds", root=tmp_path)
    items = every_kind()
    run(session.add_items(items))
    back = run(session.get_items())
    assert dumps(back) == dumps(items)  # the same values, keys in the same order
    again = run(JsonltapeSession("kinds", root=tmp_path).get_items())
    assert dumps(again) == dumps(items)


def test_items_map_to_core_events_keeping_the_items_in_data(tmp_path: Path) -> None:
    session = JsonltapeSession("map", root=tmp_path)
    items = every_kind()
    run(session.add_items(items))
    skip = ("session/start", "session/flush")
    events = [e for e in jsonltape.read(session.path) if e.type not in skip]
    kept = [e.data["openai_agents"]["items"] for e in events]
    assert [i for group in kept for i in group] == items
    # A response's consecutive model-side items share one assistant/message.
    assert [len(group) for group in kept] == [1, 1, 1, 1, 2] + [1] * 12
    got = [(e.type, e.data["message"]["role"], e.data["message"]["parts"]) for e in events]
    assert got[:3] == [
        ("user/message", "user", [{"type": "text", "content": "plain text, ünïcode ✓"}]),
        ("user/message", "system", [{"type": "text", "content": "be brief"}]),
        ("user/message", "system", [{"type": "text", "content": "dev note"}]),
    ]
    assert got[3][2] == [
        {"type": "text", "content": "look:"},
        {"type": "uri", "uri": "https://example.com/a.png", "modality": "image"},
        {"type": "file", "file_id": "file-img", "modality": "image"},
        {"type": "file", "file_id": "file-pdf"},
        {"type": "uri", "uri": "https://example.com/b.pdf"},
        {"type": "openai_agents.item", "item_type": "input_audio"},
    ]
    # Arguments beyond the format's integer range stay the raw string, as bad JSON does.
    assert got[4] == (
        "assistant/message",
        "assistant",
        [
            {"type": "reasoning", "content": "hm"},
            {"type": "tool_call", "id": "c9", "name": "f", "arguments": items[5]["arguments"]},
        ],
    )
    assert events[4].data["message"]["id"] == "rs_9"  # the first item id of the response
    assert (events[5].type, events[5].data["call_id"]) == ("tool/result", "c9")
    assert got[5][2] == [{"type": "tool_call_response", "id": "c9", "response": "ok"}]
    assert got[6][2][0]["arguments"] == "not json"
    assert got[7][2][0]["response"] == [{"type": "input_text", "text": "list output"}]
    assert got[8][2] == [
        {"type": "tool_call", "id": "c11", "name": "patch", "arguments": "*** raw"}
    ]
    assert got[10][2][0]["name"] == "computer" and events[11].type == "tool/result"
    assert got[12][2] == [{"type": "text", "content": "answer"}, {"type": "text", "content": "no"}]
    unmapped = [(t, r, p[0]["item_type"]) for t, r, p in got[13:]]
    assert unmapped == [
        ("assistant/message", "assistant", "web_search_call"),
        ("assistant/message", "assistant", "item_reference"),
        ("assistant/message", "assistant", "hologram_call"),
        ("user/message", "user", "future_prompt"),
    ]


def test_limit_returns_the_latest_items_in_order_as_sqlite_session_does(tmp_path: Path) -> None:
    ours = JsonltapeSession("limit", root=tmp_path)
    theirs = SQLiteSession("limit")
    items = every_kind()
    run(ours.add_items(items))
    run(theirs.add_items(items))
    for limit in (None, 0, 1, 3, 13, 14, len(items), 100, -1):  # 13: inside a response
        assert run(ours.get_items(limit)) == run(theirs.get_items(limit)), limit
    assert run(ours.get_items(2)) == items[-2:]
    configured = JsonltapeSession("limit", root=tmp_path, session_settings={"limit": 4})
    assert run(configured.get_items()) == items[-4:]
    assert run(configured.get_items(limit=1)) == items[-1:]


def test_pop_item_retracts_the_latest_item_like_sqlite_session(tmp_path: Path) -> None:
    """Parallel calls then their results: popping a result whose call stays is a retraction
    back to the call plus a restore of the nodes in between; the items are SQLite's."""
    ours = JsonltapeSession("pop", root=tmp_path)
    theirs = SQLiteSession("pop")
    items = [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "A"},
        {"type": "function_call_output", "call_id": "b", "output": "B"},
        {"type": "hologram_call", "id": "h"},
        {"role": "assistant", "content": "done"},
    ]
    run(ours.add_items(items))
    run(theirs.add_items(items))
    for _ in range(len(items) + 1):
        assert run(ours.pop_item()) == run(theirs.pop_item())
        assert run(ours.get_items()) == run(theirs.get_items())
        assert jsonltape.verify(ours.path).state == "clean"
    assert run(ours.pop_item()) is None
    events = list(jsonltape.read(ours.path))
    added = [e for e in events if "openai_agents" in e.data and e.sources is None]
    kept = [i for e in added for i in e.data["openai_agents"]["items"]]
    assert kept == items  # nothing was removed
    assert all(
        e.data["reason"] == "openai-agents:pop_item" for e in events if e.type == "surface/retract"
    )


def test_popping_every_kind_of_item_matches_sqlite_session(tmp_path: Path) -> None:
    ours = JsonltapeSession("pop-all", root=tmp_path)
    theirs = SQLiteSession("pop-all")
    run(ours.add_items(every_kind()))
    run(theirs.add_items(every_kind()))
    while (popped := run(theirs.pop_item())) is not None:
        assert dumps(run(ours.pop_item())) == dumps(popped)
        assert run(ours.get_items()) == run(theirs.get_items())
    assert run(ours.pop_item()) is None
    assert jsonltape.verify(ours.path).state == "clean"


def test_clear_session_retracts_everything_and_the_file_keeps_it(tmp_path: Path) -> None:
    session = JsonltapeSession("clear", root=tmp_path)
    run(session.add_items(every_kind()))
    run(session.clear_session())
    assert run(session.get_items()) == []
    versions = jsonltape.messages(session.path, all_versions=True)["messages"]
    assert len(versions) == 17 and {v["status"] for v in versions} == {"retracted"}
    run(session.add_items([{"role": "user", "content": "fresh start"}]))
    assert run(session.get_items()) == [{"role": "user", "content": "fresh start"}]


def test_a_session_without_a_file_is_empty_and_reading_or_clearing_creates_nothing(
    tmp_path: Path,
) -> None:
    session = JsonltapeSession("nothing", root=tmp_path / "root")
    assert run(session.get_items()) == []
    assert run(session.pop_item()) is None
    run(session.clear_session())
    run(session.add_items([]))
    assert not (tmp_path / "root").exists()


def test_files_are_owner_only_and_session_ids_are_validated(
    tmp_path: Path, permissive_umask: None
) -> None:
    session = JsonltapeSession("perm", root=tmp_path / "a" / "b")
    run(session.add_items([{"role": "user", "content": "x"}]))
    assert session.path == tmp_path / "a" / "b" / "perm.jsonl"
    assert session.path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o700
    for bad in ("../escape", "", "a/b", ".hidden"):
        with pytest.raises(jsonltape.InvalidSessionIdError):
            JsonltapeSession(bad, root=tmp_path)


def test_an_item_that_cannot_be_stored_is_refused_naming_it_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    session = JsonltapeSession("bad", root=tmp_path)
    run(session.add_items([{"role": "user", "content": "kept"}]))
    size = session.path.stat().st_size
    with pytest.raises(jsonltape.InvalidEventError) as info:
        run(session.add_items([{"role": "user", "content": "ok"}, {"x": float("nan")}]))
    assert info.value.batch_item == 1
    with pytest.raises(jsonltape.InvalidArgumentError) as info:
        run(session.add_items([{"role": "user", "content": "ok"}, "not an item"]))  # type: ignore[list-item]
    assert info.value.batch_item == 1
    assert session.path.stat().st_size == size
    assert run(session.get_items()) == [{"role": "user", "content": "kept"}]


REFUSED = {
    "nan": {"x": float("nan")},
    "unsafe-int": {"role": "user", "content": "x", "n": 2**60},
    "deeper-than-128": {"role": "user", "content": "x", "d": json.loads("[" * 200 + "]" * 200)},
    "lone-surrogate": {"role": "user", "content": "a\udc80b"},
}


@pytest.mark.parametrize("bad", REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_first_add_leaves_no_file_and_the_next_valid_add_creates_it(
    tmp_path: Path, bad: Any
) -> None:
    # The writer refuses these only once the session exists: the first add_items used to
    # leave a header-only session and its lock file behind.
    root = tmp_path / "root"
    session = JsonltapeSession("first", root=root)
    with pytest.raises(jsonltape.InvalidEventError) as info:
        run(session.add_items([{"role": "user", "content": "ok"}, bad]))
    assert info.value.batch_item == 1 and info.value.path == str(session.path)
    assert list(root.rglob("*")) == []  # no session, no lock file, no temporary file
    assert run(session.get_items()) == [] and run(session.pop_item()) is None
    run(session.add_items([{"role": "user", "content": "hello"}]))
    assert [p.name for p in root.rglob("*")] == ["first.jsonl"]
    header = jsonltape.header(session.path)
    assert header.id == "first" and str(header.agent).startswith("openai-agents/")
    assert run(session.get_items()) == [{"role": "user", "content": "hello"}]


def test_a_compaction_by_jsonltape_reads_back_as_an_sdk_item(tmp_path: Path) -> None:
    session = JsonltapeSession("compact", root=tmp_path)
    run(
        session.add_items(
            [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
        )
    )
    run(session.add_items([{"role": "user", "content": "q2"}]))
    seqs = [m["seq"] for m in jsonltape.messages(session.path)["messages"]]
    jsonltape.compact(session.path, "the user asked q1, got a1", through=seqs[1])
    back = run(session.get_items())
    assert back[0]["role"] == "user" and "q1, got a1" in back[0]["content"]
    assert back[1:] == [{"role": "user", "content": "q2"}]


# -- the Runner against a canned model ------------------------------------------------------


def test_runner_turns_send_the_model_what_they_send_with_sqlite_session(tmp_path: Path) -> None:
    ours = JsonltapeSession("runner", root=tmp_path)
    with_ours = run(two_turns(ours))
    theirs = SQLiteSession("runner")
    with_sqlite = run(two_turns(theirs))
    assert len(with_ours.inputs) == 3
    assert with_ours.inputs == with_sqlite.inputs  # every request, the next turn's included
    last = with_ours.inputs[-1]
    assert [i.get("type", "message") for i in last] == [
        "message",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    assert run(ours.get_items()) == last + [reply("msg_2", "Bye").model_dump(exclude_unset=True)]
    assert run(ours.get_items()) == run(theirs.get_items())
    # The fold's own reading: tool calls paired with their results by id.
    body = jsonltape.messages(ours.path, format="openai")["messages"]
    calls = [c["id"] for m in body for c in m.get("tool_calls", ())]
    results = [m["tool_call_id"] for m in body if m["role"] == "tool"]
    assert calls == results == ["call_1", "call_2"]


def test_the_file_verifies_is_found_by_search_and_exports_to_html(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    session = JsonltapeSession("search-me", root=root)
    run(two_turns(session))
    assert jsonltape.verify(session.path).state == "clean"
    index = tmp_path / "index.db"
    synced = cli("sync", str(root), "--index", str(index))
    assert synced.returncode == 0, synced.stderr
    found = cli("search", "quokkafestival", "--index", str(index), "--json")
    assert found.returncode == 0, found.stderr
    assert [json.loads(line)["session"] for line in found.stdout.splitlines()] == ["search-me"]
    out = tmp_path / "chat.html"
    exported = cli("export", "--format", "html", str(session.path), "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    page = out.read_text()
    assert "quokkafestival" in page and "weather" in page


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


# -- processes: restart, SIGKILL, concurrency -----------------------------------------------

WRITER = """
import asyncio, sys
from jsonltape.adapters.openai_agents import JsonltapeSession
session = JsonltapeSession(sys.argv[2], root=sys.argv[1])
tag, n = sys.argv[3], int(sys.argv[4])
async def main():
    for i in range(n):
        await session.add_items([
            {"role": "user", "content": f"{tag} q{i}"},
            {"type": "function_call", "call_id": f"{tag}-{i}", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"{tag}-{i}", "output": f"{tag} r{i}"},
        ])
        print(i, flush=True)
asyncio.run(main())
"""


def writer(root: Path, sid: str, tag: str, n: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), sid, tag, str(n)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def batches(items: list[Any]) -> list[tuple[str, int]]:
    """(tag, i) per batch of three; fails if any batch is not three items in a row."""
    out = []
    for k in range(0, len(items), 3):
        tag, q = items[k]["content"].split(" q")
        assert items[k + 1]["call_id"] == items[k + 2]["call_id"] == f"{tag}-{q}", items[k : k + 3]
        out.append((tag, int(q)))
    return out


def test_items_added_by_another_process_read_back_after_it_exits(tmp_path: Path) -> None:
    proc = writer(tmp_path, "restart", "p", 3)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    session = JsonltapeSession("restart", root=tmp_path)
    assert batches(run(session.get_items())) == [("p", 0), ("p", 1), ("p", 2)]
    run(session.add_items([{"role": "user", "content": "and on"}]))
    assert len(run(JsonltapeSession("restart", root=tmp_path).get_items())) == 10


def test_a_writer_sigkilled_between_add_items_keeps_every_acknowledged_batch(
    tmp_path: Path,
) -> None:
    proc = writer(tmp_path, "killed", "k", 100_000)
    assert proc.stdout is not None
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged == 20:
            break
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    session = JsonltapeSession("killed", root=tmp_path)
    items = run(session.get_items())
    # Whole items only; every acknowledged batch is there, in order.
    assert [t for t in batches(items[: len(items) // 3 * 3])][: acknowledged + 1] == [
        ("k", i) for i in range(acknowledged + 1)
    ]
    run(session.add_items([{"role": "user", "content": "after the crash"}]))
    assert run(session.get_items(1)) == [{"role": "user", "content": "after the crash"}]
    assert jsonltape.verify(session.path).state == "clean"


def test_two_processes_adding_at_once_wait_for_each_other_and_never_interleave(
    tmp_path: Path,
) -> None:
    procs = [writer(tmp_path, "shared", tag, 15) for tag in ("a", "b")]
    for p in procs:
        p.communicate(timeout=120)
    assert [p.returncode for p in procs] == [0, 0]
    got = batches(run(JsonltapeSession("shared", root=tmp_path).get_items()))
    for tag in ("a", "b"):
        assert [i for t, i in got if t == tag] == list(range(15))
    assert jsonltape.verify(tmp_path / "shared.jsonl").state == "clean"


def test_two_session_objects_in_one_process_serialize_like_sqlite_session(tmp_path: Path) -> None:
    async def both(make: Any) -> list[Any]:
        one, two = make(), make()

        async def add(session: Any, tag: str) -> None:
            for i in range(10):
                await session.add_items(
                    [
                        {"role": "user", "content": f"{tag} q{i}"},
                        {
                            "type": "function_call",
                            "call_id": f"{tag}-{i}",
                            "name": "f",
                            "arguments": "{}",
                        },
                        {"type": "function_call_output", "call_id": f"{tag}-{i}", "output": "r"},
                    ]
                )

        await asyncio.gather(add(one, "a"), add(two, "b"))
        return list(await one.get_items())

    db = tmp_path / "ref.db"
    ours = run(both(lambda: JsonltapeSession("same", root=tmp_path)))
    theirs = run(both(lambda: SQLiteSession("same", db)))
    assert sorted(batches(ours)) == sorted(batches(theirs))
    # And from threads, each with its own event loop.
    threads = [
        threading.Thread(
            target=lambda t=t: run(
                JsonltapeSession("threads", root=tmp_path).add_items(
                    [
                        {"role": "user", "content": f"{t} q0"},
                        {
                            "type": "function_call",
                            "call_id": f"{t}-0",
                            "name": "f",
                            "arguments": "{}",
                        },
                        {"type": "function_call_output", "call_id": f"{t}-0", "output": "r"},
                    ]
                )
            )
        )
        for t in "abcdef"
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = batches(run(JsonltapeSession("threads", root=tmp_path).get_items()))
    assert sorted(got) == [(t, 0) for t in "abcdef"]


def test_a_write_while_another_writer_holds_the_session_fails_clearly(tmp_path: Path) -> None:
    session = JsonltapeSession("held", root=tmp_path, lock_timeout=0.2)
    run(session.add_items([{"role": "user", "content": "before"}]))
    with jsonltape.open(session.path):
        with pytest.raises(jsonltape.LockedError):
            run(session.add_items([{"role": "user", "content": "during"}]))
        with pytest.raises(jsonltape.LockedError):
            run(session.pop_item())
        assert run(session.get_items()) == [{"role": "user", "content": "before"}]  # reads go on


def test_waiting_for_the_lock_never_blocks_the_event_loop_and_a_cancelled_add_completes(
    tmp_path: Path,
) -> None:
    """While another writer holds the session, add_items waits in a thread: the loop keeps
    ticking. Cancelled meanwhile, the add still completes before CancelledError (as
    SQLiteSession's mutations do), so what the caller cannot know about is never half done."""
    session = JsonltapeSession("loop", root=tmp_path, lock_timeout=30)
    item = {"role": "user", "content": "late but whole"}
    holder = jsonltape.open(session.path, create=True)

    async def main() -> int:
        task = asyncio.ensure_future(session.add_items([item]))
        ticks = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 0.3:
            await asyncio.sleep(0.01)
            ticks += 1
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # still waiting for the lock, not abandoned
        threading.Timer(0.1, holder.close).start()
        with pytest.raises(asyncio.CancelledError):
            await task
        return ticks

    assert run(main()) >= 10
    assert run(session.get_items()) == [item]


# -- the README example ----------------------------------------------------------------------


def test_readme_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = CannedModel([[reply("m1", "Hello!")], [reply("m2", "You said hi.")]])
    set_tracing_disabled(True)  # no trace export attempted (no network in tests)
    try:
        # --- README example (keep in sync with README "Use with your agent framework") ---
        import asyncio

        from agents import Agent, Runner

        from jsonltape.adapters.openai_agents import JsonltapeSession

        agent = Agent(name="assistant", model=model)  # model="gpt-5" in real life
        session = JsonltapeSession("support-42", root="sessions")  # sessions/support-42.jsonl

        async def chat() -> None:
            await Runner.run(agent, "hi", session=session)
            result = await Runner.run(agent, "what did I say?", session=session)
            print(result.final_output)

        asyncio.run(chat())
        # --- end ---
    finally:
        set_tracing_disabled(False)
    assert model.inputs[-1][0] == {"content": "hi", "role": "user"}
    body = jsonltape.messages(tmp_path / "sessions" / "support-42.jsonl")["messages"]
    assert [m["message"]["parts"][0]["content"] for m in body] == [
        "hi",
        "Hello!",
        "what did I say?",
        "You said hi.",
    ]


def test_importing_jsonltape_and_its_adapters_imports_no_framework() -> None:
    code = (
        "import sys, jsonltape, jsonltape.adapters, jsonltape.adapters._openai_agents_map\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('agents', 'openai')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
