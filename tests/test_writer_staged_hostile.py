"""Staged creation attacked: a file system without hard links, a directory sync failing after
the name was given, what a staged tape reports durable before it has a name, SIGKILL at each
step of its close, a forked child, ``close_all`` over a mix of tapes, keys and surface folds
read back from the temp file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import jsonltape
from jsonltape.writer import Tape

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
