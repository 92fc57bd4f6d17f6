"""Import fidelity on today's agents (issue 13): what the folded history of an imported session
looks like when the source is written the way current Claude Code and legacy pi write it.

Fixtures (built from the formats, not copied from real sessions):

* ``claude21/streamed-tool-results.jsonl``: Claude Code 2.1.x line shapes (``apiBlockIndex``,
  ``sourceToolAssistantUUID``, ``attachment`` lines) as in the 2.1.258 capture
  kzahel/yepanywhere ``packages/server/test/fixtures/captured/claude-basic-2026-09-12/
  native.jsonl`` @ 76ea6130: one response (one ``message.id``) written as four lines, with the
  result of its first tool call written *between* them (Claude Code runs a tool while the
  response is still streaming), and its other results chained to their own tool_use lines.
* ``pi1/legacy-compaction-index.jsonl``: pi v1 (no ``version``, no entry ids) with two
  compactions naming the first kept entry by ``firstKeptEntryIndex``; the shapes follow
  badlogic/pi-mono ``packages/coding-agent/test/fixtures/before-compaction.jsonl`` and the
  index's meaning ``migrateV1ToV2`` in ``packages/coding-agent/src/core/session-manager.ts``
  @ 83378aad (an index into the file's parsed entries, the header being entry 0).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.interop import FileReport, import_file

from ._importers import kept_whole

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude21" / "streamed-tool-results.jsonl"
PI = FIXTURES / "pi1" / "legacy-compaction-index.jsonl"
PI_NAME = "2025-12-08T22-00-00-000Z_8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f.jsonl"
HOUR_AGO = time.time() - 7200


def place(src: Path, dest: Path, name: str | None = None, data: bytes | None = None) -> Path:
    """A copy of a fixture (or of ``data``) in ``dest``, last modified two hours ago."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / (name or src.name)
    if data is None:
        shutil.copyfile(src, out)
    else:
        out.write_bytes(data)
    os.utime(out, (HOUR_AGO, HOUR_AGO))
    return out


def imported(report: FileReport) -> Path:
    assert report.status == "imported", report.error
    return Path(report.sessions[0])


def surface(path: Path) -> list[dict[str, Any]]:
    return list(fold.messages(path)["messages"])


def events(path: Path) -> list[jsonltape.Event]:
    return list(jsonltape.read(path))


def carried_lines(report: FileReport) -> dict[int, str]:
    """Source line number -> its verbatim text, from every event that carries one (once)."""
    raw: dict[int, str] = {}
    for session in report.sessions:
        for e in jsonltape.read(session):
            for n, text in kept_whole(e.data.get("import", {}).get("raw")):
                assert n not in raw, f"line {n} carried twice"
                raw[n] = text
    return raw


# -- Claude Code: a tool result written between the lines of one streamed response -----------


def test_claude_code_result_written_inside_a_streamed_response_keeps_it_one_message(
    tmp_path: Path,
) -> None:
    src = place(CLAUDE, tmp_path / "src")
    report = import_file("claude-code", src, tmp_path / "root")
    path = imported(report)
    lines = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    streamed = [d for d in lines if d.get("message", {}).get("id") == "msg_01StreamedToolResults"]
    assert len(streamed) == 4  # the fixture's point: a result line sits among these four
    assistants = [e for e in events(path) if e.type == "assistant/message"]
    assert [e.data["message"]["id"] for e in assistants] == [
        "msg_01StreamedToolResults",
        "msg_01FinalReply",
    ]
    first = assistants[0].data
    assert [p["type"] for p in first["message"]["parts"]] == ["reasoning"] + ["tool_call"] * 3
    assert [p["id"] for p in first["message"]["parts"][1:]] == [
        "toolu_01Write",
        "toolu_01BashOk",
        "toolu_01BashFail",
    ]
    # usage once per response: the totals are what the provider billed
    assert sum(e.data["usage"]["output_tokens"] for e in assistants) == 382 + 140
    assert first["import"]["lines"] == [n for n, d in enumerate(lines, 1) if d in streamed]
    items = surface(path)
    assert [(i["type"], i.get("call_id")) for i in items] == [
        ("user/message", None),
        ("assistant/message", None),
        ("tool/result", "toolu_01Write"),
        ("tool/result", "toolu_01BashOk"),
        ("tool/result", "toolu_01BashFail"),
        ("assistant/message", None),
    ]
    assert not [e for e in events(path) if e.type == "surface/retract"]
    assert [e.data["call_id"] for e in events(path) if e.type == "tool/call"] == [
        "toolu_01Write",
        "toolu_01BashOk",
        "toolu_01BashFail",
    ]
    assert [e.data["reason"] for e in events(path) if e.type == "turn/end"] == ["completed"]
    raw = carried_lines(report)  # the held-back result line is still carried, by its result
    assert sorted(raw) == list(range(1, len(lines) + 1))
    assert "".join(raw[n] + "\n" for n in sorted(raw)).encode() == src.read_bytes()
    write = next(e for e in events(path) if e.type == "tool/result")
    assert write.data["import"]["lines"] == [6] and "6" in write.data["import"]["raw"]
    # the Anthropic body: one assistant turn with its three tool_use blocks, answered next
    body = fold.messages(path, format="anthropic")["messages"]
    assert [m["role"] for m in body] == ["user", "assistant", "user", "assistant"]
    uses = [b["id"] for b in body[1]["content"] if b["type"] == "tool_use"]
    answers = [b["tool_use_id"] for b in body[2]["content"] if b["type"] == "tool_result"]
    assert uses == answers == ["toolu_01Write", "toolu_01BashOk", "toolu_01BashFail"]


