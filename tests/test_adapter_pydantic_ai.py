"""jsonltape.adapters.pydantic_ai: a Pydantic AI agent's message history in a session.

Written from the framework's documented interface: a run's ``new_messages()`` go in, the next
run's ``message_history`` comes out, both as the library's ``ModelMessagesTypeAdapter`` has
them. The real framework runs the turns, against its own ``FunctionModel``/``TestModel`` (no
network); no part of it is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    CompactionPart,
    DocumentUrl,
    FilePart,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import jsonltape
from jsonltape.adapters.pydantic_ai import (
    EXT,
    append_messages,
    clear,
    load_messages,
    retract_last,
)

ROOT = Path(__file__).resolve().parent.parent


def dumped(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    return out


def same_as_library_round_trip(got: list[ModelMessage], sent: list[ModelMessage]) -> None:
    """``got`` is exactly what the library's own JSON round trip of ``sent`` gives (the
    library upgrades some objects on load, e.g. an image ``BinaryContent`` to ``BinaryImage``,
    so the objects are compared with that, and the JSON with the original)."""
    assert dumped(got) == dumped(sent)
    assert got == ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(sent))


def every_kind() -> list[ModelMessage]:
    """One message of every part kind a run produces, and some only providers produce."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("you are terse"),
                UserPromptPart(
                    [
                        "what is in these?",
                        ImageUrl(url="https://example.com/cat.png"),
                        BinaryContent(data=b"\x89PNG\r\n", media_type="image/png"),
                        DocumentUrl(url="https://example.com/spec.pdf"),
                        TextContent("and this"),
                        CachePoint(),
                    ]
                ),
            ],
            instructions="answer in one line",
        ),
        ModelResponse(
            parts=[
                ThinkingPart(content="look first", signature="sig-1", provider_name="anthropic"),
                TextPart("checking"),
                ToolCallPart("grep", '{"pattern": "cat"', tool_call_id="call-raw"),
                ToolCallPart("ls", {"dir": "."}, tool_call_id="call-obj"),
                NativeToolCallPart(
                    "web_search", {"q": "cat"}, tool_call_id="ws1", provider_name="openai"
                ),
                NativeToolReturnPart(
                    "web_search", {"hits": 1}, tool_call_id="ws1", provider_name="openai"
                ),
                FilePart(content=BinaryContent(data=b"GIF89a", media_type="image/gif")),
                CompactionPart(content=None, provider_name="openai", provider_details={"enc": "x"}),
            ],
            model_name="test-model",
            provider_response_id="resp-1",
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("grep", "invalid JSON", tool_call_id="call-raw", outcome="retried"),
                ToolReturnPart("ls", {"files": ["a.py", "b.py"]}, tool_call_id="call-obj"),
                ModelSettingsDeltaPart(settings={"thinking": "high"}),
                CompactionPart(content="summary so far"),
                UserPromptPart("go on"),
            ],
            instructions="answer in one line",
        ),
        # A request a cancelled run left empty; a run sets the instructions on every request.
        ModelRequest(parts=[], instructions="answer in one line", state="interrupted"),
    ]


# -- mapping and round trip -----------------------------------------------------------------


def test_every_part_kind_round_trips_exactly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sent = every_kind()
    append_messages(path, sent)
    same_as_library_round_trip(load_messages(path), sent)
    assert jsonltape.verify(path).state == "clean"


