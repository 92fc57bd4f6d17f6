"""Staged creation (``open(create=True, staged=True)``): a new session written whole under a
temp name, named at close after one sync; nobody sees it before, a crash leaves only the temp
file, and only a dead writer's temp file is ever swept away."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsonltape
from jsonltape import _fs, writer
from jsonltape._staged import STALE_SECONDS
from jsonltape.writer import Tape, close_all, remove_stale_temps

from .crashsim import RecordingOps, recording_tape


def _temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


def _staged(path: Path, **kw: object) -> Tape:
    return jsonltape.open(path, create=True, durability="manual", staged=True, **kw)  # type: ignore[arg-type]


def test_a_staged_session_has_no_name_until_closed_then_holds_everything_synced(
    tape_path: Path,
) -> None:
    d = tape_path.parent
    tape = _staged(tape_path, session_id="s1", title="staged")
    with tape.turn():
        tape.user("hello")
        tape.assistant("hi")
    assert not os.path.lexists(tape_path)  # no reader, no other writer can see it yet
    assert len(_temps(d)) == 1
    tape.close()
    assert _temps(d) == [] and sorted(p.name for p in d.iterdir()) == ["s.jsonl"]  # no lock file
    assert (tape_path.stat().st_mode & 0o777) == 0o600
    report = jsonltape.verify(tape_path)
    assert (report.state, report.committed_bytes) == ("clean", report.size)
    events = list(jsonltape.read(tape_path))
    assert events[0].data["title"] == "staged"
    assert [e.type for e in events[1:5]] == [
        "turn/start",
        "user/message",
        "assistant/message",
        "turn/end",
    ]
    assert events[-1].type == "session/flush" and events[-1].data["seq"] == 4
    assert tape.durable_seq == 4
    with jsonltape.open(tape_path) as again:  # an ordinary session now: opens, appends
        again.user("more")
    assert jsonltape.verify(tape_path).state == "clean"


def test_a_staged_session_is_synced_once_and_only_then_named(tape_path: Path) -> None:
    named_at: list[tuple[int, bool]] = []

    class Ops(RecordingOps):
        def sync_dir(self, path: Path) -> None:
            # the directory sync comes after the link: the name exists, and every byte under
            # it was synced before the name was given
            named_at.append((tape_path.stat().st_size, os.path.lexists(tape_path)))
            super().sync_dir(path)

    ops = Ops()
    tape = recording_tape(tape_path, ops, staged=True)
    for i in range(50):
        tape.user(f"message {i}")
        assert not os.path.lexists(tape_path)
    tape.close()
    syncs = [size for op, size, _ in ops.trace if op == "sync"]
    assert syncs == [tape_path.stat().st_size]  # one sync, covering the closing checkpoint
    assert ops.trace[-1][0] == "sync"  # nothing written after it
    assert named_at == [(syncs[0], True)]


def test_close_all_names_staged_sessions_and_syncs_each_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    tapes = [_staged(d / f"s{i}.jsonl") for d in dirs for i in range(10)]
    usual = jsonltape.open(tmp_path / "a" / "usual.jsonl", create=True, durability="manual")
    for i, tape in enumerate([*tapes, usual]):
        tape.user(f"prompt {i}")
    synced: list[Path] = []
    real = _fs.fsync_dir

    def counting(path: Path) -> None:
        synced.append(Path(path))
        real(path)

    monkeypatch.setattr(_fs, "fsync_dir", counting)
    close_all([*tapes, usual])
    assert sorted(synced) == sorted(dirs)
    for tape in tapes:
        assert tape.closed and jsonltape.verify(tape.path).state == "clean"
    assert all(_temps(d) == [] for d in dirs)


def test_a_name_taken_before_close_is_refused_and_the_other_file_kept(tape_path: Path) -> None:
    tape = _staged(tape_path, session_id="s1")
    tape.user("mine")
    with jsonltape.open(tape_path, create=True, session_id="s2") as other:  # meanwhile
        other.user("theirs")
    theirs = tape_path.read_bytes()
    with pytest.raises(jsonltape.SessionExistsError):
        tape.close()
    assert tape.closed and tape_path.read_bytes() == theirs
    assert _temps(tape_path.parent) == []  # nothing of the refused session is left


def test_an_existing_name_is_refused_when_staging_starts(tape_path: Path) -> None:
    tape_path.mkdir()
    with pytest.raises(jsonltape.SessionExistsError):
        _staged(tape_path)
    assert _temps(tape_path.parent) == []


def test_flush_names_a_staged_session_early_and_it_stays_locked(tape_path: Path) -> None:
    tape = _staged(tape_path)
    tape.user("one")
    assert tape.flush() == 1
    assert jsonltape.verify(tape_path).state == "clean"
    with pytest.raises(jsonltape.LockedError):
        jsonltape.open(tape_path)  # the session file's own flock still excludes writers
    tape.user("two")
    assert tape.flush() == 3  # an ordinary flush from here on (seq 2 is the first checkpoint)
    tape.close()
    assert [e.data["message"]["parts"][0]["content"] for e in jsonltape.read(tape_path)
            if e.type == "user/message"] == ["one", "two"]  # fmt: skip
    assert jsonltape.verify(tape_path).state == "clean"


@pytest.mark.parametrize(
    "kw",
    [
        {"create": False},
        {"create": "if-missing"},
        {"create": True, "durability": "group"},
        {"create": True, "durability": "always"},
        {"create": True, "staged": 1},
        {"create": True, "staged": "yes"},
    ],
)
def test_staged_is_refused_where_it_cannot_hold_and_nothing_is_made(
    tape_path: Path, kw: dict[str, object]
) -> None:
    args: dict[str, object] = {"durability": "manual", "staged": True, **kw}
    with pytest.raises(jsonltape.InvalidArgumentError) as err:
        writer.open(tape_path, **args)  # type: ignore[arg-type]
    assert err.value.field == "staged"
    assert list(tape_path.parent.iterdir()) == []


def test_a_failed_sync_names_nothing_and_removes_the_temp_file(tape_path: Path) -> None:
    ops = RecordingOps()
    ops.fail_sync_at = 1
    tape = recording_tape(tape_path, ops, staged=True)
    tape.user("lost, and never reported saved")
    with pytest.raises(jsonltape.WriterFailedError):
        tape.close()
    assert tape.closed and list(tape_path.parent.iterdir()) == []


CHILD = r"""
import sys, jsonltape
d = sys.argv[1]
tapes = [jsonltape.open(f"{d}/s{i}.jsonl", create=True, durability="manual", staged=True)
         for i in range(5)]
