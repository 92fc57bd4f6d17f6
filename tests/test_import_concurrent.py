"""Two imports of one source into one root at the same moment: the second waits for the
first, then finds the source imported. Before, both created the same staged sessions and both
failed at naming time ("session file already exists")."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsonltape
from jsonltape._project import data_dir
from jsonltape.interop import import_paths
from jsonltape.interop._engine import as_input, session_id_for
from jsonltape.interop._one_import import STRIPES, lock_file, one_import

from .test_import_kill import _content, _repo, _sessions


def _import(root: Path, repo: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "aider", "--json",
         "--settle", "0", "-o", str(root), str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _created(out: str) -> int:
    return sum(len(json.loads(line).get("created") or []) for line in out.splitlines() if line)


@pytest.mark.timeout(300)
def test_two_imports_of_one_source_at_once_both_succeed_and_write_each_session_once(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    (fresh,) = import_paths("aider", [repo], tmp_path / "fresh", settle=0)
    want = {name: _content(p) for name, p in _sessions(tmp_path / "fresh").items()}
    root = tmp_path / "root"
    first, second = _import(root, repo), _import(root, repo)
    results = [(p, *p.communicate(timeout=240)) for p in (first, second)]
    for proc, _out, err in results:
        assert proc.returncode == 0, err
    assert sorted(_created(out) for _p, out, _e in results) == [0, len(want)]
    named = _sessions(root)
    assert sorted(named) == sorted(want)
    for name, path in named.items():
        assert _content(path) == want[name], name
        assert jsonltape.verify(path).state == "clean"
    assert fresh.status == "imported"


@pytest.mark.timeout(120)
def test_an_import_waits_while_another_import_of_its_source_runs(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    root = tmp_path / "root"
    history = repo / ".aider.chat.history.md"
    base_id = session_id_for("aider", as_input("aider", history).name)
    with one_import(root / "aider", base_id):
        child = _import(root, repo)
        time.sleep(1.5)
        assert child.poll() is None  # waiting, not failed
        assert _sessions(root) == {}  # and nothing written
    out, err = child.communicate(timeout=100)
    assert child.returncode == 0, err
    assert _created(out) == len(_sessions(root)) > 0
    lock = lock_file(root / "aider", base_id)
    # said once, before it waited: what it waits for and which lock holds it
    assert err.count("waiting") == 1, err
    assert f"{history}: waiting for another import into {root} to end" in err
    assert f"(it holds {lock})" in err


def test_an_import_nobody_holds_up_says_nothing_of_waiting(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    child = _import(tmp_path / "root", repo)
    out, err = child.communicate(timeout=100)
    assert child.returncode == 0, err
    assert "waiting" not in err and _created(out) > 0


def test_lock_files_are_few_owner_only_and_outside_the_archive(tmp_path: Path) -> None:
    paths = {lock_file(tmp_path / "root" / "aider", f"aider-{n}") for n in range(4 * STRIPES)}
    assert len(paths) <= STRIPES
    with one_import(tmp_path / "root" / "aider", "aider-1"):
        pass
    (made,) = [p for p in paths if p.exists()]
    assert made.stat().st_mode & 0o777 == 0o600
    assert made.parent.stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / "root").exists()


def test_without_a_usable_data_directory_an_import_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    monkeypatch.setenv("JSONLTAPE_HOME", str(home))
    repo = _repo(tmp_path)
    (report,) = import_paths("aider", [repo], tmp_path / "root", settle=0)
    assert report.status == "imported" and report.created


def test_one_root_named_through_a_symlink_or_dotdot_shares_its_lock(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "aider").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "up").symlink_to(tmp_path)  # sub/up/.. is tmp_path's parent, not sub
    names = [
        tmp_path / "link" / "aider",
        tmp_path / "sub" / "up" / "root" / "aider",
        tmp_path / "sub" / "up" / ".." / tmp_path.name / "root" / "aider",
        Path(os.path.relpath(root / "aider")),
    ]
    want = lock_file(root / "aider", "aider-x")
    assert [lock_file(d, "aider-x") for d in names] == [want] * len(names)


@pytest.mark.timeout(300)
def test_two_imports_into_one_root_by_two_of_its_names_both_succeed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(root)
    procs = [_import(root, repo), _import(tmp_path / "link", repo)]
    results = [(p, *p.communicate(timeout=240)) for p in procs]
    for proc, _out, err in results:
        assert proc.returncode == 0, err
    assert sorted(_created(out) for _p, out, _e in results) == [0, len(_sessions(root))]


def test_a_lock_directory_removed_while_the_process_runs_is_made_again(tmp_path: Path) -> None:
    with one_import(tmp_path / "root" / "aider", "aider-1"):
        pass
    lock = lock_file(tmp_path / "root" / "aider", "aider-1")
    shutil.rmtree(lock.parent)
    with one_import(tmp_path / "root" / "aider", "aider-1"):
        probe = os.open(lock, os.O_RDWR)  # held: another open file cannot have it
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)


def test_a_lock_the_file_system_refuses_lets_the_import_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An NFS home without its lock service refuses flock with ENOLCK (the root, elsewhere,
    # locks); nothing here can refuse it for real, so flock fails there as it does on one.
    real = fcntl.flock
    locks = str(data_dir() / "locks")

    def refused(fd: int, op: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(locks):
            raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", refused)
    repo = _repo(tmp_path)
    (report,) = import_paths("aider", [repo], tmp_path / "root", settle=0)
    assert report.status == "imported" and report.created, report.error