def test_parts_map_to_the_spec_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_messages(path, every_kind())
    events = [e for e in jsonltape.read(path) if e.type != "session/flush"]
    types = [e.type for e in events]
    assert types == [
        "session/start",
        "turn/start",
        "request/header",
        "user/message",  # system prompt
        "user/message",  # user prompt
        "assistant/message",
        "tool/call",
        "tool/call",
        "tool/result",
        "tool/result",
        "user/message",  # a settings change (unmapped, joins no message: its own)
        "user/message",  # the app's compaction summary
        "user/message",  # the prompt
        "user/message",  # the empty request
        "turn/end",
    ]
    msg = {i: e.data["message"] for i, e in enumerate(events) if "message" in e.data}
    assert msg[3]["role"] == "system" and msg[3]["parts"] == [
        {"type": "text", "content": "you are terse"}
    ]
    assert msg[4]["parts"][1] == {
        "type": "uri",
        "uri": "https://example.com/cat.png",
        "mime_type": "image/png",
        "modality": "image",
    }
    assert msg[4]["parts"][2]["type"] == "blob" and msg[4]["parts"][2]["modality"] == "image"
    assert msg[4]["parts"][3] == {
        "type": "uri",
        "uri": "https://example.com/spec.pdf",
        "mime_type": "application/pdf",
    }
    assert len(msg[4]["parts"]) == 5  # the cache point is a provider hint, not content
    reply = events[5].data
    assert reply["model"] == "test-model" and msg[5]["id"] == "resp-1"
    assert msg[5]["parts"][0] == {
        "type": "reasoning",
        "content": "look first",
        "signature": "sig-1",
    }
    assert msg[5]["parts"][2] == {
        "type": "tool_call",
        "id": "call-raw",
        "name": "grep",
        "arguments": '{"pattern": "cat"',  # not valid JSON: kept as the model's text
    }
    assert msg[5]["parts"][3]["arguments"] == {"dir": "."}
    assert [p["type"] for p in msg[5]["parts"][4:]] == [
        "x-pydantic-ai/builtin-tool-call",
        "x-pydantic-ai/builtin-tool-return",
        "blob",
        "x-pydantic-ai/compaction",
    ]
    assert [e.data["call_id"] for e in events[6:10]] == ["call-raw", "call-obj"] * 2
    assert msg[8]["parts"][0]["is_error"] is True and "is_error" not in msg[9]["parts"][0]
    assert msg[10]["parts"] == [{"type": "x-pydantic-ai/model-settings-delta"}]
    assert msg[11]["parts"] == [{"type": "text", "content": "summary so far"}]
    assert events[2].data == {"system": "answer in one line", "model": "test-model"}
    # Each event holds its own parts verbatim, with the message they belong to.
    assert events[8].data[EXT]["at"] == [0] and events[10].data[EXT]["at"] == [2]


def test_the_openai_request_body_folds_from_the_mapped_events(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_messages(path, every_kind())
    body = jsonltape.messages(path, format="openai")
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "system", "user", "assistant", "tool", "tool", "user", "user"]
    assert body["messages"][3]["tool_calls"][1]["id"] == "call-obj"


# -- driven by the framework's own runner ---------------------------------------------------


def scripted_model(seen: list[list[ModelMessage]]) -> FunctionModel:
    """A model that calls ``weather`` once (after thinking), retries a bad call, then answers;
    it records the messages of every request it gets."""

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns and returns[-1].outcome == "retried":
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": "Paris"}, tool_call_id="w2")]
            )
        if returns:
            return ModelResponse(parts=[TextPart(f"it is {returns[-1].content}")])
        return ModelResponse(
            parts=[
                ThinkingPart(content="I need the weather", signature="s"),
                ToolCallPart("weather", {"city": ""}, tool_call_id="w1"),
            ]
        )

    return FunctionModel(reply, model_name="scripted")


def weather_agent(seen: list[list[ModelMessage]]) -> Agent[None, str]:
    agent = Agent(scripted_model(seen), instructions="be brief", system_prompt="weather bot")

    @agent.tool_plain
    def weather(city: str) -> str:
        if not city:
            raise ModelRetry("city is required")
        return "sunny"

    return agent


def test_the_next_run_sees_the_same_messages_as_with_in_memory_history(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[list[ModelMessage]] = []
    agent = weather_agent(seen)
    first = agent.run_sync("weather in Paris?")
    append_messages(path, first.new_messages())
    kinds = {type(p).__name__ for m in first.new_messages() for p in m.parts}
    assert {"ThinkingPart", "ToolCallPart", "ToolReturnPart", "TextPart"} <= kinds
    assert any(
        isinstance(p, ToolReturnPart) and p.outcome == "retried"
        for m in first.new_messages()
        for p in m.parts
    )

    history = load_messages(path)
    same_as_library_round_trip(history, first.all_messages())

    seen.clear()
    ours = agent.run_sync("and tomorrow?", message_history=history)
    with_ours = seen[0]
    seen.clear()
    theirs = agent.run_sync("and tomorrow?", message_history=first.all_messages())
    with_theirs = seen[0]

    def stable(messages: list[ModelMessage]) -> list[dict[str, Any]]:
        # The new request of each run has its own timestamps and run id.
        out: list[dict[str, Any]] = json.loads(
            json.dumps(dumped(messages)), object_hook=_drop_volatile
        )
        return out

    assert stable(with_ours) == stable(with_theirs)
    assert dumped(with_ours[: len(history)]) == dumped(first.all_messages())
    append_messages(path, ours.new_messages())
    assert stable(load_messages(path)) == stable(theirs.all_messages())


#: What each run stamps anew: times, ids and (pydantic-ai-slim 2.78 on) a response's request
#: time and duration.
_VOLATILE = ("timestamp", "run_id", "conversation_id", "request_timestamp", "duration")


def _drop_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in _VOLATILE}


