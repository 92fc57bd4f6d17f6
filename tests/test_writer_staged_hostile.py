"""Staged creation attacked: a file system without hard links, a directory sync failing after
the name was given, what a staged tape reports durable before it has a name, SIGKILL at each
step of its close, a forked child, ``close_all`` over a mix of tapes, keys and surface folds
read back from the temp file."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape._staged import STALE_SECONDS
from jsonltape.writer import Tape, close_all, remove_stale_temps

from .crashsim import RecordingOps, recording_tape


def _temps(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp"))


def _staged(path: Path, ops: RecordingOps | None = None) -> Tape:
    return recording_tape(path, ops or RecordingOps(), staged=True)


def _texts(path: Path) -> list[str]:
    return [
        e.data["message"]["parts"][0]["content"]
        for e in jsonltape.read(path)
        if e.type == "user/message"
    ]


@pytest.fixture
def no_hard_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """link(2) refused as vfat, exFAT and some network and FUSE file systems refuse it (none
    can be mounted here): creation falls back to an exclusive copy, a new inode."""

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", refused)


@pytest.mark.usefixtures("no_hard_links")
def test_without_hard_links_a_staged_session_flushed_early_goes_on_in_its_named_copy_locked(
    tape_path: Path,
) -> None:
    tape = _staged(tape_path)
    tape.user("one")
    assert tape.flush() == 1
    assert _temps(tape_path.parent) == [] and jsonltape.verify(tape_path).state == "clean"
    with pytest.raises(jsonltape.LockedError):
        jsonltape.open(tape_path)  # the named copy is the locked file, not the gone temp
    tape.user("two")
    assert tape.flush() == 3
    assert _texts(tape_path) == ["one", "two"]  # the append reached the named file
    tape.close()
    report = jsonltape.verify(tape_path)
    assert (report.state, report.committed_bytes) == ("clean", report.size)
    assert _texts(tape_path) == ["one", "two"]
    with jsonltape.open(tape_path) as again:  # unlocked at close
        again.user("three")
    assert _texts(tape_path) == ["one", "two", "three"]
    assert sorted(p.name for p in tape_path.parent.iterdir()) == [".s.jsonl.lock", "s.jsonl"]


@pytest.mark.usefixtures("no_hard_links")
def test_without_hard_links_a_copy_cut_short_leaves_no_name(
    tape_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = _staged(tape_path)
    tape.user("one")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the copy's own sync
    with pytest.raises(jsonltape.WriterFailedError):
        tape.close()
    assert list(tape_path.parent.iterdir()) == []  # neither the copy nor the temp file


class _DirSyncFails(RecordingOps):
    def sync_dir(self, path: Path) -> None:
        raise OSError(errno.EIO, "Input/output error (injected)")


def test_a_directory_sync_failing_after_the_name_was_given_says_so_and_promises_nothing(
    tape_path: Path,
) -> None:
    tape = _staged(tape_path, _DirSyncFails())
    tape.user("one")
    with pytest.raises(jsonltape.WriterFailedError) as err:
        tape.close()
    # the name was given and every byte under it synced: the error does not say nothing was
    # saved (a caller would import or write it all again), but that the name may not last
    assert "nothing of it was saved" not in str(err.value)
    assert "has its name" in str(err.value) and "power cut" in str(err.value)
    assert jsonltape.verify(tape_path).state == "clean" and _texts(tape_path) == ["one"]
    assert tape.durable_seq < 1 and _temps(tape_path.parent) == []


def test_a_staged_tape_reports_nothing_durable_before_it_has_a_name(tape_path: Path) -> None:
    ops = RecordingOps()
    tape = _staged(tape_path, ops)
    assert tape.durable_seq == -1  # not even its header: a crash now leaves no session
    tape.user("one")
    tape.drain()
    assert tape.durable_seq == -1
    ops.fail_sync_at = 1
    with pytest.raises(jsonltape.WriterFailedError):
        tape.flush()
    assert tape.durable_seq == -1
    tape.close()
    assert not tape_path.exists()
    done = _staged(tape_path)
    done.user("one")
    assert done.flush() == 1 == done.durable_seq
    done.close()


#: A staged session written and closed; with ``kill N`` the process SIGKILLs itself right
#: before its N-th call of one of the file-system calls below (with ``trace``: prints them).
KILLED = r"""
import os, signal, sys
import jsonltape
d, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = []
def hooked(name, real):
    def call(*args, **kwargs):
        calls.append(name)
        if mode == "kill" and len(calls) == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return call
