"""Continue sessions (``~/.continue/sessions/<id>.json``, issue 32): imported as Continue sends
them to the model (gui/src/redux/util/constructMessages.ts at continuedev/continue @
d0a3c0b626b5), rebuilt record for record, re-imported when grown or rewritten in place.

The fixtures (tests/fixtures/interop/continue, PROVENANCE.md) are built from Continue's writer
(``HistoryManager.save``) and types; the hypothesis tests generate the versions a session goes
through as Continue saves it whole (grown, an earlier message edited and re-run, cut back).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape.interop import discover, import_file, import_paths
from jsonltape.interop.continue_dev import CANCELLED, ERRORED, NO_OUTPUT

from ._importers import (
    FIXTURES,
    JSON,
    age,
    bodies,
    cli,
    copy_tree,
    current_records,
    imported,
    nested,
    one_verdict,
    problems,
    scan_matches_import,
    surface,
    survives,
)

TREE = FIXTURES / "continue" / "built-from-writer" / ".continue" / "sessions"
SIMPLE = "9490954d-d7dd-4cbe-984c-6172d60bf3dc.json"
RICH = "b7e1c2d3-0000-4000-8000-00000000c0de.json"
_settings = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _import(tmp: Path, name: str = RICH, **kw: Any) -> tuple[Path, Path]:
    sessions = copy_tree(TREE, tmp / "sessions")
    report = import_file("continue", sessions / name, tmp / "root", **kw)
    return sessions / name, imported(report)


def _save(path: Path, doc: dict[str, Any], *, seconds: float = 7200) -> None:
    """Save as Continue does (``JSON.stringify(session, undefined, 2)``), ``seconds`` ago."""
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
    age([path], seconds)


# -- what the model sees -----------------------------------------------------------------------


@pytest.mark.parametrize("name", [SIMPLE, RICH])
def test_every_fixture_session_folds_to_bodies_a_provider_accepts(
    tmp_path: Path, name: str
) -> None:
    _src, session = _import(tmp_path, name)
    assert problems(session) == []
    assert jsonltape.verify(session).state == "clean"


def test_the_history_is_what_continue_sends_the_model(tmp_path: Path) -> None:
    _src, session = _import(tmp_path)
    events = list(jsonltape.read(session))
    messages = [e.data["message"] for e in events if "message" in e.data]
    prompt = messages[0]
    # context items go first, each its content and a newline; then the text and the image
    assert [p["type"] for p in prompt["parts"]] == ["text", "text", "blob"]
    assert prompt["parts"][0]["content"] == "```build.log\nerror: missing semicolon\n```\n"
    assert prompt["parts"][2]["mime_type"] == "image/png"
    reply = messages[1]
    # the thinking item is the reply's reasoning, unsigned (an OpenAI provider answered)
    assert reply["parts"][0] == {
        "type": "reasoning",
        "content": "Look at the log, then run the build.",
    }
    calls = [p for p in reply["parts"] if p["type"] == "tool_call"]
    assert calls[0]["arguments"] == {"command": "make", "waitForCompletion": True}
    results = {
        e.data["call_id"]: (
            e.data["message"]["parts"][0]["response"],
            e.data["message"]["parts"][0].get("is_error", False),
        )
        for e in events
        if e.type == "tool/result"
    }
    assert results == {
        "call_Ab12": (
            "src/main.c:3: error: expected ';'\n[Status: Command failed with exit code 2]",
            False,
        ),
        "call_Cd34": (CANCELLED, True),
        "call_Ef56": (ERRORED, True),
    }
    assert NO_OUTPUT not in {r for r, _ in results.values()}
    # the summary replaces everything up to its item; the system item and the empty reply are
    # not sent; the tool item is not (its call's state is)
    assert surface(session) == [
        (
            "user",
            "Previous conversation summary:\n\n The user asked why the build fails; `make` "
            "reported a missing semicolon at src/main.c:3.",
        ),
        ("user", "fix it"),
        ("assistant", None),
        ("tool", ERRORED),
        ("assistant", "The edit failed; please apply `int x = 1;` by hand."),
    ]
    kinds = [e.data["kind"] for e in events if e.type == "import/raw"]
    assert sorted(kinds) == ["$set", "message/empty", "message/system", "message/tool", "session"]
    assert all(e.data["known"] for e in events if e.type == "import/raw")


def test_a_thinking_signature_is_kept_only_when_continues_anthropic_provider_answered(
    tmp_path: Path,
) -> None:
    src, session = _import(tmp_path, SIMPLE)
    reasoning = [
        p
        for e in jsonltape.read(session)
        if e.type == "assistant/message"
        for p in e.data["message"]["parts"]
        if p["type"] == "reasoning"
    ]
    assert reasoning[0]["signature"].startswith("RXFN")
    doc = json.loads(src.read_text(encoding="utf-8"))
    for item in doc["history"]:
        for log in item.get("promptLogs") or ():
            log["modelProvider"] = "openai"
    other = tmp_path / "other" / "sessions" / SIMPLE
    other.parent.mkdir(parents=True)
    _save(other, doc)
    session = imported(import_file("continue", other, tmp_path / "root2"))
    reasoning = [
        p
        for e in jsonltape.read(session)
        if e.type == "assistant/message"
        for p in e.data["message"]["parts"]
        if p["type"] == "reasoning"
    ]
    assert "signature" not in reasoning[0]
    assert problems(session) == []


def test_usage_leaves_the_cache_out_of_the_input_for_either_provider(tmp_path: Path) -> None:
    _src, session = _import(tmp_path)
    usages = [e.data.get("usage") for e in jsonltape.read(session) if e.type == "assistant/message"]
    # OpenAI-style providers count promptTokens with the cached ones
    assert usages[0] == {
        "input_tokens": 400,
        "output_tokens": 31,
        "cache_read_input_tokens": 2000,
        "reasoning_tokens": 12,
    }
    _src, session = _import(tmp_path / "simple", SIMPLE)
    usages = [e.data.get("usage") for e in jsonltape.read(session) if e.type == "assistant/message"]
    # Anthropic's promptTokens are its input_tokens, without the cache
    assert usages == [
        {"input_tokens": 1800, "output_tokens": 40, "cache_creation_input_tokens": 1500},
        {"input_tokens": 1900, "output_tokens": 12, "cache_read_input_tokens": 1500},
    ]


def test_the_header_has_continues_title_the_workspace_path_and_the_index_creation_time(
    tmp_path: Path,
) -> None:
    _src, session = _import(tmp_path)
    head = jsonltape.reader.header(session)
    assert head.id == "continue-b7e1c2d3-0000-4000-8000-00000000c0de"
    assert head.title == "Why the build fails"
    assert head.cwd == "c:/Users/u/proj"
    assert head.created == 1788134900000
    assert head.meta["import"]["workspace"] == "file:///c%3A/Users/u/proj"
    times = [e.time for e in jsonltape.read(session) if e.type == "assistant/message"]
    # no item has a time of its own but the reasoning of the last reply
    assert times[-1] == 1788135000000


@pytest.mark.parametrize("created", ["1788134900000\u00b2", "\u0661" * 13, "1" * 4301, "9" * 17])
def test_an_index_creation_time_of_digits_int_refuses_is_no_time(
    tmp_path: Path, created: str
) -> None:
    """``sessions.json`` is Continue's, edited or not: a ``dateCreated`` of digits ``int``
    refuses (a superscript, Arabic-Indic digits: ``str.isdigit`` takes them; more than 4,300
    digits) or past any time is no creation time, and the session imports (it was a
    ValueError traceback)."""
    sessions = copy_tree(TREE, tmp_path / "sessions")
    index = sessions / "sessions.json"
    entries = json.loads(index.read_text(encoding="utf-8"))
    for e in entries:
        e["dateCreated"] = created
    index.write_text(json.dumps(entries), encoding="utf-8")
    age([index])
    done = cli("import", "--from", "continue", str(sessions), "-o", str(tmp_path / "root"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    for session in (tmp_path / "root" / "continue").glob("*.jsonl"):
        assert jsonltape.reader.header(session).created != 1788134900000


def test_the_sessions_folder_walked_from_inside_finds_what_its_full_path_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `jsonltape import --from continue .` in ~/.continue/sessions: each file's folder is
    # "sessions" all the same (walked as ".", it had no name, and nothing was found)
    sessions = copy_tree(TREE, tmp_path / "sessions")
    whole, _ = discover("continue", [sessions])
    monkeypatch.chdir(sessions)
    here, _ = discover("continue", [Path(".")])
    assert whole and [(u.name, u.created) for u in here] == [(u.name, u.created) for u in whole]


def test_a_sessions_index_that_is_a_symlink_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    sessions = copy_tree(TREE, tmp_path / "sessions")
    index = sessions / "sessions.json"
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(index.read_bytes())
    index.unlink()
    index.symlink_to(elsewhere)
    session = imported(import_file("continue", sessions / RICH, tmp_path / "root"))
    assert jsonltape.reader.header(session).created != 1788134900000  # not the index's
    index.unlink()
    os.mkfifo(index)  # no writer: an open that waits for one would hang the import
    session = imported(import_file("continue", sessions / RICH, tmp_path / "root2"))
    assert jsonltape.reader.header(session).created != 1788134900000


def test_an_unnamed_session_is_titled_by_its_first_prompt_and_a_rename_is_a_title_event(
    tmp_path: Path,
) -> None:
    src = copy_tree(TREE, tmp_path / "sessions") / RICH
    doc = json.loads(src.read_text(encoding="utf-8"))
    doc["title"] = "New Session"
    _save(src, doc)
    session = imported(import_file("continue", src, tmp_path / "root"))
    assert jsonltape.reader.header(session).title == "why does the build fail?"
    doc["title"] = "Build failure"
    _save(src, doc)
    again = import_file("continue", src, tmp_path / "root")
    assert again.status == "imported"
    titles = [e.data["title"] for e in jsonltape.read(session) if e.type == "session/title"]
    assert titles == ["Build failure"]


# -- whole-file rewrites -------------------------------------------------------------------------


def _rebuilt(session: Path) -> dict[str, Any]:
    """The Continue session as the imported session keeps it: its current version's records."""
    head, *items, changes = current_records(session)
    return {**head, "history": items, **changes["$set"]}


