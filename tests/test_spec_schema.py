"""The JSON Schemas in spec/schema/: well-formed 2020-12, complete, and right about real files.

The validation tests need the ``jsonschema`` package, which is not a dependency yet; they skip
cleanly without it. The structural tests run everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import events as ev

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "spec" / "schema"
READER = json.loads((SCHEMAS / "jsonltape-v1.reader.schema.json").read_text(encoding="utf-8"))
WRITER = json.loads((SCHEMAS / "jsonltape-v1.writer.schema.json").read_text(encoding="utf-8"))

#: y_ vectors that break §6/§8 on purpose (a reader must still accept the lines as good).
BREAK_THE_VOCABULARY = {
    "y_core_data_not_validated",
    "y_closing_checkpoint_without_seq",
    # Good lines whose checkpoint is not valid (format 1.1, a malformed span); `from` past the
    # offset is a relation no schema states, so it is not here.
    "y_span_crc_uppercase",
    "y_span_crc_seven_digits",
    "y_span_crc_final_newline",
    "y_span_crc_not_string",
    "y_span_crc_missing",
    "y_span_from_negative",
    "y_span_from_missing",
    "y_span_from_not_integer",
    "y_span_not_object",
}


def rule_types(schema: dict[str, Any]) -> list[str]:
    return [
        r["if"]["properties"]["type"]["const"]
        for r in schema["allOf"]
        if "const" in r.get("if", {}).get("properties", {}).get("type", {})
    ]


@pytest.mark.parametrize("schema", [READER, WRITER], ids=["reader", "writer"])
def test_schema_covers_every_core_type(schema: dict[str, Any]) -> None:
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$ref"] == "#/$defs/Envelope"
    assert sorted(rule_types(schema)) == sorted(ev.CORE_TYPES)
    for struct in {*ev.CORE_TYPES.values(), *ev.PART_TYPES.values()}:
        assert struct.__name__ in schema["$defs"]
    env = schema["$defs"]["Envelope"]
    assert env["required"] == ["seq", "type", "time", "data", "crc"]
    assert "discriminator" not in json.dumps(schema)


def test_reader_is_open_and_writer_is_closed() -> None:
    assert "additionalProperties" not in json.dumps(READER)
    assert WRITER["$defs"]["Envelope"]["additionalProperties"] is False
    assert WRITER["$defs"]["TurnEndData"]["additionalProperties"] is False
    assert "patternProperties" in WRITER["$defs"]["TurnEndData"]
    assert "additionalProperties" not in WRITER["$defs"]["AnyData"]  # chunks are free-form
    assert '"type": "null"' not in json.dumps(WRITER)  # optional members are omitted


@pytest.fixture(scope="module")
def validators() -> tuple[Any, Any]:
    jsonschema = pytest.importorskip("jsonschema")
    cls = jsonschema.Draft202012Validator
    cls.check_schema(READER)
    cls.check_schema(WRITER)
    return cls(READER), cls(WRITER)


def errors(validator: Any, obj: Any) -> list[str]:
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(obj)]


def written_by_jsonltape(path: Path) -> list[dict[str, Any]]:
    """A session using every writer feature that has a core type, parsed line by line."""
    with jsonltape.open(
        path, create=True, title="schema", cwd="/w", agent="t/1", meta={"k": 1}
    ) as t:
        t.append("request/header", {"model": "m", "system": "s", "tools": [{"name": "ls"}]})
        t.append("todo/write", {"todos": [{"content": "x", "status": "pending", "id": "1"}]})
        with t.turn(input={"argv": ["x"]}) as turn:
            u = t.user("hello", key="import:1")
            with t.step():
                t.assistant(
                    [{"type": "reasoning", "content": "hm", "signature": "sig"}],
                    tool_calls=[{"id": "c1", "name": "ls", "arguments": {"path": "."}}],
                    model="m",
                    usage={"input_tokens": 3, "output_tokens": 1},
                )
                t.tool_call("ls", {"path": "."}, call_id="c1")
                t.tool_result("c1", {"files": ["a"]}, is_error=True)
            a = t.assistant([{"type": "text", "content": "done"}, {"type": "x-chart", "v": 1}])
            t.append("assistant/chunk", {"delta": "do"})
            t.append("session/title", {"title": "renamed"}, ignorable=True)
            t.append("com.example/cost", {"usd": 0.1, "com.example.n": 2}, ignorable=True)
            v = t.append(
                "user/message",
                {
                    "message": {
                        "id": "u2",
                        "role": "user",
                        "parts": [{"type": "text", "content": "hi"}],
                    }
                },
                surface={"op": "replace", "start": u.seq, "end": u.seq},
                sources=[u.seq],
            )
            t.append(
                "surface/retract",
                {"reason": "oops"},
                surface={"op": "retract", "start": a.seq, "end": a.seq},
                sources=[a.seq, v.seq],
            )
            turn.reason = "max-tokens"
        t.flush()
        with pytest.raises(RuntimeError), t.turn():
            raise RuntimeError("boom")
    # A crash inside a turn (the bytes as they were after a flush), then repair's closers:
    # error tool/results with sources, step/end, turn/end with reason interrupted.
    with jsonltape.open(path) as t, t.turn(), t.step():
        t.assistant(tool_calls=[{"id": "c2", "name": "rm", "arguments": {}}])
        t.tool_call("rm", {}, call_id="c2")
        t.flush()
        image = path.read_bytes()
    crashed = path.with_name("crashed.jsonl")
    crashed.write_bytes(image)
    crashed.chmod(0o600)
    result = jsonltape.repair(crashed)
    assert result.state_before == "open-turn" and len(result.closers) == 3
    lines = path.read_bytes().splitlines() + crashed.read_bytes().splitlines()[-4:]
    return [json.loads(line) for line in lines]


def test_writer_output_validates_against_both_schemas(
    validators: tuple[Any, Any], tape_path: Path
) -> None:
    reader, writer = validators
    events = written_by_jsonltape(tape_path)
    types = {e["type"] for e in events}
    assert set(ev.CORE_TYPES) - types <= {
        t for t in ev.CORE_TYPES if t.startswith(("compaction/", "handoff/", "fork/", "branch/"))
    }
    for e in events:
        assert errors(writer, e) == [], e
        assert errors(reader, e) == [], e


def vector_events(pattern: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((ROOT / "spec" / "vectors").glob(pattern)):
        expected = json.loads(path.read_text(encoding="utf-8"))
        name = path.name.split(".")[0]
        if expected.get("ok") and name not in BREAK_THE_VOCABULARY:
            out += [(f"{path.parent.name}/{name}", e) for e in expected["events"]]
    return out


def test_reader_schema_accepts_the_accepted_vectors(validators: tuple[Any, Any]) -> None:
    reader, _ = validators
    events = vector_events("*/y_*.read.json") + vector_events("compat/*.read.json")
    assert len(events) > 400
    for name, e in events:
        assert errors(reader, e) == [], (name, e["seq"])


def test_reader_schema_rejects_what_breaks_the_vocabulary(validators: tuple[Any, Any]) -> None:
    reader, _ = validators
    for name in BREAK_THE_VOCABULARY:
        expected = json.loads(
            (ROOT / "spec" / "vectors" / "read" / f"{name}.read.json").read_text(encoding="utf-8")
        )
        assert any(errors(reader, e) for e in expected["events"]), name


BASE = {"seq": 3, "type": "turn/start", "time": 1, "data": {}, "crc": "0123abcd"}


@pytest.mark.parametrize(
    ("change", "reader_ok", "writer_ok"),
    [
        ({}, True, True),
        ({"x-note": 1}, True, False),  # unknown envelope member
        ({"data": {"com.example.k": 1}}, True, True),  # namespaced extension member in data
        ({"data": {"foo": 1}}, True, False),  # unknown, not namespaced
        ({"key": None}, True, False),  # null instead of omitted
        ({"ignorable": False}, True, False),
        ({"surface": "append"}, True, False),  # not model-visible
        ({"crc": "0123ABCD"}, False, False),
        ({"crc": "123abcd"}, False, False),
        ({"data": []}, False, False),
        ({"seq": -1}, False, False),
        ({"seq": 2**53}, False, False),
        ({"type": "Turn Start"}, True, False),
        ({"type": "session/flush", "data": {"offset": 9, "seq": 2}}, True, False),  # ignorable
        ({"type": "session/flush", "data": {"offset": 9, "seq": 2}, "ignorable": True}, True, True),
        ({"type": "session/start", "data": {"format": "jsonltape", "version": 1}}, False, False),
        ({"type": "turn/end", "data": {"turn": 1, "reason": "bored"}}, False, False),
    ],
)
def test_schemas_on_single_lines(
    validators: tuple[Any, Any], change: dict[str, Any], reader_ok: bool, writer_ok: bool
) -> None:
    reader, writer = validators
    obj = {**BASE, **change}
    assert (errors(reader, obj) == []) is reader_ok
    assert (errors(writer, obj) == []) is writer_ok


def _message_line(type_: str, role: str, parts: list[dict[str, Any]], **data: Any) -> Any:
    message = {"id": "m", "role": role, "parts": parts}
    return {
        "seq": 4,
        "type": type_,
        "time": 1,
        "data": {"message": message, **data},
        "surface": "append",
        "crc": "0123abcd",
    }


def test_schemas_on_messages(validators: tuple[Any, Any]) -> None:
    reader, writer = validators
    text = [{"type": "text", "content": "hi"}]
    response = {"type": "tool_call_response", "id": "c", "response": "ok"}
    good = [
        _message_line("user/message", "user", text),
        _message_line("user/message", "system", text),
        _message_line("assistant/message", "assistant", [{"type": "x-new", "any": 1}]),
        _message_line("tool/result", "tool", [response], call_id="c"),
    ]
    bad = [
        _message_line("user/message", "assistant", text),
        _message_line("tool/result", "tool", [response, response], call_id="c"),
        _message_line("tool/result", "tool", text, call_id="c"),
        _message_line("assistant/message", "assistant", [{"type": "text"}]),
        _message_line("assistant/message", "assistant", [{"content": "no type"}]),
    ]
    for obj in good:
        assert errors(reader, obj) == [] and errors(writer, obj) == [], obj
    for obj in bad:
        assert errors(reader, obj) and errors(writer, obj), obj
    no_surface = _message_line("user/message", "user", text)
    del no_surface["surface"]
    assert errors(writer, no_surface)
