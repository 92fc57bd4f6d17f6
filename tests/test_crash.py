"""Crash consistency: truncation at every byte, ALICE-style crash images, bit flips.

These are the promises: a reader returns exactly the complete-line prefix; repair never cuts
below the last checkpoint and never mistakes a crash tail for corruption; damage to committed
bytes is always detected.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

import jsonltape
from jsonltape._scan import scan_full, scan_tail

from .conftest import LONG
from .crashsim import image, record
from .helpers import golden

# A sentence reads better than 40 quoted words.
_SCRIPT_TEXT = (
    "turn user assistant flush call result assistant end flush "
    "turn user chunk chunk big assistant flush call flush result end "
    "turn user call result call flush result assistant end flush turn user big call"
)
SCRIPT = _SCRIPT_TEXT.split()


def _scan_bytes(tmp: Path, data: bytes, *, tail: bool = False) -> jsonltape.Report:
    tmp.write_bytes(data)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        s = (scan_tail if tail else scan_full)(fd, str(tmp))
    finally:
        os.close(fd)
    return jsonltape.Report.from_scan(s)


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    for i, b in enumerate(data):
        if b == 0x0A:
            starts.append(i + 1)
    return starts


def test_truncation_at_every_byte_returns_exactly_the_complete_lines(
    tape_path: Path, tmp_path: Path
) -> None:
    checkpoints = golden(tape_path, turns=6)
    data = tape_path.read_bytes()
    header_end = data.index(b"\n") + 1
    starts = _line_starts(data)
    probe = tmp_path / "probe.jsonl"
    probe.touch(mode=0o600)
    for cut in range(header_end, len(data) + 1):
        report = _scan_bytes(probe, data[:cut])
        complete = max(s for s in starts if s <= cut)
        assert report.state != "corrupt", cut
        assert report.committed_bytes == complete, cut
        assert report.events == data[:complete].count(b"\n"), cut
        assert report.state in (("clean", "open-turn") if cut == complete else ("torn-tail",))
        # repair never cuts below the last checkpoint that is complete in this prefix
        last_ck = max((end for end, _seq in checkpoints if end <= cut), default=header_end)
        assert report.committed_bytes >= last_ck
        # the streaming reader serves the same prefix, nothing more
        events = list(jsonltape.read(probe))
        assert len(events) == report.events
        assert [e.seq for e in events] == list(range(report.events))


def test_truncated_header_is_not_a_session(tmp_path: Path, tape_path: Path) -> None:
    golden(tape_path, turns=1)
    data = tape_path.read_bytes()
    probe = tmp_path / "probe.jsonl"
    for cut in range(0, data.index(b"\n") + 1):
        probe.write_bytes(data[:cut])
        with pytest.raises(jsonltape.FormatError):
            jsonltape.verify(probe)


def test_alice_crash_images_lose_no_checkpointed_event(tmp_path: Path) -> None:
    session = tmp_path / "d" / "golden.jsonl"
    work = record(session, SCRIPT)
    rng = random.Random(20261130)
    probe = tmp_path / "probe.jsonl"
    n_images = 200_000 if LONG else 10_000
    states: dict[str, int] = {}
    for i in range(n_images):
        point = work.points[i % len(work.points)]
        img = image(work, point, rng)
        report = _scan_bytes(probe, img)
        states[report.state] = states.get(report.state, 0) + 1
        assert report.state != "corrupt", (i, point)
        # every byte that was durable at the crash is committed after it
        assert report.committed_bytes >= point.durable, (i, point)
        assert img[: report.committed_bytes] == work.data[: report.committed_bytes]
        # the O(tail) scan a writer does on open agrees with the full scan
        tail = _scan_bytes(probe, img, tail=True)
        assert (tail.state, tail.committed_bytes, tail.events) == (
            report.state,
            report.committed_bytes,
            report.events,
        )
    # the generator really produced all kinds of tails
    assert states.get("torn-tail", 0) > n_images // 10
    assert states.get("clean", 0) + states.get("open-turn", 0) > n_images // 20


def test_alice_crash_images_of_an_always_writer_keep_every_appended_event(
    tmp_path: Path,
) -> None:
    """durability="always": each append is written and synced before it returns (its
    checkpoint rides in front of the next one); whatever a crash leaves, every event whose
    append returned is committed."""
    session = tmp_path / "d" / "golden.jsonl"
    work = record(session, SCRIPT, durability="always")
    rng = random.Random(11)
    probe = tmp_path / "probe.jsonl"
    for i in range(2_000 if LONG else 400):
        point = work.points[i % len(work.points)]
        img = image(work, point, rng)
        report = _scan_bytes(probe, img)
        assert report.state != "corrupt", (i, point)
        assert report.committed_bytes >= point.durable, (i, point)
        assert img[: report.committed_bytes] == work.data[: report.committed_bytes]
    last = work.points[-1]
    assert last.durable == last.written  # the last append returned durable


def test_alice_crash_images_repair_to_clean_and_continue(tmp_path: Path) -> None:
    session = tmp_path / "d" / "golden.jsonl"
    work = record(session, SCRIPT)
    rng = random.Random(7)
    root = tmp_path / "images"
    root.mkdir(mode=0o700)
    for i in range(400 if LONG else 60):
        point = work.points[rng.randrange(len(work.points))]
        img = image(work, point, rng)
        path = root / f"img{i}.jsonl"
        path.write_bytes(img)
        os.chmod(path, 0o600)
        before = jsonltape.verify(path)
        result = jsonltape.repair(path)
        assert result.state_before == before.state
        after = jsonltape.verify(path)
        assert after.state == "clean", (i, result)
        data = path.read_bytes()
        assert data[: point.durable] == work.data[: point.durable]
        if result.sidecar:
            assert Path(result.sidecar).read_bytes() == img[before.committed_bytes :]
        # no turn is left open by a crash, and every tool call has a result
        events = list(jsonltape.read(path))
        open_turn = None
        pending: set[str] = set()
        for e in events:
            if e.type == "turn/start":
                open_turn = e.seq
            elif e.type == "turn/end":
                assert e.data["turn"] == open_turn
                open_turn = None
                assert not pending, (i, pending)
            elif e.type == "tool/call":
                pending.add(e.data["call_id"])
            elif e.type == "tool/result":
                pending.discard(e.data["call_id"])
        assert open_turn is None
        # appending continues at the right seq, and a second repair changes nothing
        with jsonltape.open(path) as tape:
            assert tape.user("after repair").seq == events[-1].seq + 1
        size = path.stat().st_size
        again = jsonltape.repair(path)
        assert again.closers == [] and again.sidecar is None
        assert path.stat().st_size == size


def test_bit_flip_anywhere_before_the_last_checkpoint_is_detected(
    tape_path: Path, tmp_path: Path
) -> None:
    golden(tape_path, turns=4)
    data = tape_path.read_bytes()
    header_end = data.index(b"\n") + 1
    last = json.loads(data.splitlines()[-1])
    assert last["type"] == "session/flush"
    durable_end = last["data"]["offset"]
    starts = _line_starts(data)
    probe = tmp_path / "probe.jsonl"
    bits = range(8) if LONG else None
    for pos in range(durable_end):
        for bit in bits if bits is not None else (pos % 8,):
            flipped = bytearray(data)
            flipped[pos] ^= 1 << bit
            if pos < header_end:
                with pytest.raises(jsonltape.FormatError):
                    _scan_bytes(probe, bytes(flipped))
                continue
            report = _scan_bytes(probe, bytes(flipped))
            line_start = max(s for s in starts if s <= pos)
            if data[pos] == 0x0A:  # the flipped newline merges this line into the next
                line_start = max(s for s in starts if s <= pos - 1)
            if pos == durable_end - 1:
                # The newline right before the last checkpoint: the flip merges the
                # checkpoint into the line before it, so no witness is left. Still detected,
                # as a torn tail (spec §10.2 notes this limit; the cut goes to a sidecar).
                assert report.state == "torn-tail", (pos, bit)
            else:
                assert report.state == "corrupt", (pos, bit)
            assert report.offset == line_start, (pos, bit)


def test_bit_flip_in_the_tail_after_the_last_checkpoint_is_a_torn_tail(
    tape_path: Path, tmp_path: Path
) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("durable")
        tape.flush()
        tape.user("not yet durable")
        data = tape_path.read_bytes()
    last_line_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    probe = tmp_path / "probe.jsonl"
    for pos in range(last_line_start, len(data)):
        flipped = bytearray(data)
        flipped[pos] ^= 0x10
        report = _scan_bytes(probe, bytes(flipped))
        assert report.state == "torn-tail"
        assert report.offset == last_line_start


def test_random_nonsense_tail_is_cut_exactly(tape_path: Path) -> None:
    """Kafka-style: nonsense from a random position inside a record to EOF."""
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        for i in range(20):
            tape.user(f"m{i}")
        tape.flush()
        for i in range(20):
            tape.user(f"n{i}")
    data = tape_path.read_bytes()
    starts = _line_starts(data)
    ck = next(s for s in starts[:-1] if b'"session/flush"' in data[s : data.index(b"\n", s)])
    rng = random.Random(3)
    for _ in range(10):
        victim = rng.choice([s for s in starts[:-1] if s > ck])
        start = victim + rng.randint(0, 15)
        broken = data[:start] + bytes(rng.randrange(32, 127) for _ in range(rng.randint(1, 300)))
        tape_path.write_bytes(broken)
        result = jsonltape.repair(tape_path)
        assert result.state_before == "torn-tail"
        assert result.cut_offset == victim
        assert tape_path.read_bytes()[:victim] == data[:victim]
        assert jsonltape.verify(tape_path).state == "clean"


def test_open_reads_only_the_tail(tape_path: Path) -> None:
    """Damage before the last checkpoint is invisible to open (O(tail)) but not to verify."""
    golden(tape_path, turns=4)
    data = bytearray(tape_path.read_bytes())
    second_line = data.index(b"\n") + 1
    data[second_line + 3] ^= 0x01
    tape_path.write_bytes(bytes(data))
    with jsonltape.open(tape_path) as tape:
        tape.user("appended without reading the damaged middle")
    assert jsonltape.verify(tape_path).state == "corrupt"
    with pytest.raises(jsonltape.CorruptError, match="line 2"):
        jsonltape.repair(tape_path)
