"""The LangChain seam: ``JsonltapeChatMessageHistory`` against langchain-core's own interface.

Real LangChain objects throughout (messages, ``InMemoryChatMessageHistory`` as the reference,
``RunnableWithMessageHistory`` around a fake chat model from langchain_core); no network.
LangChain 1.x deprecates ``InMemoryChatMessageHistory`` and ``RunnableWithMessageHistory`` in
favour of LangGraph; the tests that use them say so with a filter for exactly that warning.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pydantic
import pytest

pytest.importorskip("langchain_core")

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

import jsonltape
from jsonltape.adapters.langchain import JsonltapeChatMessageHistory

ROOT = Path(__file__).resolve().parents[1]
# Precisely the two deprecations of the reference objects (LangChain points to LangGraph).
IN_MEMORY_DEPRECATED = pytest.mark.filterwarnings(
    "ignore:The class `InMemoryChatMessageHistory` was deprecated"
    ":langchain_core._api.LangChainDeprecationWarning"
)
RUNNABLE_DEPRECATED = pytest.mark.filterwarnings(
    "ignore:RunnableWithMessageHistory is deprecated"
    ":langchain_core._api.LangChainDeprecationWarning"
)


def every_kind() -> list[BaseMessage]:
    """One of every message kind LangChain produces, with the members that carry meaning."""
    return [
        SystemMessage("be terse", id="sys-1"),
        HumanMessage(
            content=[
                {"type": "text", "text": "what is in this picture?"},
                {"type": "image", "url": "https://example.com/cat.png", "mime_type": "image/png"},
                {"type": "image_url", "image_url": {"url": "https://example.com/dog.jpg"}},
                {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
                {"type": "file", "file_id": "file-123"},
            ],
            name="ana",
            additional_kwargs={"client": {"ip": None, "tags": ["a", 1, 2.5, True]}},
        ),
        AIMessage(
            content=[
                {"type": "thinking", "thinking": "look at it", "signature": "sig-1"},
                {"type": "text", "text": "a cat; let me check the file"},
            ],
            tool_calls=[{"name": "read_file", "args": {"path": "a.py"}, "id": "call-1"}],
            invalid_tool_calls=[
                {"name": "ls", "args": "{not json", "id": "call-2", "error": "bad JSON"}
            ],
            response_metadata={"model_provider": "anthropic", "model_name": "claude-x"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
            id="ai-1",
        ),
        ToolMessage("print('hi')", tool_call_id="call-1", artifact={"bytes": 11}, id="t-1"),
        ToolMessage("not JSON", tool_call_id="call-2", status="error"),
        AIMessage("", additional_kwargs={"reasoning_content": "deep thought"}),
        AIMessageChunk(
            content="streamed",
            tool_call_chunks=[tool_call_chunk(name="f", args='{"a": 1}', id="call-3", index=0)],
        ),
        ToolMessage(content=[{"type": "text", "text": "ok"}], tool_call_id="call-3"),
        HumanMessageChunk(content="chunk of a prompt"),
        ChatMessage(role="user", content="said as a chat message"),
        ChatMessage(role="critic", content="a role nobody maps"),
        FunctionMessage(name="legacy_fn", content="42"),
        RemoveMessage(id="sys-1"),
        AIMessage("the end", name="bot"),
    ]


def events(path: Path) -> list[jsonltape.Event]:
    return list(jsonltape.read(path))


@IN_MEMORY_DEPRECATED
def test_every_message_kind_reads_back_equal_to_the_in_memory_history(tape_path: Path) -> None:
    ours, reference = JsonltapeChatMessageHistory(tape_path), InMemoryChatMessageHistory()
    for h in (ours, reference):
        h.add_messages(every_kind()[:5])
        h.add_message(every_kind()[5])
        h.add_messages(every_kind()[6:])
    assert ours.messages == reference.messages == every_kind()
    # A new object on the same file (nothing cached) reads the same.
    assert JsonltapeChatMessageHistory(tape_path).messages == every_kind()
    assert [type(m) for m in ours.messages] == [type(m) for m in every_kind()]


def test_messages_map_to_core_events_with_the_verbatim_item_in_data(tape_path: Path) -> None:
    JsonltapeChatMessageHistory(tape_path).add_messages(every_kind())
    msgs = [e for e in events(tape_path) if e.type not in ("session/start", "session/flush")]
    assert [e.type for e in msgs] == [
        "user/message",
        "user/message",
        "assistant/message",
        "tool/result",
        "tool/result",
        "assistant/message",
        "assistant/message",
        "tool/result",
        "user/message",
        "user/message",
        "x-langchain/message",
        "x-langchain/message",
        "x-langchain/message",
        "assistant/message",
    ]
    system, human, ai, result, failed, deep = (e.data for e in msgs[:6])
    assert system["message"]["role"] == "system" and system["message"]["id"] == "sys-1"
    assert human["message"]["name"] == "ana"
    assert human["message"]["parts"] == [
        {"type": "text", "content": "what is in this picture?"},
        {"type": "uri", "uri": "https://example.com/cat.png", "mime_type": "image/png"}
        | {"modality": "image"},
        {"type": "uri", "uri": "https://example.com/dog.jpg", "modality": "image"},
        {"type": "blob", "content": "iVBORw0KGgo=", "mime_type": "image/png", "modality": "image"},
        {"type": "file", "file_id": "file-123"},
    ]
    assert ai["message"]["parts"] == [
        {"type": "reasoning", "content": "look at it", "signature": "sig-1"},
        {"type": "text", "content": "a cat; let me check the file"},
        {"type": "tool_call", "id": "call-1", "name": "read_file", "arguments": {"path": "a.py"}},
        {"type": "tool_call", "id": "call-2", "name": "ls", "arguments": "{not json"},
    ]
    assert ai["model"] == "claude-x" and ai["usage"]["total_tokens"] == 15
    assert result["call_id"] == "call-1"
    assert result["message"]["parts"] == [
        {"type": "tool_call_response", "id": "call-1", "response": "print('hi')"}
    ]
    assert failed["message"]["parts"][0]["is_error"] is True
    assert deep["message"]["parts"][0] == {"type": "reasoning", "content": "deep thought"}
    # The framework's own serialization, verbatim, on every event; unmapped kinds ignorable.
    assert all(e.data["langchain"]["type"] for e in msgs)
    assert msgs[2].data["langchain"]["data"]["invalid_tool_calls"][0]["args"] == "{not json"
    assert all(e.ignorable for e in msgs if e.type == "x-langchain/message")


def test_openai_request_from_the_fold_matches_langchains_own_conversion(tape_path: Path) -> None:
    conversation: list[BaseMessage] = [
        SystemMessage("you list files"),
        HumanMessage("what is here?"),
        AIMessage("", tool_calls=[{"name": "ls", "args": {"dir": "."}, "id": "c1"}]),
        ToolMessage("a.py b.py", tool_call_id="c1"),
        AIMessage("a.py and b.py"),
    ]
    history = JsonltapeChatMessageHistory(tape_path)
    history.add_messages(conversation)
    ours = jsonltape.messages(tape_path, format="openai")["messages"]
    theirs = convert_to_openai_messages(history.messages)
    for message in (*ours, *theirs):  # argument JSON spacing differs, not its value
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        if message.get("content") == "" and message.get("tool_calls"):
            message["content"] = None
    assert ours == theirs


@IN_MEMORY_DEPRECATED
def test_clear_retracts_everything_and_the_file_keeps_it(tape_path: Path) -> None:
    ours, reference = JsonltapeChatMessageHistory(tape_path), InMemoryChatMessageHistory()
    for h in (ours, reference):
        h.add_messages(every_kind())
        h.clear()
    assert ours.messages == reference.messages == []
    before_clear = [e for e in events(tape_path) if "langchain" in e.data]
    assert len(before_clear) == len(every_kind())  # nothing removed from the file
    versions = jsonltape.messages(tape_path, all_versions=True)["messages"]
    assert versions and {v["status"] for v in versions} == {"retracted"}
    for h in (ours, reference):
        h.add_messages([FunctionMessage(name="f", content="after"), HumanMessage("again")])
    assert ours.messages == reference.messages
    assert len(ours.messages) == 2
    assert jsonltape.verify(tape_path).state == "clean"


def test_a_history_without_a_file_is_empty_and_clearing_it_creates_nothing(tmp_path: Path) -> None:
    history = JsonltapeChatMessageHistory(tmp_path / "none.jsonl")
    assert history.messages == []
    history.clear()
    history.add_messages([])
    assert not (tmp_path / "none.jsonl").exists()


def test_a_message_that_would_not_round_trip_is_refused_and_nothing_written(
    tape_path: Path,
) -> None:
    history = JsonltapeChatMessageHistory(tape_path)
    history.add_messages([HumanMessage("kept")])
    size = tape_path.stat().st_size
    for bad in (
        AIMessage("x", additional_kwargs={"parsed": {1, 2}}),  # a set: JSON has none
        AIMessage("x", response_metadata={"at": b"bytes"}),
        HumanMessage("x", additional_kwargs={"n": float("nan")}),
    ):
        with pytest.raises(jsonltape.JsonltapeError):
            history.add_messages([HumanMessage("first of the batch"), bad])

    class Parsed(pydantic.BaseModel):  # structured output, as some chat models attach it
        answer: int

    with pytest.raises(jsonltape.InvalidArgumentError, match=r"messages\[1\].*without loss"):
        history.add_messages(
            [HumanMessage("ok"), AIMessage("42", additional_kwargs={"parsed": Parsed(answer=42)})]
        )
    with pytest.raises(jsonltape.InvalidArgumentError, match=r"messages\[0\]"):
        history.add_messages(["a plain string"])  # type: ignore[list-item]
    assert tape_path.stat().st_size == size
    assert history.messages == [HumanMessage("kept")]


NESTED = json.loads("[" * 200 + "]" * 200)
REFUSED = {
    "nan": AIMessage("x", additional_kwargs={"n": float("nan")}),
    "set": AIMessage("x", additional_kwargs={"parsed": {1, 2}}),
    "bytes": AIMessage("x", response_metadata={"at": b"bytes"}),
    "unsafe-int": HumanMessage("x", additional_kwargs={"n": 2**60}),
    "deeper-than-128": HumanMessage(
        "x", additional_kwargs={"d": json.loads("[" * 200 + "]" * 200)}
    ),
    "lone-surrogate": HumanMessage("a\udc80b"),
}


@pytest.mark.parametrize("bad", REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_first_add_leaves_no_file_and_the_next_valid_add_creates_it(
    tmp_path: Path, bad: BaseMessage
) -> None:
    # The writer refuses these only once the session exists: the first add used to leave a
    # header-only session and its lock file behind.
    root = tmp_path / "chats"
    history = JsonltapeChatMessageHistory.for_session(root, "s1", title="t")
    with pytest.raises(jsonltape.JsonltapeError) as err:
        history.add_messages([HumanMessage("first of the batch"), bad])
    assert err.value.path == str(root / "s1.jsonl")  # named as the caller knows it
    assert list(root.rglob("*")) == []  # no session, no lock file, no temporary file
    assert history.messages == []
    history.add_messages([HumanMessage("hello")])
    assert [p.name for p in root.rglob("*")] == ["s1.jsonl"]
    header = jsonltape.header(root / "s1.jsonl")
    assert (header.id, header.title, header.agent) == ("s1", "t", "jsonltape.adapters.langchain")
    assert history.messages == [HumanMessage("hello")]
    assert jsonltape.verify(root / "s1.jsonl").state == "clean"


def test_histories_racing_to_create_a_session_all_land_in_one_file(tmp_path: Path) -> None:
    # Each builds the session aside; one gets the name, the others then append to it.
    path = tmp_path / "race" / "r.jsonl"
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def add(i: int) -> None:
        history = JsonltapeChatMessageHistory(path)
        start.wait()
        try:
            history.add_messages([HumanMessage(f"q{i}"), AIMessage(f"a{i}")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    back = [m.content for m in JsonltapeChatMessageHistory(path).messages]
    assert sorted(back) == sorted(f"{k}{i}" for i in range(8) for k in "qa")
    assert all(back[i][1:] == back[i + 1][1:] for i in range(0, 16, 2))  # batches whole
    assert [e.seq for e in jsonltape.read(path) if e.type == "session/start"] == [0]
    assert sorted(p.name for p in path.parent.iterdir()) == [".r.jsonl.lock", "r.jsonl"]


def test_files_are_owner_only_and_session_ids_are_validated(tmp_path: Path) -> None:
    history = JsonltapeChatMessageHistory.for_session(tmp_path / "chats", "user-42.chat")
    history.add_messages([HumanMessage("hi")])
    assert history.path == tmp_path / "chats" / "user-42.chat.jsonl"
    assert (history.path.stat().st_mode & 0o777) == 0o600
    assert (history.path.parent.stat().st_mode & 0o777) == 0o700
    assert jsonltape.header(history.path).id == "user-42.chat"
    for hostile in ("../escape", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(jsonltape.InvalidSessionIdError):
            JsonltapeChatMessageHistory.for_session(tmp_path, hostile)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats"]
    # A path whose name is no session id still works: the header gets a generated id.
    odd = JsonltapeChatMessageHistory(tmp_path / "my chat (1).jsonl")
    odd.add_messages([HumanMessage("hi")])
    assert len(jsonltape.header(odd.path).id) == 26


def test_a_compaction_by_jsonltape_reads_back_as_langchain_messages(tape_path: Path) -> None:
    history = JsonltapeChatMessageHistory(tape_path)
    history.add_messages([HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")])
    seqs = [m["seq"] for m in jsonltape.messages(tape_path)["messages"]]
    jsonltape.compact(tape_path, "the user asked q1, got a1", through=seqs[1])
    back = history.messages
    assert [type(m) for m in back] == [HumanMessage, HumanMessage]
    assert "q1, got a1" in str(back[0].content) and back[1] == HumanMessage("q2")


def test_messages_another_writer_logged_read_back_as_their_langchain_kinds(
    tape_path: Path,
) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.user("list the files")
        tape.assistant("sure", tool_calls=[{"id": "c1", "name": "ls", "arguments": {"d": "."}}])
        tape.assistant(tool_calls=[{"id": "c2", "name": "ls", "arguments": "{oops"}])
        tape.tool_result("c1", "a.py")
        tape.tool_result("c2", {"error": "bad"}, is_error=True)
    back = JsonltapeChatMessageHistory(tape_path).messages
    assert [type(m) for m in back] == [HumanMessage, AIMessage, AIMessage, ToolMessage] + [
        ToolMessage
    ]
    human, ai, bad, result, failed = back
    assert isinstance(ai, AIMessage) and isinstance(bad, AIMessage)
    assert human.content == "list the files" and ai.content == "sure"
    assert ai.tool_calls == [{"name": "ls", "args": {"d": "."}, "id": "c1", "type": "tool_call"}]
    assert bad.invalid_tool_calls[0]["args"] == "{oops" and bad.tool_calls == []
    assert isinstance(failed, ToolMessage) and failed.status == "error"
    assert result == ToolMessage("a.py", tool_call_id="c1", id=result.id)
    assert failed.content == '{"error": "bad"}'


def test_a_tool_call_without_an_id_gets_one_in_the_event_and_none_read_back(
    tape_path: Path,
) -> None:
    message = AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": None}])
    history = JsonltapeChatMessageHistory(tape_path)
    history.add_messages([message])
    assert history.messages == [message]
    (event,) = [e for e in events(tape_path) if e.type == "assistant/message"]
    (part,) = event.data["message"]["parts"]
    assert part["type"] == "tool_call" and part["id"].startswith("call_")


def test_a_hand_edited_langchain_member_is_one_clear_error_naming_the_line(
    tape_path: Path,
) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.append(
            "user/message",
            {
                "message": {"id": "m", "role": "user", "parts": []},
                "langchain": {"type": "martian", "data": {}},
            },
        )
    with pytest.raises(jsonltape.FormatError) as err:
        _ = JsonltapeChatMessageHistory(tape_path).messages
    assert err.value.line == 2 and err.value.field == "$.data.langchain"
    assert "martian" in str(err.value)


def test_clearing_a_fork_with_inherited_messages_is_refused_whole(tmp_path: Path) -> None:
    parent = JsonltapeChatMessageHistory(tmp_path / "parent.jsonl")
    parent.add_messages([HumanMessage("q1"), AIMessage("a1")])
    last = jsonltape.messages(parent.path)["seq"]
    info = jsonltape.fork(parent.path, at=last, session_id="child")
    child = JsonltapeChatMessageHistory(info.path)
    child.add_messages([HumanMessage("q2")])
    assert child.messages == [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")]
    size = Path(info.path).stat().st_size
    with pytest.raises(jsonltape.SurfaceError, match="fork"):
        child.clear()
    assert Path(info.path).stat().st_size == size
    assert len(child.messages) == 3


# -- processes: restart, SIGKILL, concurrency ------------------------------------------------

WRITER = """
import sys
from langchain_core.messages import AIMessage, HumanMessage
from jsonltape.adapters.langchain import JsonltapeChatMessageHistory
history = JsonltapeChatMessageHistory(sys.argv[1])
tag, n = sys.argv[2], int(sys.argv[3])
for i in range(n):
    history.add_messages([HumanMessage(f"{tag} q{i}"), AIMessage(f"{tag} a{i}", id=f"{tag}-{i}")])
    print(i, flush=True)