tape = jsonltape.open(f"{d}/s.jsonl", create=True, durability="manual", staged=True)
for name in ("write", "fdatasync", "fsync", "link", "unlink"):
    setattr(os, name, hooked(name, getattr(os, name)))
for i in range(6):
    tape.user(f"message {i} " + "x" * 200)
    if i == 2:
        tape.drain()
tape.close()
if mode == "trace":
    print(" ".join(calls))
"""


def _run(d: Path, mode: str, n: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-c", KILLED, str(d), mode, str(n)],
        capture_output=True,
        text=True,
        cwd=d,
        check=False,
    )


def test_a_staged_close_sigkilled_before_each_call_leaves_no_name_or_the_whole_session(
    tmp_path: Path,
) -> None:
    traced = _run(tmp_path, "trace")
    assert traced.returncode == 0, traced.stderr
    calls = traced.stdout.split()
    # every byte, the closing checkpoint included, is synced once, before the name exists
    assert calls == ["write", "write", "write", "fdatasync", "link", "unlink", "fsync"]
    whole = _texts(tmp_path / "s.jsonl")
    assert len(whole) == 6
    for n in range(1, len(calls) + 1):
        d = tmp_path / f"kill{n}"
        d.mkdir(mode=0o700)
        killed = _run(d, "kill", n)
        assert killed.returncode == -signal.SIGKILL, (n, killed.stderr)
        named = d / "s.jsonl"
        if calls[n - 1] in ("write", "fdatasync", "link"):
            assert not os.path.lexists(named), n  # killed before the link: no session
        else:
            report = jsonltape.verify(named)
            assert (report.state, report.committed_bytes) == ("clean", report.size), n
            assert _texts(named) == whole, n
        left = len(_temps(d))
        assert left == (0 if calls[n - 1] == "fsync" else 1), n
        # the dead writer's temp file goes at the next sweep; the session stays
        assert remove_stale_temps(d, now=time.time() + 2 * STALE_SECONDS) == left
        assert _temps(d) == []
        assert [p.name for p in d.iterdir()] == ([named.name] if calls[n - 1] in
                                                 ("unlink", "fsync") else [])  # fmt: skip
        if named.exists():
            with jsonltape.open(named) as again:  # nothing left locked, nothing to repair
                assert again.closers == [] and again.sidecar is None


#: A process with a staged tape forks; the child sweeps, tries to append and exits through
#: atexit (which closes the tapes a process left open); then the parent goes on and closes.
FORKED = r"""
import os, sys, time
import jsonltape
from jsonltape._staged import STALE_SECONDS
from jsonltape.writer import remove_stale_temps
path = sys.argv[1]
tape = jsonltape.open(path, create=True, durability="manual", staged=True)
tape.user("before the fork")
pid = os.fork()
if pid == 0:
    # the parent holds the temp file: however old, no sweep may take it
    if remove_stale_temps(os.path.dirname(path), now=time.time() + 10 * STALE_SECONDS):
        sys.exit(3)
    try:
        tape.user("from the child")
        sys.exit(4)
    except jsonltape.JsonltapeError:
        pass
    sys.exit(0)  # atexit runs here: it must not close (name) the parent's tape
