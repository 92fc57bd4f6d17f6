"""GitHub Copilot Chat sessions of VS Code (``<User>/workspaceStorage/<id>/chatSessions/<id>.jsonl``
operation logs, older ``.json`` documents; issue 32): imported as the Copilot extension sends its
history (microsoft/vscode-copilot-chat @ 31acd00a8642), rebuilt record for record, re-imported
when grown, rewritten in place or compacted by VS Code.

The fixtures (tests/fixtures/interop/copilot-vscode, PROVENANCE.md) are built from VS Code's
writer (microsoft/vscode @ 047238f9fe1b: objectMutationLog.ts, chatModel.ts); the hypothesis tests
generate the versions a session goes through as VS Code saves it (grown, a request rewritten, the
log compacted into one initial entry, the flat document rewritten whole).
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
from jsonltape.interop.copilot_vscode import replay

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

TREE = FIXTURES / "copilot-vscode" / "built-from-writer"
WS = Path("workspaceStorage") / "0123456789abcdef0123456789abcdef" / "chatSessions"
LOG = WS / "c0de0001-0000-4000-8000-00000000c0de.jsonl"
SMALL_LOG = WS / "b1111111-2222-4333-8444-555555555555.jsonl"
FLAT = WS / "a8969187-e0be-4408-95dc-a5781793b48f.json"
EMPTY_WINDOW = (
    Path("globalStorage") / "emptyWindowChatSessions" / "c0de0002-0000-4000-8000-00000000c0de.json"
)
ALL = [LOG, SMALL_LOG, FLAT, EMPTY_WINDOW]
_settings = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _import(tmp: Path, rel: Path = LOG, **kw: Any) -> tuple[Path, Path]:
    tree = copy_tree(TREE, tmp / "User")
    report = import_file("copilot-vscode", tree / rel, tmp / "root", **kw)
    return tree / rel, imported(report)


def _doc(src: Path) -> dict[str, Any]:
    """The session a file holds, as VS Code reads it."""
    if src.suffix == ".jsonl":
        value: dict[str, Any] = replay(src)
        return value
    loaded: dict[str, Any] = json.loads(src.read_text(encoding="utf-8"))
    return loaded


def _write_log(path: Path, entries: list[dict[str, Any]], *, seconds: float = 7200) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
    age([path], seconds)


def _rebuilt(session: Path) -> dict[str, Any]:
    """The VS Code session as the imported session keeps it: its current version's records."""
    head, *requests, changes = current_records(session)
    head.pop("workspaceFolder", None)  # from workspace.json beside the folder, not the file
    return {**head, "requests": requests, **changes["$set"]}


# -- what the model sees -----------------------------------------------------------------------


@pytest.mark.parametrize("rel", ALL, ids=lambda p: p.name)
def test_every_fixture_session_folds_to_bodies_a_provider_accepts(
    tmp_path: Path, rel: Path
) -> None:
    _src, session = _import(tmp_path, rel)
    assert problems(session) == []
    assert jsonltape.verify(session).state == "clean"


@pytest.mark.parametrize("rel", ALL, ids=lambda p: p.name)
def test_the_session_is_rebuilt_record_for_record_from_the_import(
    tmp_path: Path, rel: Path
) -> None:
    src, session = _import(tmp_path, rel)
    assert _rebuilt(session) == _doc(src)


