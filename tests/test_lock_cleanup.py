"""A refused open or create leaves no lock file and no temp file behind, and a lock file that
cannot be made is an I/O (or policy) error, not "another writer holds this session"."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import jsonltape
from jsonltape import _fs
from jsonltape.errors import SessionExistsError, StorageError

from .crashsim import recording_tape


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def _session_bytes(tmp_path: Path) -> bytes:
    src = tmp_path / "src" / "s.jsonl"
    with jsonltape.open(src, create=True) as tape:
        tape.user("hello")
    return src.read_bytes()


def test_opening_a_missing_session_leaves_no_lock_file(tape_path: Path) -> None:
    with pytest.raises(jsonltape.SessionNotFoundError):
        jsonltape.open(tape_path)
    with pytest.raises(jsonltape.SessionNotFoundError):
        jsonltape.repair(tape_path)
    with pytest.raises(jsonltape.SessionNotFoundError, match="no such directory"):
        jsonltape.open(tape_path.parent / "missing" / "s.jsonl")
    assert _leftovers(tape_path.parent) == []


@pytest.mark.parametrize("content", [b'{"hello": "world"}\n', b"", b"not json\n"])
def test_opening_what_is_not_a_session_leaves_no_lock_file(tape_path: Path, content: bytes) -> None:
    tape_path.write_bytes(content)
    os.chmod(tape_path, 0o600)
    with pytest.raises(jsonltape.FormatError):
        jsonltape.open(tape_path)
    with pytest.raises(jsonltape.FormatError):
        jsonltape.repair(tape_path)
    assert _leftovers(tape_path.parent) == []


def test_a_lock_file_that_was_there_before_is_left_alone(tape_path: Path) -> None:
    tape_path.write_bytes(b"not a session\n")
    os.chmod(tape_path, 0o600)
    lock = tape_path.with_name(f".{tape_path.name}.lock")
    lock.write_bytes(b"")
    with pytest.raises(jsonltape.FormatError):
        jsonltape.open(tape_path)
    assert lock.exists()


def test_opening_a_corrupt_session_leaves_no_lock_file(tape_path: Path, tmp_path: Path) -> None:
    lines = _session_bytes(tmp_path).splitlines(keepends=True)
    bad = json.loads(lines[1])
    bad["data"]["message"]["parts"][0]["content"] = "edited"  # the CRC no longer matches
    lines[1] = json.dumps(bad, separators=(",", ":")).encode() + b"\n"
    tape_path.write_bytes(b"".join(lines))
    os.chmod(tape_path, 0o600)
    with pytest.raises(jsonltape.CorruptError):
        jsonltape.open(tape_path)
    assert _leftovers(tape_path.parent) == []


def test_creating_over_an_existing_file_is_session_exists_and_leaves_nothing(
    tape_path: Path,
) -> None:
    tape_path.write_bytes(b"someone else's file\n")
    with pytest.raises(SessionExistsError) as err:
        jsonltape.open(tape_path, create=True)
    assert isinstance(err.value, FileExistsError)
    assert err.value.code == "exists"
    assert _leftovers(tape_path.parent) == []
    assert tape_path.read_bytes() == b"someone else's file\n"


def test_a_create_whose_sync_fails_is_a_storage_error_and_leaves_nothing(
    tape_path: Path,
) -> None:
    class FullDisk(_fs.FileOps):
        def sync(self, fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(StorageError) as err:
        recording_tape(tape_path, FullDisk())  # type: ignore[arg-type]
    assert err.value.errno == errno.ENOSPC
    assert not isinstance(err.value, jsonltape.LockedError)
    assert list(tape_path.parent.iterdir()) == []


def test_a_lock_file_name_too_long_for_the_file_system_is_a_storage_error(
    tmp_path: Path,
) -> None:
    d = tmp_path / "long"
    d.mkdir(mode=0o700)
    path = d / ("a" * 245 + ".jsonl")  # fits in NAME_MAX (255); ".<name>.lock" does not
    with pytest.raises(StorageError) as err:
        jsonltape.open(path, create=True)
    assert err.value.errno == errno.ENAMETOOLONG
    assert list(d.iterdir()) == []
    path.write_bytes(_session_bytes(tmp_path))
    os.chmod(path, 0o600)
    with pytest.raises(StorageError) as err:
        jsonltape.open(path)
    assert err.value.errno == errno.ENAMETOOLONG


@pytest.mark.parametrize("what", ["directory", "symlink"])
def test_a_lock_file_that_is_not_a_regular_file_is_refused_as_unsafe(
    tape_path: Path, what: str
) -> None:
    jsonltape.open(tape_path, create=True).close()
    lock = tape_path.with_name(f".{tape_path.name}.lock")
    lock.unlink()
    if what == "directory":
        lock.mkdir()
    else:
        lock.symlink_to(tape_path.name)
    with pytest.raises(jsonltape.UnsafeFileError, match=what):
        jsonltape.open(tape_path)


# Run as an ordinary user (root ignores permissions): a directory the user may not write into.
UNWRITABLE = r"""
import errno, os, sys, jsonltape
d = sys.argv[1]
jsonltape.open(os.path.join(d, "s.jsonl"), create=True).close()
os.unlink(os.path.join(d, ".s.jsonl.lock"))
os.chmod(d, 0o500)
for call in ("open", "create"):
    name = "s.jsonl" if call == "open" else "new.jsonl"
    try:
        jsonltape.open(os.path.join(d, name), create=call == "create")
        print(call, "opened")
    except jsonltape.JsonltapeError as exc:
        print(call, type(exc).__name__, errno.errorcode.get(getattr(exc, "errno", 0) or 0))
"""


_SETPRIV = shutil.which("setpriv")


@pytest.mark.skipif(os.geteuid() == 0 and _SETPRIV is None, reason="root needs setpriv to drop")
def test_a_directory_the_writer_may_not_write_into_is_a_storage_error_exit_5() -> None:
    d = Path(tempfile.mkdtemp(prefix="jsonltape-ro-"))
    run_as: list[str] = []
    if os.geteuid() == 0:  # root ignores permissions: run as nobody
        os.chown(d, 65534, 65534)
        run_as = [str(_SETPRIV), "--reuid=65534", "--regid=65534", "--clear-groups"]
    try:
        out = subprocess.run(
            [*run_as, sys.executable, "-c", UNWRITABLE, str(d)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [
            "open StorageError EACCES",
            "create StorageError EACCES",
        ]
        cli = subprocess.run(
            [*run_as, sys.executable, "-m", "jsonltape", "repair", str(d / "s.jsonl")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cli.returncode == 5, cli.stderr
        assert len(cli.stderr.splitlines()) == 1
        assert "lock file" in cli.stderr and "another writer" not in cli.stderr
    finally:
        os.chmod(d, 0o700)
        shutil.rmtree(d)
