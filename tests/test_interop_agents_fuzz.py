"""Damaged and hostile input to the Qwen Code, Kimi CLI, Factory Droid, OpenHands and Amp
importers: a line log cut at every byte maps exactly what its complete lines map; a thread
document cut anywhere, an event file being written, records of the wrong types, values nested
far too deep: the importer never raises, every verdict is one line naming the place, nothing is
written for a source it refuses, and what it imports verifies clean."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape.errors import JsonltapeError
from jsonltape.interop import discover, foreign, import_file

from ._agents import AGENTS, FIXTURES, HOUR_AGO, LINE_LOGS, tree
from ._importers import kept_whole
from .conftest import LONG

#: The small fixtures every run cuts at every byte (JSONLTAPE_LONG=1: every line log).
SWEPT = {
    "qwen-code": ["0b6298e3-0000-4000-8000-000000000000.jsonl"],
    "kimi-cli": ["5e0d1f5c-0000-4000-8000-000000000001/wire.jsonl"],
    "factory-droid": ["abc12345-0000-4000-8000-000000000001.jsonl"],
}


def _line_logs() -> list[tuple[str, Path]]:
    found = []
    for agent in LINE_LOGS:
        for f in sorted((FIXTURES / agent).rglob("*.jsonl")):
            if f.name == "context.jsonl":
                continue
            if LONG or any(str(f).endswith(s) for s in SWEPT[agent]):
                found.append((agent, f))
    return found


def _scan(agent: str, path: Path) -> tuple[list[tuple[str, Any]], Any]:
    scan = foreign.scan_file(agent, path, raw=True)
    got = [(sid, (e.seq, e.type, e.data, e.surface, e.sources, e.key)) for sid, e in scan.events()]
    return got, scan.report


def _place(agent: str, src: Path, dest: Path) -> Path:
    """Where the agent keeps a file like ``src`` under ``dest`` (a wire.jsonl stays one)."""
    target = dest / src.relative_to(FIXTURES / agent)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


@pytest.mark.parametrize(
    "agent,src", _line_logs(), ids=lambda v: v if isinstance(v, str) else v.name
)
def test_a_line_log_cut_at_every_byte_maps_what_its_complete_lines_map(
    tmp_path: Path, agent: str, src: Path
) -> None:
    data = src.read_bytes()
    path = _place(agent, src, tmp_path / "cut")

    def scan(upto: int) -> tuple[list[tuple[str, Any]], Any]:
        path.write_bytes(data[:upto])
        os.utime(path, (HOUR_AGO, HOUR_AGO))
        return _scan(agent, path)

    expected: dict[int, list[tuple[str, Any]]] = {}
    for cut in range(len(data) + 1):
        complete = data.rfind(b"\n", 0, cut) + 1  # the lines a writer finished
        if complete not in expected:
            expected[complete] = scan(complete)[0]
        got, report = scan(cut)
        fragment = data[complete:cut]
        if fragment.strip() and _is_object(fragment):  # only its newline is missing: taken
            assert report.torn is None
            continue
        assert got == expected[complete], f"cut at byte {cut}"
        if fragment:
            assert report.torn is not None and report.torn.offset == complete, cut


def _is_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


def test_a_thread_document_cut_anywhere_is_one_verdict_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    src = FIXTURES / "amp" / "agentsview-tooluse-thinking.json"
    data = src.read_bytes()
    threads = tmp_path / "threads"
    threads.mkdir()
    path = threads / "T-cut.json"
    step = 1 if LONG else 7
    for cut in range(0, len(data), step):
        path.write_bytes(data[:cut])
        os.utime(path, (HOUR_AGO, HOUR_AGO))
        out = tmp_path / f"root{cut}"
        report = import_file("amp", path, out)
        assert report.status == "error", cut
        assert report.error is not None and "\n" not in report.error and str(path) in report.error
        assert not out.exists() or not any(out.rglob("*.jsonl"))  # nothing written
    path.write_bytes(data)
    os.utime(path, (HOUR_AGO, HOUR_AGO))
    assert import_file("amp", path, tmp_path / "root").status == "imported"


def test_a_thread_still_being_saved_holds_its_last_message_until_it_is_settled(
    tmp_path: Path,
) -> None:
    root = tree("amp", tmp_path / "src", finished=False)
    path = root / "T-019cb000-1111-7222-8333-444455556666.json"
    out = tmp_path / "root"
    live = import_file("amp", path, out, settle=None)
    assert live.status == "imported" and live.held is not None
    messages = json.loads(path.read_bytes())["messages"]
    session = Path(live.sessions[0])
    kept = [e for e in jsonltape.read(session) if "raw" in (e.data.get("import") or {})]
    assert len(kept) == len(messages)  # the thread record and every message but the last
    os.utime(path, (HOUR_AGO, HOUR_AGO))
    done = import_file("amp", path, out)
    assert done.status == "imported" and done.held is None and done.events > 0


def test_an_event_file_being_written_waits_then_a_torn_one_is_one_problem(tmp_path: Path) -> None:
    root = tree("openhands", tmp_path / "src", finished=False)
    conv = root / "5b2f0e3c9d1a4e7f8a6b1c2d3e4f5a6b"
    files = sorted((conv / "events").glob("event-*.json"))
    whole = files[5].read_bytes()
    files[5].write_bytes(whole[: len(whole) // 2])  # OpenHands is writing it
    out = tmp_path / "root"
    live = import_file("openhands", conv, out, settle=None)
    assert live.status == "imported" and live.held is not None and live.held.line == 7
    session = Path(live.sessions[0])
    carried = {
        n
        for e in jsonltape.read(session)
        for n, _ in kept_whole((e.data.get("import") or {}).get("raw"))
    }
    assert carried == set(range(1, 7))  # the records before it, not it nor later
    files[5].write_bytes(whole)  # it finished
    os.utime(conv / "base_state.json")
    grown = import_file("openhands", conv, out, settle=None)
    assert grown.status == "imported" and grown.held is None and grown.events > 0
    # a file a crash left torn is one problem once the conversation is settled
    other = tmp_path / "other"
    files[5].write_bytes(whole[:10])
    for dirpath, _dirs, names in os.walk(conv):
        for n in [*names, "."]:
            os.utime(os.path.join(dirpath, n), (HOUR_AGO, HOUR_AGO))
    settled = import_file("openhands", conv, other)
    assert settled.status == "imported" and settled.held is None
    assert [why for _n, why in settled.problems] == [
        f"event file {files[5].name}: malformed or unreadable JSON"
    ]


# -- records of the wrong shape --------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _mutate(value: Any, draw: Any) -> Any:
    """``value`` with one member somewhere replaced by a value of any type (or nested far
    deeper than a line may be)."""
    if not isinstance(value, (dict, list)) or not value or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()) and draw(st.booleans()):
            return json.loads("[" * 700 + "]" * 700)
        return draw(_VALUES)
    keys = list(value) if isinstance(value, dict) else list(range(len(value)))
    k = keys[draw(st.integers(0, len(keys) - 1))]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[k] = _mutate(copy[k], draw)
    return copy


def _records(agent: str, root: Path) -> list[Path]:
    """The files holding the agent's records under ``root`` (what a mutation may hit)."""
    if agent in LINE_LOGS:
        return sorted(p for p in root.rglob("*.jsonl") if p.name != "context.jsonl")
    if agent == "amp":
        return sorted(root.glob("*.json"))
    return sorted(root.glob("*/events/event-*.json"))