def test_agent_mode_is_its_tool_call_rounds_with_results_and_the_summary(tmp_path: Path) -> None:
    _src, session = _import(tmp_path)
    events = list(jsonltape.read(session))
    first = next(e for e in events if e.type == "user/message")
    # the prompt as the extension rendered it into history (renderedUserMessage)
    assert first.data["message"]["parts"][0]["content"].startswith("<context>")
    rounds = [e.data["message"] for e in events if e.type == "assistant/message"]
    assert [m["id"] for m in rounds] == ["round-a", "round-b", "round-c", "round-d"]
    assert [p["type"] for p in rounds[0]["parts"]] == ["reasoning", "tool_call", "tool_call"]
    assert rounds[0]["parts"][2]["arguments"] == {"command": "npm test", "isBackground": False}
    results = {e.data["call_id"]: e.data["message"]["parts"][0]["response"] for e in events
               if e.type == "tool/result"}  # fmt: skip
    # a plain text part, and a prompt-tsx node tree read as its text
    assert results == {
        "toolu_r1": "setTimeout(done, 10)",
        "toolu_t1": "1 failing\ntimeout of 2000ms",
        "toolu_g1": "[main 1a2b3c] fix",
    }
    ends = [(e.data["reason"], e.data.get("error")) for e in events if e.type == "turn/end"]
    assert ends == [
        ("completed", None),
        ("aborted", {"code": "error", "message": "Canceled"}),
        ("completed", None),
    ]
    # the summary of round-a replaces everything through that round's results
    assert surface(session) == [
        (
            "user",
            "<conversation-summary>\nThe flaky test waited on a real timer; it now uses a fake "
            "clock.\n</conversation-summary>",
        ),
        ("assistant", "The test waits on a timer; I replaced it with a fake clock."),
        ("user", "also run the linter"),
        ("user", "now commit it"),
        ("assistant", None),
        ("tool", "[main 1a2b3c] fix"),
        ("assistant", "Committed."),
    ]


def test_usage_is_counted_once_per_request_with_its_response_id_and_model(tmp_path: Path) -> None:
    _src, session = _import(tmp_path)
    replies = [e.data for e in jsonltape.read(session) if e.type == "assistant/message"]
    usages = [(d["message"]["id"], d.get("usage")) for d in replies if d.get("usage")]
    assert usages == [
        ("round-a", {"input_tokens": 9100, "output_tokens": 240}),
        ("round-c", {"input_tokens": 3000, "output_tokens": 30}),
    ]
    ids = [d["import"].get("response_id") for d in replies if d.get("usage")]
    assert ids == [
        "response_c0de0000-0000-4000-8000-000000000000",
        "response_c0de0002-0000-4000-8000-000000000000",
    ]
    assert {d.get("model") for d in replies} == {"claude-sonnet-4-5"}  # resolvedModel


def test_the_header_has_the_custom_title_the_workspace_folder_and_the_creation_date(
    tmp_path: Path,
) -> None:
    _src, session = _import(tmp_path)
    head = jsonltape.reader.header(session)
    assert head.id == "copilot-vscode-c0de0001-0000-4000-8000-00000000c0de"
    assert head.title == "Fix the flaky test"
    assert head.cwd == "/home/u/proj"
    assert head.created == 1785700000000
    assert head.meta["import"]["workspace"] == "file:///home/u/proj"
    times = [e.time for e in jsonltape.read(session) if e.type == "user/message"]
    assert times == sorted(times) and times[0] == 1785700000000  # each request's timestamp


def test_an_empty_window_session_has_no_folder_and_its_computed_title(tmp_path: Path) -> None:
    _src, session = _import(tmp_path, EMPTY_WINDOW)
    head = jsonltape.reader.header(session)
    assert head.cwd is None and head.title == "Regex for emails"
    assert surface(session)[:2] == [
        ("user", "a regex for emails?"),
        ("assistant", "Use `^[^@]+@[^@]+$`."),
    ]


def test_a_workspace_json_that_is_a_symlink_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    tree = copy_tree(TREE, tmp_path / "User")
    ws = (tree / LOG).parent.parent / "workspace.json"
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"folder": "file:///through/a/link"}), encoding="utf-8")
    ws.unlink()
    ws.symlink_to(elsewhere)
    session = imported(import_file("copilot-vscode", tree / LOG, tmp_path / "root"))
    assert jsonltape.reader.header(session).cwd is None
    ws.unlink()
    os.mkfifo(ws)  # no writer: an open that waits for one would hang the import
    session = imported(import_file("copilot-vscode", tree / LOG, tmp_path / "root2"))
    assert jsonltape.reader.header(session).cwd is None


