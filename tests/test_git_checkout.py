"""Checkout safety (issue 12, item 8), with the real ``git`` binary and the real daemon process.

A repository set up by ``jsonltape init`` (so its post-checkout hooks run) holds sessions under
``.jsonltape/sessions/`` that differ between branches: more events appended, a different
continuation after seq N, a continuation of the same length ending in the same line, a session
deleted, one added. While ``jsonltape daemon run`` watches that folder, ``git checkout`` back
and forth, ``git pull`` (fast-forward and through the merge driver), ``git stash`` / ``stash
pop`` and ``git reset --hard`` replace the files; after each, once the daemon has seen every
file as it now is, its index equals a rebuild of the same tree (sessions, events with their seq
and crc, messages, search hits), with no duplicate and nothing from a file that is gone.

A writer that holds a session while git replaces its file refuses its next append with
:class:`ConcurrentModificationError` (exit 4 through the CLI's mapping), the file git put in
place is not written to, and the lock is free after ``close``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters, search
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.ingestor import Ingestor, walk
from jsonltape_daemon.service.daemon import daemon_status

import jsonltape
from jsonltape import _framing
from jsonltape.errors import ConcurrentModificationError, LockedError, WriterFailedError

from .conftest import LONG
from .test_git_install import clone, commit_all, git, jt, make_repo
from .test_git_install import git_env as git_env  # the fixture every git test here uses
from .test_index_helpers import dump, raw_append, rebuild, session, user_data

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary"),
    pytest.mark.usefixtures("git_env"),
]

SESSIONS = Path(".jsonltape") / "sessions"
#: Words that each live in some branch's sessions only (or in all of them).
TERMS = ("apple", "kiwi", "mango", "banana", "cherry", "durian", "fig", "grape", "plum", "lime")


# -- waiting and comparing ------------------------------------------------------------------


def wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    """A bounded poll (no fixed sleep): ``cond`` must come true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def on_disk(root: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every session file under ``root`` with the stat hints the index records for it."""
    out = {}
    for p in walk(str(root)):
        st = os.lstat(p)
        out[p] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def registry(index: Path) -> dict[str, tuple[int, int, int, int]] | None:
    try:
        con = connect(index, readonly=True)
    except IndexStateError:  # not published yet
        return None
    try:
        rows = con.execute("SELECT path, dev, ino, size, mtime_ns FROM files").fetchall()
    finally:
        con.close()
    return {path: (dev, ino, size, mtime) for path, dev, ino, size, mtime in rows}


def settle(index: Path, root: Path) -> None:
    """Wait until the daemon has looked at every file as it is now and forgotten the gone
    ones: its registry holds exactly the files on disk, each with its current stat."""
    wait_for(lambda: registry(index) == on_disk(root))


def hits(con: sqlite3.Connection, term: str) -> list[tuple[str, str, int, str, str]]:
    found = search(con, term, Filters(), limit=1000)
    # Ranks tie among equal texts and ties fall back to row ids, which differ between an
    # index kept current and a rebuild: compare the hits as a set (a duplicate would show).
    return sorted((h.session, h.path, h.seq, h.status, h.snippet) for h in found)


def assert_index_equals_rebuild(index: Path, root: Path) -> None:
    """The daemon's index, read as it is, against a rebuild of the same tree."""
    con = connect(index, readonly=True)
    fresh = SqliteStore(":memory:")
    try:
        Ingestor(fresh, root).rescan()
        paths = set(walk(str(root)))
        sessions = con.execute("SELECT path, count(*) FROM sessions GROUP BY path").fetchall()
        assert {p for p, _n in sessions} == paths  # nothing from a file that no longer exists
        assert all(n == 1 for _p, n in sessions), sessions  # one session per file
        # Every event with its seq and crc, as in the files now.
        indexed = sorted(
            con.execute("SELECT s.path, e.seq, e.crc FROM events e JOIN sessions s USING (sid)")
        )
        in_files = sorted(
            (str(p), e.seq, _framing.crc_of(raw))
            for p in map(Path, paths)
            for e, raw in zip(jsonltape.read(p), _framing_lines(p), strict=True)
        )
        assert indexed == in_files
        assert dump(con) == dump(fresh.con)  # files, sessions, events, messages, tool calls
        assert hits(con, "apple")  # a.jsonl is on every branch: the comparison has hits
        for term in TERMS:
            assert hits(con, term) == hits(fresh.con, term), term
    finally:
        fresh.close()
        con.close()


def _framing_lines(path: Path) -> list[bytes]:
    """The raw committed lines of a session (the ones jsonltape.read yields), in order."""
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    return lines[: sum(1 for _ in jsonltape.read(path))]


# -- the repository and the daemon ----------------------------------------------------------


def _turns(path: Path, texts: list[str]) -> None:
    """Append one user/assistant turn per text to an existing session (a real writer)."""
    with jsonltape.open(path) as tape:
        for text in texts:
            with tape.turn():
                tape.user(text)
                tape.assistant(f"noted {text}")


def _new(path: Path, texts: list[str]) -> None:
    session(path, texts)


def _branch(repo: Path, name: str, change: Callable[[Path], None]) -> None:
    """Branch ``name`` off main with ``change(sessions folder)`` committed; back on main."""
    git(repo, "checkout", "-q", "-b", name, "main")
    change(repo / SESSIONS)
    commit_all(repo, name)
    git(repo, "checkout", "-q", "main")


def _same_length_continuation(word: str) -> Callable[[Path], None]:
    """A continuation after a.jsonl's last line whose bytes differ from the other one's only in
    ``word`` (same length), ending in the same last line at the same offset."""

    def change(s: Path) -> None:
        raw_append(s / "a.jsonl", [("user/message", user_data(f"twin {word} word"))])
        raw_append(s / "a.jsonl", [("user/message", user_data("the same closing line"))])

    return change


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: a, b, c. more: a + two turns. diverged: a + other turns after main's seq N.
    twin-fig / twin-elm: a + a continuation of equal length with an equal last line.
    gone: b deleted. added: d in a new folder."""
    r = make_repo(tmp_path / "origin")
    done = jt(r, "init")
    assert done.returncode == 0, done.stderr
    s = r / SESSIONS
    session(s / "a.jsonl", ["apple base one", "apple base two"])
    session(s / "b.jsonl", ["banana bread"])
    session(s / "c.jsonl", ["cherry pie"])
    commit_all(r, "sessions")
    _branch(r, "more", lambda s: _turns(s / "a.jsonl", ["apple more kiwi", "apple more grape"]))
    _branch(r, "diverged", lambda s: _turns(s / "a.jsonl", ["apple other mango"]))
    _branch(r, "twin-fig", _same_length_continuation("fig"))
    _branch(r, "twin-elm", _same_length_continuation("elm"))
    _branch(r, "gone", lambda s: (s / "b.jsonl").unlink())
    _branch(r, "added", lambda s: _new(s / "deep" / "d.jsonl", ["durian"]))
    return r


class RunningDaemon:
    """``jsonltape daemon run ROOT`` as its own process; rescans are an hour apart, so what it
    does after a git command comes from the watcher's hints, not from the safety net."""

    def __init__(self, root: Path, index: Path) -> None:
        self.root, self.index = root, index
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jsonltape",
                "daemon",
                "run",
                str(root),
                "--index",
                str(index),
                "--rescan-interval",
                "3600",
                "--debounce",
                "0.05",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_for(lambda: self._running() or self.proc.poll() is not None, timeout=30)
        assert self.proc.poll() is None, self.proc.communicate()[1]

    def _running(self) -> bool:
        status = daemon_status(self.index)
        return bool(status) and status.get("state") == "running"  # type: ignore[union-attr]

    def check(self) -> None:
        """Settle, then compare with a rebuild."""
        assert self.proc.poll() is None, "the daemon died"
        settle(self.index, self.root)
        assert_index_equals_rebuild(self.index, self.root)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        _out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err


@contextmanager
def daemon_on(repo: Path, index: Path) -> Iterator[RunningDaemon]:
    d = RunningDaemon(repo / SESSIONS, index)
    try:
        yield d
    finally:
        d.stop()


def checkout(repo: Path, branch: str) -> None:
    git(repo, "checkout", "-q", branch)  # its post-checkout hook runs (git install set it up)


# -- the daemon across git commands ---------------------------------------------------------


def test_branch_switches_leave_the_daemons_index_equal_to_a_rebuild(
    repo: Path, tmp_path: Path
) -> None:
    with daemon_on(repo, tmp_path / "index.db") as d:
        d.check()
        hops = ["more", "diverged", "more", "main", "twin-fig", "twin-elm", "twin-fig"]
        hops += ["gone", "added", "gone", "diverged", "added", "main"]
        for branch in hops:
            checkout(repo, branch)
            d.check()
        assert (repo / SESSIONS / "a.jsonl").stat().st_mode & 0o777 == 0o600  # hooks ran
        if LONG:  # a longer random walk over the branches
            rng = random.Random(12)
            names = ["main", "more", "diverged", "twin-fig", "twin-elm", "gone", "added"]
            for _ in range(40):
                checkout(repo, rng.choice(names))
                d.check()


def test_pull_stash_and_reset_leave_the_daemons_index_equal_to_a_rebuild(
    repo: Path, tmp_path: Path
) -> None:
    other = clone(repo, tmp_path / "other")
    assert jt(other, "git", "install").returncode == 0
    with daemon_on(repo, tmp_path / "index.db") as d:
        d.check()
        # A fast-forward pull: the other clone appended to a.jsonl.
        _turns(other / SESSIONS / "a.jsonl", ["apple pulled plum"])
        commit_all(other, "appended elsewhere")
        git(repo, "pull", "-q", "--no-edit", str(other), "main")
        d.check()
        # stash takes a work-tree append away (the file shrinks back), pop brings it back.
        _turns(repo / SESSIONS / "b.jsonl", ["banana stashed"])
        d.check()
        git(repo, "stash", "-q")
        assert b"stashed" not in (repo / SESSIONS / "b.jsonl").read_bytes()
        d.check()
        git(repo, "stash", "pop", "-q")
        assert b"stashed" in (repo / SESSIONS / "b.jsonl").read_bytes()
        d.check()
        git(repo, "checkout", "-q", "--", ".")  # drop it again
        d.check()
        # reset --hard across diverging histories (no hook runs: modes are not the point here).
        git(repo, "checkout", "-q", "-b", "scratch")
        for target in ("diverged", "more", "twin-elm", "twin-fig", "gone", "added", "main"):
            git(repo, "reset", "-q", "--hard", target)
            d.check()


@pytest.mark.skipif(
    importlib.util.find_spec("jsonltape.cli._git_merge") is None,
    reason="the merge driver (issue 12, item 2) is not there yet",
)
def test_a_pull_through_the_merge_driver_leaves_the_daemons_index_equal_to_a_rebuild(
    repo: Path, tmp_path: Path
) -> None:
    """Both sides appended different events to c.jsonl; the merge driver writes one file
    (ours, then theirs as a recorded branch) in place of ours while the daemon watches."""
    other = clone(repo, tmp_path / "other")
    assert jt(other, "git", "install").returncode == 0
    with daemon_on(repo, tmp_path / "index.db") as d:
        _turns(repo / SESSIONS / "c.jsonl", ["cherry here"])
        commit_all(repo, "here")
        d.check()
        _turns(other / SESSIONS / "c.jsonl", ["cherry there lime"])
        commit_all(other, "there")
        git(repo, "pull", "-q", "--no-edit", str(other), "main")
        assert b"lime" in (repo / SESSIONS / "c.jsonl").read_bytes()
        d.check()
        git(repo, "reset", "-q", "--hard", "HEAD~1")  # and the merge undone
        d.check()


def test_a_sync_after_each_checkout_equals_a_rebuild(repo: Path, tmp_path: Path) -> None:
    """Without a daemon: ``jsonltape sync`` (the engine's rescan) after each branch switch."""
    root = repo / SESSIONS
    store = SqliteStore(tmp_path / "index.db")
    try:
        engine = Ingestor(store, root)
        engine.rescan()
        for branch in ("more", "diverged", "twin-fig", "twin-elm", "gone", "added", "main"):
            checkout(repo, branch)
            engine.rescan()
            assert dump(store.con) == rebuild(root), branch
    finally:
        store.close()
    # The command line agrees: a rebuild into another index finds what search found here.
    checkout(repo, "more")
    for index in (tmp_path / "index.db", tmp_path / "fresh.db"):
        cmd = "sync" if index.name == "index.db" else "index"
        args = [str(root), "--index", str(index)]
        done = jt(repo, *([cmd, *args] if cmd == "sync" else [cmd, "rebuild", *args]))
        assert done.returncode == 0, done.stderr
    # The same hits; not the same bm25 scores: the synced index's full-text statistics still
    # count the messages of replaced files until `index optimize` (daemon/SCHEMA.md, dead keys).
    found = [
        sorted(
            json.dumps({k: v for k, v in json.loads(line).items() if k != "score"})
            for line in jt(repo, "search", "kiwi", "--index", str(i), "--json").stdout.splitlines()
        )
        for i in (tmp_path / "index.db", tmp_path / "fresh.db")
    ]
    assert found[0] == found[1] and len(found[0]) == 2  # the user's message and the reply


# -- the engine case (the defect the twin branches found) -----------------------------------


def test_a_replaced_file_that_diverges_but_ends_in_the_same_line_is_reingested(
    tmp_path: Path,
) -> None:
    """Two continuations of one session after seq N, of equal length and with an equal last
    line: the cursor's line (offset, seq, crc) still matches after one replaces the other, but
    the lines before it do not. The index must follow the file, not keep the old rows."""
    root = tmp_path / "r"
    path = root / "a.jsonl"
    session(path, ["base"])
    base = path.read_bytes()
    variants = []
    for word in ("fig", "elm"):
        path.write_bytes(base)
        raw_append(path, [("user/message", user_data(f"twin {word} word"))])
        raw_append(path, [("user/message", user_data("the same closing line"))])
        variants.append(path.read_bytes())
    fig, elm = variants
    assert len(fig) == len(elm) and fig.splitlines()[-1] == elm.splitlines()[-1] and fig != elm
    path.write_bytes(fig)
    store = SqliteStore(tmp_path / "index.db")
    try:
        engine = Ingestor(store, root)
        engine.rescan()
        tmp = root / "new.tmp"
        tmp.write_bytes(elm)
        os.replace(tmp, path)  # another inode, the same size: what a checkout leaves
        assert engine.rescan().reingested == 1
        assert dump(store.con) == rebuild(root)
        # In place too (same inode, same size, a new mtime): the same rule.
        with open(path, "r+b") as f:
            f.write(fig)
        os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
        assert engine.rescan().reingested == 1
        assert dump(store.con) == rebuild(root)
        # A rename keeps its rows: the whole region is compared and found the same.
        os.rename(path, root / "b.jsonl")
        moved = engine.rescan()
        assert moved.reingested == 0 and moved.events == 0 and moved.sessions_added == 0
        assert dump(store.con) == rebuild(root)
    finally:
        store.close()


# -- a writer that holds a session while git replaces it ------------------------------------

_WRITER = """
import sys
import jsonltape
from jsonltape.cli import fail

tape = jsonltape.open(sys.argv[1], durability=sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()  # the test runs git meanwhile
try:
    tape.user("written after the checkout")
    tape.flush()
except Exception as exc:
    tape.close()
    err = fail(exc)
    print(type(exc).__name__, flush=True)
    err.show()
    sys.exit(err.exit_code)
tape.close()
"""


@pytest.mark.parametrize("durability", ["always", "group"])
def test_a_writer_whose_file_a_checkout_replaced_refuses_to_append(
    repo: Path, durability: str
) -> None:
    path = repo / SESSIONS / "a.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), durability],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    with pytest.raises(LockedError):  # it holds the session
        jsonltape.open(path).close()
    checkout(repo, "more")
    out, err = proc.communicate("go\n", timeout=60)
    assert proc.returncode == 4, err  # the CLI's exit code for a file changed underneath
    assert out.strip().splitlines()[-1] == "ConcurrentModificationError"
    assert "replaced or removed" in err
    assert path.read_bytes() == git(repo, "show", f"more:{SESSIONS}/a.jsonl").stdout.encode()
    assert git(repo, "status", "--porcelain").stdout == ""
    with jsonltape.open(path) as tape:  # the lock was released
        tape.user("a new writer")


def test_an_in_process_writer_refuses_after_reset_hard_and_frees_its_lock(repo: Path) -> None:
    path = repo / SESSIONS / "b.jsonl"
    committed = path.read_bytes()
    tape = jsonltape.open(path, durability="manual")
    try:
        tape.user("banana uncommitted")
        tape.flush()
        assert path.read_bytes() != committed  # a work-tree change git will throw away
        git(repo, "reset", "-q", "--hard")
        assert path.read_bytes() == committed
        tape.user("banana after the reset")
        with pytest.raises(ConcurrentModificationError, match="replaced or removed"):
            tape.flush()
        with pytest.raises(WriterFailedError, match="failed earlier"):  # and stays refused
            tape.user("again")
    finally:
        tape.close()
    assert path.read_bytes() == committed  # the file git put there was never written to
    with jsonltape.open(path, lock_timeout=0) as again:
        again.user("a new writer")
