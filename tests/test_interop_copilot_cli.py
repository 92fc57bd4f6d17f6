"""GitHub Copilot CLI event logs (``~/.copilot/session-state/<id>/events.jsonl``, issue 32):
imported from the public event schema (github/copilot-sdk @ cc0438d66e3e,
nodejs/src/generated/session-events.ts), byte-exact, incremental, rewound logs re-imported.

The fixtures (tests/fixtures/interop/copilot-cli, PROVENANCE.md) are built from that schema;
make_session.py writes the larger one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape.interop import discover, import_file, import_paths, session_id_for
from jsonltape.interop._rewrite import document
from jsonltape.interop.copilot_cli import title_of
from jsonltape.interop.foreign import scan_file

from ._importers import (
    FIXTURES,
    JSON,
    age,
    bodies,
    cli,
    copy_tree,
    imported,
    one_verdict,
    problems,
    raws,
    scan_matches_import,
    surface,
)

TREE = FIXTURES / "copilot-cli" / "built-from-schema" / "session-state"
SMALL = "381474ec-0000-4000-8000-000000000001"
RICH = "5e1f0c2a-0000-4000-8000-0000000000c2"
_settings = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _tree(tmp: Path, *, seconds: float | None = 7200) -> Path:
    return copy_tree(TREE, tmp / ".copilot" / "session-state", seconds=seconds)


def _import(tmp: Path, sid: str = RICH) -> tuple[Path, list[Path]]:
    tree = _tree(tmp)
    src = tree / sid / "events.jsonl"
    report = import_file("copilot-cli", src, tmp / "root")
    imported(report)
    return src, [Path(s) for s in report.sessions]


def _events(path: Path) -> list[jsonltape.Event]:
    return list(jsonltape.read(path))


# -- the mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sid", [SMALL, RICH])
def test_every_session_folds_to_bodies_a_provider_accepts(tmp_path: Path, sid: str) -> None:
    _src, sessions = _import(tmp_path, sid)
    for session in sessions:
        assert problems(session) == [], session
        assert jsonltape.verify(session).state == "clean"


def test_the_header_comes_from_session_start_and_the_title_from_workspace_yaml(
    tmp_path: Path,
) -> None:
    _src, (main, side) = _import(tmp_path)
    head = jsonltape.reader.header(main)
    assert head.id == f"copilot-cli-{RICH}"
    assert head.title == "Login test: why it's red"
    assert head.cwd == "/home/u/app"
    assert head.agent == "copilot-cli/1.0.78"
    assert head.created == 1_781_900_000_000
    info = head.meta["import"]
    assert info["session"] == RICH and info["git"]["branch"] == "main"
    sub = jsonltape.reader.header(side)
    assert sub.id == f"copilot-cli-{RICH}.sidechain-agent-7"
    assert sub.parent is not None and sub.parent.session == head.id and sub.parent.seq == 0
    assert sub.meta["import"]["sidechain"] == "agent-7"


def test_a_workspace_yaml_that_is_a_symlink_or_a_fifo_is_not_read(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    secret = tmp_path / "elsewhere.yaml"
    secret.write_text("name: read through a link\n", encoding="utf-8")
    yaml = tree / RICH / "workspace.yaml"
    yaml.unlink()
    yaml.symlink_to(secret)
    assert title_of(tree / RICH / "events.jsonl") is None
    yaml.unlink()
    os.mkfifo(yaml)  # no writer: an open that waits for one would hang the import
    assert title_of(tree / RICH / "events.jsonl") is None
    report = import_file("copilot-cli", tree / RICH / "events.jsonl", tmp_path / "root")
    head = jsonltape.reader.header(imported(report))
    assert head.title != "read through a link" and head.title  # the first prompt instead


def test_the_history_is_what_the_cli_sent_the_model(tmp_path: Path) -> None:
    _src, (main, side) = _import(tmp_path)
    events = _events(main)
    prompt = next(e for e in events if e.type == "user/message")
    text, image = prompt.data["message"]["parts"]
    assert text["content"].startswith("<current_datetime>")  # transformedContent
    assert image["type"] == "blob" and image["mime_type"] == "image/png"  # its binary asset
    replies = [e.data for e in events if e.type == "assistant/message"]
    first = replies[0]
    assert [p["type"] for p in first["message"]["parts"]] == [
        "reasoning",
        "text",
        "tool_call",
        "tool_call",
    ]
    assert first["message"]["parts"][0]["content"] == "Run the test first."
    assert first["import"]["request_id"] == "req-1" and first["model"] == "claude-sonnet-4.6"
    # the two chunks of one model call are one message; its usage is the call's last count
    chunked = replies[1]
    assert chunked["message"]["id"] == "resp-2"
    assert chunked["import"]["ids"] == ["msg-2", "msg-3"]
    assert chunked["usage"] == {"output_tokens": 25}
    assert chunked["message"]["parts"][0] == {
        "type": "reasoning",
        "content": "Delegate the database check.",
    }
    results = {
        e.data["call_id"]: e.data["message"]["parts"][0] for e in events if e.type == "tool/result"
    }
    assert results["toolu_b"] == {
        "type": "tool_call_response",
        "id": "toolu_b",
        "response": "file not found",
        "is_error": True,
    }
    # the steering message follows the results of the calls it interrupted
    order = [
        (e.type, e.data.get("call_id") or e.data["message"]["parts"][0].get("content"))
        for e in events
        if e.type in ("user/message", "tool/result")
    ]
    assert order[1:4] == [
        ("tool/result", "toolu_a"),
        ("tool/result", "toolu_b"),
        ("user/message", "it uses the staging db"),
    ]
    ends = [e.data["reason"] for e in events if e.type == "turn/end"]
    assert "aborted" in ends
    # the compaction replaced everything before it with the summary
    assert surface(main)[:3] == [
        ("system", "You are the GitHub Copilot CLI."),
        ("user", "The login test fails with a 500: the staging users table lacks last_login."),
        ("user", "write the migration"),
    ]
    assert bodies(main)[0]["model"] == "gpt-5.4"
    # the sub-agent's own history is its session's
    assert surface(side) == [
        ("user", "check the staging db schema"),
        ("assistant", None),
        ("tool", "users(id, email)"),
        ("assistant", "The users table lacks `last_login`."),
    ]


def test_yaml_titles_plain_quoted_and_escaped(tmp_path: Path) -> None:
    d = tmp_path / "s"
    d.mkdir()
    log = d / "events.jsonl"
    for text, title in [
        ("name: Fix the build\n", "Fix the build"),
        ('name: "Fix \\"it\\" now"\n', 'Fix "it" now'),
        ("name: 'It''s red'\n", "It's red"),
        ("name: plain # a comment\n", "plain"),
        ("name: |\n  block\n", None),
        ("id: x\n", None),
    ]:
        (d / "workspace.yaml").write_text(text, encoding="utf-8")
        assert title_of(log) == title, text


# -- layout ----------------------------------------------------------------------------------------


def test_the_early_flat_layout_is_read_and_the_directory_wins(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    flat = tree / f"{SMALL}.jsonl"
    shutil.copyfile(tree / SMALL / "events.jsonl", flat)
    other = "0f0f0f0f-0000-4000-8000-000000000009"
    shutil.copyfile(tree / SMALL / "events.jsonl", tree / f"{other}.jsonl")
    legacy = tmp_path / ".copilot" / "history-session-state" / "old.jsonl"
    legacy.parent.mkdir()
    legacy.write_text("{}\n")
    items, skipped = discover("copilot-cli", [tmp_path / ".copilot"])
    assert sorted(str(Path(str(i)).relative_to(tree)) for i in items) == sorted(
        [f"{SMALL}/events.jsonl", f"{RICH}/events.jsonl", f"{other}.jsonl"]
    )
    assert sorted((p.name, "imported" in why or "not read" in why) for p, why in skipped) == [
        (f"{SMALL}.jsonl", True),
        ("old.jsonl", True),
    ]
    assert session_id_for("copilot-cli", tree / SMALL / "events.jsonl") == f"copilot-cli-{SMALL}"
    assert session_id_for("copilot-cli", tree / f"{other}.jsonl") == f"copilot-cli-{other}"


def test_a_log_given_by_a_bare_relative_name_is_the_session_its_full_path_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `jsonltape import --from copilot-cli events.jsonl` from the session's folder: the id
    # came from the name of the path's parent, empty for a bare name (and not for the full
    # path an import worker is given), so one log made two sessions
    tree = _tree(tmp_path)
    whole = import_file("copilot-cli", tree / SMALL / "events.jsonl", tmp_path / "whole")
    monkeypatch.chdir(tree / SMALL)
    bare = import_file("copilot-cli", Path("events.jsonl"), tmp_path / "bare")
    imported(whole)
    imported(bare)
    assert [Path(s).name for s in bare.sessions] == [Path(s).name for s in whole.sessions]
    assert session_id_for("copilot-cli", Path("events.jsonl")) == f"copilot-cli-{SMALL}"
    flat = tree / f"{RICH}.jsonl"  # the early layout, by its bare name from its folder
    shutil.move(tree / RICH / "events.jsonl", flat)
    monkeypatch.chdir(tree)
    items, skipped = discover("copilot-cli", [Path(flat.name)])
    assert (items, skipped) == ([Path(flat.name)], [])
    # walked from inside the folder: its files' folder is "session-state" all the same
    items, _ = discover("copilot-cli", [Path(".")])
    assert Path(flat.name) in items


# -- byte-exact, incremental, rewound ----------------------------------------------------------


@pytest.mark.parametrize("sid", [SMALL, RICH])
def test_the_log_is_rebuilt_byte_for_byte(tmp_path: Path, sid: str) -> None:
    src, sessions = _import(tmp_path, sid)
    kept = raws(sessions)
    assert "".join(kept[n] + "\n" for n in sorted(kept)).encode() == src.read_bytes()


def test_every_cut_of_a_log_scans_without_error_and_holds_back_its_torn_line(
    tmp_path: Path,
) -> None:
    data = (TREE / SMALL / "events.jsonl").read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    d = tmp_path / SMALL
    d.mkdir()
    src = d / "events.jsonl"
    for cut in range(1, len(data) + 1):
        src.write_bytes(data[:cut])
        scan = scan_file("copilot-cli", src)
        list(scan.events())
        complete = sum(1 for e in ends if e <= cut)
        partial = cut not in ends
        assert scan.report.lines == complete + (
            1 if partial and data[:cut].rstrip().endswith(b"}") and _is_object(data, cut) else 0
        ), cut
        assert scan.report.problems == []


def _is_object(data: bytes, cut: int) -> bool:
    start = data.rfind(b"\n", 0, cut) + 1
    try:
        return isinstance(json.loads(data[start:cut]), dict)
    except ValueError:
        return False


@_settings
@given(cuts=st.lists(st.integers(min_value=1), min_size=1, max_size=3))
def test_a_growing_log_imports_as_a_fresh_import_of_it_would(
    tmp_path: Path, cuts: list[int]
) -> None:
    work = tmp_path / os.urandom(4).hex()
    data = (TREE / RICH / "events.jsonl").read_bytes()
    src = work / RICH / "events.jsonl"
    src.parent.mkdir(parents=True)
    shutil.copyfile(TREE / RICH / "workspace.yaml", src.parent / "workspace.yaml")
    steps = sorted(c % len(data) + 1 for c in cuts) + [len(data)]
    for k, cut in enumerate(steps):
        src.write_bytes(data[:cut])
        age([src], 7200 - k)
        last = k == len(steps) - 1  # the CLI is still writing it until the last step
        report = import_file("copilot-cli", src, work / "root", settle=3600 if last else None)
        assert report.status in ("imported", "unchanged", "empty"), report.error
    fresh = import_file("copilot-cli", src, work / "fresh")
    for a, b in zip(report.sessions, fresh.sessions, strict=True):
        assert bodies(a) == bodies(b)


def test_a_rewound_log_is_reimported_from_the_prompt_it_goes_back_to(tmp_path: Path) -> None:
    src, (main, _side) = _import(tmp_path)
    lines = src.read_bytes().splitlines(keepends=True)
    prompts = [
        k
        for k, line in enumerate(lines)
        if b'"type":"user.message"' in line and b"agentId" not in line and b"steering" not in line
    ]
    cut = prompts[1]  # /rewind to the second prompt, then a new one
    new = [
        {"type": "user.message", "data": {"content": "skip the migration"},
         "id": "00000000-0000-4000-8000-00000000f001", "timestamp": "2026-06-21T10:00:00.000Z",
         "parentId": None},
        {"type": "assistant.message", "data": {"messageId": "m-f", "content": "Skipped.",
         "apiCallId": "resp-f", "outputTokens": 2},
         "id": "00000000-0000-4000-8000-00000000f002", "timestamp": "2026-06-21T10:00:01.000Z",
         "parentId": None},
    ]  # fmt: skip
    src.write_bytes(b"".join(lines[:cut]) + b"".join(json.dumps(e).encode() + b"\n" for e in new))
    age([src])
    again = import_file("copilot-cli", src, tmp_path / "root")
    assert again.status == "imported" and again.problems == [], again.error
    fresh = import_file("copilot-cli", src, tmp_path / "fresh")
    assert bodies(main) == bodies(fresh.sessions[0])
    assert surface(main)[-2:] == [("user", "skip the migration"), ("assistant", "Skipped.")]
    assert any(
        e.type == "surface/retract" and e.data["reason"] == "rewritten" for e in _events(main)
    )
    marker = [e.data for e in _events(main) if e.type == "import/sync"][-1]
    kept = raws(Path(s) for s in again.sessions)
    rebuilt = document(
        [kept[n].encode() for n in range(1, marker["lines"] + 1)],
        [tuple(p) for p in marker["rewrites"]],
    )
    assert b"".join(r + b"\n" for r in rebuilt) == src.read_bytes()
    assert import_file("copilot-cli", src, tmp_path / "root").status == "unchanged"


_LINES = (TREE / RICH / "events.jsonl").read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("cut", [k for k, line in enumerate(_LINES) if b'"user.message"' in line])
def test_a_log_rewound_to_any_prompt_imports_as_fresh_or_is_refused_before_its_compaction(
    tmp_path: Path, cut: int
) -> None:
    """``/rewind`` to any prompt: imported as a fresh import of the rewound log would be, or,
    when the log's compaction summarized messages the rewound log keeps (the summary replaced
    them, and a retraction cannot bring them back), refused in one line with nothing written.
    To the prompts after the first one it imported the log retracting the summary, and with it
    the messages the rewound log keeps."""
    src, sessions = _import(tmp_path)
    compaction = next(k for k, x in enumerate(_LINES) if b"session.compaction_complete" in x)
    again_prompt = {"type": "user.message", "data": {"content": "again"},
                    "id": "00000000-0000-4000-8000-00000000f001",
                    "timestamp": "2026-06-21T10:00:00.000Z", "parentId": None}  # fmt: skip
    src.write_bytes(b"".join(_LINES[:cut]) + json.dumps(again_prompt).encode() + b"\n")
    age([src], 7000)
    before = [s.read_bytes() for s in sessions]
    again = import_file("copilot-cli", src, tmp_path / "root")
    if again.status == "error":
        assert again.error is not None and cut < compaction
        assert "before a compaction that summarized" in again.error and "\n" not in again.error
        assert [s.read_bytes() for s in sessions] == before
        return
    assert again.status == "imported" and again.problems == [], again.error
    fresh = import_file("copilot-cli", src, tmp_path / "fresh")
    mine = {Path(s).name: s for s in again.sessions}  # a sub-agent the rewind dropped stays
    for b in fresh.sessions:
        assert bodies(mine[Path(b).name]) == bodies(b)


# -- bad input ------------------------------------------------------------------------------------

_TYPES = st.sampled_from(
    ["session.start", "user.message", "assistant.message", "assistant.reasoning",
     "tool.execution_complete", "abort", "session.compaction_start",
     "session.compaction_complete", "session.context_cleared", "system.message",
     "session.model_change", "session.binary_asset", "x.unknown"]
)  # fmt: skip


@_settings
@given(
    lines=st.lists(
        st.fixed_dictionaries(
            {"type": _TYPES, "data": st.dictionaries(st.sampled_from(
                ["content", "toolRequests", "toolCallId", "messageId", "apiCallId", "success",
                 "result", "error", "summaryContent", "role", "attachments", "delivery",
                 "outputTokens", "assetId", "data", "newModel", "context", "reasoningText"]),
                JSON, max_size=5)},
            optional={"agentId": JSON, "timestamp": JSON},
        ),
        max_size=12,
    )
)  # fmt: skip
def test_events_of_any_shape_never_break_the_import(
    tmp_path: Path, lines: list[dict[str, Any]]
) -> None:
    work = tmp_path / os.urandom(4).hex()
    src = work / RICH / "events.jsonl"
    src.parent.mkdir(parents=True)
    head = (TREE / SMALL / "events.jsonl").read_bytes().splitlines(keepends=True)[0]
    src.write_bytes(head + b"".join(json.dumps(v).encode() + b"\n" for v in lines))
    age([src])
    report = import_file("copilot-cli", src, work / "root")
    assert report.status == "imported", report.error
    for _n, why in report.problems:
        assert "\n" not in why
    for session in report.sessions:
        assert jsonltape.verify(session).state == "clean"


def test_a_file_of_another_agent_is_one_verdict(tmp_path: Path) -> None:
    src = tmp_path / "x" / "events.jsonl"
    src.parent.mkdir()
    src.write_text('{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{}}\n')
    done = cli("import", "--from", "copilot-cli", str(src), "-o", str(tmp_path / "root"))
    one_verdict(done, str(src), "Codex")


# -- the read-only scan and the index ---------------------------------------------------------


def test_the_read_only_scan_gives_the_imported_events(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    src = tree / RICH / "events.jsonl"
    report = next(r for r in import_paths("copilot-cli", [src], tmp_path / "root"))
    scan_matches_import("copilot-cli", src, report)


def test_sync_source_indexes_the_logs_and_their_sub_agents_in_place(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {"JSONLTAPE_HOME": str(tmp_path / "home")}
    index = str(tmp_path / "index.db")
    done = cli("sync", str(empty), "--index", index, "--source", f"copilot-cli:{tree}", env=env)
    assert done.returncode == 0, done.stderr
    listed = [
        json.loads(x)
        for x in cli("sessions", "--index", index, "--json", env=env).stdout.splitlines()
    ]
    ids = sorted(s["session"] for s in listed)
    assert ids == sorted(
        [f"copilot-cli-{SMALL}", f"copilot-cli-{RICH}", f"copilot-cli-{RICH}.sidechain-agent-7"]
    )
    titles = {s["session"]: s.get("title") for s in listed}
    assert titles[f"copilot-cli-{RICH}"] == "Login test: why it's red"
