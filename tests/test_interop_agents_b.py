"""What the importers of issue 32's Aider, Cline, Roo Code, Kilo Code, Goose and Crush promise,
on their fixtures laid out as the agents lay out their data (tests/_agents_b.py): every source
record kept verbatim exactly once (the file rebuilt byte for byte for Aider's Markdown log,
record for record for documents and databases), request bodies a provider accepts, an unchanged
tree skipped without writing, a source the agent was still writing imported and then ending
where a fresh import ends, a source changed in place refused in one line with nothing written,
a damaged source one verdict naming it while the rest imports, and the sources never written."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

import jsonltape
from jsonltape.cli import cli as main
from jsonltape.interop import discover
from jsonltape.interop._engine import as_input

from ._agents import (
    events,
    imported,
    raw_lines,
    reimport_writes_nothing,
    run,
    shown_title,
    surface,
)
from ._agents_b import AGENTS, DATABASES, DOCUMENTS, database, tree
from .test_request_validity import _problems as body_problems


def _listing(root: Path) -> dict[Path, tuple[int, bytes]]:
    """Every file below ``root`` with its mtime and bytes (what an import must not change)."""
    return {
        p: (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("agent", AGENTS)
def test_every_fixture_imports_into_request_bodies_a_provider_accepts(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    before = _listing(tmp_path / "src")
    sessions = imported(run(agent, root, tmp_path / "root"))
    assert len(sessions) >= 1
    runner = CliRunner()
    for s in sessions:
        assert jsonltape.verify(s).state == "clean"
        assert body_problems(s) == [], s.name
        res = runner.invoke(main, ["messages", "--check", str(s)])
        assert res.exit_code == 0, res.output
    assert any(e.type == "assistant/message" for s in sessions for e in events(s))
    assert _listing(tmp_path / "src") == before  # nothing written beside the agent's files


@pytest.mark.parametrize("agent", AGENTS)
def test_every_source_record_is_kept_verbatim_exactly_once(tmp_path: Path, agent: str) -> None:
    root = tree(agent, tmp_path / "src")
    sessions = imported(run(agent, root, tmp_path / "root"))
    kept = raw_lines(sessions)
    items, _ = discover(agent, [root])
    assert items
    for item in items:
        inp = as_input(agent, item)
        data = inp.data()
        if data is None:  # a line log: the file itself, byte for byte
            data = inp.path.read_bytes()
            assert agent in ("aider", "goose")
        key = f"{os.path.abspath(inp.path)}#{inp.name}"
        if agent == "aider":  # a session per run: the runs' lines together are the file
            lines = {
                n: t
                for k, got in kept.items()
                if k.startswith(f"{inp.path}#")
                for n, t in got.items()
            }
        else:
            lines = kept[key]
        assert sorted(lines) == list(range(1, data.count(b"\n") + 1)), key
        rebuilt = "".join(lines[n] + "\n" for n in sorted(lines)).encode()
        assert rebuilt == data


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unchanged_or_touched_tree_is_imported_again_without_writing(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    out = tmp_path / "root"
    reimport_writes_nothing(agent, root, out)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9])
def test_a_grown_source_appends_only_what_is_new_and_ends_as_a_fresh_import(
    tmp_path: Path, agent: str, keep: float
) -> None:
    src = tmp_path / "src"  # one place: Aider's sessions are named after their file's path
    fresh = imported(run(agent, tree(agent, src), tmp_path / "fresh"))
    shutil.rmtree(src)
    grown = tree(agent, src, keep=keep, finished=False)
    out = tmp_path / "root"
    first = imported(run(agent, grown, out, settle=None))  # still being written
    written = {s: events(s) for s in first}
    shutil.rmtree(src)
    tree(agent, src)  # the agent wrote the rest, and finished
    final = imported(run(agent, grown, out))
    assert [s.name for s in final] == [s.name for s in fresh]
    for mine, theirs in zip(final, fresh, strict=True):
        kept = written.get(mine, [])
        assert events(mine)[: len(kept)] == kept  # nothing written before changed
        assert surface(mine) == surface(theirs), mine.name  # the same history as a fresh import
        assert shown_title(mine) == shown_title(theirs)


def _change_in_place(agent: str, root: Path) -> Path:
    """Change the first message's text where the agent keeps it; the file changed."""
    if agent == "aider":
        f = root / "shop" / ".aider.chat.history.md"
        data = f.read_bytes()
        at = data.index(b"#### ") + 5
        f.write_bytes(data[:at] + (b"X" if data[at : at + 1] != b"X" else b"Y") + data[at + 1 :])
        return f
    if agent in DOCUMENTS:
        f = sorted(root.glob("tasks/*/api_conversation_history.json"))[0]
        doc = json.loads(f.read_bytes())
        first = doc[0]
        first["content"] = [{"type": "text", "text": "something else"}]
        f.write_text(json.dumps(doc))
        return f
    f = root / "sessions.db" if agent == "goose" else root / ".crush" / "crush.db"
    con = sqlite3.connect(f, isolation_level=None)
    try:
        if agent == "goose":
            con.execute(
                "UPDATE messages SET content_json = ? WHERE id = (SELECT min(id) FROM messages)",
                (json.dumps([{"type": "text", "text": "something else"}]),),
            )
        else:
            rowid, parts = con.execute(
                "SELECT rowid, parts FROM messages ORDER BY created_at, rowid LIMIT 1"
            ).fetchone()
            changed = [
                {"type": "text", "data": {"text": "something else"}} if p["type"] == "text" else p
                for p in json.loads(parts)
            ]
            con.execute(
                "UPDATE messages SET parts = ? WHERE rowid = ?", (json.dumps(changed), rowid)
            )
    finally:
        con.close()
    return f


