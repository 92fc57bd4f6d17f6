"""``jsonltape git install`` / ``git status`` with the real ``git`` binary in temporary
repositories: what is written, that a second install changes nothing, that existing hooks keep
running (and blocking), ``core.hooksPath``, and a fresh clone before and after install.

HOME, the XDG dirs and git's global config point into the test's temporary directory, so the
user's own configuration is never read or touched (the helpers here serve the other git tests).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import jsonltape
from jsonltape.cli._base import available as _available
from jsonltape.git._install import DEFAULT_PATTERN, IGNORED

from .helpers import one_turn

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")


# -- helpers (the other git test modules import them) ---------------------------------------


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An isolated user: HOME, XDG dirs and git's global config under ``tmp_path/home``, no
    jsonltape root from the environment, umask 022 (git then writes files 0644)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[pull]\n\trebase = false\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("JSONLTAPE_ROOT", "JSONLTAPE_HOME", "JSONLTAPE_INDEX", "GIT_DIR", "GIT_WORK_TREE"):
        monkeypatch.delenv(name, raising=False)
    old = os.umask(0o022)
    try:
        yield home
    finally:
        os.umask(old)


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done


def jt(
    cwd: Path, *args: str, preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``jsonltape`` command (the same interpreter the hooks will run)."""
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=preexec_fn,
    )


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    git(path, "config", "user.name", "Test")
    git(path, "config", "user.email", "test@example.invalid")
    return path


def clone(origin: Path, path: Path) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(path))
    git(path, "config", "user.name", "Clone")
    git(path, "config", "user.email", "clone@example.invalid")
    return path


def write_session(path: Path, text: str = "hello") -> Path:
    """A session written by jsonltape (which creates missing folders 0700)."""
    with jsonltape.open(path, create=True) as tape:
        one_turn(tape, text)
    return path


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def snapshot(repo: Path) -> dict[str, bytes]:
    """Every file install may write: attributes, ignores, local config, hooks."""
    files = [repo / ".gitattributes", repo / ".gitignore", repo / ".git" / "config"]
    files += sorted((repo / ".git" / "hooks").iterdir())
    return {str(p.relative_to(repo)): p.read_bytes() for p in files if p.is_file()}


