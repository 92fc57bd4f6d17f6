"""SurfaceFold: positions and anchors, statuses, and tool calls staying paired with results."""

from __future__ import annotations

from typing import Any

import pytest

from jsonltape import SurfaceError
from jsonltape.events import Replace, Retract
from jsonltape.fold import SurfaceFold


def user(text: str = "u") -> dict[str, Any]:
    return {"message": {"id": text, "role": "user", "parts": [{"type": "text", "content": text}]}}


def assistant(*calls: str) -> dict[str, Any]:
    parts = [{"type": "tool_call", "id": c, "name": "Read", "arguments": {}} for c in calls]
    return {"message": {"id": "a", "role": "assistant", "parts": parts}}


def result(call: str) -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": call, "response": "r"}
    return {"call_id": call, "message": {"id": "r", "role": "tool", "parts": [part]}}


def build(*events: tuple[str, dict[str, Any]]) -> SurfaceFold:
    """Append events at seqs 1, 2, 3, ..."""
    f = SurfaceFold()
    for seq, (type_, data) in enumerate(events, 1):
        f.apply_parts(seq, type_, "append", None, data)
    return f


def snapshot(f: SurfaceFold) -> tuple[Any, ...]:
    return (f.nodes, [f.anchor(s) for s in f.nodes], [f.call_id(s) for s in f.nodes])


def test_replace_puts_the_new_event_where_the_range_started() -> None:
    f = build(("user/message", user()), ("user/message", user()), ("user/message", user()))
    changes = f.apply_parts(4, "user/message", Replace(1, 2), [1, 2], user("sum"))
    assert changes == [(4, "current"), (1, "superseded"), (2, "superseded")]
    assert f.nodes == [4, 3]
    assert f.anchor(4) == 1 and f.position(4) == 0 and f.position(3) == 1
    f.apply_parts(5, "user/message", "append", None, user())
    assert f.nodes == [4, 3, 5]


def test_range_is_positional_so_start_may_be_numerically_after_end() -> None:
    f = build(("user/message", user()), ("user/message", user()))
    f.apply_parts(3, "user/message", Replace(1, 1), [1], user())  # seq 3 now sits first
    f.apply_parts(4, "user/message", Replace(3, 2), [2, 3], user())
    assert f.nodes == [4]
    with pytest.raises(SurfaceError, match="comes after end"):
        build(("user/message", user()), ("user/message", user())).apply_parts(
            3, "surface/retract", Retract(2, 1), None, {}
        )


def test_sources_must_name_every_replaced_seq() -> None:
    f = build(("user/message", user()), ("user/message", user()))
    before = snapshot(f)
    with pytest.raises(SurfaceError, match=r"missing \[2\]") as err:
        f.apply_parts(3, "user/message", Replace(1, 2), [1], user())
    assert err.value.field == "$.sources"
    assert snapshot(f) == before


def test_range_must_name_current_messages() -> None:
    f = build(("user/message", user()))
    f.apply_parts(2, "surface/retract", Retract(1, 1), None, {})
    for op in (Replace(1, 1), Replace(9, 9)):
        with pytest.raises(SurfaceError, match="not a current message") as err:
            f.apply_parts(3, "user/message", op, [1, 9], user())
        assert err.value.field == "$.surface.start"


def test_retracting_an_assistant_message_takes_its_tool_results_along() -> None:
    f = build(
        ("assistant/message", assistant("c1", "c2")),
        ("tool/result", result("c1")),
        ("user/message", user()),
        ("tool/result", result("c2")),  # not next to its call
    )
    changes = f.apply_parts(5, "surface/retract", Retract(1, 1), None, {})
    assert changes == [(1, "retracted"), (2, "retracted"), (4, "retracted")]
    assert f.nodes == [3]
    assert not f.declares("c1")


def test_a_replace_that_removes_a_call_must_list_its_results_in_sources() -> None:
    f = build(
        ("user/message", user()),
        ("assistant/message", assistant("c1")),
        ("tool/result", result("c1")),
    )
    with pytest.raises(SurfaceError, match=r"missing \[3\].*go with their calls"):
        f.apply_parts(4, "user/message", Replace(1, 2), [1, 2], user())
    changes = f.apply_parts(4, "user/message", Replace(1, 2), [1, 2, 3], user())
    assert changes[-1] == (3, "superseded")
    assert f.nodes == [4]


def test_removing_the_only_result_of_a_call_that_stays_is_refused() -> None:
    f = build(
        ("assistant/message", assistant("c1")),
        ("tool/result", result("c1")),
        ("user/message", user()),
    )
    before = snapshot(f)
    with pytest.raises(SurfaceError, match="unanswered"):
        f.apply_parts(4, "surface/retract", Retract(2, 3), None, {})
    with pytest.raises(SurfaceError, match="unanswered"):
        f.apply_parts(4, "user/message", Replace(2, 3), [2, 3], user())
    assert snapshot(f) == before


