"""The append pipeline accepts, refuses and encodes exactly as the spec's rules say.

:func:`reference` is those rules written the slow, obvious way from the spec (§4-§6 envelope
and framing, §8 data shapes, §9 unknown types), independent of the writer's shortcuts (its
cached type rules, the decode that checks the envelope, the inlined gate): a request is
checked rule by rule in the documented order and the first broken one names the error; an
accepted one becomes the JSON object the spec describes, members in its order, framed with
the CRC of its bytes. The property runs both on every request hypothesis draws; the last
test proves the comparison can fail, by finding a request that tells a broken pipeline
from the reference.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec
import pytest
from hypothesis import find, given, settings

import jsonltape
from jsonltape import _prepare
from jsonltape.events import CORE_TYPES, Replace, Retract, validate_data

from . import strategies

SEQ = 7
MAX_SAFE = 2**53 - 1
MAX_TIME = 253_402_300_799_999
MODEL_VISIBLE = {"user/message", "assistant/message", "tool/result"}
ALWAYS_IGNORABLE = {"session/flush", "assistant/chunk"}
TYPE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)+")


class Refused(Exception):
    def __init__(self, error: str, field: str | None) -> None:
        super().__init__(error, field)
        self.outcome = (error, field)


def _refuse(field: str | None, error: str = "InvalidEventError") -> Refused:
    return Refused(error, field)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _where(path: str, key: str) -> str:
    return (
        f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    )


def _lossless(value: Any, path: str, depth: int, seen: tuple[int, ...]) -> None:
    """Spec §4/§6: JSON values only, integers within ±(2**53-1), no NaN/infinity/-0.0,
    Unicode text, at most 128 levels of arrays and objects (the envelope is level 1)."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE:
            raise _refuse(path, "NotLosslessError")
        return
    if isinstance(value, float):
        if not math.isfinite(value) or (value == 0 and math.copysign(1, value) < 0):
            raise _refuse(path, "NotLosslessError")
        return
    if isinstance(value, str):
        if not _utf8(value):
            raise _refuse(path, "NotLosslessError")
        return
    if type(value) not in (dict, list) or id(value) in seen or depth + 1 > 128:
        raise _refuse(path, "NotLosslessError")
    inner = (*seen, id(value))
    if type(value) is dict:
        if not all(type(k) is str and _utf8(k) for k in value):
            raise _refuse(path, "NotLosslessError")
        for k, v in value.items():
            _lossless(v, _where(path, k), depth + 1, inner)
    else:
        for i, v in enumerate(value):
            _lossless(v, f"{path}[{i}]", depth + 1, inner)


def _surface(type_: str, value: Any) -> Any:
    """§8.6: what a type's ``surface`` member may be, as the JSON value it is written as."""
    if value is None and type_ in MODEL_VISIBLE:
        return "append"
    if type_ not in MODEL_VISIBLE and type_ != "surface/retract":
        if value is not None:
            raise _refuse("$.surface")
        return None
    if isinstance(value, (Replace, Retract)):
        value = {"op": value.__struct_config__.tag, "start": value.start, "end": value.end}
    if value == "append" and type_ in MODEL_VISIBLE:
        return "append"
    # The op's own shape first: its members, their types and ranges (out of range is the
    # wrong type, §6); then whether this type may carry it; then that it names earlier events.
    if (
        type(value) is not dict
        or set(value) != {"op", "start", "end"}
        or value["op"] not in ("replace", "retract")
        or not all(type(value[n]) is int and 0 <= value[n] <= MAX_SAFE for n in ("start", "end"))
    ):
        raise _refuse("$.surface")
    if (value["op"] == "retract") != (type_ == "surface/retract"):
        raise _refuse("$.surface.op")
    for name in ("start", "end"):
        if not 0 < value[name] < SEQ:
            raise _refuse(f"$.surface.{name}")
    return value


