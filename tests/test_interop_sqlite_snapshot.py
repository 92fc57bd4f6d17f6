"""What the private copy of a live agent database promises (jsonltape/interop/_sqlite.py, spec
B.18.1): while an agent writes its ``-wal`` through a connection kept open, checkpoints it
(PASSIVE, RESTART, TRUNCATE) and writes on, every read equals a fresh copy's read; the user's
files are never written and nothing is created beside them; the copied database file stays the
user's bytes; a one-row change of a large database copies about its ``-wal``, not the database;
and a kept copy is never read with a ``-wal`` of another generation, even when the database's
change time says nothing moved (a coarse clock)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jsonltape.interop import _private_dir, _sqlite
from jsonltape.interop._private_dir import STALE_SECONDS, remove_stale_dirs
from jsonltape.interop._sqlite import INT, TEXT, SqliteSource

_COLUMNS = {"t": [("id", INT), ("body", TEXT)]}


def _rows(con: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in con.execute("SELECT id, body FROM t ORDER BY id")]


def _read(db: Path) -> list[tuple[Any, ...]]:
    """A read as the importers do it: a new source (a new snapshot) each time."""
    return SqliteSource(db, _COLUMNS, agent="Test").read(_rows)


def _fresh_read(db: Path) -> list[tuple[Any, ...]]:
    """The reference: the database and its ``-wal`` copied anew and read as SQLite does."""
    with tempfile.TemporaryDirectory() as where:
        copy = Path(where) / "fresh.db"
        shutil.copyfile(db, copy)
        wal = db.with_name(db.name + "-wal")
        if wal.exists():
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        con = sqlite3.connect(copy)
        con.text_factory = bytes
        try:
            return [(i, _sqlite.Text(b)) for i, b in _rows(con)]
        finally:
            con.close()


def _files(where: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(where.iterdir())}


def _writer(db: Path) -> sqlite3.Connection:
    """The agent, running: its connection stays open, it never checkpoints on its own."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    return con


