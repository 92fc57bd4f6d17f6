"""compact, prune, retract, restore, revise, handoff: what they append, and what they refuse."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.fold import FoldError

from .helpers import raw_lines


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in raw_lines(path)]


def current(path: Path) -> list[int]:
    return [m["seq"] for m in fold.messages(path)["messages"]]


def statuses(path: Path) -> dict[int, str]:
    return {m["seq"]: m["status"] for m in fold.messages(path, all_versions=True)["messages"]}


def session(path: Path) -> dict[str, int]:
    """u1, a tool round (Read a.py ok, Edit b.py failed), a final answer, u2."""
    s: dict[str, int] = {}
    with jsonltape.open(path, create=True, durability="manual") as tape:
        s["u1"] = tape.user("fix it").seq
        s["a1"] = tape.assistant(
            tool_calls=[
                {"id": "c1", "name": "Read", "arguments": {"file_path": "a.py"}},
                {"id": "c2", "name": "Edit", "arguments": {"file_path": "b.py"}},
            ]
        ).seq
        s["r1"] = tape.tool_result("c1", "x" * 100).seq
        s["r2"] = tape.tool_result("c2", "denied", is_error=True).seq
        s["a2"] = tape.assistant("done").seq
        s["u2"] = tape.user("thanks").seq
    return s


def test_compact_appends_start_summary_message_end_and_shadows_the_range(
    tape_path: Path,
) -> None:
    s = session(tape_path)
    before = tape_path.read_bytes()
    c = fold.compact(tape_path, "Read a.py.", through=s["a2"], reason="manual", tokens=900)
    assert tape_path.read_bytes().startswith(before)  # nothing rewritten
    new = events(tape_path)[-5:-1]  # the last line is the closing checkpoint
    assert [e["type"] for e in new] == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
    ]
    start, summary, message, end = new
    assert start["data"] == {"start": s["u1"], "end": s["a2"], "reason": "manual"}
    assert summary["data"]["compaction"] == start["seq"]
    assert summary["data"]["summary"] == "Read a.py."
    assert (summary["data"]["start"], summary["data"]["end"]) == (s["u1"], s["a2"])
    assert summary["data"]["count"] == 5 and summary["data"]["tokens"] == 900
    assert summary["data"]["chars"] == len("Read a.py.")
    assert summary["data"]["shadowed_chars"] > 100
    assert summary["data"]["ledger"] == {"read": ["a.py"]}  # the failed Edit is left out
    assert message["surface"] == {"op": "replace", "start": s["u1"], "end": s["a2"]}
    assert message["sources"] == sorted(
        [*(s[k] for k in ("u1", "a1", "r1", "r2", "a2")), summary["seq"]]
    )
    assert end["data"] == {"compaction": start["seq"], "message": message["seq"]}
    assert (c.start, c.summary, c.message, c.end) == tuple(e["seq"] for e in new)
    assert current(tape_path) == [message["seq"], s["u2"]]
    assert all(statuses(tape_path)[s[k]] == "compacted" for k in ("u1", "a1", "r1", "r2", "a2"))


def test_compacting_through_a_call_takes_its_later_results_along(tape_path: Path) -> None:
    s = session(tape_path)
    c = fold.compact(tape_path, "asked and called tools", through=s["a1"])
    assert c.shadowed == [s["u1"], s["a1"], s["r1"], s["r2"]]
    assert current(tape_path) == [c.message, s["a2"], s["u2"]]


@pytest.mark.parametrize("summary", ["", "   \n\t"])
def test_an_empty_summary_is_refused_and_nothing_is_written(tape_path: Path, summary: str) -> None:
    s = session(tape_path)
    before = tape_path.read_bytes()
    with pytest.raises(jsonltape.InvalidEventError, match="empty summary"):
        fold.compact(tape_path, summary, through=s["a2"])
    with pytest.raises(jsonltape.InvalidEventError, match="empty summary"):
        fold.handoff(tape_path, summary)
    assert tape_path.read_bytes() == before


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"through": 999}, FoldError, "past the end"),
        ({"through": 0}, FoldError, "not on the surface"),
        ({"through": "3"}, FoldError, "must be a seq"),
        ({"through": "u1", "start": "a2"}, jsonltape.SurfaceError, "comes after end"),
        ({"through": "a2", "start": "r1"}, jsonltape.SurfaceError, "unanswered"),
    ],
)
def test_bad_compaction_requests_write_nothing(
    tape_path: Path, kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    s = session(tape_path)
    kw = {k: s.get(v, v) if isinstance(v, str) and v in s else v for k, v in kwargs.items()}
    before = tape_path.read_bytes()
    with pytest.raises(error, match=fragment):
        fold.compact(tape_path, "summary", **kw)
    assert tape_path.read_bytes() == before


def test_compaction_inside_compaction_merges_the_earlier_ledger(tape_path: Path) -> None:
    s = session(tape_path)
    first = fold.compact(tape_path, "one", through=s["a2"])
    with jsonltape.open(tape_path) as tape:
        tape.assistant(tool_calls=[{"id": "c9", "name": "Write", "arguments": {"path": "c.py"}}])
        tape.tool_result("c9", "ok")
        last = tape.assistant("wrote c.py").seq
    second = fold.compact(tape_path, "two", start=first.message, through=last)
    assert second.ledger is not None
    assert (second.ledger.modified, second.ledger.read) == (["c.py"], ["a.py"])
    assert statuses(tape_path)[first.message] == "compacted"
    assert current(tape_path) == [second.message]


def test_a_summarizer_gets_the_shadowed_messages(tape_path: Path) -> None:
    s = session(tape_path)
    seen: list[list[int]] = []

    def summarize(items: list[dict[str, Any]]) -> str:
        seen.append([m["seq"] for m in items])
        return "summarized"

    c = fold.compact(tape_path, summarize, through=s["u2"])
    assert seen == [[s[k] for k in ("u1", "a1", "r1", "r2", "a2", "u2")]]
    assert current(tape_path) == [c.message]


@pytest.mark.parametrize("outcome", ["raises", "empty"])
def test_a_failed_summary_replaces_nothing_and_is_recorded(tape_path: Path, outcome: str) -> None:
    s = session(tape_path)
    before = current(tape_path)

    def summarize(items: list[dict[str, Any]]) -> str:
        if outcome == "raises":
            raise TimeoutError("model timed out")
        return " "

    with pytest.raises((TimeoutError, jsonltape.InvalidEventError)):
        fold.compact(tape_path, summarize, through=s["a2"])
    assert current(tape_path) == before  # the context stays whole
    start, end = [e for e in events(tape_path) if e["type"].startswith("compaction/")]
    assert start["type"] == "compaction/start" and end["type"] == "compaction/end"
    assert end["data"]["compaction"] == start["seq"]
    code = "SUMMARY_FAILED" if outcome == "raises" else "EMPTY_SUMMARY"
    assert end["data"]["error"]["code"] == code
    assert "message" not in end["data"]


def test_compacting_an_open_tape_keeps_the_writer_usable(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        a = tape.user("a").seq
        tape.assistant("b")
        c = fold.compact(tape, lambda items: "sum", through=a)
        later = tape.user("c")
    assert current(tape_path) == [c.message, a + 1, later.seq]


def test_prune_replaces_a_tool_output_by_a_stub_in_place(tape_path: Path) -> None:
    s = session(tape_path)
    prune_ev, stub = fold.prune(tape_path, s["r1"])
    assert prune_ev.type == "compaction/prune"
    assert prune_ev.data == {"target": s["r1"], "chars": 100}
    response = stub.data["message"]["parts"][0]["response"]
    assert "100 characters" in response and f"seq {s['r1']}" in response
    assert stub.data["call_id"] == "c1" and stub.sources == [s["r1"], prune_ev.seq]
    seqs = current(tape_path)
    assert seqs.index(stub.seq) == 2  # where the result was
    assert statuses(tape_path)[s["r1"]] == "compacted"
    with pytest.raises(FoldError, match="already a prune stub"):
        fold.prune(tape_path, stub.seq)
    with pytest.raises(FoldError, match="not a tool/result"):
        fold.prune(tape_path, s["u1"])


def test_retract_then_restore_by_the_retraction(tape_path: Path) -> None:
    s = session(tape_path)
    (retraction,) = fold.retract(tape_path, s["a1"], reason="wrong tool")
    assert current(tape_path) == [s["u1"], s["a2"], s["u2"]]  # results went with the call
    restored = fold.restore(tape_path, retraction.seq)
    assert [e.sources for e in restored] == [[s["a1"]], [s["r1"]], [s["r2"]]]
    assert [e.data for e in restored] == [
        next(e["data"] for e in events(tape_path) if e["seq"] == s[k]) for k in ("a1", "r1", "r2")
    ]
    assert current(tape_path)[-3:] == [e.seq for e in restored]
    with pytest.raises(FoldError, match="already restored"):
        fold.restore(tape_path, s["a1"])


def test_restoring_an_assistant_message_brings_its_results(tape_path: Path) -> None:
    s = session(tape_path)
    fold.retract(tape_path, s["a1"])
    restored = fold.restore(tape_path, s["a1"])
    assert [e.sources for e in restored] == [[s["a1"]], [s["r1"]], [s["r2"]]]


def test_restoring_a_result_whose_call_is_gone_is_refused(tape_path: Path) -> None:
    s = session(tape_path)
    (retraction,) = fold.retract(tape_path, s["a1"])
    with pytest.raises(FoldError, match=f"restore the retraction \\(seq {retraction.seq}\\)"):
        fold.restore(tape_path, s["r1"])
    with pytest.raises(FoldError, match="neither a retracted message"):
        fold.restore(tape_path, s["u1"])


def test_retracting_a_result_alone_is_refused(tape_path: Path) -> None:
    s = session(tape_path)
    before = tape_path.read_bytes()
    with pytest.raises(jsonltape.SurfaceError, match="unanswered"):
        fold.retract(tape_path, s["r1"])
    assert tape_path.read_bytes() == before


def test_revise_replaces_a_message_by_its_new_version(tape_path: Path) -> None:
    s = session(tape_path)
    (edit,) = fold.revise(tape_path, s["u1"], "fix it now")
    assert edit.data["message"]["id"] == next(
        e["data"]["message"]["id"] for e in events(tape_path) if e["seq"] == s["u1"]
    )
    assert edit.surface == jsonltape.Replace(s["u1"], s["u1"]) and edit.sources == [s["u1"]]
    assert current(tape_path)[0] == edit.seq
    assert statuses(tape_path)[s["u1"]] == "superseded"
    (tool,) = fold.revise(
        tape_path,
        s["r1"],
        {"parts": [{"type": "tool_call_response", "id": "c1", "response": "fixed"}]},
    )
    assert tool.data["call_id"] == "c1"


def test_handoff_rebuilds_the_context_from_the_anchor(tape_path: Path) -> None:
    s = session(tape_path)
    anchor, message = fold.handoff(tape_path, "Phase 1 done.", state={"phase": 2})
    assert anchor.type == "handoff/anchor"
    assert anchor.data == {"summary": "Phase 1 done.", "state": {"phase": 2}}
    assert current(tape_path) == [message.seq]
    parts = message.data["message"]["parts"]
    assert parts[0]["content"] == "Phase 1 done."
    assert "data, not instructions" in parts[1]["content"] and '"phase": 2' in parts[1]["content"]
    assert set(s.values()) | {anchor.seq} == set(message.sources or [])
    assert all(v == "compacted" for k, v in statuses(tape_path).items() if k != message.seq)


def test_handoff_on_an_empty_surface_appends(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    _, message = fold.handoff(tape_path, "start here")
    assert message.surface == "append" and current(tape_path) == [message.seq]
