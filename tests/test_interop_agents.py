"""What every importer of issue 32's Qwen Code, Kimi CLI, Factory Droid, OpenHands and Amp
promises, on their fixtures laid out as the agents lay out their data (tests/_agents.py): the
source rebuilt from the import (byte for byte for line logs, record for record for JSON
documents and folders), request bodies a provider accepts, an unchanged tree skipped, a grown
source appending only what is new and ending where a fresh import ends, a source changed in
place refused in one line with nothing written, and the read-only index giving the import's
sessions without writing beside the agent's files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignIngestor, split_member

import jsonltape
from jsonltape.cli import cli as main
from jsonltape.interop import discover, foreign
from jsonltape.interop._engine import as_input

from ._agents import (
    AGENTS,
    LINE_LOGS,
    events,
    imported,
    raw_lines,
    reimport_writes_nothing,
    run,
    shown_title,
    surface,
    tree,
)
from .test_index_helpers import dump, fts_ok
from .test_request_validity import _problems as body_problems


@pytest.mark.parametrize("agent", AGENTS)
def test_every_fixture_imports_into_request_bodies_a_provider_accepts(
    tmp_path: Path, agent: str
) -> None:
    sessions = imported(run(agent, tree(agent, tmp_path / "src"), tmp_path / "root"))
    assert len(sessions) >= 2
    runner = CliRunner()
    for s in sessions:
        assert jsonltape_verify(s) == "clean"
        assert body_problems(s) == [], s.name
        res = runner.invoke(main, ["messages", "--check", str(s)])
        assert res.exit_code == 0, res.output


def jsonltape_verify(path: Path) -> str:
    return jsonltape.verify(path).state


@pytest.mark.parametrize("agent", AGENTS)
def test_every_source_record_is_kept_verbatim_exactly_once(tmp_path: Path, agent: str) -> None:
    root = tree(agent, tmp_path / "src")
    sessions = imported(run(agent, root, tmp_path / "root"))
    kept = raw_lines(sessions)
    items, _ = discover(agent, [root])
    assert len(kept) == len(items)
    for item in items:
        inp = as_input(agent, item)
        lines = kept[f"{os.path.abspath(inp.path)}#{inp.name}"]
        data = inp.data()
        if data is None:  # a line log: the file itself, byte for byte
            data = inp.path.read_bytes()
            assert agent in LINE_LOGS
        assert sorted(lines) == list(range(1, data.count(b"\n") + 1))
        rebuilt = "".join(lines[n] + "\n" for n in sorted(lines)).encode()
        assert rebuilt == data
    if agent == "amp":  # each message is the value the thread stores
        for f in sorted(root.glob("*.json")):
            doc = json.loads(f.read_bytes())
            values = [json.loads(t) for t in kept[f"{f}#{f.name}"].values()]
            assert [v for v in values if "role" in v] == doc["messages"]
    if agent == "openhands":  # each event is the value of its file
        for conv in sorted(root.iterdir()):
            files = sorted((conv / "events").glob("event-*.json"))
            values = [
                json.loads(t) for t in kept[f"{conv / 'base_state.json'}#{conv.name}"].values()
            ]
            assert values[1:] == [json.loads(f.read_bytes()) for f in files]


@pytest.mark.parametrize("agent", AGENTS)
def test_an_unchanged_or_touched_tree_is_imported_again_without_writing(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    out = tmp_path / "root"
    reimport_writes_nothing(agent, root, out)


def _cut(agent: str, root: Path, keep: float) -> None:
    """Shorten every source of the tree to about ``keep`` of its records, as it was while the
    agent was still writing it."""
    if agent in LINE_LOGS:
        for f in root.rglob("*.jsonl"):
            lines = f.read_bytes().splitlines(keepends=True)
            f.write_bytes(b"".join(lines[: max(1, int(len(lines) * keep))]))
    elif agent == "amp":
        for f in root.glob("*.json"):
            doc = json.loads(f.read_bytes())
            doc["messages"] = doc["messages"][: max(1, int(len(doc["messages"]) * keep))]
            f.write_text(json.dumps(doc, indent=2))
    else:
        for events_dir in root.glob("*/events"):
            files = sorted(events_dir.glob("event-*.json"))
            for f in files[max(1, int(len(files) * keep)) :]:
                f.unlink()


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("keep", [0.3, 0.6, 0.9])
def test_a_grown_source_appends_only_what_is_new_and_ends_as_a_fresh_import(
    tmp_path: Path, agent: str, keep: float
) -> None:
    full = tree(agent, tmp_path / "full")
    fresh = imported(run(agent, full, tmp_path / "fresh"))
    grown = tree(agent, tmp_path / "grown", finished=False)
    _cut(agent, grown, keep)
    out = tmp_path / "root"
    first = imported(run(agent, grown, out, settle=None))  # still being written
    written = {s: len(events(s)) for s in first}
    shutil.rmtree(grown)
    tree(agent, tmp_path / "grown")  # the agent wrote the rest, and finished
    final = imported(run(agent, grown, out))
    assert [s.name for s in final] == [s.name for s in fresh]
    for mine, theirs in zip(final, fresh, strict=True):
        kept = events(mine)[: written.get(mine, 0)]
        assert kept == events(mine)[: len(kept)]  # nothing written before changed
        assert surface(mine) == surface(theirs), mine.name  # the same history as a fresh import
        assert shown_title(mine) == shown_title(theirs)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_source_changed_in_place_is_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    out = tmp_path / "root"
    sessions = imported(run(agent, root, out))
    before = {s: s.read_bytes() for s in sessions}
    if agent in LINE_LOGS:
        f = sorted(root.rglob("wire.jsonl" if agent == "kimi-cli" else "*.jsonl"))[0]
        data = bytearray(f.read_bytes())
        at = data.index(b'"', data.index(b"\n") + 1)  # a character of its second line
        data[at + 1 : at + 2] = b"X" if data[at + 1 : at + 2] != b"X" else b"Y"
        f.write_bytes(bytes(data))
    elif agent == "amp":
        f = root / "T-019cb000-1111-7222-8333-444455556666.json"
        doc = json.loads(f.read_bytes())
        doc["messages"][0]["content"][0]["text"] = "something else"
        f.write_text(json.dumps(doc))
    else:
        f = sorted((root / "5b2f0e3c9d1a4e7f8a6b1c2d3e4f5a6b" / "events").glob("event-*"))[2]
        event = json.loads(f.read_bytes())
        event["llm_message"]["content"][0]["text"] = "something else"
        f.write_text(json.dumps(event))
        os.utime(f.parent.parent / "base_state.json")
    result = CliRunner().invoke(main, ["import", "--from", agent, str(root), "-o", str(out)])
    assert result.exit_code == 2
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("jsonltape: error")]
    assert len(errors) == 1 and "changed since it was imported" in errors[0]
    assert {s: s.read_bytes() for s in sessions} == before


@pytest.mark.parametrize("agent", AGENTS)
def test_the_index_reads_the_tree_in_place_as_the_import_maps_it(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    listing = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    store = SqliteStore(tmp_path / "index.db")
    try:
        engine = ForeignIngestor(store, root, agent)
        stats = engine.rescan()
        assert stats.errors == 0
        rows = {path: sid for path, sid in store.con.execute("SELECT path, id FROM sessions")}
        sessions = imported(run(agent, root, tmp_path / "root"))
        assert sorted(rows.values()) == sorted(s.stem for s in sessions)
        for path, sid in rows.items():
            real, _member = split_member(path)
            scan = {s: e for s, e in foreign.scan(agent, real, raw=False) if s == sid}
            assert scan, path
            count = store.con.execute(
                "SELECT events FROM sessions WHERE path = ?", (path,)
            ).fetchone()[0]
            assert count == sum(1 for s, _ in foreign.scan(agent, real, raw=False) if s == sid)
        assert engine.rescan().transactions == 0
        fresh = SqliteStore(":memory:")
        try:
            ForeignIngestor(fresh, root, agent).rescan()
            assert dump(store.con) == dump(fresh.con)
        finally:
            fresh.close()
        fts_ok(store.con)
    finally:
        store.close()
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == listing  # nothing written


@pytest.mark.parametrize("agent", AGENTS)
def test_a_file_of_another_format_is_one_verdict_and_the_rest_imports(
    tmp_path: Path, agent: str
) -> None:
    root = tree(agent, tmp_path / "src")
    items, _ = discover(agent, [root])
    victim = as_input(agent, items[0])
    if agent in LINE_LOGS:
        victim.path.write_text('{"hello": "world"}\n')
        where = str(victim.path)
    elif agent == "amp":
        victim.path.write_text('{"v": 1, "id": "T-x", "messages": [')  # a torn save
        where = str(victim.path)
    else:  # an event nested deeper than a line may be
        event = victim.path.parent / "events" / "event-00099-0000aaaa-bbbb.json"
        event.write_text('{"kind": "MessageEvent", "id": "x", "v": ' + "[" * 600 + "]" * 600 + "}")
        os.utime(victim.path)
        where = str(event)
    out = tmp_path / "root"
    result = CliRunner().invoke(main, ["import", "--from", agent, str(root), "-o", str(out)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("jsonltape: error")]
    assert len(errors) == 1 and where in errors[0], result.stderr
    assert "Traceback" not in result.output + result.stderr
    reports = run(agent, root, tmp_path / "other")
    assert [r.status for r in reports].count("error") == 1
    assert sum(1 for r in reports if r.status == "imported") == len(reports) - 1


def test_every_new_agent_is_a_source_of_import_and_sync() -> None:
    from jsonltape.interop import SOURCES

    result = CliRunner().invoke(main, ["import", "--help"])
    for agent in AGENTS:
        assert agent in SOURCES and agent in result.output