def _rewrite(agent: str, path: Path, draw: Any) -> None:
    if agent in LINE_LOGS:
        lines = path.read_bytes().splitlines()
        k = draw(st.integers(0, len(lines) - 1))
        value = _mutate(json.loads(lines[k]), draw)
        lines[k] = json.dumps(value).encode()
        path.write_bytes(b"\n".join(lines) + b"\n")
    else:
        path.write_text(json.dumps(_mutate(json.loads(path.read_bytes()), draw)))


@pytest.mark.parametrize("agent", AGENTS)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_records_of_any_shape_never_raise_and_every_verdict_is_one_line(
    tmp_path_factory: pytest.TempPathFactory, agent: str, data: st.DataObject
) -> None:
    base = tmp_path_factory.mktemp("fuzz")
    root = tree(agent, base / "src")
    files = _records(agent, root)
    for _ in range(data.draw(st.integers(1, 3))):
        _rewrite(agent, files[data.draw(st.integers(0, len(files) - 1))], data.draw)
    for dirpath, _dirs, names in os.walk(root):
        for n in [*names, "."]:
            os.utime(os.path.join(dirpath, n), (HOUR_AGO, HOUR_AGO))
    items, _skipped = discover(agent, [root])
    for item in items:
        out = base / "root"
        report = import_file(agent, item, out)
        assert report.status in ("imported", "error", "empty", "unchanged"), report
        if report.status == "error":
            assert report.error is not None and "\n" not in report.error
        for _n, why in report.problems:
            assert "\n" not in why
        for s in report.sessions if report.status == "imported" else ():
            assert jsonltape.verify(s).state in ("clean", "open-turn"), s
        # the read-only scan says the same, or refuses in one line
        try:
            scan = foreign.scan_file(agent, item, raw=False)
            list(scan.events())
        except JsonltapeError as exc:
            assert report.status == "error" and "\n" not in str(exc)
    shutil.rmtree(base)