def reference(request: dict[str, Any]) -> tuple[Any, ...]:
    """What the spec says happens to ``request`` at seq 7: ``("line", members, data)`` or
    ``(error class name, field)``."""
    type_, data, key, time = (request[k] for k in ("type", "data", "key", "time"))
    if key is not None and (type(key) is not str or not 0 < len(key) <= 1024 or not _utf8(key)):
        raise _refuse("$.key")
    if type(type_) is not str or TYPE_NAME.fullmatch(type_) is None:
        raise _refuse("$.type")
    if type_ in ("session/start", "session/flush"):
        raise _refuse("$.type")
    if data is None:
        data = {}
    elif isinstance(data, Mapping):
        data = dict(data)
    else:
        raise _refuse("$.data")
    surface = _surface(type_, request["surface"])
    ignorable = request["ignorable"]
    if ignorable is None:
        ignorable = type_ in ALWAYS_IGNORABLE
    # A bool; "always ignorable: true" types stay so (§8.5), the surface is never skipped.
    elif type(ignorable) is not bool or (
        (type_ in ALWAYS_IGNORABLE and not ignorable) or (type_ in MODEL_VISIBLE and ignorable)
    ):
        raise _refuse("$.ignorable")
    sources = request["sources"]
    if sources is not None:
        if isinstance(sources, (str, bytes, Mapping)) or not isinstance(sources, Iterable):
            raise _refuse("$.sources", "SurfaceError")
        sources = list(sources)
        for i, s in enumerate(sources):
            if type(s) is not int or not 0 <= s < SEQ or s in sources[:i]:
                raise _refuse(f"$.sources[{i}]", "SurfaceError")
    if not ignorable and type_ not in CORE_TYPES:
        raise _refuse("$.type")
    if type(time) is not int or not 0 <= time <= MAX_TIME:
        raise _refuse("$.time")
    _lossless(data, "$.data", 1, ())
    try:
        validate_data(type_, data)
    except jsonltape.JsonltapeError as exc:
        raise Refused(type(exc).__name__, exc.field) from None
    members: list[tuple[str, Any]] = [("seq", SEQ), ("type", type_), ("time", time)]
    members.append(("data", data))
    for name, value in (("surface", surface), ("sources", sources), ("key", key)):
        if value is not None:
            members.append((name, value))
    if ignorable:
        members.append(("ignorable", True))
    return ("line", members)


def expected(request: dict[str, Any]) -> tuple[Any, ...]:
    try:
        return reference(request)
    except Refused as refused:
        return refused.outcome


def outcome(prepare: Callable[..., tuple[bytes, Any]], request: dict[str, Any]) -> tuple[Any, ...]:
    """What the pipeline did, in the reference's terms; the line's framing is checked here."""
    r = request
    try:
        line, event = prepare(
            r["type"],
            r["data"],
            r["surface"],
            r["sources"],
            r["key"],
            r["ignorable"],
            SEQ,
            r["time"],
        )
    except jsonltape.JsonltapeError as exc:
        return type(exc).__name__, exc.field
    body, suffix = line[:-19], line[-19:]
    assert suffix == b',"crc":"%08x"}\n' % zlib.crc32(body), "framing (spec §4, §5)"
    members = json.loads(line)  # a dict keeps the members in the line's order
    assert list(members)[-1] == "crc" and members["crc"] == f"{zlib.crc32(body):08x}"
    assert event == msgspec.json.decode(line, type=jsonltape.Event)
    return ("line", list(members.items())[:-1])


def _same(got: tuple[Any, ...], want: tuple[Any, ...]) -> bool:
    """Equal outcomes; lines member by member, values compared as the JSON they encode to."""
    if got[0] != "line" or want[0] != "line":
        return got == want
    enc = msgspec.json.encode
    return [k for k, _ in got[1]] == [k for k, _ in want[1]] and all(
        enc(a) == enc(b) for (_, a), (_, b) in zip(got[1], want[1], strict=True)
    )


@settings(max_examples=800)
@given(request=strategies.append_request())
def test_the_append_pipeline_accepts_refuses_and_encodes_as_the_spec_says(
    request: dict[str, Any],
) -> None:
    got = outcome(_prepare.prepare_event, request)
    want = expected(request)
    assert _same(got, want), (got, want)


def _drop_duplicate_sources(original: Callable[..., Any]) -> Callable[..., Any]:
    def mutant(type_: Any, data: Any, surface: Any, sources: Any, *rest: Any) -> Any:
        if type(sources) is list and all(type(s) is int for s in sources):
            sources = list(dict.fromkeys(sources)) or None  # silently "fixes" the request
        return original(type_, data, surface, sources, *rest)

    return mutant


@pytest.mark.parametrize("mutation", ["no shape check", "duplicate sources dropped"])
def test_the_comparison_tells_a_broken_pipeline_from_the_reference(
    monkeypatch: pytest.MonkeyPatch, mutation: str
) -> None:
    """Seeded mutations of the pipeline: hypothesis finds a request where each disagrees."""
    prepare = _prepare.prepare_event
    if mutation == "no shape check":
        monkeypatch.setattr(_prepare, "validate_fast", lambda *a: None)
    else:
        prepare = _drop_duplicate_sources(prepare)
    find(
        strategies.append_request(),
        lambda r: not _same(outcome(prepare, r), expected(r)),
        settings=settings(max_examples=5000, database=None),
    )
