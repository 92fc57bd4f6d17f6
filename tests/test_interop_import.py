"""Import of real Claude Code, Codex and pi sessions (../shared/samples) and crafted edge cases.

The samples are copied into tmp dirs (never touched in place); expectations are computed from
the source lines with the json module and checked against what the import wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.interop import FileReport, import_file, kept_lines

from ._importers import kept_whole
from .conftest import SAMPLES

FIXTURES = Path(__file__).parent / "fixtures" / "interop"
SOURCE_OF = {
    "claude-code-v1.0.98-init.jsonl": "claude-code",
    "claude-code-v1.0.108-japanese.jsonl": "claude-code",
    "codex-0.104-rollout-unfinished-turn.jsonl": "codex",
    "codex-0.104-rollout-complete.jsonl": "codex",
    "pi-v1-legacy-large-session.jsonl": "pi",
}
CRAFTED = {
    "claude-rewind-compact.jsonl": "claude-code",
    "codex-compacted.jsonl": "codex",
    "pi-v3-tree.jsonl": "pi",
}
HOUR_AGO = time.time() - 7200


def copy(name: str, dest: Path, *, finished: bool = True) -> Path:
    """A copy of a sample (or crafted fixture), last modified two hours ago if ``finished``."""
    src = SAMPLES / name if (SAMPLES / name).exists() else FIXTURES / name
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / name
    shutil.copyfile(src, out)
    if finished:
        os.utime(out, (HOUR_AGO, HOUR_AGO))
    return out


def source_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def imported(report: FileReport) -> Path:
    assert report.status == "imported", report.error
    return Path(report.sessions[0])


def current(path: Path) -> list[dict[str, Any]]:
    return list(fold.messages(path)["messages"])


def events(path: Path) -> list[jsonltape.Event]:
    return list(jsonltape.read(path))


def roles(items: list[dict[str, Any]]) -> Counter[str]:
    return Counter(i["message"]["role"] for i in items)


def assert_paired(items: list[dict[str, Any]]) -> None:
    """Every tool call on the surface has exactly one result after it, and vice versa."""
    calls = [p["id"] for i in items for p in i["message"]["parts"] if p["type"] == "tool_call"]
    results = [i["call_id"] for i in items if i["type"] == "tool/result"]
    assert sorted(calls) == sorted(results)
    assert len(set(calls)) == len(calls)


# -- nothing is lost -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SOURCE_OF) + sorted(CRAFTED))
def test_every_source_line_is_kept_verbatim_exactly_once(tmp_path: Path, name: str) -> None:
    source = {**SOURCE_OF, **CRAFTED}[name]
    src = copy(name, tmp_path / "src")
    report = import_file(source, src, tmp_path / "root")
    assert report.status == "imported", report.error
    raw: dict[int, str] = {}
    for session in report.sessions:
        assert jsonltape.verify(session).state == "clean"
        for e in jsonltape.read(session):
            for n, text in kept_whole(e.data.get("import", {}).get("raw")):
                assert n not in raw, f"line {n} carried twice"
                raw[n] = text
    data = src.read_bytes()
    assert sorted(raw) == list(range(1, data.count(b"\n") + 1))
    rebuilt = "".join(raw[n] + "\n" for n in sorted(raw)).encode("utf-8")
    assert rebuilt == data  # byte-exact, Japanese and all


# -- Claude Code ------------------------------------------------------------------------------


def test_claude_code_split_lines_merge_into_one_message_with_usage_counted_once(
    tmp_path: Path,
) -> None:
    src = copy("claude-code-v1.0.98-init.jsonl", tmp_path / "src")
    path = imported(import_file("claude-code", src, tmp_path / "root"))
    lines = source_lines(src)
    last_usage: dict[str, int] = {}
    for d in lines:
        if d["type"] == "assistant":
            last_usage[d["message"]["id"]] = d["message"]["usage"]["output_tokens"]
    assert len(lines) == 29 and len(last_usage) == 7
    items = current(path)
    assert roles(items) == {"user": 2, "assistant": 7, "tool": 12}
    assistants = [i for i in items if i["type"] == "assistant/message"]
    assert [i["message"]["id"] for i in assistants] == list(last_usage)
    usage = {
        e.data["message"]["id"]: e.data["usage"]["output_tokens"]
        for e in events(path)
        if e.type == "assistant/message"
    }
    assert usage == last_usage  # the last (complete) line's usage, once per message
    assert sum(usage.values()) == 953
    # the five tool_use lines of msg_018mu4at... are one message with five calls
    five = next(i for i in assistants if i["message"]["id"] == "msg_018mu4atNCkxSiLt7VVQquTL")
    assert [p["type"] for p in five["message"]["parts"]] == ["tool_call"] * 5
    assert_paired(items)
    calls = [e for e in events(path) if e.type == "tool/call"]
    assert len(calls) == 12
    assert all(e.data["turn"] == calls[0].data["turn"] for e in calls)


def test_claude_code_japanese_text_survives_byte_exact_and_sidechains_become_forks(
    tmp_path: Path,
) -> None:
    src = copy("claude-code-v1.0.108-japanese.jsonl", tmp_path / "src")
    report = import_file("claude-code", src, tmp_path / "root")
    path = imported(report)
    lines = source_lines(src)
    final = lines[-1]["message"]["content"][0]["text"]
    assert "CLAUDE.mdファイルを最新の状態にアップデートしました" in final
    items = current(path)
    assert items[-1]["message"]["parts"][0]["content"] == final
    assert "を最新の状態にアップデートしてください" in items[0]["message"]["parts"][0]["content"]
    assert (
        jsonltape.header(path).title
        == "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください"
    )
    main_lines = [d for d in lines if not d.get("isSidechain")]
    assert roles(items) == {
        "user": 2,
        "assistant": len({d["message"]["id"] for d in main_lines if d["type"] == "assistant"}),
        "tool": 13,
    }
    assert_paired(items)
    # two Task sub-agents ran as sidechains: one session each, not replayed into the main one
    sides = [Path(s) for s in report.sessions[1:]]
    assert len(sides) == 2
    main_text = json.dumps(items, ensure_ascii=False)
    task_calls = {
        p["arguments"].get("prompt"): p["id"]
        for i in items
        for p in i["message"]["parts"]
        if p["type"] == "tool_call" and p["name"] == "Task"
    }
    for side in sides:
        header = jsonltape.header(side)
        assert header.parent is not None and header.parent.seq == 0
        assert header.parent.session == jsonltape.header(path).id
        side_items = current(side)  # folds through the parent reference, inheriting nothing
        assert side_items[0]["type"] == "user/message" and "session" not in side_items[0]
        prompt = side_items[0]["message"]["parts"][0]["content"]
        assert header.meta is not None
        assert header.meta["import"]["spawned_by"] == task_calls[prompt]
        assert_paired(side_items)
        for i in side_items:
            if i["type"] == "assistant/message":
                assert i["message"]["id"] not in main_text
    side_lines = sum(len(current(s)) for s in sides)
    assert side_lines == 20  # 2 prompts, 10 replies, 8 results in 22 sidechain lines


def test_claude_code_rewind_retracts_the_abandoned_branch_and_compaction_maps(
    tmp_path: Path,
) -> None:
    src = copy("claude-rewind-compact.jsonl", tmp_path / "src")
    report = import_file("claude-code", src, tmp_path / "root")
    path = imported(report)
    assert report.unknown == {"brand-new-line-type": 1}
    assert report.raw == {"summary": 1, "file-history-snapshot": 1, "brand-new-line-type": 1}
    everything = fold.messages(path, all_versions=True)["messages"]
    status = {i["message"]["id"]: i["status"] for i in everything}
    assert status["u6"] == status["msg_0003"] == "retracted"  # the branch left by the rewind
    assert status["u8"] == status["msg_0005"] == "compacted"
    summary, *rest = current(path)
    assert summary["message"]["id"] == "u13"
    assert summary["message"]["parts"][0]["content"].startswith("This session is being continued")
    ledger = summary["message"]["parts"][1]["content"]
    assert 'Modified: "migrations/0042.sql"' in ledger  # read then edited: modified
    [info] = [e.data for e in events(path) if e.type == "compaction/summary"]
    assert info["tokens"] == 4321 and info["ledger"] == {"modified": ["migrations/0042.sql"]}
    assert [i["message"]["id"] for i in rest] == ["u14", "msg_0006", "u16", "u17"]
    ends = [e.data["reason"] for e in events(path) if e.type == "turn/end"]
    assert ends == ["completed", "completed", "completed", "aborted"]
    assert jsonltape.header(path).title == "Fix the flaky migration test"


# -- Codex ------------------------------------------------------------------------------------


def test_codex_complete_rollout(tmp_path: Path) -> None:
    src = copy("codex-0.104-rollout-complete.jsonl", tmp_path / "src")
    report = import_file("codex", src, tmp_path / "root")
    path = imported(report)
    lines = source_lines(src)
    items = [d["payload"] for d in lines if d["type"] == "response_item"]
    assert roles(current(path)) == {
        "system": sum(1 for p in items if p.get("role") == "developer"),
        "user": sum(1 for p in items if p.get("role") == "user"),
        "assistant": 6,  # reasoning + commentary + call (or final answer) per model response
        "tool": sum(1 for p in items if p["type"] == "function_call_output"),
    }
    assert roles(current(path)) == {"system": 4, "user": 3, "assistant": 6, "tool": 5}
    assert_paired(current(path))
    evs = events(path)
    usages = [e.data["usage"] for e in evs if e.type == "assistant/message"]
    # one token_count per response, not the repeated ones after each turn_context
    assert sum(u["output_tokens"] for u in usages) == 1123
    last = [d for d in lines if d["payload"].get("type") == "token_count"][-1]
    assert usages[-1] == last["payload"]["info"]["last_token_usage"]
    assert [e.data["reason"] for e in evs if e.type == "turn/end"] == ["completed"]
    header = [e.data for e in evs if e.type == "request/header"][-1]
    assert header["model"] == "gpt-5.3-codex" and header["provider"] == "openai"
    meta = jsonltape.header(path).meta
    assert meta is not None and meta["import"]["session"] == "019c8bfe-ec25-79e0-97d7-bda6a9c575ff"


def test_codex_interrupted_turn_ends_interrupted_and_repair_has_nothing_left(
    tmp_path: Path,
) -> None:
    src = copy("codex-0.104-rollout-unfinished-turn.jsonl", tmp_path / "src")
    report = import_file("codex", src, tmp_path / "root")
    path = imported(report)
    assert report.closed_turns and not report.open_turn
    result = jsonltape.repair(path)
    assert result.state_before == "clean" and result.closers == []
    evs = events(path)
    end = [e for e in evs if e.type == "turn/end"][-1]
    assert end.data["reason"] == "interrupted" and end.data["synthetic"] is True
    closer = [e for e in evs if e.type == "tool/result"][-1]
    assert closer.data["call_id"] == "call_UtYwHmwWekzvq83m8Rb9K8jJ"
    assert closer.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"  # the call was recorded
    call = next(e for e in evs if e.type == "tool/call")
    assert closer.sources == [call.seq]
    assert_paired(current(path))
    request = fold.messages(path, format="openai")
    assert request["messages"][-1]["role"] == "tool"  # a valid request: the call is answered


def test_codex_live_source_keeps_the_turn_open_until_it_is_finished(tmp_path: Path) -> None:
    src = copy("codex-0.104-rollout-unfinished-turn.jsonl", tmp_path / "src", finished=False)
    root = tmp_path / "root"
    report = import_file("codex", src, root)  # modified just now: maybe still running
    path = imported(report)
    assert report.open_turn and not report.closed_turns
    assert jsonltape.verify(path).state == "clean"  # open on purpose, not a crash
    assert import_file("codex", src, root).status == "unchanged"
    os.utime(src, (HOUR_AGO, HOUR_AGO))  # an hour later nothing came: it was interrupted
    again = import_file("codex", src, root)
    assert again.closed_turns and again.events == 3  # closer, turn/end, sync marker
    assert [e.data["reason"] for e in events(path) if e.type == "turn/end"] == ["interrupted"]
    assert import_file("codex", src, root).status == "unchanged"


def test_codex_compaction_and_aborted_turn(tmp_path: Path) -> None:
    src = copy("codex-compacted.jsonl", tmp_path / "src")
    path = imported(import_file("codex", src, tmp_path / "root"))
    items = current(path)
    assert items[0]["message"]["parts"][0]["content"].startswith("The user listed the migrations")
    assert [i["message"]["role"] for i in items] == ["user", "user", "assistant"]
    evs = events(path)
    assert [e.data["reason"] for e in evs if e.type == "turn/end"] == ["completed", "aborted"]
    apply = items[-1]["message"]["parts"][0]
    assert apply["name"] == "apply_patch" and apply["arguments"].startswith("*** Delete File")
    shell = next(e for e in evs if e.type == "tool/call")
    assert shell.data["arguments"] == {"command": ["ls", "migrations"]}  # JSON text decoded


# -- pi ---------------------------------------------------------------------------------------


def test_pi_legacy_v1_session_imports(tmp_path: Path) -> None:
    src = copy("pi-v1-legacy-large-session.jsonl", tmp_path / "src")
    report = import_file("pi", src, tmp_path / "root")
    path = imported(report)
    lines = source_lines(src)
    assert "version" not in lines[0] and len(lines) == 1019
    msgs = [d["message"] for d in lines if d["type"] == "message"]
    by_role = Counter(m["role"] for m in msgs)
    items = current(path)
    assert roles(items) == {
        "user": by_role["user"],
        "assistant": by_role["assistant"],
        "tool": by_role["toolResult"],
    }
    assert roles(items) == {"user": 88, "assistant": 453, "tool": 373}
    evs = events(path)
    stops = Counter(m["stopReason"] for m in msgs if m["role"] == "assistant")
    ends = Counter(e.data["reason"] for e in evs if e.type == "turn/end")
    assert ends["completed"] == stops["stop"] and ends["aborted"] == stops["aborted"]
    assert ends["error"] == stops["error"] == 1
    assert sum(ends.values()) == sum(stops[s] for s in ("stop", "aborted", "error", "length"))
    # two prompts were typed while the agent was still working (queued into that turn); one
    # of them was answered after the turn stopped, in a turn of its own
    assert sum(1 for e in evs if e.type == "turn/start") == by_role["user"] - 2 + 1 == 87
    thinking = [p for i in items for p in i["message"]["parts"] if p["type"] == "reasoning"]
    assert len(thinking) == 1 and thinking[0]["signature"].startswith("ErMCCkYI")
    results = {i["call_id"] for i in items if i["type"] == "tool/result"}
    answered = [
        p
        for i in items
        for p in i["message"]["parts"]
        if p["type"] == "tool_call" and p["id"] in results
    ]
    assert len(answered) == len(results) == 373
    meta = jsonltape.header(path).meta
    assert meta is not None and meta["import"]["format_version"] == 1
    assert report.raw == {}  # every line (header, model and thinking changes) mapped


def test_pi_tree_branch_summary_and_compaction(tmp_path: Path) -> None:
    src = copy("pi-v3-tree.jsonl", tmp_path / "src")
    path = imported(import_file("pi", src, tmp_path / "root"))
    status = {
        i["message"]["id"]: i["status"] for i in fold.messages(path, all_versions=True)["messages"]
    }
    assert status["e0000006"] == status["e0000007"] == "retracted"  # the French branch left
    assert status["e0000008"] == "compacted"  # the branch summary, later compacted
    ids = [i["message"]["id"] for i in current(path)]
    assert ids == ["e0000011", "e0000009", "e0000010", "e0000013", "e0000014"]
    evs = events(path)
    assert jsonltape.header(path).title == "read the README"  # fixed at the first prompt
    assert fold.title(path) == "README translations"  # pi's session_info, later
    [summary] = [e.data for e in evs if e.type == "compaction/summary"]
    assert summary["tokens"] == 2048 and summary["ledger"] == {"read": ["README.md"]}
    end = [e.data for e in evs if e.type == "turn/end"][-1]
    assert end["reason"] == "error" and end["error"]["message"] == "overloaded"


# -- idempotent, incremental, torn ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SOURCE_OF))
def test_reimport_adds_nothing(tmp_path: Path, name: str) -> None:
    src = copy(name, tmp_path / "src")
    root = tmp_path / "root"
    first = import_file(SOURCE_OF[name], src, root)
    before = {s: Path(s).read_bytes() for s in first.sessions}
    assert import_file(SOURCE_OF[name], src, root).status == "unchanged"
    os.utime(src, (HOUR_AGO - 10, HOUR_AGO - 10))  # touched, not changed: replayed, no write
    again = import_file(SOURCE_OF[name], src, root)
    assert again.status == "unchanged" and again.events == 0
    assert {s: Path(s).read_bytes() for s in first.sessions} == before


def _surface(report: FileReport) -> list[Any]:
    return [[(i["type"], i["message"]) for i in current(Path(s))] for s in report.sessions]


@pytest.mark.parametrize(
    ("name", "every"),
    [
        ("claude-code-v1.0.98-init.jsonl", 1),
        ("claude-code-v1.0.108-japanese.jsonl", 4),
        ("codex-0.104-rollout-complete.jsonl", 3),
        ("claude-rewind-compact.jsonl", 1),
        ("pi-v3-tree.jsonl", 1),
    ],
)
def test_a_growing_source_appends_only_its_new_part(tmp_path: Path, name: str, every: int) -> None:
    source = {**SOURCE_OF, **CRAFTED}[name]
    full = copy(name, tmp_path / "full")
    once = import_file(source, full, tmp_path / "once")
    want = _surface(once)
    lines = full.read_bytes().splitlines(keepends=True)
    for cut in range(1, len(lines), every):
        d = tmp_path / f"cut{cut}"
        grow = d / "src" / name
        grow.parent.mkdir(parents=True)
        grow.write_bytes(b"".join(lines[:cut]))
        first = import_file(source, grow, d / "root", settle=None)
        assert first.status == "imported", first.error
        before = {s: Path(s).read_bytes() for s in first.sessions}
        with open(grow, "ab") as f:
            f.write(b"".join(lines[cut:]))
        os.utime(grow, (HOUR_AGO, HOUR_AGO))
        second = import_file(source, grow, d / "root")
        assert second.status == "imported", second.error
        for s, data in before.items():  # appended only: what was written stays as it was
            assert Path(s).read_bytes().startswith(data)
            assert jsonltape.verify(s).state == "clean"
        assert _surface(second) == want, f"cut after line {cut}"


def test_a_source_cut_in_the_middle_of_a_line_imports_its_complete_lines(tmp_path: Path) -> None:
    full = copy("claude-code-v1.0.98-init.jsonl", tmp_path / "full")
    data = full.read_bytes()
    lines = data.splitlines(keepends=True)
    cut_at = sum(len(x) for x in lines[:20]) + len(lines[20]) // 2  # inside line 21
    src = tmp_path / "src" / full.name
    src.parent.mkdir()
    src.write_bytes(data[:cut_at])
    root = tmp_path / "root"
    report = import_file("claude-code", src, root, settle=None)
    path = imported(report)
    assert report.lines == 20
    assert report.torn is not None and report.torn.line == 21
    assert report.torn.offset == sum(len(x) for x in lines[:20])
    assert report.torn.bytes == len(lines[20]) // 2
    carried = {n for e in events(path) for n, _ in kept_lines(e.data.get("import", {}).get("raw"))}
    assert carried == set(range(1, 21))
    src.write_bytes(data)  # the writer finished the line and went on
    os.utime(src, (HOUR_AGO, HOUR_AGO))
    rest = import_file("claude-code", src, root)
    assert rest.torn is None and rest.lines == 29
    once = import_file("claude-code", full, tmp_path / "once")
    assert _surface(rest) == _surface(once)


def test_malformed_lines_and_odd_values_are_kept_raw_and_reported(tmp_path: Path) -> None:
    src = copy("claude-code-v1.0.98-init.jsonl", tmp_path / "src")
    lines = src.read_bytes().splitlines(keepends=True)
    weird = json.loads(lines[0])
    weird["uuid"] = "weird-1"
    weird["message"]["content"] = "PLACEHOLDER"
    odd = json.dumps(weird).replace('"PLACEHOLDER"', '"half an emoji \\ud83d here"')
    odd = odd.replace('"isSidechain": false', '"isSidechain": false, "n": 123456789012345678901')
    lines[5:5] = [b'{"type": "user", "message": {broken json\n', b"\n", odd.encode() + b"\n"]
    src.write_bytes(b"".join(lines))
    report = import_file("claude-code", src, tmp_path / "root")
    path = imported(report)
    assert [n for n, _why in report.problems] == [6, 7]
    assert "malformed JSON" in report.problems[0][1] and report.sanitized == 1
    raws = [e for e in events(path) if e.type == "import/raw"]
    assert raws[0].data["import"]["raw"]["6"] == '{"type": "user", "message": {broken json'
    every = fold.messages(path, all_versions=True)["messages"]
    texts = [p["content"] for i in every for p in i["message"]["parts"] if p["type"] == "text"]
    assert "half an emoji \ufffd here" in texts  # storable; the raw line keeps the escape
    carried = "".join(
        t for e in events(path) for _n, t in kept_lines(e.data.get("import", {}).get("raw"))
    )
    assert "\\ud83d" in carried and "123456789012345678901" in carried
    assert roles(current(path))["assistant"] == 7


def test_a_rewritten_source_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    src = copy("codex-0.104-rollout-complete.jsonl", tmp_path / "src")
    root = tmp_path / "root"
    path = imported(import_file("codex", src, root))
    before = path.read_bytes()
    data = bytearray(src.read_bytes())
    i = data.index(b"REDACTED_TEXT len=156")
    data[i : i + 8] = b"rewritte"
    src.write_bytes(
        bytes(data) + b'{"timestamp":"2026-02-23T19:40:00.000Z","type":"x","payload":{}}\n'
    )
    report = import_file("codex", src, root)
    assert report.status == "error" and "changed since it was imported" in str(report.error)
    assert path.read_bytes() == before


def test_wrong_format_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    src = copy("pi-v1-legacy-large-session.jsonl", tmp_path / "src")
    report = import_file("codex", src, tmp_path / "root")
    assert report.status == "error"
    assert "line 1" in str(report.error) and "use --from pi" in str(report.error)
    assert not (tmp_path / "root").exists()


def test_same_file_name_from_another_source_gets_its_own_session(tmp_path: Path) -> None:
    a = copy("codex-0.104-rollout-complete.jsonl", tmp_path / "a")
    b = copy("codex-0.104-rollout-unfinished-turn.jsonl", tmp_path / "b")
    b = b.rename(b.with_name(a.name))
    root = tmp_path / "root"
    first = imported(import_file("codex", a, root))
    second = imported(import_file("codex", b, root))
    assert first != second and first.parent == second.parent
    assert jsonltape.header(second).id.startswith(jsonltape.header(first).id + "-")


def test_parallel_tool_results_pointing_at_their_call_lines_are_not_a_rewind(
    tmp_path: Path,
) -> None:
    """Newer Claude Code versions chain a tool result to the line of its own tool_use block,
    not to the previous line; that must not look like a rewind."""
    base = {"sessionId": "s1", "type": "assistant", "isSidechain": False}
    msg = {"id": "msg_1", "role": "assistant", "model": "m", "usage": {"output_tokens": 1}}

    def call(uuid: str, parent: str, cid: str) -> dict[str, Any]:
        block = {"type": "tool_use", "id": cid, "name": "Read", "input": {"file_path": cid}}
        return {**base, "uuid": uuid, "parentUuid": parent, "message": {**msg, "content": [block]}}

    def res(uuid: str, parent: str, cid: str) -> dict[str, Any]:
        content = [{"type": "tool_result", "tool_use_id": cid, "content": "ok"}]
        message = {"role": "user", "content": content}
        return {**base, "type": "user", "uuid": uuid, "parentUuid": parent, "message": message}

    rows = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None,
         "message": {"role": "user", "content": "read both"}},
        call("a1", "u1", "c1"),
        call("a2", "a1", "c2"),
        res("r1", "a1", "c1"),
        res("r2", "a2", "c2"),
        {**base, "uuid": "a3", "parentUuid": "r2",
         "message": {**msg, "id": "msg_2", "content": [{"type": "text", "text": "done"}]}},
    ]  # fmt: skip
    src = tmp_path / "src" / "s1.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = imported(import_file("claude-code", src, tmp_path / "root", settle=0))
    assert not [e for e in events(path) if e.type == "surface/retract"]
    items = current(path)
    assert [i["type"] for i in items] == [
        "user/message", "assistant/message", "tool/result", "tool/result", "assistant/message",
    ]  # fmt: skip
    assert_paired(items)
    assert [e.data["reason"] for e in events(path) if e.type == "turn/end"] == ["completed"]
