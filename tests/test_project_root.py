"""Sessions inside a project (issue 12, item 6): ``jsonltape init`` and the root a command uses:
the command line, then ``$JSONLTAPE_ROOT``, then the nearest ``.jsonltape/`` above the current
directory (found from a subdirectory, as git finds ``.git``), then the user's data dir. One
function decides (``jsonltape._project.resolve_root``); ``sync``, ``import`` and ``daemon`` use
it, ``info`` and ``index status`` show it. An unsafe ``.jsonltape`` is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from jsonltape._project import find_project, resolve_root
from jsonltape.errors import UnsafeFileError

from .test_git_install import (
    git,
    git_env,  # noqa: F401 - the fixture every test here uses
    jt,
    make_repo,
    mode,
    write_session,
)

pytestmark = pytest.mark.usefixtures("git_env")

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")


def _project(tmp_path: Path) -> Path:
    top = tmp_path / "proj"
    top.mkdir()
    done = jt(top, "init")
    assert done.returncode == 0, done.stderr
    return top


# -- init ------------------------------------------------------------------------------------------


def test_init_outside_a_git_repository_makes_owner_only_folders_only(tmp_path: Path) -> None:
    top = tmp_path / "plain"
    top.mkdir()
    done = jt(top, "init")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{top / '.jsonltape' / 'sessions'}: created (0700)\n"
    assert mode(top / ".jsonltape") == 0o700 and mode(top / ".jsonltape" / "sessions") == 0o700
    assert sorted(p.name for p in top.iterdir()) == [".jsonltape"]  # no git files
    again = jt(top, "init")
    assert again.stdout == f"{top / '.jsonltape' / 'sessions'}: already there\n"


@needs_git
def test_init_in_a_git_repository_sets_git_up_too(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sub = repo / "packages" / "agent"
    sub.mkdir(parents=True)
    done = jt(sub, "init")
    assert done.returncode == 0, done.stderr
    assert (sub / ".jsonltape" / "sessions").is_dir()
    assert "added       .gitattributes" in done.stdout
    sample = "packages/agent/.jsonltape/sessions/s.jsonl"
    assert "merge: jsonltape" in git(repo, "check-attr", "merge", "--", sample).stdout
    assert jt(repo, "git", "status").returncode == 0
    no_git = make_repo(tmp_path / "other")
    assert jt(no_git, "init", "--no-git").returncode == 0
    assert not (no_git / ".gitattributes").exists()


def test_init_refuses_a_symlinked_jsonltape_and_creates_nothing_through_it(
    tmp_path: Path,
) -> None:
    top, elsewhere = tmp_path / "top", tmp_path / "elsewhere"
    top.mkdir()
    elsewhere.mkdir()
    (top / ".jsonltape").symlink_to(elsewhere)
    done = jt(top, "init")
    assert done.returncode == 2
    assert "symlink" in done.stderr
    assert list(elsewhere.iterdir()) == []


def test_init_tightens_a_cloned_jsonltape_and_refuses_a_writable_one(tmp_path: Path) -> None:
    top = tmp_path / "top"
    (top / ".jsonltape").mkdir(parents=True, mode=0o755)
    assert jt(top, "init").returncode == 0
    assert mode(top / ".jsonltape") == 0o700
    os.chmod(top / ".jsonltape", 0o777)
    done = jt(top, "init")
    assert done.returncode == 2 and "writable by group or others" in done.stderr


# -- the precedence -------------------------------------------------------------------------------


def test_precedence_flag_then_env_then_project_then_user_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = _project(tmp_path)
    deep = top / "src" / "pkg"
    deep.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(deep)
    found = resolve_root()
    assert (found.source, found.path) == ("project", top / ".jsonltape" / "sessions")
    assert found.project == top / ".jsonltape"
    monkeypatch.setenv("JSONLTAPE_ROOT", str(tmp_path / "from-env"))
    assert (resolve_root().source, resolve_root().path) == ("env", tmp_path / "from-env")
    flag = resolve_root(tmp_path / "named")
    assert (flag.source, flag.path) == ("flag", tmp_path / "named")
    monkeypatch.delenv("JSONLTAPE_ROOT")
    monkeypatch.chdir(outside)
    default = resolve_root()
    assert default.source == "default"
    home = Path(os.environ["HOME"])  # the fixture's
    assert default.path == home / ".local" / "share" / "jsonltape" / "sessions"


def test_sync_from_a_subdirectory_indexes_the_projects_sessions(tmp_path: Path) -> None:
    top = _project(tmp_path)
    write_session(top / ".jsonltape" / "sessions" / "s.jsonl", "the project's session")
    deep = top / "src"
    deep.mkdir()
    index = tmp_path / "index.db"
    done = jt(deep, "sync", "--index", str(index))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{top / '.jsonltape' / 'sessions'}: 1 session indexed")
    status = json.loads(jt(deep, "index", "status", "--index", str(index), "--json").stdout)
    assert status["root"]["from"] == "project"
    assert status["root"]["path"] == str(top / ".jsonltape" / "sessions")
    text = jt(deep, "index", "status", "--index", str(index)).stdout
    assert f"root here: {top / '.jsonltape' / 'sessions'} (project: {top / '.jsonltape'})" in text
    named = tmp_path / "named"
    named.mkdir()
    flagged = jt(deep, "sync", str(named), "--index", str(index))
    assert flagged.stdout.startswith(f"{named}: ") and "0 files read" in flagged.stdout


def test_info_shows_the_root_and_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = _project(tmp_path)
    path = write_session(top / ".jsonltape" / "sessions" / "s.jsonl")
    info = json.loads(jt(top, "info", str(path), "--json").stdout)
    assert info["root"] == {
        "path": str(top / ".jsonltape" / "sessions"),
        "from": "project",
        "project": str(top / ".jsonltape"),
    }
    monkeypatch.setenv("JSONLTAPE_ROOT", str(tmp_path))
    text = jt(top, "info", str(path)).stdout
    assert f"root here:    {tmp_path} (from $JSONLTAPE_ROOT)" in text


def test_import_writes_into_the_project_found_from_a_subdirectory(tmp_path: Path) -> None:
    top = tmp_path / "proj"
    (top / "src").mkdir(parents=True)
    (top / ".jsonltape").mkdir(mode=0o700)  # a project whose sessions folder is not there yet
    source = tmp_path / "claude.jsonl"
    source.write_text(
        json.dumps(
            {
                "type": "user",
                "sessionId": "c1",
                "uuid": "u1",
                "timestamp": "2026-01-01T00:00:00Z",
                "message": {"role": "user", "content": "imported"},
            }
        )
        + "\n"
    )
    done = jt(top / "src", "import", "--from", "claude-code", str(source))
    assert done.returncode == 0, done.stderr
    sessions = top / ".jsonltape" / "sessions"
    assert mode(sessions) == 0o700
    assert list(sessions.rglob("*.jsonl")), done.stdout


# -- an unsafe .jsonltape --------------------------------------------------------------------------


def test_a_symlinked_jsonltape_is_refused_where_it_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top, elsewhere = tmp_path / "top", tmp_path / "elsewhere"
    (top / "src").mkdir(parents=True)
    (elsewhere / "sessions").mkdir(parents=True, mode=0o700)
    elsewhere.chmod(0o700)
    (top / ".jsonltape").symlink_to(elsewhere)
    with pytest.raises(UnsafeFileError, match="symlink"):
        find_project(top / "src")
    done = jt(top / "src", "sync", "--index", str(tmp_path / "i.db"))
    assert done.returncode == 2
    assert done.stderr.startswith("jsonltape: error: ") and "symlink" in done.stderr
    assert not (elsewhere / "sessions" / "x").exists() and list(elsewhere.iterdir()) == [
        elsewhere / "sessions"
    ]


def test_a_group_writable_jsonltape_is_refused_a_readable_one_used(tmp_path: Path) -> None:
    top = tmp_path / "top"
    (top / ".jsonltape" / "sessions").mkdir(parents=True)
    os.chmod(top / ".jsonltape", 0o775)
    with pytest.raises(UnsafeFileError, match="writable by group or others"):
        find_project(top)
    os.chmod(top / ".jsonltape", 0o755)  # what a clone leaves: used
    assert find_project(top) == top / ".jsonltape"


def test_a_file_named_jsonltape_is_not_a_project(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    (outer / ".jsonltape").mkdir(mode=0o700)
    (inner / ".jsonltape").write_text("not a folder\n")
    assert find_project(inner) == outer / ".jsonltape"
