"""A sync that runs out of room, for real: the index on a small tmpfs (mounted here when the
tests may mount, as root in a container), or under a file size limit (anywhere).

Promised (issue 29, item 10): one line on stderr naming the index, exit 5 (``StorageError``),
never a traceback, from every phase a full disk can hit (the bulk load of a first sync, its
helper process, copying the helper's word index in, publishing; a later sync's commits); no
stray build or helper file; the index keeps what it had committed and stays searchable, and
once there is room the next sync gives exactly the rows a clean sync gives.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.store import FTS_TABLES

import jsonltape

from ._search_cases import PY, REPO, T0, event
from .conftest import LONG
from .test_index_helpers import dump, runs_ok

#: Sessions x messages: past 20,000, so a first sync starts its full-text helper process.
SESSIONS, MESSAGES = 110, 200
#: Sizes of the file system (MiB): each runs out in another phase of a first sync of the tree
#: (measured: the load at 2, the helper at 6, copying the helper's word index in at 10).
FIRST_SIZES = list(range(1, 15)) if LONG else [2, 6, 10]
LATER_SIZES = list(range(1, 9)) if LONG else [3]


def _text(s: int, i: int) -> str:
    return f"FileNotFoundError number {s} {i} lorem ipsum dolor sit amet words_{i}_{s} " * 3


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a clean sync of :func:`tree` goes (made by the first test that needs it)."""
    return tmp_path_factory.mktemp("clean") / "ix" / "index.db"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("full") / "tree"
    src.mkdir(mode=0o700)
    for s in range(SESSIONS):
        with jsonltape.open(src / f"s{s:04d}.jsonl", create=True, durability="manual") as tape:
            tape.append_batch(
                event("user", _text(s, i), i, T0 + s * 60_000 + i * 1000) for i in range(MESSAGES)
            )
    return src


class SmallFs:
    """A tmpfs mounted at ``path`` for one test; skips the test where mounting is refused."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mounted = False

    def mount(self, mib: int) -> Path:
        self.unmount()
        self.path.mkdir(exist_ok=True)
        got = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0700", "tmpfs", str(self.path)],
            capture_output=True,
        )
        if got.returncode != 0:
            pytest.skip("cannot mount a tmpfs here (needs root): the file size limit test runs")
        self.mounted = True
        return self.path

    def grow(self, mib: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={mib}m", str(self.path)], check=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.path)], check=True)
            self.mounted = False


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[SmallFs]:
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the file size limit test runs")
    fs = SmallFs(tmp_path / "mnt")
    try:
        yield fs
    finally:
        fs.unmount()


def _sync(root: Path, index: Path, fsize: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:  # in the child: writes past fsize fail (EFBIG) instead of a signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))  # type: ignore[arg-type]

    return subprocess.run(
        [PY, "-P", "-m", "jsonltape", "sync", str(root), "--index", str(index)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        preexec_fn=limit if fsize is not None else None,  # pytest runs no other thread
    )


def _out_of_room(got: subprocess.CompletedProcess[str], index: Path) -> bool:
    """Whether a sync ran out of room, checking that it said so as promised (or succeeded)."""
    if got.returncode == 0:
        assert got.stderr == "", got.stderr
        return False
    assert got.returncode == 5, got.stderr
    assert got.stdout == ""
    assert got.stderr.count("\n") == 1 and got.stderr.startswith(f"jsonltape: error: {index}: "), (
        got.stderr
    )
    return True


def _fulltext(con: sqlite3.Connection) -> dict[str, object]:
    """What the full-text side holds, keys aside: each table's words with their message and
    hit counts (``fts5vocab``), checked by FTS5's integrity check, and the word list."""
    out: dict[str, object] = {"words": sorted(con.execute("SELECT term, docs FROM words"))}
    for table in FTS_TABLES:
        con.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
        con.execute(f"CREATE VIRTUAL TABLE temp.v_{table} USING fts5vocab(main, {table}, 'row')")
        out[table] = sorted(con.execute(f"SELECT term, doc, cnt FROM temp.v_{table}"))
    return out