@pytest.mark.parametrize("name", [SIMPLE, RICH])
def test_the_session_is_rebuilt_record_for_record_from_the_import(
    tmp_path: Path, name: str
) -> None:
    src, session = _import(tmp_path, name)
    assert _rebuilt(session) == json.loads(src.read_text(encoding="utf-8"))


def test_a_session_still_being_saved_holds_its_last_item_until_settled(tmp_path: Path) -> None:
    sessions = copy_tree(TREE, tmp_path / "sessions", seconds=0)
    src, root = sessions / RICH, tmp_path / "root"
    live = import_file("continue", src, root)
    assert live.status == "imported" and live.held is not None
    n_items = len(json.loads(src.read_text(encoding="utf-8"))["history"])
    assert live.held.line == n_items + 1  # the last item and the $set wait
    assert import_file("continue", src, root).status == "unchanged"
    age([src])
    settled = import_file("continue", src, root)
    assert settled.status == "imported" and settled.held is None and settled.events > 0
    fresh = imported(import_file("continue", src, tmp_path / "fresh"))
    assert bodies(settled.sessions[0]) == bodies(fresh)


def test_a_grown_session_adds_only_its_new_records(tmp_path: Path) -> None:
    src, session = _import(tmp_path)
    before = len(list(jsonltape.read(session)))
    doc = json.loads(src.read_text(encoding="utf-8"))
    doc["history"] += [
        {"message": {"role": "user", "content": "thanks", "id": "u-9"}, "contextItems": []},
        {"message": {"role": "assistant", "content": "Welcome.", "id": "a-9"}, "contextItems": []},
    ]
    _save(src, doc)
    again = import_file("continue", src, tmp_path / "root")
    assert again.status == "imported"
    written = list(jsonltape.read(session))[before:]
    assert not any(e.type == "surface/retract" for e in written)
    assert [e.data["message"]["id"] for e in written if "message" in e.data] == ["u-9", "a-9"]
    fresh = imported(import_file("continue", src, tmp_path / "fresh"))
    assert bodies(session) == bodies(fresh)
    assert _rebuilt(session) == doc