for n in range(200):
    for t in tapes:
        t.user(f"message {n} " + "x" * 300)
print("written", flush=True)
sys.stdin.read()
"""


def test_a_sigkilled_staging_writer_leaves_no_session_and_its_temp_files_are_swept(
    tape_path: Path,
) -> None:
    d = tape_path.parent
    with subprocess.Popen(
        [sys.executable, "-P", "-c", CHILD, str(d)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "written\n"
            assert remove_stale_temps(d, now=time.time() + 10 * STALE_SECONDS) == 0  # alive
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    names = _temps(d)
    assert len(names) == 5 and not any(p.suffix == ".jsonl" for p in d.iterdir())
    # a live writer's temp file, however old, and a foreign look-alike are left alone
    live = _staged(d / "live.jsonl")
    live.user("still writing")
    old = time.time() - 10 * STALE_SECONDS
    for p in d.iterdir():
        os.utime(p, (old, old))
    other = d / ".notes.jsonl.0123456789ab.tmp"
    other.mkdir()
    os.symlink("/etc/passwd", d / ".x.jsonl.0123456789ab.tmp")
    assert remove_stale_temps(d, now=old + STALE_SECONDS / 2) == 0  # too young yet
    assert remove_stale_temps(d) == 5
    assert set(_temps(d)) == {other.name, ".x.jsonl.0123456789ab.tmp"} | set(
        n for n in os.listdir(d) if n.startswith(".live.jsonl.")
    )
    live.close()
    assert jsonltape.verify(d / "live.jsonl").state == "clean"


def test_discard_drops_a_staged_session_unnamed_and_refuses_any_other_tape(
    tape_path: Path,
) -> None:
    tape = _staged(tape_path)
    tape.user("given up")
    assert tape.staged
    tape.discard()
    assert tape.closed and list(tape_path.parent.iterdir()) == []  # no name, no temp file
    with pytest.raises(jsonltape.JsonltapeError, match="discarded"):
        tape.user("more")
    with pytest.raises(jsonltape.InvalidArgumentError):
        tape.discard()
    named = _staged(tape_path)
    named.flush()  # now it has its name: discarding it would drop a saved session
    assert not named.staged
    with pytest.raises(jsonltape.InvalidArgumentError, match="no name yet"):
        named.discard()
    named.user("kept")
    named.close()
    usual = jsonltape.open(tape_path.with_name("usual.jsonl"), create=True)
    with pytest.raises(jsonltape.InvalidArgumentError):
        usual.discard()
    usual.close()
    assert jsonltape.verify(tape_path).state == "clean"
