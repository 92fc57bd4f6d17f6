"""Expected results: what each protocol command must answer for a case (spec/conformance.md §1).

A case states its answer from what it built (the first bad line, the state, the closers it
expects), never from a run of an implementation.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # common imports this module; only the type is needed here
    from .common import Log

Expect = dict[str, Any]
"""``{command: expected answer}`` of one input."""
Built = tuple[bytes, Expect]
"""What a builder returns: the input bytes and their expected answers."""


OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
NOT_STARTED_TEXT = (
    "The tool call was interrupted before it was recorded as started. "
    "Retry it if it is still needed."
)


def read_ok(log: Log) -> dict[str, Any]:
    return {"ok": True, "events": [json.loads(line) for line in log.committed]}


def read_err(error: str, line: int | None = None, offset: int | None = None) -> dict[str, Any]:
    return {"ok": False, "error": error, "line": line, "offset": offset}


def verify_of(log: Log, state: str) -> dict[str, Any]:
    return {
        "state": state,
        "events": len(log.committed),
        "line": log.bad_line,
        "offset": log.bad_offset,
    }


def expect_session(log: Log, state: str) -> dict[str, Any]:
    """read + verify expectations of a file the spec accepts (clean/open-turn/torn-tail/corrupt)."""
    if state == "corrupt":
        assert log.bad_line is not None
        read = read_err("corrupt", log.bad_line, log.bad_offset)
    else:
        if state == "torn-tail":
            assert log.bad_offset is not None, "a torn tail needs a bad line"
        else:
            assert log.bad_offset is None, f"{state} file with a bad line"
        read = read_ok(log)
    return {"read": read, "verify": verify_of(log, state)}


def expect_refused(error: str, *, repair: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"read": read_err(error), "verify": {"error": error}}
    if repair:
        out["repair"] = {"error": error}
    return out


def closer_result(call_id: str, recorded: int | None) -> dict[str, Any]:
    text = OUTCOME_UNKNOWN_TEXT if recorded is not None else NOT_STARTED_TEXT
    code = "TOOL_OUTCOME_UNKNOWN" if recorded is not None else "TOOL_NOT_STARTED"
    out: dict[str, Any] = {
        "type": "tool/result",
        "data": {
            "call_id": call_id,
            "message": {
                "id": f"interrupted-{call_id}",
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": call_id,
                        "response": text,
                        "is_error": True,
                    }
                ],
            },
            "error": {"code": code, "message": text},
            "synthetic": True,
        },
        "surface": "append",
    }
    if recorded is not None:
        out["sources"] = [recorded]
    return out


def closer_step(step: int, turn: int) -> dict[str, Any]:
    return {"type": "step/end", "data": {"step": step, "turn": turn, "synthetic": True}}


def closer_turn(turn: int) -> dict[str, Any]:
    return {
        "type": "turn/end",
        "data": {"turn": turn, "reason": "interrupted", "synthetic": True},
    }


def expect_repair(log: Log, state: str, closers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "repair": {
            "state": state,
            "cut": log.bad_offset,
            "kept": len(log.committed),
            "closers": closers,
        }
    }


# The neutral message form of §8.7.10, for the fold cases.


def neutral(log: Log, seq: int) -> dict[str, Any]:
    """The neutral item of the committed message event ``seq``."""
    obj = next(o for o in map(json.loads, log.committed) if o["seq"] == seq)
    data = obj["data"]
    item: dict[str, Any] = {
        "seq": obj["seq"],
        "time": obj["time"],
        "type": obj["type"],
        "message": data["message"],
    }
    if obj["type"] == "tool/result":
        item["call_id"] = data["call_id"]
        for name in ("error", "synthetic"):
            if data.get(name) not in (None, False):
                item[name] = data[name]
    if isinstance(data.get("origin"), dict):
        item["origin"] = data["origin"]
    return item


def expect_fold(log: Log, seqs: list[int]) -> dict[str, Any]:
    return {"fold": {"messages": [neutral(log, s) for s in seqs]}}


def with_fold(expect: dict[str, Any], log: Log, seqs: list[int]) -> dict[str, Any]:
    return {**expect, **expect_fold(log, seqs)}
