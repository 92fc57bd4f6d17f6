"""Owner-only session files after git (issue 12, item 7), with the real ``git`` binary: a clone
writes them with the umask (0644, folders 0755); ``jsonltape git install`` tightens them, and its
post-checkout / post-merge / post-rewrite hooks do it again after a branch switch, a pull (merge
or rebase). ``verify`` and ``info`` warn about a session others may read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .test_git_install import (
    clone,
    commit_all,
    git,
    git_env,  # noqa: F401 - the fixture every test here uses
    jt,
    make_repo,
    mode,
    write_session,
)

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary"),
    pytest.mark.usefixtures("git_env"),
]

SESSIONS = Path(".jsonltape") / "sessions"


def _origin(tmp_path: Path) -> Path:
    """A repository set up by jsonltape, with a README and sessions in a nested folder."""
    origin = make_repo(tmp_path / "origin")
    assert jt(origin, "init").returncode == 0
    (origin / "README").write_text("hi\n")
    write_session(origin / SESSIONS / "alpha" / "a.jsonl", "first")
    commit_all(origin, "sessions")
    return origin


def _owner_only(repo: Path) -> None:
    """Every session file 0600 and every folder from it up to .jsonltape 0700."""
    files = list((repo / ".jsonltape").rglob("*.jsonl"))
    assert files
    for f in files:
        assert mode(f) == 0o600, f
        d = f.parent
        while d != repo:
            assert mode(d) == 0o700, d
            d = d.parent


def test_a_clone_is_loose_until_install_tightens_it(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    copy = clone(origin, tmp_path / "copy")
    assert mode(copy / SESSIONS / "alpha" / "a.jsonl") == 0o644  # git keeps no modes
    assert mode(copy / ".jsonltape") == 0o755
    done = jt(copy, "git", "install")
    assert done.returncode == 0, done.stderr
    assert "tightened   session file modes: 1 session files: 1 files" in done.stdout
    _owner_only(copy)
    assert mode(copy / "README") == 0o644  # not a session file: left as git wrote it
    assert mode(copy) == 0o755  # the top of the work tree is never changed


def test_switching_branches_restores_owner_only(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    git(origin, "checkout", "-q", "-b", "other")
    write_session(origin / SESSIONS / "beta" / "b.jsonl", "on another branch")
    commit_all(origin, "other branch")
    git(origin, "checkout", "-q", "main")
    copy = clone(origin, tmp_path / "copy")
    assert jt(copy, "git", "install").returncode == 0
    git(copy, "checkout", "-q", "other")  # post-checkout
    assert mode(copy / SESSIONS / "beta" / "b.jsonl") == 0o600
    assert mode(copy / SESSIONS / "beta") == 0o700
    _owner_only(copy)


def test_a_pull_that_merges_restores_owner_only(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    copy = clone(origin, tmp_path / "copy")
    assert jt(copy, "git", "install").returncode == 0
    write_session(origin / SESSIONS / "gamma" / "g.jsonl", "pushed from elsewhere")
    commit_all(origin, "fast-forward")
    git(copy, "pull", "-q")  # a fast-forward: post-merge
    assert mode(copy / SESSIONS / "gamma" / "g.jsonl") == 0o600
    write_session(origin / SESSIONS / "delta" / "d.jsonl", "and more")
    commit_all(origin, "upstream")
    (copy / "local.txt").write_text("local\n")
    commit_all(copy, "local work")
    git(copy, "pull", "-q", "--no-edit")  # a real merge commit: post-merge
    assert len(git(copy, "rev-list", "--parents", "-n1", "HEAD").stdout.split()) == 3
    assert mode(copy / SESSIONS / "delta" / "d.jsonl") == 0o600
    _owner_only(copy)


def test_a_pull_that_rebases_restores_owner_only(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    copy = clone(origin, tmp_path / "copy")
    assert jt(copy, "git", "install").returncode == 0
    write_session(origin / SESSIONS / "epsilon" / "e.jsonl", "upstream")
    commit_all(origin, "upstream")
    (copy / "local.txt").write_text("local\n")
    commit_all(copy, "local work")
    git(copy, "pull", "-q", "--rebase")  # post-rewrite (and post-checkout)
    assert mode(copy / SESSIONS / "epsilon" / "e.jsonl") == 0o600
    _owner_only(copy)


def test_git_never_runs_a_jsonltape_folder_checked_out_in_the_work_tree(tmp_path: Path) -> None:
    # git runs hooks and textconv at the top of the work tree; `python -m jsonltape` would
    # import a jsonltape/ package from there (any cloned repository could ship one).
    origin = _origin(tmp_path)
    marker = tmp_path / "imported"
    (origin / "jsonltape").mkdir()
    (origin / "jsonltape" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    git(origin, "checkout", "-q", "-b", "other")
    write_session(origin / SESSIONS / "beta" / "b.jsonl", "on another branch")
    commit_all(origin, "a decoy package and a session")
    git(origin, "checkout", "-q", "main")
    copy = clone(origin, tmp_path / "copy")
    assert jt(copy, "git", "install").returncode == 0
    git(copy, "checkout", "-q", "other")  # post-checkout runs jsonltape from the top
    git(copy, "log", "-p", "-1")  # textconv (if built) too
    assert mode(copy / SESSIONS / "beta" / "b.jsonl") == 0o600  # the real one ran
    assert not marker.exists()


def test_fix_modes_follows_no_symlink(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert jt(repo, "init").returncode == 0
    outside = tmp_path / "outside.jsonl"
    outside.write_text("not ours to change\n")
    outside.chmod(0o644)
    (repo / SESSIONS / "link.jsonl").symlink_to(outside)
    commit_all(repo, "a symlink where a session would be")
    done = jt(repo, "git", "fix-modes")
    assert done.returncode == 0, done.stderr
    assert mode(outside) == 0o644


def test_a_custom_pattern_tightens_only_the_files_own_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    logs = repo / "work" / "logs"
    logs.mkdir(parents=True)
    write_session(logs / "s.jsonl")
    os.chmod(logs / "s.jsonl", 0o644)
    commit_all(repo, "logs")
    done = jt(repo, "git", "install", "--pattern", "work/logs/*.jsonl")
    assert done.returncode == 0, done.stderr
    assert mode(logs / "s.jsonl") == 0o600
    assert mode(logs) == 0o700
    assert mode(repo / "work") == 0o755


# -- verify and info ------------------------------------------------------------------------


def test_verify_and_info_warn_about_a_session_others_can_read(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl")
    path.chmod(0o644)
    done = jt(tmp_path, "verify", str(path))
    assert done.returncode == 0  # the bytes are clean: the exit code says so
    assert done.stdout.startswith(f"{path}: clean, ")
    warning = done.stderr.strip()
    assert warning.startswith(
        f"jsonltape: warning: {path}: readable by group or others (mode 0644)"
    )
    assert "chmod 600" in warning and "jsonltape git install" in warning
    info = jt(tmp_path, "info", str(path))
    assert info.returncode == 0
    assert info.stderr.strip() == warning
    path.chmod(0o600)
    assert jt(tmp_path, "verify", str(path)).stderr == ""
    assert jt(tmp_path, "info", str(path)).stderr == ""
