"""The lossless gate looks past what strings hold: digit runs, brackets and ``-0`` inside a
string never send an event to the slow walk (``_gate.explain``), and the same things outside
strings (an unsafe integer, a negative zero, nesting too deep) are still refused, whatever
quotes and backslashes the strings around them hold."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import jsonltape
from jsonltape._gate import MAX_DEPTH, MAX_SAFE_INT, encoder, outside_strings, suspect
from jsonltape.interop import import_paths

FIXTURES = Path(__file__).parent / "fixtures" / "interop"

#: Pieces that look like trouble to a byte scan but are only text: digit runs, openers, minus
#: zeros, and the escapes that decide where a string ends (a quote after backslashes).
_PIECES = ["1796598425547540309", "0000000000000000", "[", "{" * 130, "[" * 64, "-0", "-0.0",
           "-0e5", '"', "\\", '\\"', '\\\\"', "\\\\", "x", "é", "\n", "\u2028", "}", "]", ":",
           ","]  # fmt: skip
tricky = st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)
#: Numbers with fewer than 16 digits, never a negative zero: nothing the gate must look at.
plain_numbers = st.integers(-(10**15) + 1, 10**15 - 1) | st.sampled_from([0.5, -1.25, 3e-7, 2.0])
safe_values = st.recursive(
    tricky | plain_numbers | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky, inner, max_size=4),
    max_leaves=20,
)
safe_objects = st.dictionaries(tricky, safe_values, max_size=5)


@given(data=safe_objects)
def test_text_in_strings_is_never_suspect_and_round_trips(
    tmp_path_factory: Any, data: dict[str, Any]
) -> None:
    body = encoder.encode({"type": "x.test/data", "key": json.dumps(data), "data": data})
    assert not suspect(body)
    path = Path(tmp_path_factory.mktemp("s")) / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        written = tape.append("x.test/data", data, ignorable=True)
    (line,) = [ln for ln in jsonltape.lines(path) if ln.event.seq == written.seq]
    assert line.event.data == data


def _outside_by_walk(text: str) -> str:
    """The characters of JSON ``text`` outside its strings, one at a time (the oracle)."""
    out: list[str] = []
    inside = escaped = False
    for c in text:
        if escaped:
            escaped = False
        elif inside and c == "\\":
            escaped = True
        elif c == '"':
            inside = not inside
        elif not inside:
            out.append(c)
    return "".join(out)


@given(data=safe_objects, around=tricky)
def test_what_is_left_outside_strings_is_what_a_walk_finds_there(
    data: dict[str, Any], around: str
) -> None:
    body = encoder.encode({around: data, "n": [around, -1, 2.5]})
    assert outside_strings(body).decode() == _outside_by_walk(body.decode())


@pytest.mark.parametrize(
    ("poison", "why"),
    [
        (MAX_SAFE_INT + 1, "interoperable range"),
        (-(2**60), "interoperable range"),
        (-0.0, "negative zero"),
    ],
)
@given(data=safe_objects, key=tricky)
def test_an_unsafe_number_among_tricky_strings_is_still_refused(
    tmp_path_factory: Any, data: dict[str, Any], key: str, poison: Any, why: str
) -> None:
    data = {**data, key: [poison, key]}
    path = Path(tmp_path_factory.mktemp("p")) / "s.jsonl"
    with (
        jsonltape.open(path, create=True) as tape,
        pytest.raises(jsonltape.NotLosslessError, match=why),
    ):
        tape.append("x.test/data", data, ignorable=True)


@given(key=tricky)
def test_nesting_too_deep_among_tricky_strings_is_still_refused(
    tmp_path_factory: Any, key: str
) -> None:
    deep: Any = key
    for _ in range(MAX_DEPTH):
        deep = [deep, key]
    path = Path(tmp_path_factory.mktemp("d")) / "s.jsonl"
    with (
        jsonltape.open(path, create=True) as tape,
        pytest.raises(jsonltape.NotLosslessError, match="nest deeper"),
    ):
        tape.append("x.test/data", {key: deep}, ignorable=True)


def test_no_line_of_an_aider_import_is_suspect(tmp_path: Path) -> None:
    # Every import/sync marker holds mtime_ns, a 19-digit string, and its key ends in it: each
    # was walked string by string (1.4 ms a marker listing 1,134 sessions of a real history).
    repo = tmp_path / "repo"
    repo.mkdir()
    fixture = FIXTURES / "aider" / "aider-repo-head.chat.history.md"
    (repo / ".aider.chat.history.md").write_bytes(fixture.read_bytes())
    sessions = [
        s for r in import_paths("aider", [repo], tmp_path / "root", settle=0) for s in r.sessions
    ]
    assert len(sessions) == 5
    suspects = [
        (s, n)
        for s in sessions
        for n, raw in enumerate(Path(s).read_bytes().splitlines())
        if suspect(raw)
    ]
    assert suspects == []
