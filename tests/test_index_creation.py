"""A new SQLite index gets its name only once its whole schema is in it: a reader that comes
while the writer makes it (``daemon status`` as the daemon starts) finds no index, never a
half-made one at schema version 0 or 1 (a fresh-clone CI run once caught exactly that)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite import store as store_mod
from jsonltape_daemon.engines.sqlite.schema import SCHEMA_VERSION, connect
from jsonltape_daemon.engines.sqlite.status import local_status
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.paths import new_path

NOT_YET = "no index here yet"


def _version(index: Path) -> int:
    con = connect(index, readonly=True)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def test_the_index_has_no_name_while_its_schema_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "data" / "index.db"
    seen: list[str] = []
    real = store_mod.migrate

    def watching(con: object) -> int:
        try:
            _version(index)
            seen.append("opened")
        except IndexStateError as exc:
            seen.append(NOT_YET if NOT_YET in str(exc) else str(exc))
        return real(con)  # type: ignore[arg-type]

    monkeypatch.setattr(store_mod, "migrate", watching)
    SqliteStore(index).close()
    assert seen[0] == NOT_YET, seen
    assert _version(index) == SCHEMA_VERSION
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    assert stat.S_IMODE(index.parent.stat().st_mode) == 0o700
    left = {p.name for p in index.parent.iterdir()}
    assert "index.db" in left and left <= {"index.db", "index.db-wal", "index.db-shm"}, left


def test_a_reader_polling_while_indexes_are_made_sees_none_or_a_whole_one(tmp_path: Path) -> None:
    verdicts: dict[str, int] = {}
    for n in range(40):
        index = tmp_path / f"i{n}" / "index.db"
        made = threading.Thread(target=lambda i=index: SqliteStore(i).close())
        made.start()
        try:
            while True:
                done = not made.is_alive()
                try:
                    status = local_status(index)
                except IndexStateError as exc:
                    verdict = NOT_YET if NOT_YET in str(exc) else str(exc)
                else:
                    assert status["schema"] == SCHEMA_VERSION
                    verdict = "whole"
                verdicts[verdict] = verdicts.get(verdict, 0) + 1
                if done:
                    break
        finally:
            made.join()
    assert set(verdicts) <= {NOT_YET, "whole"}, verdicts
    assert verdicts.get("whole", 0) >= 40


def test_a_creation_killed_midway_leaves_a_file_the_next_writer_replaces(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    half = new_path(index)
    half.write_bytes(b"SQLite format 3\x00" + os.urandom(100))  # torn: not a database
    with pytest.raises(IndexStateError, match=NOT_YET):
        _version(index)
    SqliteStore(index).close()
    assert _version(index) == SCHEMA_VERSION
    assert not half.exists()


def test_an_index_name_that_is_a_dangling_symlink_is_refused_and_nothing_made_where_it_points(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "sessions"
    tree.mkdir(mode=0o700)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere" / "index.db"
    elsewhere.parent.mkdir()
    (data / "index.db").symlink_to(elsewhere)
    index = str(data / "index.db")
    done = subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "sync", str(tree), "--index", index],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("jsonltape: error: ") and "symlink" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert list(elsewhere.parent.iterdir()) == []
    assert (data / "index.db").is_symlink()
