"""Usage in the SQLite index: an index from before usage was counted gets it at the next sync
(read back from the files, foreign sessions ingested again) and then equals a rebuild; the same
response indexed in place and imported is counted once; a report of an index that is not
caught up says so instead of reporting less."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import SqliteTarget

from jsonltape.interop import import_file
from jsonltape.usage import report

from .conftest import SAMPLES
from .test_index_helpers import dump

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
CLAUDE = ("claude-code-v1.0.98-init.jsonl", "claude-code-v1.0.108-japanese.jsonl")


def _trees(tmp_path: Path) -> tuple[Path, Path]:
    """A jsonltape root with imported pi and Codex sessions, and a Claude Code tree to index
    in place."""
    root, cc = tmp_path / "root", tmp_path / "claude" / "projects" / "-p"
    cc.mkdir(parents=True)
    for name in CLAUDE:
        shutil.copyfile(SAMPLES / name, cc / name)
    src = tmp_path / "src"
    src.mkdir()
    past = time.time() - 7200
    for source, name in (("pi", "pi-v1-legacy-large-session.jsonl"),
                         ("codex", "codex-0.104-rollout-complete.jsonl")):  # fmt: skip
        dest = src / name
        shutil.copyfile(SAMPLES / name, dest)
        os.utime(dest, (past, past))
        assert import_file(source, dest, root).status == "imported"
    return root, cc


def _daily(index: Path) -> dict[str, tuple[int, int]]:
    reader = open_reader(SqliteTarget(index))
    try:
        r = report(reader, "daily", timezone="UTC")
        return {line.period: (line.responses, line.tokens.total) for line in r.lines}
    finally:
        reader.close()


def _back_to_schema(index: Path, version: int) -> None:
    """What an index written before usage was counted holds: no usage tables, an older
    version (8: before step 9; 11: main's schema when usage was merged, as step 12)."""
    con = sqlite3.connect(index, isolation_level=None)
    con.executescript(
        f"""
        DROP TABLE usage; DROP TABLE usage_slots; DROP TABLE usage_sessions;
        DELETE FROM migrations WHERE version > {version};
        PRAGMA user_version = {version};
        """
    )
    con.close()


@pytest.mark.parametrize("version", [8, 11])
def test_an_index_from_before_usage_gets_it_at_the_next_sync(tmp_path: Path, version: int) -> None:
    root, cc = _trees(tmp_path)
    index = tmp_path / "index.db"
    sources = [("claude-code", str(cc))]
    store = SqliteStore(index)
    try:
        Mirror(store, str(root), sources).rescan()
        want, want_dump = _daily(index), dump(store.con)
    finally:
        store.close()
    assert len(want) >= 4
    _back_to_schema(index, version)
    with pytest.raises(IndexStateError, match="predates usage reports: run `jsonltape sync`"):
        _daily(index)
    store = SqliteStore(index)  # the writer migrates: the tables are there, empty
    try:
        with pytest.raises(IndexStateError, match=r"the usage of 6 sessions indexed before"):
            _daily(index)
        stats = Mirror(store, str(root), sources).rescan()
        # the jsonltape sessions were read back, not ingested again; only the foreign ones
        # (rendered from Claude Code's lines, no byte range to read back: 2 files, 2 sidechains)
        assert stats.files == 4 and stats.reingested == 4
        assert _daily(index) == want
        assert dump(store.con) == want_dump
    finally:
        store.close()


def test_a_response_indexed_in_place_and_imported_is_counted_once(tmp_path: Path) -> None:
    root, cc = _trees(tmp_path)
    index = tmp_path / "index.db"
    store = SqliteStore(index)
    try:
        Mirror(store, str(root), [("claude-code", str(cc))]).rescan()
        once = _daily(index)
        past = time.time() - 7200
        for name in CLAUDE:  # the same files imported into the root too
            os.utime(cc / name, (past, past))
            assert import_file("claude-code", cc / name, root).status == "imported"
        Mirror(store, str(root), [("claude-code", str(cc))]).rescan()
        n = store.con.execute(
            "SELECT count(*), sum(counted) FROM usage WHERE rkey LIKE 'claude-code:%'"
        ).fetchone()
        assert n == (54, 27)  # each Claude Code response twice, counted once
        assert _daily(index) == once
    finally:
        store.close()