def _caught_up(root: Path, index: Path, clean: Path) -> None:
    """The next sync, with room again, leaves exactly what a clean sync of the tree gives
    (``clean``: made here if it is not there)."""
    got = _sync(root, index)
    assert (got.returncode, got.stderr) == (0, ""), got.stderr
    if not clean.exists():
        clean.parent.mkdir(mode=0o700)
        assert _sync(root, clean).returncode == 0
    a, b = connect(index), connect(clean)
    try:
        assert dump(a) == dump(b)
        assert _fulltext(a) == _fulltext(b)
        runs_ok(a)
        assert a.execute(
            "SELECT value FROM meta WHERE key IN ('fts', 'substrings')"
        ).fetchall() == [
            ("live",),
            (str(a.execute("SELECT max(id) FROM messages").fetchone()[0]),),
        ]
    finally:
        a.close()
        b.close()


def _leftovers(index: Path) -> list[str]:
    return sorted(p.name for p in index.parent.iterdir() if p.name.endswith((".build", ".fts")))


@pytest.mark.parametrize("mib", FIRST_SIZES)
def test_a_first_sync_out_of_room_says_so_in_one_line_and_the_next_one_catches_up(
    tree: Path, clean: Path, small_fs: SmallFs, mib: int
) -> None:
    index = small_fs.mount(mib) / "index.db"
    got = _sync(tree, index)
    if mib <= 2:
        assert _out_of_room(got, index)  # the tree's index needs ~12 MiB: this one fails
    if _out_of_room(got, index):
        assert _leftovers(index) == []
        con = connect(index, readonly=True)  # the load was thrown away: an empty index
        try:
            assert con.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
        finally:
            con.close()
    small_fs.grow(256)
    _caught_up(tree, index, clean)


@pytest.mark.parametrize("mib", LATER_SIZES)
def test_a_later_sync_out_of_room_keeps_its_commits_and_the_next_one_catches_up(
    tree: Path, small_fs: SmallFs, tmp_path: Path, mib: int
) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    files = sorted(tree.glob("*.jsonl"))
    shutil.copy2(files[0], root)
    index = small_fs.mount(mib) / "index.db"
    assert "1 session indexed" in _sync(root, index).stdout
    for f in files[1:]:
        shutil.copy2(f, root)
    got = _sync(root, index)
    if mib <= 3:
        assert _out_of_room(got, index)
    if _out_of_room(got, index):
        con = connect(index, readonly=True)  # searchable, with at least the first session
        try:
            assert con.execute("SELECT count(*) FROM messages").fetchone()[0] >= MESSAGES
        finally:
            con.close()
    small_fs.grow(256)
    _caught_up(root, index, tmp_path / "clean" / "index.db")


def test_a_sync_past_the_file_size_limit_says_so_in_one_line_and_the_next_one_catches_up(
    tree: Path, clean: Path, tmp_path: Path
) -> None:
    index = tmp_path / "ix" / "index.db"
    index.parent.mkdir(mode=0o700)
    for fsize in (100_000, 1_000_000, 4_000_000):  # the load, the helper, copying its index
        got = _sync(tree, index, fsize)
        assert _out_of_room(got, index)
        assert "SQLITE_IOERR" in got.stderr or "no room" in got.stderr
        assert _leftovers(index) == []
    _caught_up(tree, index, clean)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-P", "-m", "jsonltape", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


def test_a_full_disk_when_the_index_is_opened_is_not_a_damaged_index(
    tree: Path, small_fs: SmallFs, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    for f in sorted(tree.glob("*.jsonl"))[:4]:
        shutil.copy2(f, root)
    index = small_fs.mount(4) / "index.db"
    assert _sync(root, index).returncode == 0
    before = index.read_bytes()
    filler = index.parent / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:  # every block taken: WAL's shared memory cannot be made
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    for args in (
        ["sync", str(root)],
        ["index", "rebuild"],  # never taken for a damaged index: it would delete this one
        ["index", "optimize"],
        ["search", "FileNotFoundError"],
    ):
        got = _cli(*args, "--index", str(index))
        assert _out_of_room(got, index), args
        assert "no room left" in got.stderr
        assert index.read_bytes() == before, args
    filler.unlink()
    got = _cli("search", "FileNotFoundError", "--index", str(index))
    assert got.returncode == 0 and "FileNotFoundError" in got.stdout
