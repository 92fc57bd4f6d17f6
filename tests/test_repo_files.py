"""Files jsonltape reads from a repository (``.jsonltape-allow``, ``.gitattributes``,
``.gitignore``, the hooks) are opened without following a link, without blocking on a FIFO, and
read up to a cap: a clone that plants a link to ``/dev/zero``, a FIFO, a huge file or a
directory under one of those names gets one line and exit 2, never a hang, a MemoryError or a
traceback. Every command runs as its own process under a 1 GiB address-space limit, so a read
without end fails the test quickly instead of filling the machine.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from jsonltape import _fs
from jsonltape.errors import UnsafeFileError

from .test_git_check import repo, session  # noqa: F401 - the fixture
from .test_git_install import git, jt

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")

_LIMIT = 1 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_LIMIT, _LIMIT))


def jt_limited(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return jt(cwd, *args, preexec_fn=_limited)


def plant_link_to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def plant_fifo(path: Path) -> None:
    os.mkfifo(path)


def plant_huge_file(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(_fs.MAX_REPO_FILE + 1)  # sparse: costs no disk


def plant_directory(path: Path) -> None:
    path.mkdir()


PLANTS: dict[str, Callable[[Path], None]] = {
    "link to /dev/zero": plant_link_to_dev_zero,
    "fifo": plant_fifo,
    "huge file": plant_huge_file,
    "directory": plant_directory,
}
WHY = {
    "link to /dev/zero": "is a symlink; jsonltape does not follow links",
    "fifo": "is not a regular file",
    "huge file": f"is larger than {_fs.MAX_REPO_FILE} bytes",
    "directory": "is a directory, not a file",
}


def refused_once(done: subprocess.CompletedProcess[str], path: Path, plant: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and WHY[plant] in lines[0], lines[0]


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_the_allow_list_is_never_followed_blocked_on_or_read_whole(
    repo: Path,  # noqa: F811
    plant: str,
) -> None:
    session(repo / "sessions" / "a.jsonl")
    git(repo, "add", "sessions/a.jsonl")
    PLANTS[plant](repo / ".jsonltape-allow")
    for args in (["git", "pre-commit"], ["git", "check", "sessions/a.jsonl"]):
        refused_once(jt_limited(repo, *args), repo / ".jsonltape-allow", plant)
    # The real commit through the real hook is refused too, and nothing is committed.
    done = git(repo, "commit", "-q", "-m", "x", check=False)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert git(repo, "rev-list", "--count", "HEAD").stdout.strip() == "1"


@pytest.mark.parametrize("name", [".gitattributes", ".gitignore"])
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_git_install_and_status_refuse_a_planted_attributes_or_ignore_file(
    repo: Path,  # noqa: F811
    name: str,
    plant: str,
) -> None:
    target = repo / name
    if target.exists():
        target.unlink()
    PLANTS[plant](target)
    before = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file() and not p.is_symlink()}
    for args in (["git", "install"], ["git", "status"]):
        refused_once(jt_limited(repo, *args), target, plant)
    # Nothing was written: install reads both files before it writes either.
    after = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file() and not p.is_symlink()}
    assert after == before
    assert not (repo / ".git" / "hooks" / "pre-commit.jsonltape-previous").exists()


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_hook_is_not_read_but_moved_aside_and_chained(
    repo: Path,  # noqa: F811
    plant: str,
) -> None:
    # core.hooksPath in the work tree: the hooks are files of the repository.
    hooks = repo / "githooks"
    hooks.mkdir()
    git(repo, "config", "core.hooksPath", "githooks")
    PLANTS[plant](hooks / "pre-commit")
    done = jt_limited(repo, "git", "status")
    assert done.returncode == 1, done.stderr  # not installed yet: said, not refused
    assert "Traceback" not in done.stderr
    assert "missing     hook pre-commit: not installed" in done.stdout
    done = jt_limited(repo, "git", "install")
    assert done.returncode == 0, done.stderr
    assert "chained     hook pre-commit" in done.stdout
    assert os.path.lexists(hooks / "pre-commit.jsonltape-previous")
    done = jt_limited(repo, "git", "status")
    assert "configured  hook pre-commit" in done.stdout, done.stdout


def test_read_repo_file_reads_a_small_file_and_says_none_for_a_missing_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f"
    assert _fs.read_repo_file(path) is None
    assert _fs.read_repo_file(tmp_path / "no-dir" / "f") is None
    path.write_bytes(b"x" * _fs.MAX_REPO_FILE)
    assert _fs.read_repo_file(path) == b"x" * _fs.MAX_REPO_FILE  # the cap itself is fine
    with path.open("ab") as f:
        f.write(b"y")
    with pytest.raises(UnsafeFileError, match="is larger than"):
        _fs.read_repo_file(path)
    with pytest.raises(UnsafeFileError, match="is larger than 3 bytes"):
        _fs.read_repo_file(path, cap=3)