"""


def writer(path: Path, tag: str, n: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), tag, str(n)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def test_history_written_by_another_process_reads_back_after_it_exits(tape_path: Path) -> None:
    proc = writer(tape_path, "p", 3)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    history = JsonltapeChatMessageHistory(tape_path)
    assert [m.content for m in history.messages] == ["p q0", "p a0", "p q1", "p a1", "p q2", "p a2"]
    history.add_messages([HumanMessage("and on")])
    assert len(JsonltapeChatMessageHistory(tape_path).messages) == 7


def test_a_writer_sigkilled_between_adds_keeps_every_acknowledged_add(tape_path: Path) -> None:
    proc = writer(tape_path, "k", 10_000)
    assert proc.stdout is not None
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 20:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    history = JsonltapeChatMessageHistory(tape_path)
    back = history.messages
    assert len(back) >= 2 * (acknowledged + 1)
    assert len(back) % 2 == 0  # a batch is all or nothing
    for i in range(len(back) // 2):
        assert back[2 * i : 2 * i + 2] == [
            HumanMessage(f"k q{i}"),
            AIMessage(f"k a{i}", id=f"k-{i}"),
        ]
    history.add_messages([HumanMessage("after the crash")])  # the next writer repairs the tail
    assert history.messages[-1] == HumanMessage("after the crash")
    assert jsonltape.verify(tape_path).state == "clean"


FIRSTS = """
import sys
from pathlib import Path
from langchain_core.messages import AIMessage, HumanMessage
from jsonltape.adapters.langchain import JsonltapeChatMessageHistory
root = Path(sys.argv[1])
for i in range(100_000):
    history = JsonltapeChatMessageHistory(root / f"s{i}.jsonl")
    history.add_messages([HumanMessage(f"q{i}" * 2000), AIMessage(f"a{i}")])