def test_a_json_beside_its_jsonl_is_skipped_as_vs_code_reads_the_log(tmp_path: Path) -> None:
    tree = copy_tree(TREE, tmp_path / "User")
    log = tree / LOG
    (log.with_suffix(".json")).write_text(json.dumps(_doc(log)), encoding="utf-8")
    items, skipped = discover("copilot-vscode", [tree])
    paths = [Path(getattr(i, "path", i)) for i in items]
    assert log.with_suffix(".json") not in paths and log in paths
    assert [(p.name, "reads" in why) for p, why in skipped] == [(log.stem + ".json", True)]


# -- the operation log as it grows and is rewritten ----------------------------------------------


def test_a_log_still_being_written_holds_its_last_request_until_settled(tmp_path: Path) -> None:
    tree = copy_tree(TREE, tmp_path / "User", seconds=0)
    src, root = tree / LOG, tmp_path / "root"
    live = import_file("copilot-vscode", src, root)
    assert live.status == "imported" and live.held is not None
    assert import_file("copilot-vscode", src, root).status == "unchanged"
    age([src])
    settled = import_file("copilot-vscode", src, root)
    assert settled.status == "imported" and settled.held is None
    fresh = imported(import_file("copilot-vscode", src, tmp_path / "fresh"))
    assert bodies(settled.sessions[0]) == bodies(fresh)


def test_a_torn_last_entry_is_not_read_and_a_bad_entry_before_it_is_one_verdict(
    tmp_path: Path,
) -> None:
    tree = copy_tree(TREE, tmp_path / "User")
    src = tree / LOG
    data = src.read_bytes()
    src.write_bytes(data + b'{"kind":2,"k":["requests",2,"resp')
    age([src])
    report = import_file("copilot-vscode", src, tmp_path / "root")
    assert report.status == "imported", report.error
    assert _rebuilt(Path(report.sessions[0])) == _doc(tree / LOG)
    lines = data.split(b"\n")
    lines[3] = b'{"kind":2,"k":["requests",0,"resp'
    bad = tmp_path / "bad" / LOG.name
    bad.parent.mkdir()
    bad.write_bytes(b"\n".join(lines))
    age([bad])
    report = import_file("copilot-vscode", bad, tmp_path / "root2")
    assert report.status == "error" and report.error is not None
    assert "line 4" in report.error and str(bad) in report.error and "\n" not in report.error
    assert not (tmp_path / "root2").exists() or not any((tmp_path / "root2").rglob("*.jsonl"))


@pytest.mark.parametrize(
    "entry",
    [
        {"kind": 1, "k": ["requests", 10**12], "v": {}},
        {"kind": 2, "k": ["requests"], "v": [], "i": 10**12},
        {"kind": 3, "k": ["requests", 4], "v": None},
    ],
)
def test_an_entry_past_the_end_of_an_array_is_one_verdict_not_a_huge_array(
    tmp_path: Path, entry: dict[str, Any]
) -> None:
    src = copy_tree(TREE / LOG, tmp_path / "chatSessions" / LOG.name)
    lines = src.read_bytes().splitlines(keepends=True)
    src.write_bytes(b"".join(lines) + json.dumps(entry).encode() + b"\n" + lines[-1])
    age([src])
    report = import_file("copilot-vscode", src, tmp_path / "root")
    assert report.status == "error" and report.error is not None
    assert f"line {len(lines) + 1}:" in report.error
    assert "past the end" in report.error or "is not an index of an array of 3" in report.error
    assert "\n" not in report.error


def test_sets_that_nest_the_session_past_the_depth_limit_are_one_verdict(tmp_path: Path) -> None:
    src = tmp_path / "chatSessions" / "0bad5eed-0000-4000-8000-000000000009.jsonl"
    src.parent.mkdir()
    request = {"requestId": "r", "message": {"text": "hi"}, "x": nested(400)}
    deep = ["requests", 0, "x", *[0] * 399]
    entries = [
        {"kind": 0, "v": {"version": 3, "sessionId": src.stem, "requests": [request]}},
        {"kind": 1, "k": deep, "v": nested(400)},  # each line nests about 400 levels
        {"kind": 1, "k": [*deep, *[0] * 399], "v": nested(400)},
    ]
    _write_log(src, entries)
    report = import_file("copilot-vscode", src, tmp_path / "root")
    assert report.status == "error" and report.error is not None
    assert "deeper than 512 levels" in report.error and "\n" not in report.error


