"""Forks by reference, merge and discard receipts, and broken parent chains."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.fold import FoldError

from .helpers import raw_lines


def seqs(path: Path, **kw: object) -> list[tuple[str | None, int]]:
    return [(m.get("session"), m["seq"]) for m in fold.messages(path, **kw)["messages"]]  # type: ignore[arg-type]


@pytest.fixture
def parent(tape_path: Path) -> Path:
    with jsonltape.open(tape_path, create=True, session_id="P", title="t") as tape:
        tape.append("request/header", {"model": "m"})
        tape.append("todo/write", {"todos": [{"content": "x", "status": "pending"}]})
        tape.user("one")  # seq 3
        tape.assistant("two")  # seq 4
        tape.user("later")  # seq 5: after the fork point
    return tape_path


def test_fork_header_names_parent_seq_path_and_crc_and_copies_nothing(parent: Path) -> None:
    info = fold.fork(parent, 4, parent.with_name("f.jsonl"), session_id="F")
    assert (info.session, info.parent, info.at) == ("F", "P", 4)
    lines = raw_lines(Path(info.path))
    header = json.loads(lines[0])["data"]
    parent_line = json.loads(raw_lines(parent)[4])
    assert header["parent"] == {
        "session": "P",
        "seq": 4,
        "path": "s.jsonl",
        "crc": parent_line["crc"],
    }
    assert header["title"] == "t"
    assert not any(b'"one"' in x for x in lines)


def test_a_fork_folds_the_parent_prefix_then_its_own_events(parent: Path) -> None:
    f = Path(fold.fork(parent, 4, parent.with_name("f.jsonl"), session_id="F").path)
    with jsonltape.open(f) as tape:
        mine = tape.user("in fork").seq
    assert seqs(f) == [("P", 3), ("P", 4), (None, mine)]
    assert fold.request_header(f) == {"model": "m"}  # inherited state
    assert fold.todo(f) == [{"content": "x", "status": "pending"}]
    assert seqs(f, at=mine - 1) == [("P", 3), ("P", 4)]


def test_forks_of_forks_fold_through_every_ancestor(parent: Path) -> None:
    f1 = Path(fold.fork(parent, 3, parent.with_name("f1.jsonl"), session_id="F1").path)
    with jsonltape.open(f1) as tape:
        a = tape.assistant("f1 says").seq
    f2 = Path(fold.fork(f1, a, parent.with_name("f2.jsonl"), session_id="F2").path)
    with jsonltape.open(f2) as tape:
        b = tape.user("f2 asks").seq
    assert seqs(f2) == [("P", 3), ("F1", a), (None, b)]
    versions = fold.messages(f2, all_versions=True)["messages"]
    assert [(m.get("session"), m["status"]) for m in versions] == [
        ("P", "current"),
        ("F1", "current"),
        (None, "current"),
    ]


def test_a_fork_cannot_change_inherited_messages(parent: Path) -> None:
    f = Path(fold.fork(parent, 4, parent.with_name("f.jsonl")).path)
    before = f.read_bytes()
    with pytest.raises(FoldError, match="no messages of its own"):
        fold.compact(f, "sum", through=4)
    with pytest.raises(FoldError, match="must be a current message of this session"):
        fold.retract(f, 3)
    assert f.read_bytes() == before


def test_fork_at_a_seq_the_parent_does_not_have_creates_nothing(parent: Path) -> None:
    out = parent.with_name("f.jsonl")
    with pytest.raises(FoldError, match="no seq 99"):
        fold.fork(parent, 99, out)
    assert not out.exists()


def test_a_missing_parent_is_a_clear_error_and_can_be_pointed_at(parent: Path) -> None:
    f = Path(fold.fork(parent, 4, parent.with_name("f.jsonl")).path)
    moved = parent.with_name("moved.jsonl")
    os.rename(parent, moved)
    with pytest.raises(jsonltape.SessionNotFoundError, match="parent session P") as err:
        fold.messages(f)
    assert err.value.path == str(f) and err.value.field == "$.data.parent.path"
    assert [s for s, _ in seqs(f, parents={"P": moved})] == ["P", "P"]


def test_a_parent_replaced_by_another_session_is_refused(parent: Path) -> None:
    f = Path(fold.fork(parent, 4, parent.with_name("f.jsonl")).path)
    os.unlink(parent)
    with jsonltape.open(parent, create=True, session_id="Q") as tape:
        for i in range(5):
            tape.user(str(i))
    with pytest.raises(jsonltape.FormatError, match="holds session Q"):
        fold.messages(f)


def test_a_parent_whose_fork_line_changed_is_refused(parent: Path) -> None:
    f = Path(fold.fork(parent, 4, parent.with_name("f.jsonl")).path)
    clone = parent.with_name("clone.jsonl")
    os.unlink(parent)
    with jsonltape.open(parent, create=True, session_id="P") as tape:  # same id, other content
        for i in range(5):
            tape.user(str(i))
    with pytest.raises(jsonltape.FormatError, match="crc"):
        fold.messages(f)
    assert not clone.exists()


def test_a_parent_cut_before_the_fork_point_is_refused(parent: Path) -> None:
    f = Path(fold.fork(parent, 4, parent.with_name("f.jsonl")).path)
    lines = raw_lines(parent)
    parent.write_bytes(b"".join(lines[:4]))
    with pytest.raises(jsonltape.FormatError, match="ends before seq 4"):
        fold.messages(f)


def test_a_loop_of_fork_headers_is_refused(tmp_path: Path) -> None:
    from jsonltape.events import ParentRef

    d = tmp_path / "loop"
    d.mkdir(mode=0o700)
    jsonltape.open(
        d / "a.jsonl", create=True, session_id="A", parent=ParentRef("B", 0, "b.jsonl")
    ).close()
    jsonltape.open(
        d / "b.jsonl", create=True, session_id="B", parent=ParentRef("A", 0, "a.jsonl")
    ).close()
    with pytest.raises(jsonltape.FormatError, match="loops"):
        fold.messages(d / "a.jsonl")


# -- merge and discard --------------------------------------------------------------------


def forked(parent: Path, name: str = "f.jsonl", sid: str = "F") -> Path:
    f = Path(fold.fork(parent, 4, parent.with_name(name), session_id=sid).path)
    with jsonltape.open(f) as tape:
        tape.assistant(tool_calls=[{"id": "k1", "name": "Read", "arguments": {}}])
        tape.tool_result("k1", "found")
        tape.assistant("fork result")
    return f


def test_merge_appends_the_forks_messages_with_origins_then_a_receipt(parent: Path) -> None:
    f = forked(parent)
    fork_msgs = fold.messages(f)["messages"][2:]
    result = fold.merge(parent, f)
    assert not result.already and len(result.merged) == 3
    merged = [json.loads(x) for x in raw_lines(parent)][-5:-1]
    for line, original in zip(merged[:-1], fork_msgs, strict=True):
        assert line["data"]["origin"] == {"session": "F", "seq": original["seq"]}
        assert line["data"]["message"] == original["message"]
        assert line["key"] == f"fork:F:{original['seq']}"
        assert "turn" not in line["data"]
    receipt = merged[-1]
    assert receipt["type"] == "fork/merge" and receipt["seq"] == result.receipt
    assert receipt["data"] == {
        "fork": "F",
        "at": 4,
        "head": len(raw_lines(f)) - 1,
        "crc": json.loads(raw_lines(f)[-1])["crc"],
        "count": 3,
        "path": "f.jsonl",
    }
    assert [s for _, s in seqs(parent)][-3:] == result.merged


def test_merging_twice_adds_nothing(parent: Path) -> None:
    f = forked(parent)
    fold.merge(parent, f)
    before = parent.read_bytes()
    again = fold.merge(parent, f)
    assert again.already and again.merged == [] and parent.read_bytes() == before


def test_a_later_merge_adds_only_what_the_fork_gained(parent: Path) -> None:
    f = forked(parent)
    first = fold.merge(parent, f)
    with jsonltape.open(f) as tape:
        tape.user("more")
    second = fold.merge(parent, f)
    assert len(second.merged) == 1 and second.receipt != first.receipt


def test_a_merge_interrupted_before_its_receipt_completes_on_retry(parent: Path) -> None:
    f = forked(parent)
    image = parent.read_bytes()
    fold.merge(parent, f)
    lines = raw_lines(parent)[len(raw_lines_of(image)) :]
    parent.write_bytes(image + b"".join(lines[:1]))  # one merged event made it, no receipt
    result = fold.merge(parent, f)
    assert len(result.merged) == 2
    origins = [json.loads(x)["data"].get("origin", {}).get("seq") for x in raw_lines(parent)]
    assert len([o for o in origins if o is not None]) == 3


def raw_lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def test_merging_into_a_different_parent_is_refused(parent: Path) -> None:
    f = forked(parent)
    other = parent.with_name("other.jsonl")
    with jsonltape.open(other, create=True, session_id="O") as tape:
        tape.user("x")
    before = other.read_bytes()
    with pytest.raises(FoldError, match="made from session P, not from O"):
        fold.merge(other, f)
    with pytest.raises(FoldError, match="not a fork"):
        fold.merge(parent, other)
    assert other.read_bytes() == before


def test_changed_merged_messages_are_refused(parent: Path) -> None:
    f = forked(parent)
    fold.merge(parent, f)
    last = fold.messages(f)["messages"][-1]["seq"]
    fold.revise(f, last, "changed my mind")
    before = parent.read_bytes()
    with pytest.raises(FoldError, match="already merged"):
        fold.merge(parent, f)
    assert parent.read_bytes() == before


def test_discard_appends_a_receipt_and_keeps_the_fork(parent: Path) -> None:
    f = forked(parent)
    fork_bytes = f.read_bytes()
    parent_msgs = seqs(parent)
    receipt = fold.discard(parent, f, reason="dead end")
    assert receipt is not None and receipt.type == "fork/discard"
    assert receipt.data["reason"] == "dead end" and receipt.data["fork"] == "F"
    assert f.read_bytes() == fork_bytes and seqs(parent) == parent_msgs
    before = parent.read_bytes()
    assert fold.discard(parent, f) is None and parent.read_bytes() == before
    with pytest.raises(FoldError, match="discarded"):
        fold.merge(parent, f)


def test_a_merged_fork_cannot_be_discarded(parent: Path) -> None:
    f = forked(parent)
    fold.merge(parent, f)
    with pytest.raises(FoldError, match="was merged"):
        fold.discard(parent, f)


def test_merge_of_a_fork_of_a_fork_goes_to_its_own_parent(parent: Path) -> None:
    f1 = forked(parent, "f1.jsonl", "F1")
    last = fold.messages(f1)["messages"][-1]["seq"]
    f2 = Path(fold.fork(f1, last, parent.with_name("f2.jsonl"), session_id="F2").path)
    with jsonltape.open(f2) as tape:
        tape.user("deep")
    with pytest.raises(FoldError, match="made from session F1, not from P"):
        fold.merge(parent, f2)
    fold.merge(f1, f2)
    fold.merge(parent, f1)
    texts = [m["message"]["parts"][0].get("content") for m in fold.messages(parent)["messages"]]
    assert texts[-1] == "deep"


def test_merge_works_with_a_parent_moved_away_from_its_hint(parent: Path, tmp_path: Path) -> None:
    f = forked(parent)
    d = tmp_path / "elsewhere"
    d.mkdir(mode=0o700)
    moved = d / "p.jsonl"
    shutil.move(parent, moved)
    result = fold.merge(moved, f)
    assert len(result.merged) == 3
