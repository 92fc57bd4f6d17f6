"""Property tests: JSON-safe data round-trips byte-exactly; everything else is refused clearly
(the whole append pipeline against the spec's rules: tests/test_append_pipeline.py)."""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import jsonltape
from jsonltape._gate import MAX_SAFE_INT

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INT, max_value=MAX_SAFE_INT)
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not (f == 0.0 and math.copysign(1.0, f) < 0)
    )
    | st.text()
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=6)

# Values that must never enter a session, with the reason fragment the error must carry.
poisons = st.sampled_from(
    [
        (float("nan"), "not valid JSON"),
        (float("-inf"), "not valid JSON"),
        (-0.0, "negative zero"),
        (MAX_SAFE_INT + 1, "interoperable range"),
        (-(2**64), "interoperable range"),
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        ((1,), "tuple"),
        (b"x", "bytes"),
        (bytearray(b"x"), "bytearray"),
        (datetime.datetime(2026, 1, 1), "datetime"),
        (datetime.date(2026, 1, 1), "date"),
        (decimal.Decimal("1.5"), "Decimal"),
        (uuid.UUID(int=1), "UUID"),
        ({2: "int key"}, "not a string"),
        ("\udc80", "lone surrogate"),
    ]
)


@st.composite
def poisoned(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A JSON-safe object with one poison planted at a random path; returns (obj, path, why)."""
    poison, why = draw(poisons)
    depth = draw(st.integers(0, 3))
    path = "$.data"
    root: dict[str, Any] = draw(json_objects)
    node: Any = root
    key = draw(st.text(alphabet="abc_", min_size=1, max_size=3))
    for _ in range(depth):
        segment = f"[{key}]" if isinstance(key, int) else f".{key}"
        if draw(st.booleans()):
            child: Any = [draw(json_scalars) for _ in range(draw(st.integers(0, 2)))]
            child.append(None)
            node[key] = child
            node, key = child, len(child) - 1
        else:
            child = {}
            node[key] = child
            node, key = child, draw(st.text(alphabet="xyz", min_size=1, max_size=3))
        path += segment
    node[key] = poison
    path += f"[{key}]" if isinstance(key, int) else f".{key}"
    return root, path, why


@given(data=json_objects)
def test_json_safe_data_round_trips_byte_exactly(
    tmp_path_factory: Any, data: dict[str, Any]
) -> None:
    path = Path(tmp_path_factory.mktemp("rt")) / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        written = tape.append("x.test/data", data, ignorable=True)
    (line,) = [ln for ln in jsonltape.lines(path) if ln.event.seq == written.seq]
    assert line.event.data == data
    assert msgspec.json.encode(line.event.data) == msgspec.json.encode(data)
    assert line.event == written


@given(case=poisoned())
def test_gate_refuses_every_non_json_value_and_names_it(
    tmp_path_factory: Any, case: tuple[dict[str, Any], str, str]
) -> None:
    data, where, why = case
    path = Path(tmp_path_factory.mktemp("gate")) / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.flush()  # queued lines reach the file; a refused append adds none
        size = path.stat().st_size
        with pytest.raises(jsonltape.NotLosslessError) as err:
            tape.append("x.test/data", data, ignorable=True)
        tape.flush()
        assert path.stat().st_size == size
    assert err.value.field == where
    assert why in err.value.message
