"""``writer.close_all``: several tapes closed with their syncs running at once, each exactly
as :meth:`Tape.close` closes it (flushed, synced, checkpointed), and every one closed even when
one of them fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import jsonltape
from jsonltape.writer import close_all


def _last(path: Path) -> jsonltape.Event:
    return [line.event for line in jsonltape.lines(path)][-1]


def test_close_all_leaves_each_session_as_its_own_close_would(tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    together = tmp_path / "together"
    for d in (alone, together):
        d.mkdir()
    made: dict[Path, list[jsonltape.Tape]] = {alone: [], together: []}
    for d, tapes in made.items():
        for i in range(20):
            tape = jsonltape.open(d / f"s{i}.jsonl", create=True, durability="manual")
            tape.user(f"prompt {i}")
            if i % 3 == 0:
                tape.append("turn/start", {}, time=1)  # an open turn: the closing marker
            tapes.append(tape)
    for tape in made[alone]:
        tape.close()
    close_all(made[together])
    assert all(t.closed for tapes in made.values() for t in tapes)
    for i in range(20):
        a, b = _last(alone / f"s{i}.jsonl"), _last(together / f"s{i}.jsonl")
        assert (a.type, a.seq, a.data.get("closed")) == (b.type, b.seq, b.data.get("closed"))
        assert b.type == "session/flush" and b.data["seq"] == b.seq - 1
        assert bool(b.data.get("closed")) == (i % 3 == 0)
        with jsonltape.open(together / f"s{i}.jsonl") as again:  # the lock was released
            assert again.next_seq == b.seq + 1


def test_close_all_closes_every_tape_when_one_fails_and_raises_that_failure(
    tmp_path: Path,
) -> None:
    paths = [tmp_path / f"s{i}.jsonl" for i in range(12)]
    tapes = [jsonltape.open(p, create=True, durability="manual") for p in paths]
    for i, tape in enumerate(tapes):
        tape.user(f"prompt {i}")
    with open(paths[3], "r+b") as f:
        f.truncate(50)  # the fourth session changed under its writer: its close must refuse
    with pytest.raises(jsonltape.ConcurrentModificationError, match="changed size"):
        close_all(tapes)
    assert all(t.closed for t in tapes)
    assert paths[3].stat().st_size == 50  # nothing appended after the change
    for i, path in enumerate(paths):
        if i != 3:
            assert _last(path).type == "session/flush"
            with jsonltape.open(path) as again:
                assert again.next_seq == 3


def test_sessions_close_all_returned_for_survive_a_kill_at_once(tmp_path: Path) -> None:
    # The process is killed right after close_all returns: every session must read back whole.
    script = textwrap.dedent(
        f"""
        import os, signal, jsonltape
        from jsonltape.writer import close_all
        tapes = [jsonltape.open({str(tmp_path)!r} + f"/s{{i}}.jsonl", create=True,
                                durability="manual") for i in range(16)]
        for i, t in enumerate(tapes):
            for k in range(50):
                t.user(f"prompt {{i}} {{k}}")
        close_all(tapes)
        print("closed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-c", script], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.stdout == "closed\n"
    for i in range(16):
        events = [line.event for line in jsonltape.lines(tmp_path / f"s{i}.jsonl")]
        assert [
            e.data["message"]["parts"][0]["content"] for e in events if e.type == "user/message"
        ] == [f"prompt {i} {k}" for k in range(50)]
        assert events[-1].type == "session/flush"
