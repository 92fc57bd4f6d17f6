"""What the Cursor importer promises (spec B.20), on a transcript built from readers' consensus
and a ``state.vscdb`` built by tests/_cursor_db.py: provider-valid bodies, every row and line
kept verbatim once, times the source's own, the database never written, its ``ItemTable``
(authentication tokens) never read, an unchanged composer skipped, a grown, renamed or edited
one continued as a fresh import ends, what is left out said. Damaged and arbitrary input:
tests/test_interop_cursor_fuzz.py."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

import jsonltape
from jsonltape.cli import cli as main
from jsonltape.interop._cursor_store import Database

from . import _cursor_db as cdb
from ._agents import imported, run
from ._cursor import MARKERS, TID, TRANSCRIPT, TRANSCRIPTS, build_db, by_id, events, ok
from ._importers import age, copy_tree, problems, raws, surface


def _listing(where: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(where.iterdir())}


def test_composers_and_transcripts_import_into_bodies_a_provider_accepts(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src")
    src = copy_tree(TRANSCRIPTS, tmp_path / "projects")
    sessions = ok(run("cursor", db, tmp_path / "out") + run("cursor", src, tmp_path / "out"))
    assert len(sessions) == 4
    for s in sessions:  # clean, and bodies a provider accepts, as messages --check says
        res = CliRunner().invoke(main, ["messages", "--check", str(s)])
        assert (jsonltape.verify(s).state, problems(s), res.exit_code) == ("clean", [], 0), s
    by = by_id(sessions)
    head = next(iter(jsonltape.read(by[cdb.MAIN]))).data
    assert head["title"] == "Cart total" and head["created"] == cdb.T0
    replies = {e.data["message"]["id"]: e.data for e in events(by[cdb.MAIN], "assistant/message")}
    # the dead branch is not mapped; the bubbles in the headers' order are
    assert list(replies) == ["a1", "a2", "a3", "a4", "a5"]
    assert replies["a3"]["usage"] == {"input_tokens": 1200, "output_tokens": 80}
    assert replies["a3"]["import"]["ids"] == ["a3"]  # the key usage reports count it by
    assert replies["a3"]["model"] == "claude-4.5-sonnet"
    assert "usage" not in replies["a1"] and "usage" not in replies["a2"]  # zeros: no usage
    assert replies["a1"]["message"]["parts"] == [
        {"type": "reasoning", "content": "Look at cart.py first."}
    ]
    results = {
        e.data["call_id"]: e.data["message"]["parts"][0]
        for e in events(by[cdb.MAIN], "tool/result")
    }
    assert results["toolu_cart"]["response"] == {"contents": "total = sum(prices)"}
    assert results["toolu_task"]["is_error"] is True
    calls = [p for r in replies.values() for p in r["message"]["parts"] if p["type"] == "tool_call"]
    assert calls[0]["arguments"] == {"targetFile": "cart.py"}  # params before rawArgs
    assert calls[1]["arguments"] == "not json {"  # kept as Cursor wrote it
    text = by[cdb.MAIN].read_text()
    assert "regenerated" not in text
    sub = next(iter(jsonltape.read(by[cdb.SUB]))).data["meta"]["import"]
    assert (sub["sidechain_of"], sub["spawned_by"]) == (cdb.MAIN, "toolu_task")
    old = [e.data["message"]["parts"][0]["content"] for e in events(by[cdb.OLD], "user/message")]
    assert old == ["Rename shop to store."]
    transcript = list(jsonltape.read(by[TID]))
    assert transcript[0].data["title"] == "list the files here"
    calls = [e.data["call_id"] for e in events(by[TID], "tool/result")]
    assert calls == ["line-2.1", "toolu_01"]


def test_times_are_the_sources_own_or_a_neighbours_never_the_import_clock(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src")
    src = copy_tree(TRANSCRIPTS, tmp_path / "projects", seconds=86_400 * 30)
    sessions = ok(run("cursor", db, tmp_path / "out") + run("cursor", src, tmp_path / "out"))
    by = by_id(sessions)
    for sid, path in by.items():
        # only the import's own markers have the import's time
        times = [e.time for e in jsonltape.read(path) if e.type not in MARKERS]
        assert times == sorted(times), sid
        assert max(times) < (time.time() - 3600) * 1000, sid
    untimed = [e for e in events(by[cdb.MAIN], "user/message")][1]
    assert untimed.time == cdb.T0 + 4_000  # u2 has no createdAt: its timed neighbour's
    mtime = TRANSCRIPT.stat().st_mtime  # the transcript has no times: the file's change time
    copy_mtime = (src / TRANSCRIPT.relative_to(TRANSCRIPTS)).stat().st_mtime_ns // 1_000_000
    times = {e.time for e in jsonltape.read(by[TID]) if e.type not in MARKERS}
    assert mtime and times == {copy_mtime}


def test_every_record_and_line_is_kept_verbatim_exactly_once(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src")
    src = copy_tree(TRANSCRIPTS, tmp_path / "projects")
    by = by_id(ok(run("cursor", db, tmp_path / "o1") + run("cursor", src, tmp_path / "o2")))
    kept = raws([by[TID]])
    assert "".join(kept[n] + "\n" for n in sorted(kept)).encode() == TRANSCRIPT.read_bytes()
    store = Database(db)
    for unit in store.units():
        sid = unit.name.partition("#")[2]
        body, _held = unit.render(True)
        kept = raws([by[sid]])
        assert "".join(kept[n] + "\n" for n in sorted(kept)).encode() == body, sid
        values = [msgspec.json.decode(line) for line in body.splitlines()]
        assert values[0]["type"] == "composer"


def test_the_database_is_never_written_and_nothing_appears_beside_it(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src")
    assert db.with_name("state.vscdb-wal").stat().st_size > 0  # the sub-agent is in the log
    assert db.with_name("state.vscdb-shm").exists()
    before = _listing(db.parent)
    reports = run("cursor", db, tmp_path / "out")
    assert by_id(imported(reports)).keys() == {cdb.MAIN, cdb.SUB, cdb.OLD}
    run("cursor", db, tmp_path / "out")
    assert _listing(db.parent) == before
    os.unlink(db.with_name("state.vscdb-wal"))  # Cursor checkpointed and closed: immutable read
    before = _listing(db.parent)
    run("cursor", db, tmp_path / "out2")
    assert _listing(db.parent) == before


def test_the_authentication_token_never_appears_in_any_output(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src")
    out = tmp_path / "out"
    user = db.parent.parent  # a tree with the database in it
    for args in (["import", "--from", "cursor", str(db), "-o", str(out)],
                 ["import", "--from", "cursor", str(user), "-o", str(out)]):  # fmt: skip
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 0, res.output
        assert cdb.TOKEN not in res.output + res.stderr
    for p in out.rglob("*"):
        if p.is_file():
            assert cdb.TOKEN.encode() not in p.read_bytes(), p
    for s in out.rglob("*.jsonl"):
        for args in (["messages", str(s)], ["export", "--format", "md", str(s)], ["cat", str(s)]):
            res = CliRunner().invoke(main, args)
            assert cdb.TOKEN not in res.output, args


def test_an_unchanged_composer_is_skipped_and_a_grown_one_continues_as_a_fresh_import_does(
    tmp_path: Path,
) -> None:
    db = build_db(tmp_path / "src")
    out = tmp_path / "out"
    sessions = by_id(ok(run("cursor", db, out)))
    again = run("cursor", db, out)
    assert {r.status for r in again} == {"unchanged"} and sum(r.events for r in again) == 0
    before = {k: s.read_bytes() for k, s in sessions.items()}
    # Cursor goes on: the main composer gets a prompt and a reply, a new composer starts
    main_rows = dict(cdb.main_rows())
    value = json.loads(main_rows[f"composerData:{cdb.MAIN}"])
    value["fullConversationHeadersOnly"] += [{"bubbleId": "u3", "type": 1},
                                             {"bubbleId": "a6", "type": 2}]  # fmt: skip
    value["lastUpdatedAt"] = cdb.T0 + 120_000
    new = "c0a1b2c3-0000-4000-8000-00000000d004"
    cdb.write(db, [
        (f"composerData:{cdb.MAIN}", json.dumps(value)),
        (f"bubbleId:{cdb.MAIN}:u3", json.dumps(cdb.bubble(1, cdb.T0 + 100_000, text="Thanks!"))),
        (f"bubbleId:{cdb.MAIN}:a6", json.dumps(cdb.bubble(2, cdb.T0 + 101_000, text="Welcome."))),
        (f"composerData:{new}", json.dumps(cdb.composer(new, "New", [
            ("n1", cdb.bubble(1, cdb.T0 + 200_000, text="Hello"))]))),
        (f"bubbleId:{new}:n1", json.dumps(cdb.bubble(1, cdb.T0 + 200_000, text="Hello"))),
    ])  # fmt: skip
    age(db.parent.iterdir())
    grown = {r.path.partition("#")[2]: r for r in run("cursor", db, out)}
    assert grown[cdb.SUB].status == grown[cdb.OLD].status == "unchanged"
    assert grown[cdb.MAIN].status == "imported" and grown[new].status == "imported"
    after = sessions[cdb.MAIN].read_bytes()
    assert after.startswith(before[cdb.MAIN])  # appended to, nothing rewritten
    fresh = by_id(ok(run("cursor", db, tmp_path / "fresh")))
    assert problems(sessions[cdb.MAIN]) == []
    assert surface(sessions[cdb.MAIN]) == surface(fresh[cdb.MAIN])
    assert surface(sessions[cdb.MAIN])[-2:] == [("user", "Thanks!"), ("assistant", "Welcome.")]


def test_an_edited_prompt_is_a_rewrite_that_ends_as_a_fresh_import_of_the_new_version(
    tmp_path: Path,
) -> None:
    db = build_db(tmp_path / "src")
    out = tmp_path / "out"
    session = by_id(ok(run("cursor", db, out)))[cdb.MAIN]
    before = session.read_bytes()
    # the user edits the second prompt: Cursor writes new bubbles and headers from it on, the
    # old ones stay in the table, dead
    value = json.loads(dict(cdb.main_rows())[f"composerData:{cdb.MAIN}"])
    value["fullConversationHeadersOnly"] = value["fullConversationHeadersOnly"][:4] + [
        {"bubbleId": "u2b", "type": 1}, {"bubbleId": "a7", "type": 2}
    ]  # fmt: skip
    value["lastUpdatedAt"] = cdb.T0 + 300_000
    cdb.write(db, [
        (f"composerData:{cdb.MAIN}", json.dumps(value)),
        (f"bubbleId:{cdb.MAIN}:u2b",
         json.dumps(cdb.bubble(1, cdb.T0 + 290_000, text="Just fix it."))),
        (f"bubbleId:{cdb.MAIN}:a7", json.dumps(cdb.bubble(2, cdb.T0 + 291_000, text="Done."))),
    ])  # fmt: skip
    age(db.parent.iterdir())
    again = {r.path.partition("#")[2]: r for r in run("cursor", db, out)}
    assert again[cdb.MAIN].status == "imported", again[cdb.MAIN].error
    assert session.read_bytes().startswith(before)  # appended: the old version kept
    fresh = by_id(ok(run("cursor", db, tmp_path / "fresh")))[cdb.MAIN]
    assert surface(session) == surface(fresh)
    assert surface(session)[-2:] == [("user", "Just fix it."), ("assistant", "Done.")]
    assert problems(session) == []


def test_a_transcript_of_a_composer_in_the_database_is_skipped_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    db = cdb.build(home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb")
    cdb.write(db, [(f"composerData:{TID}", json.dumps(cdb.composer(TID, "Files", [])))])
    src = copy_tree(TRANSCRIPTS, home / ".cursor" / "projects")
    reports = run("cursor", src, tmp_path / "out")
    skipped = [r for r in reports if r.path.endswith(f"{TID}.jsonl")]
    assert [r.status for r in skipped] == ["skipped"]
    assert f"composer {TID}" in (skipped[0].error or "")
    shutil.rmtree(home / ".config")
    from jsonltape.interop import cursor

    cursor._ids.cache_clear()
    reports = run("cursor", src, tmp_path / "out2")
    assert [r.status for r in reports if r.path.endswith(f"{TID}.jsonl")] == ["imported"]


def test_a_legacy_text_transcript_is_left_out_with_one_line(tmp_path: Path) -> None:
    src = copy_tree(TRANSCRIPTS, tmp_path / "projects")
    res = CliRunner().invoke(main, ["import", "--from", "cursor", str(src), "-o",
                                    str(tmp_path / "out")])  # fmt: skip
    assert res.exit_code == 0, res.output
    said = [ln for ln in res.stderr.splitlines() if ".txt" in ln]
    assert len(said) == 1 and "legacy Cursor text transcript" in said[0], said


def test_sqlite_reads_of_the_database_go_through_the_keys_index(tmp_path: Path) -> None:
    """Listing composers reads their rows and counts each one's bubbles by key range, not by
    scanning the table: the work grows with the composers, not with every row of the file."""
    db = build_db(tmp_path / "src")
    small = Database(db)
    small.sessions()
    con = sqlite3.connect(db)  # one transaction
    try:
        con.executemany("INSERT INTO ItemTable VALUES (?, ?)",
                        [(f"other.{i}", "x" * 100) for i in range(20_000)])  # fmt: skip
        con.executemany("INSERT INTO cursorDiskKV VALUES (?, ?)",
                        [(f"checkpointId:{i}", "{}") for i in range(20_000)])  # fmt: skip
        con.commit()
    finally:
        con.close()
    big = Database(db)
    big.sessions()
    assert big.steps < small.steps * 3 + 2_000, (small.steps, big.steps)


@pytest.mark.parametrize(
    ("plat", "user"),
    [("linux", ".config/Cursor/User"), ("darwin", "Library/Application Support/Cursor/User")],
)
def test_auto_finds_cursors_transcripts_and_database_in_their_default_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plat: str, user: str
) -> None:
    from jsonltape.interop._auto import find

    home = tmp_path / "home"
    copy_tree(TRANSCRIPTS, home / ".cursor" / "projects")
    db = cdb.build(home / user / "globalStorage" / "state.vscdb")
    age(db.parent.iterdir())
    found, _capped = find([], env={"HOME": str(home)}, plat=plat)
    where = {f.agent.name: [p.relative_to(home).as_posix() for p in f.paths] for f in found}
    assert where["cursor"] == [".cursor/projects", f"{user}/globalStorage/state.vscdb"]
    if plat != "linux":
        return  # the command searches this machine's platform
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["import", "--from", "auto", "-o", str(tmp_path / "root")])
    assert res.exit_code == 0, res.output
    made = sorted(p.name for p in (tmp_path / "root" / "cursor").glob("*.jsonl"))
    ids = [cdb.MAIN, cdb.SUB, cdb.OLD, TID]
    assert made == sorted(f"cursor-{i}.jsonl" for i in ids)


def test_a_renamed_composer_gets_its_new_title_as_a_session_title_event(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src")
    out = tmp_path / "out"
    session = by_id(ok(run("cursor", db, out)))[cdb.MAIN]
    value = json.loads(dict(cdb.main_rows())[f"composerData:{cdb.MAIN}"])
    value["name"], value["lastUpdatedAt"] = "Cart total, fixed", cdb.T0 + 400_000
    cdb.write(db, [(f"composerData:{cdb.MAIN}", json.dumps(value))])
    age(db.parent.iterdir())
    run("cursor", db, out)
    titles = [e.data["title"] for e in events(session, "session/title")]
    assert titles == ["Cart total, fixed"]


def test_a_composer_cursor_is_still_writing_holds_its_last_turn_back_until_settled(
    tmp_path: Path,
) -> None:
    db = build_db(tmp_path / "src")
    value = json.loads(dict(cdb.main_rows())[f"composerData:{cdb.MAIN}"])
    value["lastUpdatedAt"] = int(time.time() * 1000)  # Cursor wrote it just now
    cdb.write(db, [(f"composerData:{cdb.MAIN}", json.dumps(value))])
    out = tmp_path / "out"
    live = {r.path.partition("#")[2]: r for r in run("cursor", db, out, settle=3600)}
    assert live[cdb.MAIN].status == "imported" and live[cdb.MAIN].held
    session = Path(live[cdb.MAIN].sessions[0])
    said = [e.data["message"]["parts"][0]["content"] for e in events(session, "user/message")]
    assert said == ["Why is the cart total wrong?"]  # the last prompt on: still being written
    value["lastUpdatedAt"] -= 7_200_000  # done two hours ago
    cdb.write(db, [(f"composerData:{cdb.MAIN}", json.dumps(value))])
    run("cursor", db, out, settle=3600)
    fresh = by_id(ok(run("cursor", db, tmp_path / "fresh")))[cdb.MAIN]
    assert surface(session) == surface(fresh)


def test_a_transcript_below_a_transcripts_folder_is_a_session_of_its_own(tmp_path: Path) -> None:
    src = copy_tree(TRANSCRIPTS, tmp_path / "projects")
    folder = src / "home-u-shop" / "agent-transcripts" / TID
    sub = folder / "subagents" / "5ab00000-0000-4000-8000-000000000005.jsonl"
    sub.parent.mkdir()
    sub.write_bytes(TRANSCRIPT.read_bytes().split(b"\n", 2)[0] + b"\n")
    (folder / "notes.md").write_text("not a transcript")  # neither imported nor said
    reports = run("cursor", src, tmp_path / "out")
    assert sorted(by_id(ok(reports))) == sorted([TID, "5ab00000-0000-4000-8000-000000000005"])
    assert not [r for r in reports if r.path.endswith("notes.md")]


def test_counting_a_composers_bubbles_reads_the_keys_index_only(tmp_path: Path) -> None:
    """An unchanged composer is decided without reading its bubbles' values (a real database
    holds hundreds of MB of them): the count is answered by the index of the keys."""
    from jsonltape.interop._cursor_store import COUNT

    db = build_db(tmp_path / "src")
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        plan = " ".join(str(r[-1]) for r in con.execute(f"EXPLAIN QUERY PLAN {COUNT}", ("a", "b")))
    finally:
        con.close()
    assert "COVERING INDEX" in plan, plan


def test_usage_counts_a_cursor_reply_by_its_bubble_id_once_in_any_session(tmp_path: Path) -> None:
    """The same composer imported into two roots (two machines, a copied tree) is one set of
    responses, keyed ``cursor:<bubble id>`` (spec B.12)."""
    from jsonltape.usage import response_of

    db = build_db(tmp_path / "src")
    keys: list[set[str]] = []
    for root in ("a", "b"):
        session = by_id(ok(run("cursor", db, tmp_path / root)))[cdb.MAIN]
        got = set()
        for e in jsonltape.read(session):
            r = response_of(e.data["id"] if e.seq == 0 else session.stem, False, e.type, e.seq,
                            e.time, "00000000", e.data)  # fmt: skip
            if r is not None:
                got.add(r.rkey)
        keys.append(got)
    assert keys[0] == keys[1] == {"cursor:a3", "cursor:a5"}


def test_a_sub_agents_composer_hangs_under_its_parent_in_usage_reports(tmp_path: Path) -> None:
    from jsonltape.usage._rules import session_links

    by = by_id(ok(run("cursor", build_db(tmp_path / "src"), tmp_path / "out")))
    heads = {k: next(iter(jsonltape.read(p))).data for k, p in by.items()}
    main = session_links(heads[cdb.MAIN]["id"], None, heads[cdb.MAIN]["meta"])
    sub = session_links(heads[cdb.SUB]["id"], None, heads[cdb.SUB]["meta"])
    assert main.up is None and sub.up == main.alias == f"src:cursor:{cdb.MAIN}"


def test_empty_composers_and_null_rows_are_no_sessions_and_no_errors(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src", recent=False)
    empty = "c0a1b2c3-0000-4000-8000-00000000e005"
    cdb.write(db, [
        (f"composerData:{empty}", json.dumps(cdb.composer(empty, "", []))),
        ("composerData:c0a1b2c3-0000-4000-8000-00000000f006", None),
        (f"bubbleId:{cdb.MAIN}:a3", None),  # as if missing: the headers still name it
    ])  # fmt: skip
    age(db.parent.iterdir())
    reports = run("cursor", db, tmp_path / "out")
    assert sorted(by_id(ok(reports))) == sorted([cdb.MAIN, cdb.OLD])
    replies = [e.data["message"]["id"] for e in events(by_id(ok(reports))[cdb.MAIN],
                                                          "assistant/message")]  # fmt: skip
    assert replies == ["a1", "a2", "a4", "a5"]


def test_a_flat_transcript_beside_its_folder_form_is_skipped_said(tmp_path: Path) -> None:
    src = copy_tree(TRANSCRIPTS, tmp_path / "projects")
    folder = src / "home-u-shop" / "agent-transcripts"
    shutil.copyfile(TRANSCRIPT, folder / TRANSCRIPT.name)  # the older layout left behind
    reports = run("cursor", src, tmp_path / "out")
    assert sorted(by_id(ok(reports))) == [TID]  # one session, not a second one silently
    flat = [r for r in reports if r.path == str(folder / TRANSCRIPT.name)]
    assert [r.status for r in flat] == ["skipped"] and f"{TID}/{TID}.jsonl" in (flat[0].error or "")