"""


@pytest.mark.parametrize("after", [0, 3, 7, 12, 20])
def test_a_writer_sigkilled_as_a_new_session_appears_leaves_it_whole(
    tmp_path: Path, after: int
) -> None:
    # A new session file appears only once its first batch is durable. Killed the moment
    # s<after>.jsonl shows up (the writer used to publish the header first and write the batch
    # after it), every session there holds its whole batch; a private .tmp directory may stay.
    proc = subprocess.Popen([sys.executable, "-c", FIRSTS, str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL)  # fmt: skip
    target = tmp_path / f"s{after}.jsonl"
    try:
        while not target.exists() and proc.poll() is None:
            pass  # spin: the kill must land right after the name appears
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    sessions = sorted(tmp_path.glob("s*.jsonl"), key=lambda p: int(p.stem[1:]))
    assert len(sessions) >= after + 1
    for path in sessions:
        i = int(path.stem[1:])
        assert JsonltapeChatMessageHistory(path).messages == [
            HumanMessage(f"q{i}" * 2000),
            AIMessage(f"a{i}"),
        ], path
    others = [p for p in tmp_path.iterdir() if not p.name.startswith("s")]
    assert all(p.name.startswith(".s") and p.name.endswith(".tmp") for p in others), others


def test_two_processes_adding_at_once_wait_for_each_other_and_never_interleave(
    tape_path: Path,
) -> None:
    procs = [writer(tape_path, tag, 25) for tag in ("x", "y")]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    back = JsonltapeChatMessageHistory(tape_path).messages
    assert len(back) == 100
    for tag in ("x", "y"):
        mine = [m.content for m in back if str(m.content).startswith(tag)]
        assert mine == [f"{tag} {k}{i}" for i in range(25) for k in ("q", "a")]
    for i in range(0, 100, 2):  # each add_messages batch stays together
        assert str(back[i].content).replace(" q", " a") == back[i + 1].content


def test_two_instances_in_threads_serialize_their_adds(tape_path: Path) -> None:
    def add(tag: str) -> None:
        history = JsonltapeChatMessageHistory(tape_path)
        for i in range(20):
            history.add_messages([HumanMessage(f"{tag} q{i}"), AIMessage(f"{tag} a{i}")])

    threads = [threading.Thread(target=add, args=(tag,)) for tag in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    back = JsonltapeChatMessageHistory(tape_path).messages
    assert len(back) == 80
    for i in range(0, 80, 2):
        assert str(back[i].content).replace(" q", " a") == back[i + 1].content


def test_a_write_while_another_writer_holds_the_session_fails_clearly(tape_path: Path) -> None:
    history = JsonltapeChatMessageHistory(tape_path, lock_timeout=0.2)
    history.add_messages([HumanMessage("first")])
    with jsonltape.open(tape_path):
        with pytest.raises(jsonltape.LockedError):
            history.add_messages([HumanMessage("blocked")])
        with pytest.raises(jsonltape.LockedError):
            history.clear()
        assert history.messages == [HumanMessage("first")]  # readers take no lock
    history.add_messages([HumanMessage("second")])
    assert history.messages == [HumanMessage("first"), HumanMessage("second")]


# -- the framework's runner ----------------------------------------------------------------


def scripted_model() -> FakeMessagesListChatModel:
    """A fake chat model that calls a tool, then answers, then answers again (fixed ids:
    LangChain gives a reply without one an id made from the random run id)."""
    return FakeMessagesListChatModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "ls", "args": {"dir": "."}, "id": "c1"}], id="r1"),
            AIMessage("a.py and b.py", id="r2"),
            AIMessage("you asked about files", id="r3"),
        ]
    )


def run_turns(history: Any) -> list[list[BaseMessage]]:
    """Three turns through RunnableWithMessageHistory; what the model got each time."""
    seen: list[list[BaseMessage]] = []

    def record(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(list(messages))
        return messages

    chain = RunnableWithMessageHistory(RunnableLambda(record) | scripted_model(), lambda: history)
    chain.invoke([HumanMessage("what is here?")])
    chain.invoke([ToolMessage("a.py b.py", tool_call_id="c1")])
    chain.invoke("what did I ask?")
    return seen


@IN_MEMORY_DEPRECATED
@RUNNABLE_DEPRECATED
def test_runnable_with_message_history_sends_what_the_in_memory_history_sends(
    tape_path: Path,
) -> None:
    reference = InMemoryChatMessageHistory()
    ours = JsonltapeChatMessageHistory(tape_path)
    assert run_turns(ours) == run_turns(reference)
    assert ours.messages == reference.messages and len(ours.messages) == 6
    # The next request built from the file by jsonltape's own fold is LangChain's too.
    body = jsonltape.messages(tape_path, format="openai")["messages"]
    assert [m["role"] for m in body] == ["user", "assistant", "tool", "assistant", "user"] + [
        "assistant"
    ]
    assert body[1]["tool_calls"][0]["id"] == "c1" and body[2]["tool_call_id"] == "c1"


@RUNNABLE_DEPRECATED
def test_an_async_turn_keyed_by_session_id_goes_to_that_sessions_file(tmp_path: Path) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("hello there", id="g1")]))
    chain = RunnableWithMessageHistory(
        model, lambda session_id: JsonltapeChatMessageHistory.for_session(tmp_path, session_id)
    )
    config: Any = {"configurable": {"session_id": "async-1"}}
    reply = asyncio.run(chain.ainvoke("hi", config=config))
    assert reply.content == "hello there"
    assert JsonltapeChatMessageHistory(tmp_path / "async-1.jsonl").messages == [
        HumanMessage("hi"),
        AIMessage("hello there", id="g1"),
    ]


# -- the file is a jsonltape session like any other -----------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_file_verifies_is_found_by_search_and_exports_to_html(tmp_path: Path) -> None:
    root = tmp_path / "chats"
    history = JsonltapeChatMessageHistory.for_session(root, "search-me")
    history.add_messages(every_kind())
    history.add_messages([HumanMessage("where is the quokkafestival?")])
    assert jsonltape.verify(history.path).state == "clean"
    index = tmp_path / "index.db"
    synced = cli("sync", str(root), "--index", str(index))
    assert synced.returncode == 0, synced.stderr
    found = cli("search", "quokkafestival", "--index", str(index), "--json")
    assert found.returncode == 0, found.stderr
    hits = [json.loads(line) for line in found.stdout.splitlines()]
    assert [h["session"] for h in hits] == ["search-me"]
    out = tmp_path / "chat.html"
    exported = cli("export", "--format", "html", str(history.path), "-o", str(out))
    assert exported.returncode == 0, exported.stderr
    html = out.read_text()
    assert "quokkafestival" in html and "read_file" in html


def test_importing_jsonltape_and_its_adapters_imports_no_framework() -> None:
    code = (
        "import sys, jsonltape, jsonltape.adapters\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'langchain_core'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- the README example ----------------------------------------------------------------------


@RUNNABLE_DEPRECATED
def test_readme_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # --- README: Use with your agent framework / LangChain ---
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.runnables.history import RunnableWithMessageHistory

    import jsonltape
    from jsonltape.adapters.langchain import JsonltapeChatMessageHistory

    model = FakeMessagesListChatModel(responses=[AIMessage("Hello!")])  # your chat model
    chat = RunnableWithMessageHistory(
        model,
        lambda session_id: JsonltapeChatMessageHistory.for_session("chats", session_id),
    )
    chat.invoke("hi", config={"configurable": {"session_id": "demo"}})

    print(jsonltape.messages("chats/demo.jsonl", format="openai"))
    # --- end ---
    body = jsonltape.messages("chats/demo.jsonl", format="openai")
    assert body == {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}]
    }