@pytest.mark.parametrize("agent", AGENTS)
def test_a_source_changed_in_place_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    out = tmp_path / "root"
    sessions = imported(run(agent, root, out))
    before = {s: s.read_bytes() for s in sessions}
    _change_in_place(agent, root)
    result = CliRunner().invoke(main, ["import", "--from", agent, str(root), "-o", str(out)])
    assert result.exit_code == 2, result.output
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("jsonltape: error")]
    if len(sessions) == 1 or agent == "aider":  # one source: its error is the command's
        errors = errors or [ln for ln in result.stderr.splitlines() if "changed" in ln]
    assert len(errors) == 1 and "changed since it was imported" in errors[0], result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert {s: s.read_bytes() for s in sessions} == before


def _damage(agent: str, root: Path) -> str:
    """Damage one source as it happens to each kind; returns what the verdict must name."""
    if agent == "aider":
        f = root / "shop" / ".aider.chat.history.md"
        f.write_text("# Notes\n\nnot a chat history\n")
        return str(f)
    if agent in DOCUMENTS:
        f = sorted(root.glob("tasks/*/api_conversation_history.json"))[0]
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # a rewrite caught half-way
        return str(f)
    f = root / "sessions.db" if agent == "goose" else root / ".crush" / "crush.db"
    con = sqlite3.connect(f, isolation_level=None)
    try:
        column = "content_json" if agent == "goose" else "parts"
        rowid = con.execute("SELECT min(rowid) FROM messages").fetchone()[0]
        con.execute(f"UPDATE messages SET {column} = 42 WHERE rowid = ?", (rowid,))
    finally:
        con.close()
    return str(f)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_damaged_source_is_one_verdict_naming_it_and_nothing_of_it_is_written(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    where = _damage(agent, root)
    out = tmp_path / "root"
    result = CliRunner().invoke(main, ["import", "--from", agent, str(root), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output + result.stderr
    errors = [ln for ln in result.stderr.splitlines() if where in ln and "error" in ln]
    if agent in DATABASES:  # the verdict names the table, the row and the column too
        assert (
            errors
            and "messages row" in errors[0]
            and ("parts" in errors[0] or "content_json" in errors[0])
        )
    assert len(errors) == 1, result.stderr
    reports = run(agent, root, tmp_path / "other")
    assert [r.status for r in reports].count("error") == 1
    bad = next(r for r in reports if r.status == "error")
    assert bad.sessions == [] or all(not Path(s).exists() for s in bad.sessions)


@pytest.mark.parametrize("agent", DATABASES)
def test_rows_that_live_only_in_the_write_ahead_log_are_imported_without_writing_beside_it(
    tmp_path: Path, agent: str
) -> None:
    whole = run(agent, tree(agent, tmp_path / "full"), tmp_path / "fresh")
    fresh = imported([r for r in whole if ".db" in r.path])  # the database's sessions
    assert fresh
    root = tree(agent, tmp_path / "src", keep=0.5)
    db = root / "sessions.db" if agent == "goose" else root / ".crush" / "crush.db"
    full = database(agent, tmp_path / "whole" / db.name)  # the rows the agent goes on to write
    table = "messages"
    rows = full.execute(f"SELECT * FROM {table}").fetchall()
    full.close()
    writer = sqlite3.connect(db, isolation_level=None)  # the agent, still running
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        have = {r[0] for r in writer.execute(f"SELECT rowid FROM {table}")}
        marks = ",".join("?" * len(rows[0]))
        writer.execute("BEGIN")
        for r in rows:
            pk = r[0] if agent == "goose" else None
            exists = (
                pk in have
                if agent == "goose"
                else writer.execute("SELECT 1 FROM messages WHERE id = ?", (r[0],)).fetchone()
            )
            if not exists:
                writer.execute(f"INSERT INTO {table} VALUES ({marks})", r)
        writer.execute("COMMIT")
        wal = db.with_name(db.name + "-wal")
        assert wal.stat().st_size > 0  # the new rows are in the log only
        main_bytes = db.read_bytes()
        before = _listing(root)
        os.utime(db, (os.path.getmtime(wal),) * 2)
        sessions = imported(run(agent, root, tmp_path / "root", settle=0))
        assert db.read_bytes() == main_bytes  # not checkpointed by the import
        assert {p for p in _listing(root)} == set(before)  # no -wal/-shm/journal of ours
        by_name = {s.name: s for s in sessions}
        for theirs in fresh:
            assert surface(by_name[theirs.name]) == surface(theirs)
    finally:
        writer.close()


#: Per agent: a session's title as the agent shows it, and the usage of one of its replies
#: with the id it has (the provider's response id where the source keeps one), as the
#: fixtures hold them (taskHistory.json's task and api_req_started's counts; Goose's name and
#: usage_ledger row; Crush's title; Aider's first prompt and its "Tokens:" report).
_EXPECTED = {
    "aider": (
        "Use the Spinner instead of the inlined custom spinner",
        ("aider-115", {"input_tokens": 5244, "output_tokens": 604, "cost": 0.02}),
    ),
    "cline": (
        "Say hello",
        (
            "msg_01ExampleResponseId",
            {
                "input_tokens": 300,
                "output_tokens": 12,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 0,
                "cost": 0.0012,
            },
        ),
    ),
    "roo-code": (
        "Say hello",
        (
            "resp_example",
            {
                "input_tokens": 300,
                "output_tokens": 12,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 0,
                "cost": 0.0012,
            },
        ),
    ),
    "kilo-code": ("Say hello", None),
    "goose": (
        "List files",
        (
            "msg_20260801_1_6f1c0000-0000-4000-8000-000000000004",
            {
                "input_tokens": 1200,
                "output_tokens": 50,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "total_tokens": 1250,
                "cost": 0.00435,
            },
        ),
    ),
    "crush": ("Instructions in CLI.md", None),  # Crush keeps no per-message usage
}


@pytest.mark.parametrize("agent", AGENTS)
def test_titles_and_usage_are_the_agents_own(tmp_path: Path, agent: str) -> None:
    sessions = imported(run(agent, tree(agent, tmp_path / "src"), tmp_path / "root"))
    title, usage = _EXPECTED[agent]
    assert title in [shown_title(s) for s in sessions]
    if usage is not None:
        got = [
            (e.data["message"].get("id"), e.data.get("usage"))
            for s in sessions
            for e in events(s)
            if e.type == "assistant/message" and e.data.get("usage")
        ]
        assert usage in got


def test_a_sub_task_or_sub_agent_session_names_its_parent(tmp_path: Path) -> None:
    """Roo Code's sub-task (``parentTaskId`` in its ``history_item.json``) and Crush's sub-agent
    session (``parent_session_id``) are sessions of their own that name their parent."""
    root = tree("roo-code", tmp_path / "roo")
    parent = sorted(root.glob("tasks/*"))[0]
    child = parent.with_name("019a0000-0000-7000-8000-0000000000c1")
    shutil.copytree(parent, child)
    item = json.loads((child / "history_item.json").read_bytes())
    item.update(id=child.name, parentTaskId=parent.name, rootTaskId=parent.name)
    (child / "history_item.json").write_text(json.dumps(item))
    sessions = imported(run("roo-code", root, tmp_path / "out-roo"))
    head = {s.stem: events(s)[0].data for s in sessions}
    assert head[f"roo-code-{child.name}"]["meta"]["import"].get("parent") == parent.name
    assert "parent" not in head[f"roo-code-{parent.name}"]["meta"]["import"]

    root = tree("crush", tmp_path / "crush")
    con = sqlite3.connect(root / ".crush" / "crush.db", isolation_level=None)
    try:
        sid, created = con.execute("SELECT id, created_at FROM sessions LIMIT 1").fetchone()
        sub = "9da2b2ba-0000-0000-0000-000000000000$$toolu_01"
        con.execute(
            "INSERT INTO sessions (id, parent_session_id, title, message_count, prompt_tokens,"
            " completion_tokens, cost, updated_at, created_at) VALUES (?, ?, 'sub', 0, 0, 0, 0,"
            " ?, ?)",
            (sub, sid, created, created),
        )
        for n, (role, parts) in enumerate(
            [
                ("user", [{"type": "text", "data": {"text": "look for the config"}}]),
                (
                    "assistant",
                    [
                        {"type": "text", "data": {"text": "It is in crush.json."}},
                        {"type": "finish", "data": {"reason": "end_turn", "time": created + 2}},
                    ],
                ),
            ]
        ):
            con.execute(
                "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at,"
                " finished_at, provider) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, NULL)",
                (f"sub-{n}", sub, role, json.dumps(parts), created + n, created + n, created + n),
            )
    finally:
        con.close()
    sessions = imported(run("crush", root, tmp_path / "out-crush", settle=0))
    heads = [events(s)[0].data for s in sessions]
    subs = [h for h in heads if h["meta"]["import"].get("parent") == sid]
    assert len(subs) == 1, heads


def test_a_cline_task_named_with_digits_int_refuses_imports_its_task(tmp_path: Path) -> None:
    """A Cline task's id is its creation time in ms: a folder whose name only looks like one
    to ``str.isdigit`` (a superscript digit, which ``int`` refuses) has no time in its name,
    and its task record maps (it was a ValueError, the record kept raw as not mapped)."""
    root = tree("cline", tmp_path / "src")
    task = sorted((root / "tasks").iterdir())[0]
    task.rename(task.with_name("176000000000\u00b2"))
    reports = run("cline", root, tmp_path / "out")
    assert {r.status for r in reports} == {"imported"}
    assert [p for r in reports for p in r.problems] == []
