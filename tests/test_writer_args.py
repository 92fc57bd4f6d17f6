"""Wrong arguments to the writer API are library errors naming the argument, never a stdlib
TypeError/ValueError, and they leave nothing behind (no session, no lock file, no bytes)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jsonltape

# (what, keyword arguments to jsonltape.open(create=True), the field the error names)
OPEN_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("title int", {"title": 5}, "$.data.title"),
    ("cwd list", {"cwd": ["/"]}, "$.data.cwd"),
    ("agent bytes", {"agent": b"me"}, "$.data.agent"),
    ("meta list", {"meta": [("a", 1)]}, "$.data.meta"),
    ("meta int key", {"meta": {1: 2}}, "$.data.meta"),
    ("parent str", {"parent": "other.jsonl"}, "$.data.parent"),
    ("session id int", {"session_id": 5}, "$.data.id"),
    ("created float", {"created": 1.5}, "$.data.created"),
    ("created negative", {"created": -1}, "$.data.created"),
    ("lock_timeout nan", {"lock_timeout": math.nan}, "lock_timeout"),
    ("lock_timeout inf", {"lock_timeout": math.inf}, "lock_timeout"),
    ("lock_timeout negative", {"lock_timeout": -1}, "lock_timeout"),
    ("lock_timeout str", {"lock_timeout": "1"}, "lock_timeout"),
    ("lock_timeout bool", {"lock_timeout": True}, "lock_timeout"),
    ("durability bogus", {"durability": "bogus"}, "durability"),
    ("durability list", {"durability": ["group"]}, "durability"),
    ("group_events zero", {"group_events": 0}, "group_events"),
    ("group_events float", {"group_events": 2.0}, "group_events"),
    ("group_ms nan", {"group_ms": math.nan}, "group_ms"),
    ("group_ms negative", {"group_ms": -5}, "group_ms"),
]


@pytest.mark.parametrize(("what", "kwargs", "field"), OPEN_CASES, ids=[c[0] for c in OPEN_CASES])
def test_bad_open_arguments_are_refused_naming_the_field_before_anything_is_created(
    tape_path: Path, what: str, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(jsonltape.InvalidEventError) as err:
        jsonltape.open(tape_path, create=True, **kwargs)
    assert err.value.field == field, what
    assert isinstance(err.value, ValueError)
    assert list(tape_path.parent.iterdir()) == []  # no session, no lock file, no temp file


def test_bad_create_mode_is_refused(tape_path: Path) -> None:
    with pytest.raises(jsonltape.InvalidEventError) as err:
        jsonltape.open(tape_path, create="yes")  # type: ignore[arg-type]
    assert err.value.field == "create"


@pytest.mark.parametrize(
    "path",
    [5, None, b"s.jsonl", "s\x00.jsonl", ""],
    ids=["int", "None", "bytes", "NUL", "empty"],
)
@pytest.mark.parametrize("call", ["open", "create", "repair"])
def test_a_path_that_names_no_file_is_a_library_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: Any, call: str
) -> None:
    monkeypatch.chdir(tmp_path)
    run: Callable[[], object] = {
        "open": lambda: jsonltape.open(path),
        "create": lambda: jsonltape.open(path, create=True),
        "repair": lambda: jsonltape.repair(path),
    }[call]
    with pytest.raises(jsonltape.InvalidEventError) as err:
        run()
    assert err.value.field == "path"
    assert list(tmp_path.iterdir()) == []


def test_repair_refuses_a_bad_lock_timeout(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    with pytest.raises(jsonltape.InvalidEventError) as err:
        jsonltape.repair(tape_path, lock_timeout=math.nan)
    assert err.value.field == "lock_timeout"


_MSG = {"message": {"id": "m", "role": "user", "parts": []}}

# (what, a call on an open tape, the field the error names)
TAPE_CASES: list[tuple[str, Callable[[jsonltape.Tape], object], str]] = [
    ("append type int", lambda t: t.append(5), "$.type"),  # type: ignore[arg-type]
    ("append data int", lambda t: t.append("x.a/b", 5, ignorable=True), "$.data"),  # type: ignore[arg-type]
    ("append sources int", lambda t: t.append("user/message", _MSG, sources=5), "$.sources"),  # type: ignore[arg-type]
    ("append sources str", lambda t: t.append("user/message", _MSG, sources="01"), "$.sources"),  # type: ignore[arg-type]
    ("append key int", lambda t: t.append("x.a/b", {}, key=5, ignorable=True), "$.key"),  # type: ignore[arg-type]
    ("append ignorable int", lambda t: t.append("x.a/b", {}, ignorable=1), "$.ignorable"),  # type: ignore[arg-type]
    ("append time nan", lambda t: t.append("x.a/b", {}, time=math.nan, ignorable=True), "$.time"),  # type: ignore[arg-type]
    ("append surface int", lambda t: t.append("user/message", {}, surface=5), "$.surface"),
    ("batch of an int", lambda t: t.append_batch(5), ""),  # type: ignore[arg-type]
    ("batch of None", lambda t: t.append_batch(None), ""),  # type: ignore[arg-type]
    ("user int", lambda t: t.user(5), "$.data.message.parts"),  # type: ignore[arg-type]
    ("user None", lambda t: t.user(None), "$.data.message.parts"),  # type: ignore[arg-type]
    ("user id int", lambda t: t.user("hi", id=5), "$.data.message.id"),  # type: ignore[arg-type]
    ("assistant int", lambda t: t.assistant(5), "$.data.message.parts"),  # type: ignore[arg-type]
    ("tool_calls int", lambda t: t.assistant("x", tool_calls=5), "$.data.message.parts"),  # type: ignore[arg-type]
    ("tool_call not a mapping", lambda t: t.assistant("x", tool_calls=[5]), "parts[1]"),  # type: ignore[list-item]
    ("tool_call without name", lambda t: t.assistant(tool_calls=[{}]), "parts[0]"),
    ("model int", lambda t: t.assistant("x", model=5), "$.data.model"),  # type: ignore[arg-type]
    ("usage list", lambda t: t.assistant("x", usage=[1]), "$.data.usage"),  # type: ignore[arg-type]
    ("tool_call name int", lambda t: t.tool_call(5), "$.data.name"),  # type: ignore[arg-type]
    ("tool_result call id int", lambda t: t.tool_result(5, "ok"), "$.data.call_id"),  # type: ignore[arg-type]
    ("tool_result is_error str", lambda t: t.tool_result("c", "ok", is_error="yes"), "is_error"),  # type: ignore[arg-type]
    ("turn input set", lambda t: t.turn(input={1}).__enter__(), "$.data.input"),
]


@pytest.mark.parametrize(("what", "call", "field"), TAPE_CASES, ids=[c[0] for c in TAPE_CASES])
def test_bad_tape_arguments_are_library_errors_and_write_nothing(
    tape_path: Path, what: str, call: Callable[[jsonltape.Tape], object], field: str
) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("before")
        tape.flush()
        size, seq = os.path.getsize(tape_path), tape.next_seq
        with pytest.raises(jsonltape.InvalidEventError) as err:
            call(tape)
        assert tape.next_seq == seq
        assert field in (err.value.field or ""), (what, err.value.field)
        assert err.value.path == str(tape_path)
        tape.flush()
        assert os.path.getsize(tape_path) == size
        assert tape.user("after").seq == seq  # the tape is still usable


@pytest.mark.parametrize("sid", ["abc\n", "abc\r", "a b", "", "-abc", "a" * 129])
def test_a_session_id_with_a_trailing_newline_or_other_unsafe_text_is_refused(sid: str) -> None:
    with pytest.raises(jsonltape.InvalidSessionIdError):
        jsonltape.validate_session_id(sid)


def test_non_event_arguments_are_invalid_argument_errors(tmp_path: Path) -> None:
    for kwargs in ({"lock_timeout": float("nan")}, {"durability": "bogus"}):
        with pytest.raises(jsonltape.InvalidArgumentError) as err:
            jsonltape.open(tmp_path / "s.jsonl", create=True, **kwargs)  # type: ignore[arg-type]
        assert err.value.code == "bad-argument" and err.value.field in kwargs
    with pytest.raises(jsonltape.InvalidArgumentError):
        jsonltape.open("a\0b.jsonl", create=True)
