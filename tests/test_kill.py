"""Real writer processes killed with SIGKILL at random moments, and injected fsync failures."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsonltape

from .conftest import LONG
from .crashsim import RecordingOps, recording_tape

# The child appends messages numbered 0, 1, 2 ... in turns, flushes now and then, and prints
# "durable <n>" after each flush returned: from then on message n must survive anything.
CHILD = r"""
import sys, time, jsonltape
path, mode, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
tape = jsonltape.open(path, create="if-missing", durability=mode, group_events=7, group_ms=5)
n = start
while True:
    with tape.turn():
        for _ in range(5):
            tape.user(f"msg {n} " + "z" * (n % 300))
            if n % 3 == 0:
                tape.flush()
                print("durable", n, flush=True)
            n += 1
        cid = f"c{n}"
        tape.assistant(tool_calls=[{"id": cid, "name": "Bash", "arguments": {"n": n}}])
        tape.tool_call("Bash", {"n": n}, call_id=cid)
        tape.tool_result(cid, "ok")
    time.sleep(0.002)  # an agent between turns; keeps the file small enough to re-read often
"""


def _messages(path: Path) -> list[int]:
    out = []
    for e in jsonltape.read(path):
        if e.type == "user/message":
            out.append(int(e.data["message"]["parts"][0]["content"].split()[1]))
    return out


@pytest.mark.timeout(3600 if LONG else 300)  # the long sweep kills 200 writers
def test_sigkilled_writer_never_loses_flushed_events(tmp_path: Path) -> None:
    d = tmp_path / "kill"
    d.mkdir(mode=0o700)
    path = d / "s.jsonl"
    rng = random.Random(5)
    kills = 200 if LONG else 50
    durable_max = -1
    next_msg = 0
    for k in range(kills):
        mode = ("group", "always", "manual")[k % 3]
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), mode, str(next_msg)],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(0.02, 0.4))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        assert child.returncode == -signal.SIGKILL
        for line in out.split("\n")[:-1]:  # a line torn by the kill is not a report
            word, n = line.split()
            if word == "durable":
                durable_max = max(durable_max, int(n))
        if not path.exists():  # killed while starting up (a loaded machine), before creating it
            assert durable_max == -1, (k, durable_max)  # then nothing was ever reported saved
            continue
        # Recovery is just opening the session for writing again.
        state = jsonltape.verify(path).state
        assert state in ("clean", "torn-tail", "open-turn"), (k, state)
        with jsonltape.open(path) as tape:
            seq = tape.next_seq
        report = jsonltape.verify(path)
        assert report.state == "clean", (k, report)
        # a final checkpoint was added unless nothing was left to flush (the child was
        # killed while starting up, before it appended anything)
        assert report.events in (seq, seq + 1)
        msgs = _messages(path)
        # every message reported durable is present, in order, without duplicates
        assert msgs == sorted(set(msgs)), k
        assert all(n in msgs for n in range(durable_max + 1)), (k, durable_max)
        next_msg = (msgs[-1] + 1) if msgs else 0
    assert durable_max > kills  # the children really made progress between kills
    assert path.stat().st_size < 50_000_000
    events = list(jsonltape.read(path))
    assert [e.seq for e in events] == list(range(len(events)))
    assert sum(1 for e in events if e.data.get("reason") == "interrupted") > 0


def test_fsync_failure_poisons_the_writer(tape_path: Path) -> None:
    ops = RecordingOps()
    tape = recording_tape(
        tape_path, ops, durability="manual", group_events=1, group_ms=1.0, session_id="f"
    )
    tape.user("a")
    assert tape.flush() == 1
    tape.user("b")
    ops.fail_sync_at = ops.syncs + 1
    with pytest.raises(jsonltape.WriterFailedError, match="fsync failed"):
        tape.flush()
    assert tape.durable_seq == 1  # never reported durable
    with pytest.raises(jsonltape.WriterFailedError, match="failed earlier"):
        tape.user("c")
    with pytest.raises(jsonltape.WriterFailedError):
        tape.flush()
    size = tape_path.stat().st_size
    tape.close()  # releases the lock, writes no closing checkpoint
    assert tape_path.stat().st_size == size
    lines = tape_path.read_bytes().splitlines()
    assert json.loads(lines[-1])["type"] == "user/message"  # no checkpoint after the failure
    with jsonltape.open(tape_path) as again:  # a new writer can take over
        assert again.user("d").seq == 4


def test_fsync_failure_in_the_background_is_reported_on_next_call(tape_path: Path) -> None:
    ops = RecordingOps()
    tape = recording_tape(
        tape_path, ops, durability="group", group_events=1000, group_ms=5.0, session_id="f"
    )
    ops.fail_sync_at = 1
    tape.user("a")
    for _ in range(200):
        if tape._s.failed is not None:
            break
        time.sleep(0.01)
    with pytest.raises(jsonltape.WriterFailedError):
        tape.user("b")
    tape.close()


def test_checkpoint_is_written_only_right_after_a_sync(tape_path: Path) -> None:
    """ALICE-style trace check: no checkpoint write unless the previous op was a sync that
    covered every byte before it."""
    ops = RecordingOps()
    tape = recording_tape(
        tape_path, ops, durability="group", group_events=3, group_ms=10_000, session_id="o"
    )
    for i in range(20):
        tape.user(str(i))
        if i % 7 == 0:
            tape.flush()
    tape.close()
    checkpoints = 0
    for i, (op, size, data) in enumerate(ops.trace):
        if op == "write" and b'"session/flush"' in data:
            checkpoints += 1
            prev_op, prev_size, _ = ops.trace[i - 1]
            assert prev_op == "sync"
            offset = json.loads(data)["data"]["offset"]
            assert prev_size == offset == size - len(data)
    assert checkpoints >= 4  # 3 explicit flushes, the close, and background rounds
    assert ops.trace[-1][0] == "sync"  # the closing checkpoint is itself synced


def test_a_close_right_after_a_background_round_syncs_that_rounds_checkpoint(
    tape_path: Path,
) -> None:
    """A group commit writes its checkpoint after its sync; a close that finds nothing pending
    then must still sync that line (a fresh-clone CI run caught the race: the trace ended with
    the round's checkpoint write)."""
    ops = RecordingOps()
    tape = recording_tape(
        tape_path, ops, durability="group", group_events=3, group_ms=10_000, session_id="r"
    )
    for i in range(3):
        tape.user(str(i))  # the third makes the round due: the flusher thread runs it
    for _ in range(500):
        with tape._s.mutex:
            if tape._s.pending == 0 and not tape._s.syncing:
                break
        time.sleep(0.01)
    assert ops.trace[-1][0] == "write" and b'"session/flush"' in ops.trace[-1][2]
    tape.close()
    assert ops.trace[-1][0] == "sync"
    assert ops.trace[-1][1] == tape_path.stat().st_size  # the whole file, checkpoint included


def test_darwin_uses_full_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl

    from jsonltape import _fs

    calls: list[int] = []
    monkeypatch.setattr(_fs.sys, "platform", "darwin")
    monkeypatch.setattr(fcntl, "F_FULLFSYNC", 51, raising=False)
    monkeypatch.setattr(_fs.fcntl, "fcntl", lambda fd, op: calls.append(op))
    monkeypatch.setattr(os, "fdatasync", lambda fd: pytest.fail("fdatasync on darwin"))
    _fs.FileOps().sync(0)
    assert calls == [51]


def test_always_mode_writes_each_checkpoint_with_the_next_event_after_the_sync(
    tape_path: Path,
) -> None:
    """durability="always": one write and one fsync per append, like a bare loop; the
    checkpoint for the previous sync rides in front of the next event, at the offset it
    records, and nothing reaches the file between a sync and that checkpoint."""
    ops = RecordingOps()
    tape = recording_tape(
        tape_path, ops, durability="always", group_events=1, group_ms=1.0, session_id="a"
    )
    for i in range(10):
        ev = tape.user(str(i))
        assert tape.durable_seq == ev.seq  # durable when append returns
    tape.close()
    writes = [(i, size, data) for i, (op, size, data) in enumerate(ops.trace) if op == "write"]
    syncs = sum(1 for op, _s, _d in ops.trace if op == "sync")
    assert syncs == 12  # the new header, one per append, one at close
    for i, _size, data in writes:
        for line in data.splitlines(keepends=True):
            obj = json.loads(line)
            if obj["type"] == "session/flush":
                prev_op, prev_size, _ = ops.trace[i - 1]
                assert prev_op == "sync" and obj["data"]["offset"] == prev_size
    assert jsonltape.verify(tape_path).state == "clean"
    events = list(jsonltape.read(tape_path))
    assert sum(e.type == "session/flush" for e in events) == 10
