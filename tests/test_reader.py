"""Streaming reads, seeking by seq or offset, and verify's classification and report."""

from __future__ import annotations

from pathlib import Path

import pytest

import jsonltape
from jsonltape import _framing

from .helpers import golden, one_turn, raw_lines


def _big(path: Path, n: int = 3000) -> None:
    with jsonltape.open(path, create=True, group_events=50) as tape:
        for i in range(n):
            tape.append("x.test/n", {"i": i, "pad": "p" * (i % 97)}, ignorable=True)


def test_read_from_seq_finds_the_line_by_bisection(tape_path: Path) -> None:
    _big(tape_path)
    all_events = list(jsonltape.read(tape_path))
    for start in (0, 1, 2, 57, 1500, 2999, len(all_events) - 1):
        got = list(jsonltape.read(tape_path, from_seq=start))
        assert [e.seq for e in got] == list(range(start, len(all_events)))
    assert list(jsonltape.read(tape_path, from_seq=len(all_events) + 5)) == []


def test_read_from_offset_resumes_where_a_line_starts(tape_path: Path) -> None:
    _big(tape_path, 200)
    lines = list(jsonltape.lines(tape_path))
    mid = lines[120]
    resumed = list(jsonltape.lines(tape_path, from_offset=mid.offset))
    assert resumed == lines[120:]
    assert b"".join(ln.raw for ln in lines) == tape_path.read_bytes()


@pytest.mark.parametrize("first_seq", [-2, 5])
def test_from_offset_takes_the_first_seq_and_then_checks_density(
    tape_path: Path, first_seq: int
) -> None:
    # The first line read from an offset sets the seq; none of its values, even a negative
    # one from a hand-made line, may switch the density check off for the lines after it.
    golden(tape_path, turns=1)
    start = tape_path.stat().st_size
    with open(tape_path, "ab") as f:
        for seq in (first_seq, 42, 43):
            body = b'{"seq":%d,"type":"x.test/n","time":1,"data":{}}' % seq
            f.write(_framing.frame(body))
    served = [first_seq] if first_seq >= 0 else []  # nothing below from_seq=0 is served
    assert [e.seq for e in jsonltape.read(tape_path, from_offset=start)] == served
    assert [ln.event.seq for ln in jsonltape.lines(tape_path, from_offset=start)] == served


def test_torn_last_line_is_not_served(tape_path: Path) -> None:
    golden(tape_path, turns=2)
    full = list(jsonltape.read(tape_path))
    with open(tape_path, "ab") as f:
        f.write(b'{"seq":999,"type":"user/mess')
    assert list(jsonltape.read(tape_path)) == full
    report = jsonltape.verify(tape_path)
    assert report.state == "torn-tail"
    assert report.line == len(full) + 1
    assert report.offset == tape_path.stat().st_size - len(b'{"seq":999,"type":"user/mess')
    assert report.reason is not None and "incomplete line" in report.reason


def test_valid_lines_after_a_bad_tail_line_are_not_served(tape_path: Path) -> None:
    golden(tape_path, turns=2)
    lines = raw_lines(tape_path)
    # drop one line after the last checkpoint: the lines after it have the wrong seq
    with jsonltape.open(tape_path) as tape:
        one_turn(tape)
    lines = raw_lines(tape_path)
    damaged = b"".join(lines[:-4] + lines[-3:-1])  # no closing checkpoint, one line missing
    tape_path.write_bytes(damaged)
    served = list(jsonltape.read(tape_path))
    assert len(served) == len(lines) - 4
    assert jsonltape.verify(tape_path).state == "torn-tail"


def test_corruption_raises_after_serving_the_good_prefix(tape_path: Path) -> None:
    golden(tape_path, turns=3)
    lines = raw_lines(tape_path)
    lines[4] = lines[4].replace(b'"seq":4', b'"seq":5', 1)
    tape_path.write_bytes(b"".join(lines))
    served = []
    with pytest.raises(jsonltape.CorruptError) as err:
        for e in jsonltape.read(tape_path):
            served.append(e.seq)
    assert served == [0, 1, 2, 3]
    assert err.value.line == 5
    assert err.value.offset == sum(len(x) for x in lines[:4])
    assert "crc mismatch" in str(err.value)
    report = jsonltape.verify(tape_path)
    assert (report.state, report.line, report.offset) == ("corrupt", 5, err.value.offset)