def count_copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every file the reads copy from now on, by name, with the bytes copied (the real copy
    runs)."""
    log: list[tuple[str, int]] = []
    real = _sqlite._copy_file

    def counting(src: Path, dst: Path) -> int:
        n = real(src, dst)
        log.append((src.name, n))
        return n

    monkeypatch.setattr(_sqlite, "_copy_file", counting)
    return log


@pytest.fixture
def copied(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    return count_copies(monkeypatch)


# Rewrites of a few bytes keep the database's size, so a checkpoint, a restarted WAL and a
# "backdate" (the change time set back, as a coarse clock leaves it) leave the stamp as it was.
_STEP = st.one_of(
    st.tuples(st.just("write"), st.integers(1, 30), st.integers(1, 3000)),
    st.tuples(st.just("rewrite"), st.integers(0, 6), st.sampled_from([8, 9, 3000])),
    st.tuples(st.just("checkpoint"), st.sampled_from(["PASSIVE", "RESTART", "TRUNCATE"])),
    st.just(("backdate",)),
    st.just(("read",)),
)


def _restarted(mode: str) -> list[tuple[Any, ...]]:
    return [
        ("write", 30, 3000),
        ("checkpoint", mode),
        ("rewrite", 1, 8),
        ("read",),
        ("checkpoint", mode),
        ("rewrite", 2, 8),
        ("backdate",),
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_STEP, min_size=1, max_size=25))
# The database checkpointed and its WAL restarted by a change of another page, on a clock
# that did not tick: a kept copy read with the new WAL would lack the checkpointed page.
@example(steps=_restarted("PASSIVE"))
@example(steps=_restarted("RESTART"))
def test_every_read_of_a_live_database_equals_a_fresh_copys_and_writes_nothing_beside_it(
    steps: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "agent"
        where.mkdir()
        db = where / "live.db"
        writer = _writer(db)
        try:
            writer.execute("INSERT INTO t (body) VALUES (?)", ("first" * 500,))
            stamp = db.stat()
            taken = b""  # the database file's bytes when its kept copy was taken
            for step in [*steps, ("read",)]:
                if step[0] == "write":
                    writer.executemany(
                        "INSERT INTO t (body) VALUES (?)",
                        [(f"{i}" * step[2],) for i in range(step[1])],
                    )
                elif step[0] == "rewrite":
                    writer.execute(
                        "UPDATE t SET body = ? WHERE id % 7 = ?", ("r" * step[2], step[1])
                    )
                elif step[0] == "checkpoint":
                    writer.execute(f"PRAGMA wal_checkpoint({step[1]})").fetchall()
                elif step[0] == "backdate":
                    # A coarse clock: the database changed, its change time did not.
                    os.utime(db, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
                else:
                    before = _files(where)
                    made: list[str] = []
                    real = _sqlite._copy_file

                    def spy(src: Path, dst: Path, made: list[str] = made, real: Any = real) -> int:
                        made.append(dst.name)
                        return int(real(src, dst))

                    _sqlite._copy_file = spy  # type: ignore[assignment]
                    try:
                        source = SqliteSource(db, _COLUMNS, agent="Test")
                        got = source.read(_rows)
                    finally:
                        _sqlite._copy_file = real  # type: ignore[assignment]
                    assert got == _fresh_read(db)
                    assert _files(where) == before  # nothing written or created beside it
                    if source._copy is not None:
                        # a copy taken now is the user's bytes; a kept one, reused across a
                        # checkpoint within the WAL's generation, is still the bytes it was
                        # taken with (SQLite never wrote it)
                        data = source._copy.read_bytes()
                        if "source.db" in made:
                            taken = db.read_bytes()
                        assert data == taken
                    stamp = db.stat()
        finally:
            writer.close()


def test_a_one_row_change_of_a_large_live_database_copies_its_wal_not_the_database(
    tmp_path: Path, copied: list[tuple[str, int]]
) -> None:
    db = tmp_path / "big.db"
    writer = _writer(db)
    try:
        writer.executemany("INSERT INTO t (body) VALUES (?)", [("x" * 4000,) for _ in range(5000)])
        writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        size = db.stat().st_size
        assert size > 20_000_000
        writer.execute("INSERT INTO t (body) VALUES ('one')")
        assert _read(db) == _fresh_read(db)
        assert sum(n for name, n in copied if name == db.name) == size  # the first: whole
        for turn in range(3):
            copied.clear()
            writer.execute("INSERT INTO t (body) VALUES (?)", (f"turn {turn}",))
            wal = db.with_name(db.name + "-wal").stat().st_size
            assert _read(db) == _fresh_read(db)
            assert copied == [(db.name + "-wal", wal)]  # the -wal alone, a few pages
            assert wal < 64 * 1024
        # A checkpoint writes the database: the next read copies it again, once.
        writer.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
        writer.execute("INSERT INTO t (body) VALUES ('after')")
        copied.clear()
        assert _read(db) == _fresh_read(db)
        assert sum(n for name, n in copied if name == db.name) == db.stat().st_size
    finally:
        writer.close()


def test_a_kept_copy_is_never_read_with_a_wal_of_another_generation(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    writer = _writer(db)
    try:
        writer.executemany("INSERT INTO t (body) VALUES (?)", [("a" * 100,) for _ in range(50)])
        writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        writer.execute("UPDATE t SET body = 'old' WHERE id = 1")
        assert _read(db) == _fresh_read(db)  # the database is copied and kept
        stamp = db.stat()
        # The writer checkpoints (the update moves into the database) and restarts its WAL
        # with a change of another page; the clock does not tick, the size stays.
        writer.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
        writer.execute("UPDATE t SET body = 'new' WHERE id = 50")
        os.utime(db, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert db.stat().st_size == stamp.st_size
        got = _read(db)
        assert got == _fresh_read(db)
        assert got[0][1] == b"old" and got[-1][1] == b"new"
    finally:
        writer.close()


def test_the_kept_copies_are_bounded_private_and_never_written(tmp_path: Path) -> None:
    writers = []
    try:
        for n in range(_sqlite.KEPT + 2):
            db = tmp_path / f"{n}.db"
            writers.append(_writer(db))
            writers[-1].execute("INSERT INTO t (body) VALUES (?)", (f"db {n}",))
            assert _read(db) == _fresh_read(db)
        kept = _sqlite._kept._where
        assert kept is not None and kept.stat().st_mode & 0o777 == 0o700
        files = list(kept.iterdir())
        assert len(files) == _sqlite.KEPT
        assert all(f.stat().st_mode & 0o777 == 0o400 for f in files)
    finally:
        for w in writers:
            w.close()


def test_a_copy_across_file_systems_falls_back_to_reading_and_writing(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system here")
    with tempfile.TemporaryDirectory(dir=shm) as other:
        src = Path(other) / "src"  # the kernel refuses to copy it across (EXDEV)
        src.write_bytes(os.urandom(3 << 20))
        assert _sqlite._copy_file(src, tmp_path / "dst") == src.stat().st_size
        assert (tmp_path / "dst").read_bytes() == src.read_bytes()


def test_a_copy_the_kernel_refuses_midway_ends_as_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.write_bytes(os.urandom(3 << 20))
    real = os.copy_file_range
    calls = []

    def refusing(fd_in: int, fd_out: int, count: int) -> int:
        # A file system that copies some bytes in the kernel, then refuses the rest.
        calls.append(count)
        if len(calls) == 1:
            return real(fd_in, fd_out, 4096)
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refusing)
    assert _sqlite._copy_file(src, tmp_path / "dst") == src.stat().st_size
    assert (tmp_path / "dst").read_bytes() == src.read_bytes()
    assert len(calls) == 2


#: A process that reads the live database ``sys.argv[1]`` once (its copies made); what it
#: says or does next follows.
_READ = (
    "import sys\n"
    "from pathlib import Path\n"
    "from jsonltape.interop import _sqlite\n"
    "s = _sqlite.SqliteSource(Path(sys.argv[1]), {'t': []}, agent='T')\n"
    "s.read(lambda con: con.execute('SELECT id FROM t').fetchall())\n"
)


def test_the_kept_copies_and_the_readers_copies_are_removed_when_the_process_exits(
    tmp_path: Path,
) -> None:
    db = tmp_path / "live.db"
    writer = _writer(db)
    try:
        writer.execute("INSERT INTO t (body) VALUES ('in the wal')")
        code = _READ + "print(_sqlite._kept._where)\nprint(s._copy.parent)\n"
        done = subprocess.run(
            [sys.executable, "-P", "-c", code, str(db)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        kept, reader = (Path(line) for line in done.stdout.split())
        assert kept.name.startswith("jsonltape-kept-") and reader.name.startswith("jsonltape-db-")
        assert not kept.exists() and not reader.exists()
    finally:
        writer.close()


def test_the_copies_a_sigkilled_reader_left_are_removed_by_the_next_and_a_live_ones_kept(
    tmp_path: Path,
) -> None:
    db = tmp_path / "live.db"
    writer = _writer(db)
    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    env = {**os.environ, "TMPDIR": str(temp)}
    # the reader reads, says where its copies are, and waits to be killed
    code = _READ + "print(_sqlite._kept._where, s._copy.parent, flush=True)\nsys.stdin.read()\n"
    try:
        writer.execute("INSERT INTO t (body) VALUES ('a login token, say')")
        children = [
            subprocess.Popen(
                [sys.executable, "-P", "-c", code, str(db)],
                cwd=tmp_path,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        dirs = []
        for child in children:
            assert child.stdout is not None
            dirs.append([Path(p) for p in child.stdout.readline().split()])
        dead, live = children
        dead.kill()
        dead.wait()
        old = time.time() - 2 * STALE_SECONDS
        for d in [*dirs[0], *dirs[1]]:
            os.utime(d, (old, old))
        stray = temp / "jsonltape-db-stray"
        os.symlink(tmp_path, stray)  # a link named so is not followed, nor removed
        assert all(d.exists() for d in dirs[0])  # what the killed reader left, db copy included
        assert remove_stale_dirs(str(temp)) == 2
        assert not any(d.exists() for d in dirs[0])
        assert all(d.exists() for d in dirs[1])  # the live reader's are held
        assert stray.is_symlink() and db.exists()
        live.communicate("")
        assert not any(d.exists() for d in dirs[1])  # removed at its exit
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
            if child.stdout is not None:
                child.stdout.close()
            if child.stdin is not None:
                child.stdin.close()
        writer.close()


def test_a_reader_removes_the_copies_killed_readers_left_before_it_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir(mode=0o700)
    left = temp / "jsonltape-kept-abc123"
    left.mkdir(mode=0o700)
    (left / "1.db").write_bytes(b"a copy of someone's database")
    old = time.time() - 2 * STALE_SECONDS
    os.utime(left, (old, old))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    monkeypatch.setattr(_private_dir, "_swept", threading.Event())  # a new process
    db = tmp_path / "live.db"
    writer = _writer(db)
    try:
        writer.execute("INSERT INTO t (body) VALUES ('x')")
        assert _read(db) == _fresh_read(db)
        assert not left.exists()
    finally:
        writer.close()