def _entries(src: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_a_grown_log_adds_only_its_new_request(tmp_path: Path) -> None:
    src, session = _import(tmp_path)
    before = len(list(jsonltape.read(session)))
    entries = _entries(src)
    n = len(_doc(src)["requests"])
    new = {
        "requestId": "request_new", "timestamp": 1785700300000, "message": {"text": "thanks"},
        "response": [{"value": "Welcome."}], "modelState": {"value": 1},
    }  # fmt: skip
    _write_log(src, [*entries, {"kind": 2, "k": ["requests"], "v": [new]}])
    again = import_file("copilot-vscode", src, tmp_path / "root")
    assert again.status == "imported" and again.problems == []
    written = list(jsonltape.read(session))[before:]
    assert not any(e.type == "surface/retract" for e in written)
    assert [e.data["message"]["id"] for e in written if "message" in e.data] == [
        "request_new",
        "request_new-response",
    ]
    fresh = imported(import_file("copilot-vscode", src, tmp_path / "fresh"))
    assert bodies(session) == bodies(fresh)
    assert _rebuilt(session) == _doc(src)
    assert len(_doc(src)["requests"]) == n + 1


def test_a_log_vs_code_compacted_into_one_initial_entry_is_unchanged(tmp_path: Path) -> None:
    src, session = _import(tmp_path)
    doc = _doc(src)
    _write_log(src, [{"kind": 0, "v": doc}], seconds=7000)
    again = import_file("copilot-vscode", src, tmp_path / "root")
    assert again.status in ("imported", "unchanged") and again.problems == []
    assert again.events <= 2  # at most its import/sync marker and flush: nothing re-read
    assert not any(e.type == "surface/retract" for e in jsonltape.read(session))
    assert _rebuilt(session) == doc


def test_a_rewritten_request_retracts_what_followed_it(tmp_path: Path) -> None:
    src, session = _import(tmp_path)
    entries = _entries(src)
    new = _request(7, "and push it", "Pushed.")
    _write_log(src, [*entries, {"kind": 2, "k": ["requests"], "v": [new]}], seconds=7100)
    assert import_file("copilot-vscode", src, tmp_path / "root").status == "imported"
    # the last request's prompt edited and run again (VS Code sets the request anew)
    again = {**new, "message": {"text": "push it to origin"}, "response": [{"value": "Done."}]}
    _write_log(src, [*entries, {"kind": 2, "k": ["requests"], "v": [again], "i": 3}])
    report = import_file("copilot-vscode", src, tmp_path / "root")
    assert report.status == "imported" and report.problems == []
    events = list(jsonltape.read(session))
    assert [e.data["reason"] for e in events if e.type == "surface/retract"] == ["rewritten"]
    fresh = imported(import_file("copilot-vscode", src, tmp_path / "fresh"))
    assert bodies(session) == bodies(fresh)
    assert surface(session)[-2:] == [("user", "push it to origin"), ("assistant", "Done.")]
    assert _rebuilt(session) == _doc(src)
    assert problems(session) == []
    assert import_file("copilot-vscode", src, tmp_path / "root").status == "unchanged"


def test_a_rewrite_before_a_compaction_that_summarized_it_is_one_verdict(tmp_path: Path) -> None:
    src, session = _import(tmp_path)
    before = session.read_bytes()
    entries = _entries(src)
    # request 1 edited: request 2's summary (of request 0's round) came after it
    _write_log(
        src, [*entries, {"kind": 1, "k": ["requests", 1, "message"], "v": {"text": "lint it"}}]
    )
    report = import_file("copilot-vscode", src, tmp_path / "root")
    assert report.status == "error" and report.error is not None
    assert "before a compaction" in report.error and "\n" not in report.error
    assert session.read_bytes() == before  # nothing written
    done = cli("import", "--from", "copilot-vscode", str(src), "-o", str(tmp_path / "root"))
    one_verdict(done, str(src), "before a compaction")
    fresh = imported(import_file("copilot-vscode", src, tmp_path / "fresh"))
    assert ("user", "lint it") in surface(fresh)


def _request(i: int, text: str, reply: str) -> dict[str, Any]:
    return {
        "requestId": f"request_{i}",
        "timestamp": 1785700000000 + i,
        "message": {"text": text},
        "response": [{"value": reply}] if reply else [],
        "modelState": {"value": 1},
        "result": {"metadata": {"promptTokens": 10 + i, "outputTokens": 1}},
        "responseId": f"response_{i}",
    }


@st.composite
def _versions(draw: st.DrawFn) -> list[tuple[str, list[dict[str, Any]]]]:
    """What a session goes through as VS Code saves it: (how it is written, its requests)."""
    requests: list[dict[str, Any]] = []
    out = []
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["grow", "grow", "cut", "edit"]))
        if op == "cut" and requests:
            requests = requests[: draw(st.integers(0, len(requests) - 1))]
        elif op == "edit" and requests:
            requests = copy.deepcopy(requests)
            k = draw(st.integers(0, len(requests) - 1))
            requests[k]["message"]["text"] += " (edited)"
        for _ in range(draw(st.integers(0, 3))):
            i = draw(st.integers(0, 10**6))
            text = draw(st.sampled_from(["a", "fix it", "日本語", "x" * 40]))
            requests.append(_request(i, text, draw(st.sampled_from(["ok", "über", ""]))))
        out.append((draw(st.sampled_from(["log", "initial"])), copy.deepcopy(requests)))
    return out