def test_an_edited_and_rerun_message_retracts_what_followed_it(tmp_path: Path) -> None:
    src, session = _import(tmp_path)
    doc = json.loads(src.read_text(encoding="utf-8"))
    n = len(doc["history"])
    doc["history"] = doc["history"][:6] + [
        {
            "message": {"role": "user", "content": "fix it properly", "id": "u-7b"},
            "contextItems": [],
        },
        {"message": {"role": "assistant", "content": "Done.", "id": "a-7b"}, "contextItems": []},
    ]
    _save(src, doc)
    again = import_file("continue", src, tmp_path / "root")
    assert again.status == "imported" and again.problems == []
    events = list(jsonltape.read(session))
    retracts = [e for e in events if e.type == "surface/retract"]
    assert [e.data["reason"] for e in retracts] == ["rewritten"]
    # the old messages are still in the file, only no longer on the surface
    old = [e for e in events if e.type == "user/message"]
    assert [e.data["message"]["id"] for e in old].count("c1000000-0000-4000-8000-000000000007") == 1
    fresh = imported(import_file("continue", src, tmp_path / "fresh"))
    assert bodies(session) == bodies(fresh)
    assert surface(session)[-2:] == [("user", "fix it properly"), ("assistant", "Done.")]
    assert problems(session) == []
    assert _rebuilt(session) == doc
    marker = [e.data for e in events if e.type == "import/sync"][-1]
    assert marker["rewrites"] == [[n + 3, 7]]  # record 7 (item 6, the prompt) on, after line n+2
    assert import_file("continue", src, tmp_path / "root").status == "unchanged"