def test_a_second_result_may_go_while_the_first_still_answers() -> None:
    f = build(
        ("assistant/message", assistant("c1")),
        ("tool/result", result("c1")),
        ("tool/result", result("c1")),
    )
    f.apply_parts(4, "surface/retract", Retract(3, 3), None, {})
    assert f.nodes == [1, 2]


def test_an_orphan_result_can_be_retracted_alone() -> None:
    f = build(("user/message", user()), ("tool/result", result("nobody")))
    f.apply_parts(3, "surface/retract", Retract(2, 2), None, {})
    assert f.nodes == [1]


def test_revising_an_assistant_message_that_keeps_its_calls_keeps_the_results() -> None:
    f = build(("assistant/message", assistant("c1")), ("tool/result", result("c1")))
    changes = f.apply_parts(3, "assistant/message", Replace(1, 1), [1], assistant("c1"))
    assert changes == [(3, "current"), (1, "superseded")]
    assert f.nodes == [3, 2]


def test_a_revision_that_drops_a_call_drops_its_results_too() -> None:
    f = build(
        ("assistant/message", assistant("c1", "c2")),
        ("tool/result", result("c1")),
        ("tool/result", result("c2")),
    )
    changes = f.apply_parts(4, "assistant/message", Replace(1, 1), [1, 3], assistant("c1"))
    assert changes == [(4, "current"), (1, "superseded"), (3, "superseded")]
    assert f.nodes == [4, 2]


def test_a_call_declared_twice_keeps_its_results_until_both_are_gone() -> None:
    f = build(
        ("assistant/message", assistant("c1")),
        ("assistant/message", assistant("c1")),
        ("tool/result", result("c1")),
    )
    f.apply_parts(4, "surface/retract", Retract(1, 1), None, {})
    assert f.nodes == [2, 3]
    f.apply_parts(5, "surface/retract", Retract(2, 2), None, {})
    assert f.nodes == []


@pytest.mark.parametrize(
    ("type_", "op", "data", "fragment"),
    [
        ("tool/result", Replace(2, 2), result("other"), "keeps its call id"),
        ("user/message", Replace(2, 2), user(), "replaced only by a tool/result"),
        ("tool/result", Replace(1, 2), result("c1"), "replaces exactly one tool/result"),
        ("tool/result", Replace(1, 1), result("c1"), "replaces exactly one tool/result"),
    ],
)
def test_tool_results_are_revised_in_place_only(
    type_: str, op: Replace, data: dict[str, Any], fragment: str
) -> None:
    f = build(("assistant/message", assistant("c1")), ("tool/result", result("c1")))
    before = snapshot(f)
    with pytest.raises(SurfaceError, match=fragment):
        f.apply_parts(3, type_, op, [1, 2], data)
    assert snapshot(f) == before


def test_in_place_tool_result_revision_keeps_the_call_answered() -> None:
    f = build(("assistant/message", assistant("c1")), ("tool/result", result("c1")))
    f.apply_parts(3, "tool/result", Replace(2, 2), [2], result("c1"))
    assert f.nodes == [1, 3] and f.call_id(3) == "c1"


@pytest.mark.parametrize("marker", ["compaction/summary", "compaction/prune", "handoff/anchor"])
def test_replacements_citing_a_compaction_event_mark_nodes_compacted(marker: str) -> None:
    f = build(("user/message", user()), ("user/message", user()))
    f.apply_parts(3, marker, None, None, {})
    changes = f.apply_parts(4, "user/message", Replace(1, 2), [1, 2, 3], user())
    assert changes == [(4, "current"), (1, "compacted"), (2, "compacted")]


def test_only_retract_events_retract_and_they_need_a_range() -> None:
    f = build(("user/message", user()))
    with pytest.raises(SurfaceError, match="only surface/retract"):
        f.apply_parts(2, "user/message", Retract(1, 1), None, user())
    with pytest.raises(SurfaceError, match="takes op 'retract'"):
        f.apply_parts(2, "surface/retract", Replace(1, 1), [1], {})
    with pytest.raises(SurfaceError, match="needs a range"):
        f.apply_parts(2, "surface/retract", "append", None, {})


def test_removed_by_predicts_without_changing_anything() -> None:
    f = build(
        ("assistant/message", assistant("c1")),
        ("tool/result", result("c1")),
        ("user/message", user()),
    )
    before = snapshot(f)
    assert f.removed_by("surface/retract", Retract(1, 1)) == [1, 2]
    assert f.removed_by("user/message", Replace(1, 3), None, user()) == [1, 2, 3]
    assert snapshot(f) == before


def test_clone_is_independent() -> None:
    f = build(("assistant/message", assistant("c1")), ("tool/result", result("c1")))
    g = f.clone()
    g.apply_parts(3, "surface/retract", Retract(1, 1), None, {})
    assert f.nodes == [1, 2] and f.declares("c1")
    assert g.nodes == [] and not g.declares("c1")


def test_non_message_events_are_ignored() -> None:
    f = build(("user/message", user()))
    assert f.apply_parts(2, "tool/call", None, None, {"call_id": "x"}) == []
    assert f.apply_parts(3, "com.example/x", None, None, {}) == []
    assert f.nodes == [1]