@_settings
@given(versions=_versions())
def test_every_version_imports_as_a_fresh_import_of_it_would(
    tmp_path: Path, versions: list[tuple[str, list[dict[str, Any]]]]
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = work / "chatSessions" / "0bad5eed-0000-4000-8000-000000000001.jsonl"
    src.parent.mkdir(parents=True)
    base = {"version": 3, "sessionId": src.stem, "creationDate": 1785700000000, "requests": []}
    entries: list[dict[str, Any]] = [{"kind": 0, "v": base}]
    written: list[dict[str, Any]] = []
    for k, (how, requests) in enumerate(versions):
        if how == "initial":  # VS Code compacts its log into one initial entry
            entries = [{"kind": 0, "v": {**base, "requests": requests}}]
        else:  # ObjectMutationLog.write: push what is new, from the first request that changed
            same = 0
            while same < min(len(written), len(requests)) and written[same] == requests[same]:
                same += 1
            entries.append({"kind": 2, "k": ["requests"], "v": requests[same:], "i": same})
        written = requests
        _write_log(src, entries, seconds=7200 - k)  # a new change time each save
        doc = {**base, "requests": requests}
        assert replay(src) == doc
        report = import_file("copilot-vscode", src, work / "root")
        assert report.status in ("imported", "unchanged"), report.error
        assert report.problems == []
        fresh = import_file("copilot-vscode", src, work / f"fresh{k}")
        assert fresh.status == "imported", fresh.error
        assert bodies(report.sessions[0]) == bodies(fresh.sessions[0])
        assert _rebuilt(Path(report.sessions[0])) == doc


# -- bad input -------------------------------------------------------------------------------------


def test_a_log_cut_at_every_byte_imports_what_it_holds_or_is_one_verdict(tmp_path: Path) -> None:
    data = (TREE / SMALL_LOG).read_bytes()
    for cut in range(len(data) + 1):
        work = tmp_path / str(cut)
        src = work / "chatSessions" / SMALL_LOG.name
        src.parent.mkdir(parents=True)
        src.write_bytes(data[:cut])
        age([src])
        report = import_file("copilot-vscode", src, work / "root")
        if report.status == "error":
            assert report.error is not None and "\n" not in report.error, cut
            assert str(src) in report.error, cut
            assert not (work / "root").exists() or not any((work / "root").rglob("*.jsonl"))
            continue
        assert report.status == "imported", (cut, report.status)
        for session in report.sessions:
            assert jsonltape.verify(session).state == "clean"
            assert _rebuilt(Path(session)) == replay(src)


@_settings
@given(cut=st.integers(min_value=0))
def test_a_flat_session_caught_mid_save_is_one_verdict_and_writes_nothing(
    tmp_path: Path, cut: int
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = copy_tree(TREE / FLAT, work / "chatSessions" / FLAT.name)
    data = src.read_bytes()
    src.write_bytes(data[: cut % len(data)])
    age([src])
    report = import_file("copilot-vscode", src, work / "root")
    assert report.status == "error" and report.error is not None
    assert str(src) in report.error and "\n" not in report.error
    assert not (work / "root").exists() or not any((work / "root").rglob("*.jsonl"))


def test_the_cli_refuses_a_broken_log_in_one_line(tmp_path: Path) -> None:
    src = copy_tree(TREE / LOG, tmp_path / "chatSessions" / LOG.name)
    src.write_bytes(b'{"kind":1,"k":["requests"],"v":[]}\n')
    done = cli("import", "--from", "copilot-vscode", str(src), "-o", str(tmp_path / "root"))
    one_verdict(done, str(src), "line 1", "VS Code chat session")
    assert not (tmp_path / "root" / "copilot-vscode").exists()


_META = st.dictionaries(
    st.sampled_from(
        ["toolCallRounds", "toolCallResults", "renderedUserMessage", "promptTokens",
         "outputTokens", "summaries", "summary", "resolvedModel", "maxToolCallsExceeded"]
    ),
    JSON,
    max_size=5,
)  # fmt: skip


@_settings
@given(
    requests=st.lists(
        st.fixed_dictionaries(
            {"requestId": st.text(max_size=4) | st.integers()},
            optional={
                "message": JSON,
                "response": JSON,
                "result": st.fixed_dictionaries({}, optional={"metadata": _META,
                                                              "errorDetails": JSON}),
                "modelState": JSON,
                "isCanceled": JSON,
                "timestamp": JSON,
                "agent": JSON,
                "modelId": JSON,
            },
        ),
        max_size=6,
    ),
    ops=st.lists(st.fixed_dictionaries({"kind": JSON, "k": JSON}, optional={"v": JSON,
                                                                            "i": JSON}),
                 max_size=4),
    deep=st.integers(0, 700),
)  # fmt: skip
def test_requests_and_log_entries_of_any_shape_never_break_the_import(
    tmp_path: Path, requests: list[dict[str, Any]], ops: list[dict[str, Any]], deep: int
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = work / "chatSessions" / "0bad5eed-0000-4000-8000-000000000002.jsonl"
    src.parent.mkdir(parents=True)
    listed: list[Any] = list(requests)
    if deep:
        listed.append({"requestId": "deep", "message": {"text": "deep"}, "response": nested(deep)})
    head = {"version": 3, "sessionId": src.stem, "requests": listed}
    _write_log(src, [{"kind": 0, "v": head}, *ops])
    survives("copilot-vscode", src, work / "root")


# -- the read-only scan and the index --------------------------------------------------------------


def test_the_read_only_scan_gives_the_imported_events(tmp_path: Path) -> None:
    tree = copy_tree(TREE, tmp_path / "User")
    report = next(
        r for r in import_paths("copilot-vscode", [tree], tmp_path / "root") if LOG.name in r.path
    )
    scan_matches_import("copilot-vscode", tree / LOG, report)


def test_sync_source_indexes_vs_code_chat_sessions_in_place(tmp_path: Path) -> None:
    tree = copy_tree(TREE, tmp_path / "Code" / "User")
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"JSONLTAPE_HOME": str(tmp_path / "home")}
    index = str(tmp_path / "index.db")
    done = cli("sync", str(empty), "--index", index, "--source", f"copilot-vscode:{tree}", env=env)
    assert done.returncode == 0, done.stderr
    listed = cli("sessions", "--index", index, "--json", env=env)
    found = sorted(Path(json.loads(x)["path"]).name for x in listed.stdout.splitlines())
    assert found == sorted(p.name for p in ALL)  # not workspace.json
    hits = cli("search", "--index", index, "flaky", "--json", env=env)
    assert hits.returncode == 0 and "c0de0001" in hits.stdout