_USER = st.builds(
    lambda i, t: {"message": {"role": "user", "content": t, "id": f"u{i}"}, "contextItems": []},
    st.integers(0, 10**6),
    st.sampled_from(["a", "b", "fix it", "日本語", "x" * 40]),
)
_REPLY = st.builds(
    lambda i, t: {
        "message": {"role": "assistant", "content": t, "id": f"a{i}"},
        "contextItems": [],
    },
    st.integers(0, 10**6),
    st.sampled_from(["ok", "done", "über", ""]),
)


@st.composite
def _versions(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Histories a session goes through: each grown, cut back to a prompt and re-run, or with
    an earlier reply rewritten (a later save changed it)."""
    history: list[dict[str, Any]] = []
    out = []
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["grow", "grow", "rerun", "edit"]))
        prompts = [k for k, item in enumerate(history) if item["message"]["role"] == "user"]
        if op == "rerun" and prompts:
            history = history[: draw(st.sampled_from(prompts))]
        elif op == "edit" and len(history) > 1:
            k = draw(st.integers(0, len(history) - 1))
            history = copy.deepcopy(history)
            history[k]["message"]["content"] += " (edited)"
        for _ in range(draw(st.integers(0, 3))):
            history.append(draw(_USER))
            history.extend(draw(st.lists(_REPLY, max_size=2)))
        out.append(copy.deepcopy(history))
    return out


@_settings
@given(versions=_versions())
def test_every_version_imports_as_a_fresh_import_of_it_would(
    tmp_path: Path, versions: list[list[dict[str, Any]]]
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = work / "sessions" / "0bad5eed-0000-4000-8000-000000000001.json"
    src.parent.mkdir(parents=True)
    for k, history in enumerate(versions):
        doc = {"sessionId": src.stem, "title": "t", "workspaceDirectory": "/w", "history": history}
        _save(src, doc, seconds=7200 - k)  # a new change time each save
        report = import_file("continue", src, work / "root")
        assert report.status in ("imported", "unchanged"), report.error
        assert report.problems == []
        fresh = import_file("continue", src, work / f"fresh{k}")
        assert fresh.status == "imported", fresh.error
        assert bodies(report.sessions[0]) == bodies(fresh.sessions[0])
        assert _rebuilt(Path(report.sessions[0])) == doc


# -- bad input -------------------------------------------------------------------------------------


@_settings
@given(cut=st.integers(min_value=0))
def test_a_session_caught_mid_save_is_one_verdict_and_writes_nothing(
    tmp_path: Path, cut: int
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = copy_tree(TREE / RICH, work / "sessions" / RICH)
    data = src.read_bytes()
    src.write_bytes(data[: cut % len(data)])
    report = import_file("continue", src, work / "root")
    assert report.status == "error" and report.error is not None
    assert str(src) in report.error and "\n" not in report.error
    assert not (work / "root").exists() or not any((work / "root").rglob("*.jsonl"))


def test_the_cli_refuses_a_torn_session_in_one_line(tmp_path: Path) -> None:
    src = copy_tree(TREE / RICH, tmp_path / "sessions" / RICH)
    src.write_bytes(src.read_bytes()[:500])
    done = cli("import", "--from", "continue", str(src), "-o", str(tmp_path / "root"))
    one_verdict(done, str(src), "not a Continue session")
    assert not (tmp_path / "root" / "continue").exists()


@_settings
@given(
    items=st.lists(
        st.fixed_dictionaries(
            {
                "message": st.fixed_dictionaries(
                    {
                        "role": st.sampled_from(
                            ["user", "assistant", "thinking", "tool", "system", 3]
                        )
                    },
                    optional={
                        "content": JSON,
                        "id": JSON,
                        "toolCalls": JSON,
                        "usage": JSON,
                        "toolCallId": JSON,
                        "signature": JSON,
                    },
                )
            },
            optional={
                "contextItems": JSON,
                "toolCallStates": JSON,
                "promptLogs": JSON,
                "reasoning": JSON,
                "conversationSummary": JSON,
            },
        ),
        max_size=6,
    ),
    deep=st.integers(0, 700),
)
def test_items_of_any_shape_never_break_the_import(
    tmp_path: Path, items: list[dict[str, Any]], deep: int
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = work / "sessions" / "0bad5eed-0000-4000-8000-000000000002.json"
    src.parent.mkdir(parents=True)
    history: list[Any] = list(items)
    if deep:
        history.append(
            {
                "message": {"role": "user", "content": "deep", "id": "d"},
                "contextItems": nested(deep),
            }
        )
    _save(
        src, {"sessionId": src.stem, "title": "t", "workspaceDirectory": "/w", "history": history}
    )
    survives("continue", src, work / "root")


# -- the read-only scan and the index --------------------------------------------------------------


def test_the_read_only_scan_gives_the_imported_events(tmp_path: Path) -> None:
    sessions = copy_tree(TREE, tmp_path / "sessions")
    report = next(
        r for r in import_paths("continue", [sessions], tmp_path / "root") if RICH[:8] in r.path
    )
    scan_matches_import("continue", sessions / RICH, report)


def test_sync_source_indexes_continue_sessions_in_place(tmp_path: Path) -> None:
    sessions = copy_tree(TREE, tmp_path / "continue" / "sessions")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"JSONLTAPE_HOME": str(tmp_path / "home")}
    index = str(tmp_path / "index.db")
    done = cli(
        "sync", str(empty), "--index", index, "--source", f"continue:{sessions.parent}", env=env
    )
    assert done.returncode == 0, done.stderr
    listed = cli("sessions", "--index", index, "--json", env=env)
    found = sorted(Path(json.loads(x)["path"]).name for x in listed.stdout.splitlines())
    assert found == sorted([SIMPLE, RICH])  # not the sessions.json index
    hits = cli("search", "--index", index, "semicolon", "--json", env=env)
    assert hits.returncode == 0 and "semicolon" in hits.stdout


@pytest.mark.parametrize("keep", range(1, 10))
def test_a_session_cut_back_imports_as_a_fresh_import_or_is_refused_before_its_compaction(
    tmp_path: Path, keep: int
) -> None:
    """A session Continue saved cut back (to any of its items) is imported as a fresh import
    of it would be, unless the cut is before the summary of a compaction that summarized what
    the cut keeps (spec B.1: a retraction cannot bring back compacted messages): then it is
    refused in one line and nothing is written. Cut back to before the summary, the import
    retracted the summary and left the surface without the messages it had replaced, kept by
    the cut (an empty history where a fresh import has the prompt)."""
    src, session = _import(tmp_path)
    doc = json.loads(src.read_text(encoding="utf-8"))
    doc["history"] = doc["history"][:keep]
    _save(src, doc, seconds=7000)
    before = session.read_bytes()
    again = import_file("continue", src, tmp_path / "root")
    fresh = imported(import_file("continue", src, tmp_path / "fresh"))
    if again.status == "error":
        assert again.error is not None and "before a compaction that summarized" in again.error
        assert str(src) in again.error and "\n" not in again.error
        assert session.read_bytes() == before
        assert keep <= 5  # the summary is item 5 (a cut after it keeps it)
        return
    assert again.status == "imported" and again.problems == [], again.error
    assert bodies(session) == bodies(fresh)
    assert _rebuilt(session) == doc