@pytest.mark.parametrize(
    ("mutate", "state", "line"),
    [
        (lambda ls: ls[:3] + ls[4:], "corrupt", 4),  # a line lost before a checkpoint
        (lambda ls: ls[:4] + [ls[3]] + ls[4:], "corrupt", 5),  # a duplicated line
        (lambda ls: ls[:3] + [ls[4], ls[3]] + ls[5:], "corrupt", 4),  # swapped lines
        (lambda ls: ls[:3] + [ls[3].replace(b"\n", b"\r\n")] + ls[4:], "corrupt", 4),  # CRLF
        (lambda ls: ls[:3] + [b"\n"] + ls[3:], "corrupt", 4),  # a blank line
    ],
)
def test_seq_and_framing_damage_is_located(tape_path: Path, mutate, state: str, line: int) -> None:  # type: ignore[no-untyped-def]
    golden(tape_path, turns=3)
    tape_path.write_bytes(b"".join(mutate(raw_lines(tape_path))))
    report = jsonltape.verify(tape_path)
    assert (report.state, report.line) == (state, line)


def test_verify_reports_open_turn_only_for_crashed_writers(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.append("turn/start", {})
        tape.user("left open on purpose")
    # closed cleanly with the turn open: clean, and a new writer does not interrupt it
    report = jsonltape.verify(tape_path)
    assert report.state == "clean" and report.open_turn == 1 and report.closed
    with jsonltape.open(tape_path) as tape:
        assert tape.open_turn == 1
        assert tape.closers == []
        tape.user("still the same turn")
    # a crash: drop the closing checkpoint
    lines = raw_lines(tape_path)
    tape_path.write_bytes(b"".join(lines[:-1]))
    report = jsonltape.verify(tape_path)
    assert report.state == "open-turn" and report.open_turn == 1
    with jsonltape.open(tape_path) as tape:
        assert [e.type for e in tape.closers] == ["turn/end"]
        assert tape.closers[0].data == {"turn": 1, "reason": "interrupted", "synthetic": True}
        assert tape.open_turn is None


def test_closers_distinguish_recorded_from_unstarted_tool_calls(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        turn = tape.append("turn/start", {}).seq
        with tape.step() as step:
            tape.user("go")
            tape.assistant(
                tool_calls=[
                    {"id": "a", "name": "Write", "arguments": {}},
                    {"id": "b", "name": "Read", "arguments": {}},
                ]
            )
            call = tape.tool_call("Write", {}, call_id="a")
            tape.flush()
            data = tape_path.read_bytes()  # the crash happens here, inside the step
    tape_path.write_bytes(data)
    result = jsonltape.repair(tape_path)
    events = {e.seq: e for e in jsonltape.read(tape_path)}
    closers = [events[s] for s in result.closers]
    assert [e.type for e in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
    a, b, step_end, turn_end = closers
    assert a.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN" and a.sources == [call.seq]
    assert "Do not retry blindly" in a.data["message"]["parts"][0]["response"]
    assert b.data["error"]["code"] == "TOOL_NOT_STARTED" and b.sources is None
    assert a.surface == "append" and a.data["synthetic"] is True
    assert step_end.data == {"step": step, "turn": turn, "synthetic": True}
    assert turn_end.data["reason"] == "interrupted"
    last_time = max(e.time for s, e in events.items() if s < result.closers[0])
    assert all(e.time == last_time for e in closers)


def test_header_reads_only_line_one(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, title="T", session_id="abc") as tape:
        tape.user("x")
    h = jsonltape.header(tape_path)
    assert (h.id, h.title, h.version, h.format) == ("abc", "T", 1, "jsonltape")


def test_writer_refuses_a_file_with_a_line_deleted_before_its_checkpoints(
    tape_path: Path,
) -> None:
    """A bad merge or edit that drops a line shifts every later offset: the writer's tail scan
    skips the shifted checkpoints, reaches the damage and refuses to append."""
    golden(tape_path, turns=4)
    lines = raw_lines(tape_path)
    tape_path.write_bytes(b"".join(lines[:6] + lines[7:]))
    size = tape_path.stat().st_size
    with pytest.raises(jsonltape.CorruptError, match="line 7") as err:
        jsonltape.open(tape_path)
    assert err.value.offset == sum(len(x) for x in lines[:6])
    assert tape_path.stat().st_size == size
    result = jsonltape.repair(tape_path, force=True)
    assert result.state_before == "corrupt" and result.cut_offset == err.value.offset
    assert Path(result.sidecar or "").read_bytes() == b"".join(lines[7:])
    assert jsonltape.verify(tape_path).state == "clean"