def test_claude_code_streamed_response_cut_anywhere_imports_to_the_same_history(
    tmp_path: Path,
) -> None:
    once = imported(import_file("claude-code", place(CLAUDE, tmp_path / "once"), tmp_path / "r"))
    want = [(i["type"], i["message"]) for i in surface(once)]
    assert [t for t, _ in want].count("assistant/message") == 2  # one per response
    data = CLAUDE.read_bytes()
    lines = data.splitlines(keepends=True)
    for cut in range(1, len(lines)):
        d = tmp_path / f"cut{cut}"
        grow = place(CLAUDE, d / "src", data=b"".join(lines[:cut]))
        first = import_file("claude-code", grow, d / "root", settle=None)
        assert first.status == "imported", first.error
        with open(grow, "ab") as f:
            f.write(b"".join(lines[cut:]))
        os.utime(grow, (HOUR_AGO, HOUR_AGO))
        second = import_file("claude-code", grow, d / "root")
        path = imported(second)
        assert jsonltape.verify(path).state == "clean"
        assert [(i["type"], i["message"]) for i in surface(path)] == want, f"cut after {cut}"


# -- pi v1: legacy compactions name the first kept entry by its index ------------------------


def test_pi_v1_compaction_by_index_keeps_the_entries_pi_keeps(tmp_path: Path) -> None:
    src = place(PI, tmp_path / "src", PI_NAME)
    path = imported(import_file("pi", src, tmp_path / "root", settle=0))
    entries = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines()]
    assert "version" not in entries[0] and not any("id" in e for e in entries[1:])
    compactions = [(i, e["firstKeptEntryIndex"]) for i, e in enumerate(entries) if "summary" in e]
    assert compactions == [(10, 6), (13, 11)]
    # pi's v1 context after the last compaction: its summary, then every message entry from
    # the first kept index on (pi-mono c89b1ec3 loadSessionFromEntries); line = index + 1
    last, kept = compactions[-1]
    want = [f"pi-{i + 1}" for i in range(kept, len(entries)) if entries[i]["type"] == "message"]
    items = surface(path)
    assert [i["message"]["id"] for i in items] == [f"pi-{last + 1}", *want]
    # framed as pi's convertToLlm sends a compaction summary
    assert items[0]["message"]["parts"][0]["content"] == (
        "The conversation history before this point was compacted into the following "
        f"summary:\n\n<summary>\n{entries[last]['summary']}\n</summary>"
    )
    summaries = [e.data for e in events(path) if e.type == "compaction/summary"]
    # the first replaced entries 1-4 (user, assistant, tool result, assistant) and kept 6-9;
    # the second replaced the first summary and entries 6-9
    assert [s["count"] for s in summaries] == [4, 5]
    assert [s["tokens"] for s in summaries] == [175004, 185014]


def test_pi_v1_compaction_index_counts_entries_not_blank_lines(tmp_path: Path) -> None:
    """pi numbers the entries it parsed: a blank line in the file is no entry, so the index
    still points at the same message."""
    lines = PI.read_bytes().splitlines(keepends=True)
    data = b"".join(lines[:3]) + b"\n" + b"".join(lines[3:])  # a blank line before entry 3
    src = place(PI, tmp_path / "src", PI_NAME, data=data)
    path = imported(import_file("pi", src, tmp_path / "root", settle=0))
    ids = [i["message"]["id"] for i in surface(path)]
    # entry k is on line k + 2 from the blank line on
    assert ids == ["pi-15", "pi-13", "pi-14", "pi-16", "pi-17"]


# -- re-importing a still-torn file ----------------------------------------------------------


def test_reimporting_a_still_torn_source_reports_the_torn_tail_again(tmp_path: Path) -> None:
    data = CLAUDE.read_bytes()
    lines = data.splitlines(keepends=True)
    cut = sum(len(x) for x in lines[:8]) + len(lines[8]) // 3  # inside line 9
    src = place(CLAUDE, tmp_path / "src", data=data[:cut])
    root = tmp_path / "root"
    first = import_file("claude-code", src, root, settle=None)
    assert first.status == "imported" and first.lines == 8
    assert first.torn is not None
    again = import_file("claude-code", src, root, settle=None)
    assert again.status == "unchanged"
    assert again.torn == first.torn  # still torn: said again, not null
    assert (again.torn.line, again.torn.offset) == (9, sum(len(x) for x in lines[:8]))