def test_a_test_model_run_with_tools_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    agent = Agent(TestModel(), system_prompt="be brief")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    result = agent.run_sync("add please")
    append_messages(path, result.new_messages())
    same_as_library_round_trip(load_messages(path), result.all_messages())
    again = agent.run_sync("again", message_history=load_messages(path))
    append_messages(path, again.new_messages())
    same_as_library_round_trip(load_messages(path), again.all_messages())


def test_messages_written_by_jsonltape_itself_load_as_model_messages(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user("list the files")
        tape.assistant(tool_calls=[{"id": "c1", "name": "ls", "arguments": {}}])
        tape.tool_result("c1", "a.py b.py")
        tape.assistant("a.py and b.py")
    history = load_messages(path)
    assert [type(m).__name__ for m in history] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    call = history[1].parts[0]
    ret = history[2].parts[0]
    assert isinstance(call, ToolCallPart) and call.tool_call_id == "c1"
    assert isinstance(ret, ToolReturnPart) and (ret.tool_name, ret.content) == ("ls", "a.py b.py")
    seen: list[list[ModelMessage]] = []
    weather_agent(seen).run_sync("thanks", message_history=history)
    assert isinstance(seen[0][3].parts[0], TextPart)  # the framework took the history as it is


# -- retract_last / clear -------------------------------------------------------------------


def test_retract_last_takes_the_last_run_off_and_returns_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    seen: list[list[ModelMessage]] = []
    agent = weather_agent(seen)
    first = agent.run_sync("weather in Paris?")
    append_messages(path, first.new_messages())
    second = agent.run_sync("and Rome?", message_history=load_messages(path))
    append_messages(path, second.new_messages())
    lines_before = sum(1 for _ in jsonltape.read(path))

    taken = retract_last(path)
    same_as_library_round_trip(taken, second.new_messages())
    same_as_library_round_trip(load_messages(path), first.all_messages())
    assert sum(1 for _ in jsonltape.read(path)) > lines_before  # appended, nothing removed
    assert retract_last(path) and load_messages(path) == []
    assert retract_last(path) == []  # nothing appended is left


def test_clear_retracts_everything_and_keeps_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_messages(path, every_kind())
    size = path.stat().st_size
    clear(path)
    assert load_messages(path) == []
    assert path.stat().st_size > size
    retracts = [e for e in jsonltape.read(path) if e.type == "surface/retract"]
    assert [e.data["reason"] for e in retracts] == ["pydantic_ai:clear"]
    clear(path)  # an empty history stays empty, nothing is written
    assert sum(1 for e in jsonltape.read(path) if e.type == "surface/retract") == 1
    assert jsonltape.verify(path).state == "clean"
    fresh = every_kind()[:2]
    append_messages(path, fresh)
    same_as_library_round_trip(load_messages(path), fresh)


def test_a_retracted_part_of_a_request_is_left_out_of_its_message(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    request = ModelRequest(parts=[SystemPromptPart("old rules"), UserPromptPart("hi")])
    reply = ModelResponse(parts=[TextPart("hello")])
    append_messages(path, [request, reply])
    system = next(e for e in jsonltape.read(path) if e.type == "user/message")
    assert system.data["message"]["role"] == "system"
    jsonltape.retract(path, system.seq)
    expected: list[ModelMessage] = [
        ModelRequest(parts=[request.parts[1]], timestamp=request.timestamp),
        reply,
    ]
    assert dumped(load_messages(path)) == dumped(expected)


# -- missing, reopen, crash, concurrency ----------------------------------------------------


def test_a_missing_session_is_an_error_unless_missing_ok(tmp_path: Path) -> None:
    with pytest.raises(jsonltape.SessionNotFoundError):
        load_messages(tmp_path / "none.jsonl")
    assert load_messages(tmp_path / "none.jsonl", missing_ok=True) == []


def test_files_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "d" / "s.jsonl"
    path.parent.mkdir(mode=0o700)
    append_messages(path, every_kind()[:1], title="owner only", session_id="pa-1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert jsonltape.header(path).id == "pa-1"
    with pytest.raises(jsonltape.InvalidSessionIdError):
        append_messages(tmp_path / "d" / "t.jsonl", every_kind()[:1], session_id="../x")


REFUSED = {
    "unsafe-int": ModelResponse(parts=[ToolCallPart("f", {"n": 2**60}, tool_call_id="c1")]),
    "deeper-than-128": ModelResponse(
        parts=[ToolCallPart("f", {"d": json.loads("[" * 200 + "]" * 200)}, tool_call_id="c1")]
    ),
    "lone-surrogate": ModelResponse(parts=[TextPart("a\udc80b")]),
}


@pytest.mark.parametrize("bad", REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_first_append_leaves_no_file_and_the_next_valid_one_creates_it(
    tmp_path: Path, bad: ModelResponse
) -> None:
    # The writer refuses these only once the session exists (and its turn has begun): the first
    # append_messages used to leave a session with an errored turn and its lock file behind.
    path = tmp_path / "d" / "s.jsonl"
    run = [ModelRequest(parts=[UserPromptPart("hi")]), bad]
    with pytest.raises(jsonltape.NotLosslessError) as err:
        append_messages(path, run, title="t", session_id="pa-first")
    assert err.value.path == str(path)
    assert list(path.parent.rglob("*")) == []  # no session, no lock file, no temporary file
    assert load_messages(path, missing_ok=True) == []
    good = [ModelRequest(parts=[UserPromptPart("hi")]), ModelResponse(parts=[TextPart("hello")])]
    append_messages(path, good, title="t", session_id="pa-first")
    assert [p.name for p in path.parent.rglob("*")] == ["s.jsonl"]
    header = jsonltape.header(path)
    assert (header.id, header.title) == ("pa-first", "t")
    same_as_library_round_trip(load_messages(path), good)


CHILD = textwrap.dedent(
    """
    import sys, time
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from jsonltape.adapters.pydantic_ai import append_messages
    path, runs, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    for i in range(runs):
        append_messages(path, [
            ModelRequest(parts=[UserPromptPart(f"{tag} {i}")]),
            ModelResponse(parts=[TextPart(f"{tag} {i} done")]),
        ], lock_timeout=30)
        print("acked", i, flush=True)
    if len(sys.argv) > 4:
        time.sleep(60)  # killed here, between two adds
    """
)


def child(path: Path, runs: int, tag: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(runs), tag, *extra],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def texts(history: list[ModelMessage]) -> list[str]:
    out = []
    for m in history:
        for p in m.parts:
            if isinstance(p, (UserPromptPart, TextPart)) and isinstance(p.content, str):
                out.append(p.content)
    return out


def test_history_written_by_another_process_reloads(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with child(path, 2, "a") as proc:
        assert proc.wait(60) == 0
    assert texts(load_messages(path)) == ["a 0", "a 0 done", "a 1", "a 1 done"]


def test_a_writer_killed_between_two_adds_keeps_what_was_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with child(path, 3, "k", "then-sleep") as proc:
        assert proc.stdout is not None
        acked = [proc.stdout.readline() for _ in range(3)]
        assert acked[-1].startswith("acked 2")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert texts(load_messages(path)) == [f"k {i}{s}" for i in range(3) for s in ("", " done")]
    append_messages(path, [ModelRequest(parts=[UserPromptPart("after")])])  # the lock is free
    assert texts(load_messages(path))[-1] == "after"
    assert jsonltape.verify(path).state == "clean"


def test_two_processes_appending_never_interleave_a_run(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_messages(path, [])  # creates it (and appends nothing), so both children open it
    procs = [child(path, 15, tag) for tag in ("x", "y")]
    for p in procs:
        with p:
            assert p.wait(120) == 0
    got = texts(load_messages(path))
    assert len(got) == 60
    for i in range(0, 60, 2):  # each run's request and response stay together
        assert got[i + 1] == got[i] + " done"
    for tag in ("x", "y"):
        assert [t for t in got[::2] if t.startswith(tag)] == [f"{tag} {i}" for i in range(15)]
    turns = [e.type for e in jsonltape.read(path) if e.type.startswith("turn/")]
    assert turns == ["turn/start", "turn/end"] * 30


def test_a_second_writer_in_the_same_process_fails_clearly_or_shares_the_tape(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        sent = every_kind()[:2]
        with pytest.raises(jsonltape.LockedError):
            append_messages(path, sent, lock_timeout=0)
        durable = append_messages(tape, sent)  # the holder appends through its tape
        assert durable == tape.durable_seq
    same_as_library_round_trip(load_messages(path), sent)


def test_a_run_appended_inside_the_callers_own_turn_stays_in_that_turn(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    sent = every_kind()[:2]
    with jsonltape.open(path, create=True) as tape, tape.turn():
        append_messages(tape, sent)
    turns = [e.type for e in jsonltape.read(path) if e.type.startswith("turn/")]
    assert turns == ["turn/start", "turn/end"]
    same_as_library_round_trip(load_messages(path), sent)


# -- the tools around a session -------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "JSONLTAPE_HOME": str(cwd / "home")},
    )


def test_the_session_is_searchable_and_exports_to_html(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir(mode=0o700)
    seen: list[list[ModelMessage]] = []
    result = weather_agent(seen).run_sync("weather in Reykjavik?")
    append_messages(root / "w.jsonl", result.new_messages(), title="weather")
    assert jsonltape.verify(root / "w.jsonl").state == "clean"
    index = str(tmp_path / "index.db")
    synced = cli("sync", str(root), "--index", index, cwd=tmp_path)
    assert synced.returncode == 0, synced.stderr
    found = cli("search", "Reykjavik", "--index", index, cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    assert "Reykjavik" in found.stdout
    html = cli("export", str(root / "w.jsonl"), "--format", "html", cwd=tmp_path)
    assert html.returncode == 0, html.stderr
    assert "<html" in html.stdout and "it is sunny" in html.stdout


def test_importing_jsonltape_never_imports_pydantic_ai() -> None:
    code = (
        "import sys, jsonltape, jsonltape.adapters; "
        "print([m for m in sys.modules if m.split('.')[0] in ('pydantic_ai', 'pydantic')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_damaged_history_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "content": "hi"}]}
        bad = {"group": "g", "message": {"kind": "request"}, "at": [0], "parts": [{"x": 1}]}
        tape.append("user/message", {"message": message, EXT: bad})
    with pytest.raises(jsonltape.FormatError) as err:
        load_messages(path)
    assert err.value.line == 2 and err.value.field == f"$.data.{EXT}"
    assert "not a Pydantic AI message" in str(err.value) and "request.parts[0]" in str(err.value)


def test_what_is_not_a_message_list_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with pytest.raises(jsonltape.InvalidArgumentError, match=r"messages\[1\] is a str"):
        append_messages(path, [ModelRequest(parts=[UserPromptPart("hi")]), "hi"])  # type: ignore[list-item]
    with pytest.raises(jsonltape.InvalidArgumentError, match="not str"):
        append_messages(path, "hi")  # type: ignore[arg-type]
    assert not path.exists()


# -- the README example ---------------------------------------------------------------------


def test_readme_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # --- README: Use with your agent framework / Pydantic AI ---
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from jsonltape.adapters.pydantic_ai import append_messages, load_messages

    agent = Agent(TestModel())  # any model: "openai:gpt-5", "anthropic:claude-sonnet-4-5", ...
    path = "chat.jsonl"
    for prompt in ("hello", "and again"):
        result = agent.run_sync(prompt, message_history=load_messages(path, missing_ok=True))
        append_messages(path, result.new_messages())  # durable when it returns
    # --- end of README example ---
    assert len(load_messages(path)) == 4
