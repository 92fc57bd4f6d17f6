"""Every process jsonltape starts is safe from a cloned repository (issue 29, item 1).

A repository can ship a ``jsonltape/`` or ``jsonltape_daemon/`` package (and an executable
named ``git``). Each test runs, through the installed ``jsonltape`` command and inside such a
repository (a git work tree with a ``.jsonltape/`` project, as a clone would be), a command that
starts a process or writes a command line another program runs: the first bulk ``sync`` (its
full-text helper), ``daemon start``, the service files, the git merge driver, textconv and
hooks, ``import`` of every source. Every planted module writes a marker file if imported: none
may appear, and each command must have done its work.

A probe (a ``sitecustomize`` on ``PYTHONPATH``, which every Python process loads as it starts)
records each Python process: its command line, working directory and ``-P`` flag, so a test
also shows that the child it expects did start, and where.
"""

from __future__ import annotations

import inspect
import json
import os
import plistlib
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore

import jsonltape
from jsonltape.cli import cli
from jsonltape.interop import SOURCES

from ._pg import PgServer
from .helpers import one_turn
from .test_daemon import wait_for
from .test_git_install import git_env, make_repo  # noqa: F401 - git_env: the fixture

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary"),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and modes"),
    pytest.mark.usefixtures("git_env"),  # HOME, git's config: the test's own
]

JSONLTAPE = Path(sys.executable).parent / "jsonltape"  # the installed entry point
FIXTURES = Path(__file__).parent / "fixtures"
SESSIONS = Path(".jsonltape") / "sessions"
#: The messages from which a first sync hands the full-text indexes to its helper process: the
#: real default, read from the store (there is no knob to lower it from the command line).
HELPER_FROM: int = inspect.signature(SqliteStore).parameters["helper_from"].default

#: What a clone could ship: each module a child process of jsonltape imports on its way in.
PLANTED = (
    "jsonltape/__init__.py",
    "jsonltape/__main__.py",
    "jsonltape/cli/__init__.py",
    "jsonltape_daemon/__init__.py",
    "jsonltape_daemon/__main__.py",
    "jsonltape_daemon/engines/__init__.py",
    "jsonltape_daemon/engines/sqlite/__init__.py",
    "jsonltape_daemon/engines/sqlite/fts_helper.py",
)

_PROBE = """\
import json, os, sys
with open(os.environ["JSONLTAPE_TEST_PROBE"], "a") as f:
    f.write(json.dumps({
        "argv": sys.orig_argv,
        "cwd": os.getcwd(),
        "safe_path": bool(getattr(sys.flags, "safe_path", False)),
    }) + "\\n")
"""