def hook(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


# -- what install writes ----------------------------------------------------------------------


def test_install_sets_attributes_ignores_and_config_to_this_jsonltape(
    git_env: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    done = jt(repo, "git", "install")
    assert done.returncode == 0, done.stderr
    sample = ".jsonltape/sessions/proj/s.jsonl"
    attrs = git(
        repo, "check-attr", "merge", "diff", "--", sample, "nested/.jsonltape/sessions/t.jsonl"
    )
    assert attrs.stdout.count(": merge: jsonltape") == 2
    assert attrs.stdout.count(": diff: jsonltape") == 2
    assert "merge: unspecified" in git(repo, "check-attr", "merge", "--", "notes/s.jsonl").stdout
    for ignored in (
        ".jsonltape/sessions/.s.jsonl.lock",
        ".jsonltape/sessions/s.jsonl.20260101T000000Z.torn",
    ):
        assert git(repo, "check-ignore", "-q", ignored, check=False).returncode == 0, ignored
    assert git(repo, "check-ignore", "-q", sample, check=False).returncode == 1
    driver = git(repo, "config", "--local", "merge.jsonltape.driver").stdout.strip()
    assert driver == f"{sys.executable} -P -m jsonltape git merge-driver %O %A %B %P"
    assert os.path.isabs(driver.split()[0])
    textconv = git(repo, "config", "--local", "diff.jsonltape.textconv").stdout.strip()
    assert textconv == f"{sys.executable} -P -m jsonltape git textconv"
    assert git(repo, "config", "--local", "merge.jsonltape.recursive").stdout.strip() == "jsonltape"
    assert git(repo, "config", "--local", "diff.jsonltape.cachetextconv").stdout.strip() == "true"
    for name in ("pre-commit", "post-checkout", "post-merge", "post-rewrite"):
        assert os.access(repo / ".git" / "hooks" / name, os.X_OK), name


def test_installing_twice_changes_nothing_byte_for_byte(git_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitattributes").write_text("*.png binary")  # no final newline
    (repo / ".gitignore").write_text("build/\n")
    hook(repo / ".git" / "hooks" / "pre-commit", "exit 0\n")
    assert jt(repo, "git", "install").returncode == 0
    first = snapshot(repo)
    second_run = jt(repo, "git", "install")
    assert second_run.returncode == 0, second_run.stderr
    assert snapshot(repo) == first
    assert all(line.split()[0] == "unchanged" for line in second_run.stdout.splitlines())
    # what was there is kept, jsonltape's lines added after it
    assert first[".gitattributes"].startswith(b"*.png binary\n")
    assert f"{DEFAULT_PATTERN} merge=jsonltape diff=jsonltape".encode() in first[".gitattributes"]
    assert first[".gitignore"].startswith(b"build/\n")
    assert all(line.encode() in first[".gitignore"] for line in IGNORED)
    assert first[".git/hooks/pre-commit.jsonltape-previous"] == b"#!/bin/sh\nexit 0\n"


def test_install_with_patterns_and_check(git_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    done = jt(repo, "git", "install", "--pattern", "logs/*.jsonl", "--pattern", "agents/**/*.jsonl")
    assert done.returncode == 0, done.stderr
    out = git(repo, "check-attr", "merge", "--", "logs/a.jsonl", "agents/x/y/b.jsonl").stdout
    assert out.count("merge: jsonltape") == 2
    assert jt(repo, "git", "install", "--check", "--pattern", "logs/*.jsonl").returncode == 0
    other = jt(repo, "git", "install", "--check", "--pattern", "other/*.jsonl")
    assert other.returncode == 1
    assert "missing     .gitattributes: other/*.jsonl" in other.stdout
    assert not (repo / "other").exists()  # --check writes nothing


def test_a_pattern_gitattributes_cannot_hold_is_refused(git_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    done = jt(repo, "git", "install", "--pattern", "my sessions/*.jsonl")
    assert done.returncode == 2
    assert "--pattern must be one .gitattributes pattern" in done.stderr
    assert not (repo / ".gitattributes").exists()


def test_install_outside_a_git_repository_is_refused(git_env: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for args in (["git", "install"], ["git", "status"]):
        done = jt(plain, *args)
        assert done.returncode == 2, done
        assert (
            done.stderr.startswith("jsonltape: error: ")
            and "not inside a git work tree" in done.stderr
        )
    assert list(plain.iterdir()) == []


def test_a_symlinked_gitattributes_is_refused_not_written_through(
    git_env: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (repo / ".gitattributes").symlink_to(target)
    done = jt(repo, "git", "install")
    assert done.returncode == 2 and "symlink" in done.stderr
    assert target.read_text() == "keep\n"


# -- hooks: chained, never replaced -------------------------------------------------------------


def test_an_existing_pre_commit_hook_still_runs_and_its_failure_blocks_the_commit(
    git_env: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    hook(repo / ".git" / "hooks" / "pre-commit", f"echo ran >> {marker}\nexit 1\n")
    assert jt(repo, "git", "install").returncode == 0
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    done = git(repo, "commit", "-q", "-m", "blocked", check=False)
    assert done.returncode != 0
    assert marker.read_text() == "ran\n"
    assert git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0


@pytest.mark.skipif(not _available("_git_check"), reason="jsonltape git pre-commit not built yet")
def test_a_passing_existing_hook_hands_over_to_jsonltapes_check(
    git_env: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    hook(repo / ".git" / "hooks" / "pre-commit", f"echo ran >> {marker}\n")
    assert jt(repo, "git", "install").returncode == 0
    write_session(repo / ".jsonltape" / "sessions" / "s.jsonl")
    git(repo, "add", "-A")
    done = git(repo, "commit", "-q", "-m", "one clean session", check=False)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "ran\n"


def test_an_existing_post_checkout_hook_still_runs_with_its_arguments(
    git_env: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    commit_all(repo, "one")
    log = tmp_path / "args"
    hook(repo / ".git" / "hooks" / "post-checkout", f'echo "$@" >> {log}\n')
    assert jt(repo, "git", "install").returncode == 0
    git(repo, "checkout", "-q", "-b", "other")
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert log.read_text() == f"{head} {head} 1\n"


def test_core_hooks_path_is_respected(git_env: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "core.hooksPath", ".githooks")
    marker = tmp_path / "ran"
    hook(repo / ".githooks" / "post-checkout", f"echo ran >> {marker}\n")
    assert jt(repo, "git", "install").returncode == 0
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    for name in ("pre-commit", "post-checkout", "post-merge", "post-rewrite"):
        assert "# jsonltape git hook" in (repo / ".githooks" / name).read_text()
    assert (repo / ".githooks" / "post-checkout.jsonltape-previous").exists()
    (repo / "a.txt").write_text("a\n")
    commit_all(repo, "one")
    git(repo, "checkout", "-q", "-b", "other")
    assert marker.read_text() == "ran\n"
    assert jt(repo, "git", "status").returncode == 0


def test_a_hook_the_pre_commit_framework_moved_aside_still_counts(
    git_env: Path, tmp_path: Path
) -> None:
    # `pre-commit install` keeps the hook it finds as <hook>.legacy and runs it first.
    repo = make_repo(tmp_path / "repo")
    assert jt(repo, "git", "install").returncode == 0
    hooks = repo / ".git" / "hooks"
    os.rename(hooks / "pre-commit", hooks / "pre-commit.legacy")
    hook(hooks / "pre-commit", '"$(dirname "$0")/pre-commit.legacy" "$@"\n')
    before = snapshot(repo)
    assert jt(repo, "git", "status").returncode == 0
    assert jt(repo, "git", "install").returncode == 0
    assert snapshot(repo) == before  # not chained a second time


def test_a_hook_whose_jsonltape_is_gone_is_reported_and_refreshed(
    git_env: Path, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    assert jt(repo, "git", "install").returncode == 0
    pre = repo / ".git" / "hooks" / "pre-commit"
    pre.write_text(pre.read_text().replace(sys.executable, "/nonexistent/venv/bin/python"))
    done = jt(repo, "git", "status")
    assert done.returncode == 1
    assert (
        "missing     hook pre-commit: runs /nonexistent/venv/bin/python, which is gone"
        in done.stdout
    )
    again = jt(repo, "git", "install")
    assert "updated     hook pre-commit" in again.stdout
    assert jt(repo, "git", "status").returncode == 0
    assert not (repo / ".git" / "hooks" / "pre-commit.jsonltape-previous").exists()


# -- a fresh clone --------------------------------------------------------------------------------


def test_status_in_a_fresh_clone_reports_what_git_did_not_clone(
    git_env: Path, tmp_path: Path
) -> None:
    origin = make_repo(tmp_path / "origin")
    assert jt(origin, "git", "install").returncode == 0
    write_session(origin / ".jsonltape" / "sessions" / "s.jsonl")
    commit_all(origin, "sessions")
    assert jt(origin, "git", "status").returncode == 0
    copy = clone(origin, tmp_path / "copy")
    done = jt(copy, "git", "status")
    assert done.returncode == 1
    states = {line[12:].split(":")[0]: line.split()[0] for line in done.stdout.splitlines()}
    assert states[".gitattributes"] == "configured"  # tracked: cloned
    assert states[".gitignore"] == "configured"
    assert states["git config merge.jsonltape.driver"] == "missing"
    assert states["git config diff.jsonltape.textconv"] == "missing"
    assert states["hook pre-commit"] == "missing"
    assert states["session file modes"] == "missing"  # git wrote them 0644
    assert "run `jsonltape git install`" in done.stderr
    assert jt(copy, "git", "install").returncode == 0
    assert jt(copy, "git", "status").returncode == 0
    assert jt(copy, "git", "install", "--check").returncode == 0


# -- the pre-commit framework's manifest ----------------------------------------------------------


def test_the_pre_commit_manifest_runs_a_real_command_on_session_files() -> None:
    manifest = Path(__file__).parent.parent / ".pre-commit-hooks.yaml"
    fields = dict(
        line[2:].split(": ", 1) if line.startswith("- ") else line.strip().split(": ", 1)
        for line in manifest.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert {"id", "name", "entry", "language"} <= set(fields)
    assert fields["language"] == "python" and fields["pass_filenames"] == "false"
    program, group, command = fields["entry"].split()
    assert (program, group) == ("jsonltape", "git")
    from jsonltape.cli._git import GIT_COMMANDS

    assert command in GIT_COMMANDS  # the hook the installed git hook runs too
    files = re.compile(fields["files"])
    assert files.search(".jsonltape/sessions/a/s.jsonl")
    assert files.search("pkg/.jsonltape/sessions/s.jsonl")
    assert not files.search("notes/s.jsonl")
