"""messages(): the neutral form, time travel, versions, refusals, and the provider shapes."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tracemalloc
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import _framing, _lines, fold
from jsonltape.fold import FoldError, message_text

from .helpers import raw_lines

HEADER = {"format": "jsonltape", "version": 1, "id": "s", "created": 1}


def craft(path: Path, events: list[dict[str, Any]]) -> list[int]:
    """Write a session line by line (seq and crc filled in); return line offsets."""
    offsets, out = [], b""
    for seq, ev in enumerate([{"type": "session/start", "data": HEADER}, *events]):
        obj = {"seq": seq, "type": ev["type"], "time": 1000 + seq, "data": ev.get("data", {})}
        obj.update({k: v for k, v in ev.items() if k not in ("type", "data")})
        offsets.append(len(out))
        out += _framing.frame(json.dumps(obj, separators=(",", ":")).encode())
    path.write_bytes(out)
    os.chmod(path, 0o600)
    return offsets


def msg(role: str, *parts: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"message": {"id": "m", "role": role, "parts": list(parts), **extra}}


def text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def call(cid: str, arguments: Any = None, name: str = "Read") -> dict[str, Any]:
    return {"type": "tool_call", "id": cid, "name": name, "arguments": arguments}


def result(cid: str, response: Any = "ok", **kw: Any) -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": cid, "response": response, **kw}
    return {"call_id": cid, "message": {"id": f"r{cid}", "role": "tool", "parts": [part]}}


def ev(type_: str, data: dict[str, Any], **kw: Any) -> dict[str, Any]:
    surface = "append" if type_ in ("user/message", "assistant/message", "tool/result") else None
    out: dict[str, Any] = {"type": type_, "data": data}
    if surface:
        out["surface"] = surface
    out.update(kw)
    return out


# -- the neutral form ---------------------------------------------------------------------


def test_neutral_items_carry_seq_time_type_and_the_message_as_logged(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, session_id="n1") as tape:
        u = tape.user("hi", id="u1")
        tape.assistant(tool_calls=[{"id": "c1", "name": "Read", "arguments": {"path": "x"}}])
        r = tape.tool_result("c1", {"ok": True}, is_error=True)
    out = fold.messages(tape_path)
    assert out["session"] == "n1" and "header" not in out
    assert out["seq"] == len(raw_lines(tape_path)) - 1
    first, _, last = out["messages"]
    assert first == {
        "seq": u.seq,
        "time": u.time,
        "type": "user/message",
        "message": {"id": "u1", "role": "user", "parts": [{"type": "text", "content": "hi"}]},
    }
    assert last["seq"] == r.seq and last["call_id"] == "c1"
    assert last["message"] == r.data["message"]


def test_every_returned_message_is_the_logged_message_of_its_line(tape_path: Path) -> None:
    """Model-visible implies logged: each item is byte-for-byte a message in the file."""
    with jsonltape.open(tape_path, create=True) as tape:
        for i in range(5):
            tape.user(f"q{i}")
            tape.assistant(f"a{i}")
    fold.compact(tape_path, "summary", through=4)
    fold.retract(tape_path, 8)
    logged = {json.loads(x)["seq"]: json.loads(x) for x in raw_lines(tape_path)}
    for item in fold.messages(tape_path)["messages"]:
        assert logged[item["seq"]]["data"]["message"] == item["message"]
        assert logged[item["seq"]]["type"] == item["type"]


def test_latest_request_header_is_folded_alongside(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.append("request/header", {"model": "a"})
        first = tape.user("x")
        tape.append("request/header", {"model": "b", "system": "s"})
    assert fold.messages(tape_path)["header"] == {"model": "b", "system": "s"}
    assert fold.messages(tape_path, at=first.seq)["header"] == {"model": "a"}
    assert fold.request_header(tape_path, at=first.seq) == {"model": "a"}


def test_todo_fold_returns_the_latest_snapshot(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        assert fold.todo(tape_path) is None
        a = tape.append("todo/write", {"todos": [{"content": "a", "status": "pending"}]})
        tape.append("todo/write", {"todos": [{"content": "a", "status": "completed"}]})
    assert fold.todo(tape_path) == [{"content": "a", "status": "completed"}]
    assert fold.todo(tape_path, a.seq) == [{"content": "a", "status": "pending"}]


# -- time travel and versions -----------------------------------------------------------


def test_at_shows_what_the_model_saw_then(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        a = tape.user("v1")
        b = tape.append(
            "user/message",
            {"message": {"id": "x", "role": "user", "parts": []}},
            surface={"op": "replace", "start": a.seq, "end": a.seq},
            sources=[a.seq],
        )
    assert [m["seq"] for m in fold.messages(tape_path, at=a.seq)["messages"]] == [a.seq]
    assert [m["seq"] for m in fold.messages(tape_path, at=b.seq)["messages"]] == [b.seq]
    assert fold.messages(tape_path, at=0)["messages"] == []


@pytest.mark.parametrize("at", [10_000, -1])
def test_at_outside_the_session_is_refused(tape_path: Path, at: int) -> None:
    jsonltape.open(tape_path, create=True).close()
    with pytest.raises(FoldError, match="seq"):
        fold.messages(tape_path, at=at)


def test_all_versions_lists_every_message_with_status_and_cause(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        a = tape.user("draft")
        b = tape.user("other")
    fold.revise(tape_path, a.seq, "final")
    fold.retract(tape_path, b.seq)
    out = fold.messages(tape_path, all_versions=True)["messages"]
    rows = [(m["seq"], m["status"], m.get("by")) for m in out]
    assert rows[0] == (a.seq, "superseded", rows[2][0])
    assert rows[1][:2] == (b.seq, "retracted")
    assert rows[2][1:] == ("current", None)
    with pytest.raises(FoldError, match="neutral"):
        fold.messages(tape_path, format="openai", all_versions=True)


# -- what folding refuses -----------------------------------------------------------------


def test_unknown_required_type_is_refused_at_its_line(tape_path: Path) -> None:
    offsets = craft(tape_path, [ev("user/message", msg("user", text("a"))), {"type": "x.y/z"}])
    with pytest.raises(jsonltape.UnknownEventTypeError) as err:
        fold.messages(tape_path)
    assert (err.value.line, err.value.offset, err.value.field) == (3, offsets[2], "$.type")
    assert "x.y/z" in str(err.value) and str(tape_path) in str(err.value)


def test_unknown_ignorable_type_and_known_ignorable_types_are_skipped(tape_path: Path) -> None:
    craft(
        tape_path,
        [
            {"type": "x.y/z", "ignorable": True, "data": {"surface": "weird"}},
            {"type": "assistant/chunk", "ignorable": True, "data": {"delta": "h"}},
            ev("user/message", msg("user", text("a"))),
        ],
    )
    assert [m["seq"] for m in fold.messages(tape_path)["messages"]] == [3]


@pytest.mark.parametrize(
    ("event", "error", "fragment"),
    [
        (
            {"type": "tool/call", "data": {"call_id": "c", "name": "n"}, "surface": "append"},
            jsonltape.InvalidEventError,
            "takes no surface",
        ),
        ({"type": "session/start", "data": HEADER}, jsonltape.FormatError, "line 1"),
        (ev("user/message", msg("assistant", text("x"))), jsonltape.InvalidEventError, "role"),
        (ev("tool/result", result("c") | {"call_id": "d"}), jsonltape.InvalidEventError, "call_id"),
        (
            ev(
                "user/message",
                msg("user", text("x")),
                surface={"op": "replace", "start": 9, "end": 9},
                sources=[9],
            ),
            jsonltape.SurfaceError,
            "not a current message",
        ),
    ],
)
def test_invalid_events_in_a_file_are_refused_naming_the_line(
    tape_path: Path, event: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    craft(tape_path, [ev("user/message", msg("user", text("a"))), event])
    with pytest.raises(error, match=fragment) as err:
        fold.messages(tape_path)
    assert err.value.line == 3  # type: ignore[attr-defined]


def test_a_torn_tail_is_not_folded(tape_path: Path) -> None:
    craft(tape_path, [ev("user/message", msg("user", text("a")))])
    with open(tape_path, "ab") as f:
        f.write(b'{"seq":2,"type":"user/message","ti')
    assert [m["seq"] for m in fold.messages(tape_path)["messages"]] == [1]


def test_damage_before_a_checkpoint_is_corruption(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.user("a")
        tape.user("b")
    data = bytearray(tape_path.read_bytes())
    data[data.index(b'"a"') + 1] = ord("z")
    tape_path.write_bytes(bytes(data))
    with pytest.raises(jsonltape.CorruptError) as err:
        fold.messages(tape_path)
    assert err.value.line == 2


# -- provider shapes ------------------------------------------------------------------------


def test_results_without_a_declared_call_are_left_out_of_requests_only(tape_path: Path) -> None:
    craft(
        tape_path,
        [
            ev("tool/result", result("ghost")),
            ev("assistant/message", msg("assistant", call("c1"))),
            ev("tool/result", result("c1", "first")),
            ev("tool/result", result("c1", "second")),
        ],
    )
    assert len(fold.messages(tape_path)["messages"]) == 4
    oa = fold.messages(tape_path, format="openai")["messages"]
    assert [m.get("tool_call_id") for m in oa] == [None, "c1"]
    assert oa[1]["content"] == "first"
    an = fold.messages(tape_path, format="anthropic")["messages"]
    assert [b["type"] for m in an for b in m["content"]] == ["tool_use", "tool_result"]


def test_openai_shape(tape_path: Path) -> None:
    craft(
        tape_path,
        [
            {
                "type": "request/header",
                "data": {
                    "model": "m",
                    "system": "sys",
                    "tools": [
                        {"name": "Read", "input_schema": {"type": "object"}},
                        {"type": "native"},
                    ],
                    "params": {"temperature": 0, "model": "ignored", "messages": []},
                },
            },
            ev("user/message", msg("system", text("be brief"), {"type": "uri", "uri": "u"})),
            ev("user/message", msg("user", text("a"), text("b"), name="bob")),
            ev("assistant/message", msg("assistant", {"type": "reasoning", "content": "hm"})),
            ev("assistant/message", msg("assistant", call("c1", '{"raw": 1}'), call("c2", None))),
            ev("tool/result", result("c1", [1, 2])),
            ev("tool/result", result("c2", None)),
        ],
    )
    body = fold.messages(tape_path, format="openai")
    assert body["model"] == "m" and body["temperature"] == 0 and "params" not in body
    assert body["tools"] == [
        {"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}},
        {"type": "native"},
    ]
    m = body["messages"]
    assert m[0] == {"role": "system", "content": "sys"}
    assert m[1] == {"role": "system", "content": "be brief"}
    assert m[2] == {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "name": "bob",
    }
    assert m[3] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "Read", "arguments": '{"raw": 1}'},
            },
            {"id": "c2", "type": "function", "function": {"name": "Read", "arguments": "null"}},
        ],
    }  # the reasoning-only message had nothing OpenAI can take and is left out
    assert m[4] == {"role": "tool", "tool_call_id": "c1", "content": "[1,2]"}
    assert m[5] == {"role": "tool", "tool_call_id": "c2", "content": "null"}


def test_anthropic_shape(tape_path: Path) -> None:
    craft(
        tape_path,
        [
            {"type": "request/header", "data": {"system": "sys", "tools": [{"name": "T"}]}},
            ev("user/message", msg("system", text("rule"))),
            ev("user/message", msg("user", text("go"), text(""))),
            ev(
                "assistant/message",
                msg(
                    "assistant",
                    {"type": "reasoning", "content": "signed", "signature": "s"},
                    {"type": "reasoning", "content": "unsigned"},
                    call("c1", '{"a": 1}'),
                    call("c2", "not json"),
                    call("c3", [1]),
                    call("c4"),
                ),
            ),
            ev("tool/result", result("c1", "x", is_error=True)),
            ev("user/message", msg("user", text("meanwhile"))),
            ev("tool/result", result("c2", {"y": 1})),
            ev("tool/result", result("c3")),
            ev("tool/result", result("c4")),
            ev("assistant/message", msg("assistant")),
        ],
    )
    body = fold.messages(tape_path, format="anthropic")
    assert "model" not in body
    assert body["system"] == "sys\n\nrule"
    assert body["tools"] == [{"name": "T", "input_schema": {"type": "object"}}]
    m = body["messages"]
    assert [t["role"] for t in m] == ["user", "assistant", "user"]
    assert m[0]["content"] == [{"type": "text", "text": "go"}]
    assert m[1]["content"] == [
        {"type": "thinking", "thinking": "signed", "signature": "s"},
        {"type": "tool_use", "id": "c1", "name": "Read", "input": {"a": 1}},
        {"type": "tool_use", "id": "c2", "name": "Read", "input": {"arguments": "not json"}},
        {"type": "tool_use", "id": "c3", "name": "Read", "input": {"arguments": [1]}},
        {"type": "tool_use", "id": "c4", "name": "Read", "input": {}},
    ]
    # consecutive user turns merge, and tool results come first in the merged turn
    assert [b["type"] for b in m[2]["content"]] == ["tool_result"] * 4 + ["text"]
    assert m[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "x",
        "is_error": True,
    }
    assert m[2]["content"][1]["content"] == '{"y":1}'


def test_message_text_gives_searchable_text_for_indexers() -> None:
    data = msg(
        "assistant",
        {"type": "reasoning", "content": "secret"},
        text("hello"),
        call("c1", {"p": "a.py"}),
    )
    assert message_text(data) == 'hello\nRead {"p":"a.py"}'
    assert message_text(data, reasoning=True).startswith("secret\n")
    assert message_text(result("c", {"k": [1]})) == '{"k":[1]}'
    assert message_text({"message": "garbage"}) == ""


def test_message_changes_feed_an_incremental_indexer(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        a = tape.assistant("look", tool_calls=[{"id": "c1", "name": "Read", "arguments": {}}])
        r = tape.tool_result("c1", "data")
    (retraction,) = fold.retract(tape_path, a.seq)
    surface = fold.SurfaceFold()
    seen = [c for e in jsonltape.read(tape_path) for c in fold.message_changes(surface, e)]
    assert seen == [
        fold.MessageChange(a.seq, "current", "assistant/message", "assistant", "look\nRead {}"),
        fold.MessageChange(r.seq, "current", "tool/result", "tool", "data"),
        fold.MessageChange(a.seq, "retracted"),
        fold.MessageChange(r.seq, "retracted"),
    ]
    assert retraction.seq > r.seq


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (-2.0, "-2"),
        (0.1, "0.1"),
        (100.0, "100"),
        (1e16, "10000000000000000"),
        (1.2345678901234568e17, "123456789012345680"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-5.674664918136216e64, "-5.674664918136216e+64"),
        (123.456, "123.456"),
        (0.0, "0"),
    ],
)
def test_numbers_in_converted_json_are_written_as_javascript_writes_them(
    value: float, text: str
) -> None:
    assert fold.compact_json(value) == text
    assert fold.compact_json({"a": [value, 1, "é\u2028", None, True]}) == (
        '{"a":[' + text + ',1,"é\u2028",null,true]}'
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to compare with")
@settings(max_examples=1)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=200, max_size=200))
def test_compact_json_matches_json_stringify(values: list[float]) -> None:
    values = [v for v in values if not (v == 0 and math.copysign(1, v) < 0)]
    script = (
        "const v=JSON.parse(require('fs').readFileSync(0,'utf8'));"
        "process.stdout.write(JSON.stringify(v.map(x=>JSON.stringify(x))))"
    )
    out = subprocess.run(
        ["node", "-e", script],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert [fold.compact_json(v) for v in values] == json.loads(out.stdout)


def test_fold_memory_follows_the_surface_not_the_file(tape_path: Path) -> None:
    big = "x" * 50_000
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        for i in range(150):
            tape.assistant(tool_calls=[{"id": f"c{i}", "name": "Read", "arguments": {}}])
            r = tape.tool_result(f"c{i}", big)
            tape.append("assistant/chunk", {"delta": big}, ignorable=True)
            tape.append("compaction/prune", {"target": r.seq, "chars": len(big)})
            stub = dict(
                r.data,
                message=dict(
                    r.data["message"],
                    parts=[{"type": "tool_call_response", "id": f"c{i}", "response": "[pruned]"}],
                ),
            )
            tape.append(
                "tool/result",
                stub,
                surface={"op": "replace", "start": r.seq, "end": r.seq},
                sources=[r.seq, r.seq + 2],
            )
    size = tape_path.stat().st_size
    assert size > 15_000_000
    tracemalloc.start()
    try:
        # The scan may hold up to HOLD_MAX bytes waiting for the checkpoint of a span (this
        # file has none until it closes); held to one chunk here, so that what is measured is
        # the fold's own memory (tests/test_span.py bounds the scan's).
        with mock.patch.object(_lines, "HOLD_MAX", _framing.CHUNK):
            f = fold.fold_file(tape_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(f.surface) == 300
    # What is in flight is the scan's read chunk (read, held, joined, split), not the 15 MB
    # file.
    assert peak < min(6 * _framing.CHUNK, size / 2), (peak, size)