class Clone:
    """A hostile repository, the environment its commands run in, and what they left."""

    def __init__(self, tmp: Path) -> None:
        self.repo = make_repo(tmp / "clone")
        self.markers = tmp / "markers"
        self.markers.mkdir()
        self.log = tmp / "probe.log"
        probe = tmp / "probe"
        probe.mkdir()
        (probe / "sitecustomize.py").write_text(_PROBE)
        for rel in PLANTED:
            path = self.repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            marker = self.markers / rel.replace("/", ".")
            path.write_text(f"open({str(marker)!r}, 'w').close()\n")
        self.data = tmp / "data"
        self.env = {
            **os.environ,
            "JSONLTAPE_HOME": str(self.data),
            "PYTHONPATH": str(probe),
            "JSONLTAPE_TEST_PROBE": str(self.log),
        }
        assert self.jt("init", "--no-git").returncode == 0
        self.sessions = self.repo / SESSIONS

    def jt(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The installed ``jsonltape`` command, run inside the clone."""
        return subprocess.run(
            [str(JSONLTAPE), *args],
            cwd=self.repo,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["git", *args], cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
        return done

    def imported(self) -> list[str]:
        """The planted modules some process imported."""
        return sorted(p.name for p in self.markers.iterdir())

    def started(self, *words: str) -> list[dict[str, Any]]:
        """The Python processes whose command line holds ``words`` in this order."""
        found = []
        for line in self.log.read_text().splitlines() if self.log.exists() else []:
            rec = json.loads(line)
            argv = rec["argv"]
            if any(argv[i : i + len(words)] == list(words) for i in range(len(argv))):
                found.append(rec)
        return found


@pytest.fixture
def clone(tmp_path: Path) -> Clone:
    return Clone(tmp_path)


def _messages(root: Path, n: int) -> None:
    """Sessions holding ``n`` messages in all."""
    per = 2000
    for s in range(-(-n // per)):
        with jsonltape.open(root / f"bulk-{s}.jsonl", create=True, durability="manual") as tape:
            for i in range(min(per, n - s * per) // 2):
                tape.user(f"question {s} {i} lighthouse")
                tape.assistant(f"answer {s} {i} harbour")
            tape.flush()


def _safe_child(rec: dict[str, Any]) -> None:
    """A child jsonltape started: in the safe directory, without the current one on its path."""
    assert rec["cwd"] == os.path.abspath(os.sep), rec
    if sys.version_info >= (3, 11):
        assert rec["safe_path"], rec


def test_the_first_bulk_sync_runs_the_real_full_text_helper(clone: Clone) -> None:
    _messages(clone.sessions, HELPER_FROM)
    # A relative --index: the helper, started elsewhere, must still find its file beside it.
    done = clone.jt("sync", "--index", "rel.db")
    assert done.returncode == 0, done.stderr
    assert f"+{HELPER_FROM} messages" in done.stdout
    assert clone.imported() == []
    (helper,) = clone.started("jsonltape_daemon.engines.sqlite.fts_helper")
    _safe_child(helper)
    assert helper["argv"][-1] == str(clone.repo / "rel.db.fts")
    found = clone.jt("search", "lighthouse", "--index", "rel.db", "--json", "--limit", "1")
    assert found.returncode == 0 and "lighthouse" in found.stdout, found.stderr


def test_daemon_start_runs_the_real_daemon_and_its_helper(clone: Clone) -> None:
    _messages(clone.sessions, HELPER_FROM)
    started = clone.jt("daemon", "start")
    assert started.returncode == 0, started.stderr
    try:

        def indexed() -> bool:
            out = clone.jt("daemon", "status", "--json")
            return bool(json.loads(out.stdout).get("events_indexed", 0) >= HELPER_FROM)

        wait_for(indexed, timeout=60)
    finally:
        stopped = clone.jt("daemon", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert clone.imported() == []
    (daemon,) = clone.started("jsonltape", "daemon", "run")
    _safe_child(daemon)
    assert str(clone.sessions) in daemon["argv"]  # the root it found, made explicit
    (helper,) = clone.started("jsonltape_daemon.engines.sqlite.fts_helper")  # the daemon's own
    _safe_child(helper)


def test_daemon_start_with_a_team_index_gives_the_url_by_the_environment(
    clone: Clone, pg_server: PgServer
) -> None:
    from .test_pg_daemon import _count  # psycopg: only where a server runs

    user, db = pg_server.unique("spawn"), pg_server.unique("spawn_db")
    pg_server.create_role(user, "S3cret-in-url")
    pg_server.create_database(db, owner=user)
    url = pg_server.url(db, user, "S3cret-in-url")
    with jsonltape.open(clone.sessions / "team.jsonl", create=True) as tape:
        one_turn(tape, "pushed from a clone")
    started = clone.jt("daemon", "start", "--index", url, "--origin", "daemon-test")
    assert started.returncode == 0, started.stderr
    try:
        wait_for(lambda: _count(url) == 2, timeout=60)
    finally:
        stopped = clone.jt("daemon", "stop", "--index", url)
    assert stopped.returncode == 0, stopped.stderr
    assert clone.imported() == []
    (daemon,) = clone.started("jsonltape", "daemon", "run")
    _safe_child(daemon)
    assert "S3cret-in-url" not in " ".join(daemon["argv"])  # argv is visible to every user


def _systemd_words(unit: str, key: str) -> list[str]:
    (line,) = [x for x in unit.splitlines() if x.startswith(f"{key}=")]
    return [w.replace("%%", "%") for w in shlex.split(line.partition("=")[2])]


def test_service_files_run_the_real_daemon_from_a_safe_directory(clone: Clone) -> None:
    launchd = clone.jt("daemon", "print-service", "--kind", "launchd")
    systemd = clone.jt("daemon", "print-service", "--kind", "systemd")
    assert launchd.returncode == 0 and systemd.returncode == 0, launchd.stderr + systemd.stderr
    plist = plistlib.loads(launchd.stdout.encode())
    argv = plist["ProgramArguments"]
    assert _systemd_words(systemd.stdout, "ExecStart") == argv
    assert plist["WorkingDirectory"] == os.path.abspath(os.sep)
    assert _systemd_words(systemd.stdout, "WorkingDirectory") == [os.path.abspath(os.sep)]
    installed = clone.jt("daemon", "install-service", "--kind", "systemd")
    assert installed.returncode == 0, installed.stderr
    unit = Path(clone.env["HOME"]) / ".config/systemd/user/jsonltape-daemon.service"
    assert unit.read_text() == systemd.stdout
    # The command alone must be safe, even where a service manager runs it in the clone.
    proc = subprocess.Popen(argv, cwd=clone.repo, env=clone.env, stdout=subprocess.DEVNULL)
    try:

        def running() -> bool:
            out = clone.jt("daemon", "status", "--json")
            assert out.returncode in (0, 1, 3), out.stderr  # LSB's codes; 2 is an error
            return bool(json.loads(out.stdout).get("running"))

        wait_for(lambda: running() or proc.poll() is not None, timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 0
    assert clone.imported() == []
    (run,) = clone.started("jsonltape", "daemon", "run")
    if sys.version_info >= (3, 11):
        assert run["safe_path"], run


def _append_turn(path: Path, text: str) -> None:
    with jsonltape.open(path, create="if-missing", session_id="shared") as tape:
        one_turn(tape, text)


def test_git_merge_driver_textconv_and_hooks_run_the_real_jsonltape(clone: Clone) -> None:
    assert clone.jt("git", "install").returncode == 0
    session = clone.sessions / "shared.jsonl"
    _append_turn(session, "the start")
    clone.git("add", "-A")
    clone.git("commit", "-q", "-m", "start")  # pre-commit
    clone.git("checkout", "-q", "-b", "other")  # post-checkout
    _append_turn(session, "on the other branch")
    clone.git("commit", "-q", "-am", "other")
    clone.git("checkout", "-q", "main")
    _append_turn(session, "on main")
    clone.git("commit", "-q", "-am", "main")
    merged = clone.git("merge", "--no-edit", "other")  # the merge driver, post-merge
    assert "recorded as branch" in merged.stderr
    shown = clone.git("log", "-p", "-3", "--", str(SESSIONS / "shared.jsonl"))  # textconv
    assert "user: on the other branch" in shown.stdout  # a transcript line, not JSON
    diff = clone.git("diff", "HEAD~1", "HEAD", "--", str(SESSIONS / "shared.jsonl"))
    assert re.search(r"^\+ +12  \S+ \S+  \[branch 11, seq 6\] ", diff.stdout, re.M), diff.stdout
    verify = clone.jt("verify", str(session))
    assert verify.returncode == 0 and ": clean," in verify.stdout, verify.stdout + verify.stderr
    assert clone.imported() == []
    for words in (
        ("git", "pre-commit"),
        ("git", "fix-modes"),
        ("git", "merge-driver"),
        ("git", "textconv"),
    ):
        runs = clone.started("jsonltape", *words)
        assert runs, words
        for rec in runs:
            # git runs them in the work tree; the interpreter option keeps it off sys.path
            assert rec["cwd"] == str(clone.repo)
            if sys.version_info >= (3, 11):
                assert rec["safe_path"], rec


def test_a_git_on_an_empty_path_entry_is_never_run(clone: Clone) -> None:
    # An empty PATH entry (``PATH=:/usr/bin``, a common slip) names the current directory:
    # git commands run in the work tree would find the clone's own ``git``.
    fake = clone.repo / "git"
    marker = clone.markers / "git"
    fake.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(marker))}\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    clone.env["PATH"] = os.pathsep + clone.env["PATH"]
    installed = clone.jt("git", "install")
    assert installed.returncode == 0, installed.stderr
    status = clone.jt("git", "status")
    assert status.returncode == 0, status.stdout + status.stderr
    # With no git but the clone's: one clear line, not the clone's git, not "no repository"
    clone.env["PATH"] = os.pathsep.join(["", ".", "bin"])
    alone = clone.jt("git", "status")
    assert alone.returncode == 2
    assert alone.stderr == "jsonltape: error: git is not installed (no `git` on PATH)\n"
    assert clone.imported() == []


#: A sample of each source the importers read.
_SAMPLES = {
    "claude-code": FIXTURES / "interop" / "claude-rewind-compact.jsonl",
    "codex": FIXTURES / "codex15" / "rollout-0154.jsonl",
    "gemini-cli": FIXTURES / "gemini" / "session-2026-03-02T10-00-4f1c2b9e.jsonl",
    "opencode": FIXTURES / "opencode" / "storage",
    "pi": FIXTURES / "interop" / "pi-v3-tree.jsonl",
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_import_of_each_source_runs_no_planted_code(clone: Clone, source: str) -> None:
    sample = _SAMPLES.get(source)
    if sample is None:  # a source added without a sample here: its discovery still runs
        empty = clone.repo / "empty"
        empty.mkdir()
        done = clone.jt("import", "--from", source, str(empty))
        assert done.returncode == 2 and "found" in done.stderr, done.stderr
    else:
        done = clone.jt("import", "--from", source, str(sample))
        assert done.returncode == 0, done.stderr
        (created,) = done.stdout.splitlines()
        assert Path(created).parent.parent == clone.sessions
    assert clone.imported() == []


def test_serve_runs_no_planted_code(clone: Clone) -> None:
    if "serve" not in cli.list_commands(click.Context(cli)):  # the lazy table, not the loaded
        pytest.skip("no `jsonltape serve` in this build")
    proc = subprocess.Popen(
        [str(JSONLTAPE), "serve", "--port", "0"],
        cwd=clone.repo,
        env=clone.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # it says what it keeps current, then where it listens
            said.append(line)
            if "http://" in line or len(said) > 5:
                break
        assert any("http://127.0.0.1:" in line for line in said), said
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert clone.imported() == []
    runs = clone.started()
    (own,) = [i for i, rec in enumerate(runs) if rec["argv"][-3:] == ["serve", "--port", "0"]]
    for rec in runs[own + 1 :]:  # each child of serve
        _safe_child(rec)