_, status = os.waitpid(pid, 0)
left = os.listdir(os.path.dirname(path))
print(os.waitstatus_to_exitcode(status), os.path.exists(path), len(left))
tape.user("after the fork")
tape.close()
"""


def test_a_forked_child_neither_writes_nor_frees_nor_names_its_parents_staged_session(
    tape_path: Path,
) -> None:
    run = subprocess.run(
        [sys.executable, "-P", "-c", FORKED, str(tape_path)],
        capture_output=True,
        text=True,
        cwd=tape_path.parent,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "False", "1"]  # the child left the temp file alone
    assert _texts(tape_path) == ["before the fork", "after the fork"]
    assert jsonltape.verify(tape_path).state == "clean" and _temps(tape_path.parent) == []


def test_close_all_of_usual_staged_closed_failed_and_refused_tapes_closes_each_once(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    usual = jsonltape.open(a / "usual.jsonl", create=True, durability="manual")
    staged = [_staged(d / f"s{i}.jsonl") for d in (a, b) for i in range(3)]
    done = _staged(a / "done.jsonl")
    done.user("closed before")
    done.close()
    failing_ops = RecordingOps()
    failing = _staged(b / "failing.jsonl", failing_ops)
    refused = _staged(b / "taken.jsonl")
    for i, tape in enumerate([usual, *staged, failing, refused]):
        tape.user(f"prompt {i}")
    with jsonltape.open(b / "taken.jsonl", create=True) as other:  # the name, meanwhile
        other.user("theirs")
    theirs = (b / "taken.jsonl").read_bytes()
    failing_ops.fail_sync_at = 1
    with pytest.raises((jsonltape.WriterFailedError, jsonltape.SessionExistsError)):
        close_all([usual, done, *staged, failing, refused, done])
    assert all(t.closed for t in [usual, done, *staged, failing, refused])
    for i, tape in enumerate([usual, *staged], start=0):
        report = jsonltape.verify(tape.path)
        assert (report.state, report.committed_bytes) == ("clean", report.size)
        assert _texts(tape.path) == [f"prompt {i}"]
    assert _texts(done.path) == ["closed before"]
    assert (b / "taken.jsonl").read_bytes() == theirs  # never replaced
    assert not (b / "failing.jsonl").exists()  # its sync failed: no name, nothing promised
    assert _temps(a) == _temps(b) == []
    for tape in [usual, *staged, done]:  # nothing left locked
        with jsonltape.open(tape.path):
            pass


def _msg(text: str) -> dict[str, Any]:
    return {"message": {"id": text, "role": "user", "parts": [{"type": "text", "content": text}]}}


def test_keys_and_surface_folds_of_a_staged_tape_are_read_from_its_temp_file(
    tape_path: Path,
) -> None:
    tape = _staged(tape_path)
    first = tape.append("user/message", _msg("a"), key="k-a")
    second = tape.append("user/message", _msg("b"), key="k-b")
    tape.drain()  # in the temp file now, not in the writer's queue
    assert tape.append("user/message", _msg("a"), key="k-a") == first  # a retry: no new line
    with pytest.raises(jsonltape.InvalidEventError):
        tape.append("user/message", _msg("other"), key="k-b")  # the key's line is read
    fixed = tape.append(
        "user/message", _msg("a2"), surface={"op": "replace", "start": 1, "end": 1}, sources=[1]
    )
    with pytest.raises(jsonltape.SurfaceError):  # folded from the file: seq 1 is replaced
        tape.append("surface/retract", {}, surface={"op": "retract", "start": 1, "end": 1},
                    sources=[1])  # fmt: skip
    assert tape.flush() == fixed.seq  # named now
    assert tape.append("user/message", _msg("b"), key="k-b") == second
    tape.append("surface/retract", {}, surface={"op": "retract", "start": 2, "end": 2}, sources=[2])
    tape.close()
    report = jsonltape.verify(tape_path)
    assert (report.state, report.committed_bytes) == ("clean", report.size)
    assert [e.seq for e in jsonltape.read(tape_path) if e.key] == [1, 2]


def test_close_all_whose_directory_sync_fails_reports_those_sessions_not_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad, good = tmp_path / "bad", tmp_path / "good"
    staged = [jsonltape.open(d / f"s{i}.jsonl", create=True, durability="manual", staged=True)
              for d in (bad, good) for i in range(3)]  # fmt: skip
    usual = jsonltape.open(bad / "usual.jsonl", create=True, durability="manual")
    for tape in [*staged, usual]:
        tape.user("hello")
    real = os.fsync

    def failing(fd: int) -> None:
        # only the directory's sync fails (no such fault can be made on a real disk here)
        if os.path.samestat(os.fstat(fd), os.stat(bad)):
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(jsonltape.StorageError, match="directory"):
        close_all([*staged, usual])
    assert all(t.closed for t in [*staged, usual])
    assert [t.durable_seq for t in staged] == [-1, -1, -1, 1, 1, 1]  # seq 1: the message
    assert usual.durable_seq >= 1  # its directory entry was synced when it was created
