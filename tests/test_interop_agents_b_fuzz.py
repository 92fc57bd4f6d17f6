"""The Aider, Cline / Roo Code / Kilo Code, Goose and Crush importers never raise: whatever a
source holds (an Aider history cut at every byte, any JSON where a task's documents are, any
value in any column of a database row), an import gives a report per source with at most one
error line, writes nothing for a source it refuses, and never a traceback."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jsonltape.interop import import_paths

from ._agents_b import FIXTURES, database, tree

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["role", "content", "type", "text", "ts", "id", "tool_use_id", "name"])
            | st.text(max_size=4),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


def _one_verdict(reports: list) -> None:  # type: ignore[type-arg]
    assert reports
    for r in reports:
        assert r.status in ("imported", "unchanged", "empty", "error", "skipped"), r
        if r.status == "error":
            text = str(r.error)
            assert text and "\n" not in text and "Traceback" not in text
            assert r.sessions == [] or all(not Path(s).exists() for s in r.sessions)
        for _n, why in r.problems:
            assert "\n" not in why


def test_an_aider_history_cut_at_every_byte_imports_or_is_one_verdict(tmp_path: Path) -> None:
    data = (FIXTURES / "aider" / "agentsview-synthetic.aider.chat.history.md").read_bytes()
    repo = tmp_path / "repo"
    repo.mkdir()
    f = repo / ".aider.chat.history.md"
    for cut in range(len(data) + 1):
        f.write_bytes(data[:cut])
        out = (
            tmp_path / f"out{cut % 7}"
        )  # a few roots: later cuts of a file also meet earlier imports
        _one_verdict(list(import_paths("aider", [f], out, settle=0)))
        shutil.rmtree(out, ignore_errors=True)


_DOCS = ("api_conversation_history.json", "ui_messages.json")
#: A task folder's document and what goes into it (the whole of it, or one element).
TASK_CASES = {
    "agent": st.sampled_from(["cline", "roo-code", "kilo-code"]),
    "which": st.sampled_from(_DOCS),
    "value": _json,
    "wrap": st.booleans(),
}


def rewrite(doc: Path, value: object, wrap: bool) -> None:
    """Write ``value`` as the document, or (``wrap``) in place of its middle element, the
    rest of the document as the agent wrote it."""
    found = json.loads(doc.read_bytes())
    if wrap:
        found[len(found) // 2] = value
    else:
        found = value
    doc.write_text(json.dumps(found))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(**TASK_CASES)
def test_any_json_in_a_task_folder_imports_or_is_one_verdict(
    tmp_path_factory: object, agent: str, which: str, value: object, wrap: bool
) -> None:
    base = Path(tmp_path_factory.mktemp("task"))  # type: ignore[attr-defined]
    root = tree(agent, base / "src")
    rewrite(sorted(root.glob("tasks/*"))[0] / which, value, wrap)
    _one_verdict(list(import_paths(agent, [root], base / "out", settle=0)))


_CELL = (
    st.none()
    | st.integers(-(2**63), 2**63 - 1)  # what an SQLite INTEGER holds
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.binary(max_size=12)
    | _json.map(json.dumps)
)


def spoil(con: sqlite3.Connection, data: st.DataObject) -> str | None:
    """Put any value in any column of the first row of a drawn table; the column, or None
    when SQLite itself refuses the row (NOT NULL, a unique key)."""
    table = data.draw(st.sampled_from(["messages", "sessions"]))
    columns = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    column = data.draw(st.sampled_from(columns))
    value = data.draw(_CELL)
    con.execute("PRAGMA foreign_keys=OFF")
    con.execute("PRAGMA ignore_check_constraints=ON")
    for trigger in [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
    ]:
        con.execute(f"DROP TRIGGER {trigger}")
    try:
        con.execute(
            f'UPDATE {table} SET "{column}" = ? WHERE rowid = (SELECT min(rowid) FROM {table})',
            (value,),
        )
    except sqlite3.IntegrityError:
        return None
    return str(column)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(agent=st.sampled_from(["goose", "crush"]), data=st.data())
def test_any_value_in_any_column_of_a_row_imports_or_is_one_verdict(
    tmp_path_factory: object, agent: str, data: st.DataObject
) -> None:
    base = Path(tmp_path_factory.mktemp("db"))  # type: ignore[attr-defined]
    db = base / ("sessions.db" if agent == "goose" else "crush.db")
    con = database(agent, db)
    try:
        if spoil(con, data) is None:
            return  # a row SQLite itself refuses
    finally:
        con.close()
    _one_verdict(list(import_paths(agent, [db], base / "out", settle=0)))
