"""The read-only in-place index of databases, task folders and Aider histories never raises:
whatever a source holds (an Aider history grown byte by byte, any JSON where a task's documents
are, any value in any column of a database row, written while the index follows it), a sync
ends with every file either indexed or one one-line verdict, and the index equals a fresh index
of the same tree."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignIngestor

from ._agents_b import FIXTURES, tree
from .test_index_foreign import rebuild
from .test_index_helpers import dump
from .test_interop_agents_b_fuzz import TASK_CASES, rewrite, spoil

#: What each agent moves when it writes a session's rows (Goose: the session's updated_at;
#: Crush: the message's updated_at), a time after the fixtures'.
_MARK = {
    "goose": ("sessions", "updated_at", "2031-01-01 00:00:00"),
    "crush": ("messages", "updated_at", 1924992000),
}


def _verdicts(store: SqliteStore, root: Path, agent: str) -> None:
    """Every registry row is indexed or one line saying what is wrong, and the index is what
    a fresh index of the tree is."""
    for row in store.files(under=str(root)).values():
        assert row.status in ("indexed", "error", "foreign", "pending"), row
        if row.status in ("error", "foreign"):
            assert row.error and "\n" not in row.error and "Traceback" not in row.error
        else:
            assert row.error is None or "\n" not in row.error
    assert dump(store.con) == rebuild(root, agent)


def test_an_aider_history_grown_byte_by_byte_is_followed_and_never_damaged(
    tmp_path: Path,
) -> None:
    data = (FIXTURES / "aider" / "agentsview-synthetic.aider.chat.history.md").read_bytes()
    repo = tmp_path / "repo"
    repo.mkdir()
    f = repo / ".aider.chat.history.md"
    f.write_bytes(b"")
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, tmp_path, "aider")
        for cut in range(len(data) + 1):
            with open(f, "ab") as out:  # appended as Aider appends, one byte at a time
                out.write(data[cut - 1 : cut] if cut else b"")
            engine.sync_paths([str(f)])
            _verdicts(store, tmp_path, "aider")
            states = {r[0] for r in store.con.execute("SELECT state FROM sessions")}
            assert "corrupt" not in states  # a run still being written is never damage
    finally:
        store.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(**TASK_CASES)
def test_any_json_written_into_a_task_folder_being_followed_is_one_verdict_at_most(
    tmp_path_factory: object, agent: str, which: str, value: object, wrap: bool
) -> None:
    base = Path(tmp_path_factory.mktemp("task"))  # type: ignore[attr-defined]
    root = tree(agent, base / "src")
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, agent)
        engine.rescan()
        task = sorted(root.glob("tasks/*"))[0]
        rewrite(task / which, value, wrap)
        engine.sync_paths([str(task / which)])
        _verdicts(store, root, agent)
    finally:
        store.close()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(agent=st.sampled_from(["goose", "crush"]), data=st.data())
def test_any_value_written_into_a_row_of_a_database_being_followed_is_one_verdict_at_most(
    tmp_path_factory: object, agent: str, data: st.DataObject
) -> None:
    base = Path(tmp_path_factory.mktemp("db"))  # type: ignore[attr-defined]
    root = tree(agent, base / "src")
    db = root / "sessions.db" if agent == "goose" else root / ".crush" / "crush.db"
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, agent)
        engine.rescan()
        con = sqlite3.connect(db, isolation_level=None)  # the agent, its WAL not checkpointed
        try:
            con.execute("PRAGMA wal_autocheckpoint=0")
            column = spoil(con, data)
            if column is None:
                return  # a row SQLite itself refuses
            if column != _MARK[agent][1]:
                # the agent's own mark of a change, which its import and the index go by
                table, mark, value = _MARK[agent]
                con.execute(f"UPDATE {table} SET {mark} = ?", (value,))
            engine.sync_paths([f"{db}-wal"])
            _verdicts(store, root, agent)
        finally:
            con.close()
    finally:
        store.close()
