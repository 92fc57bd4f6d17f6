"""Turns: ``turn/start`` and ``turn/end``, and closing a turn the source left open the way
repair closes a crashed one (closer results for unanswered calls, then ``interrupted``)."""

from __future__ import annotations

from typing import Any

from .._repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT
from ._core import MapperCore
from ._model import Out
from ._parts import text_of
from ._tools import result_data

__all__ = ["TurnsMixin"]


class TurnsMixin(MapperCore):
    """Opens and closes turns."""

    def start_turn(self, out: Out, *, raw: bool = False) -> None:
        if out.turn is not None:
            self.end_turn(out, "completed")
        self.flush_group(out)
        out.turn = self.emit(out, "turn/start", {"import": self.imp(raw=raw)}, self.key("turn"))

    def user_message(
        self,
        out: Out,
        parts: list[dict[str, Any]],
        msg_id: str,
        *,
        prompt: bool,
        tag: str | None = None,
    ) -> int:
        """A ``user/message`` from the current line: a ``prompt`` (what the user typed) starts
        a turn and titles a session that has no title; anything else (results' companions,
        queued input, notes the agent adds) joins the running turn, starting one if none is
        open."""
        if prompt:
            self.start_turn(out)
            self.note_title(out, text_of(parts))
        elif out.turn is None:
            self.start_turn(out)
        return self.message(out, "user/message", "user", parts, msg_id, tag=tag)

    def end_turn(
        self,
        out: Out,
        reason: str,
        error: dict[str, Any] | None = None,
        tag: str = "end",
        *,
        raw: bool = False,
    ) -> None:
        if out.turn is None:
            return
        self.flush_group(out)
        if out.pending and reason == "completed":
            self.close_interrupted(out, tag)
            return
        data: dict[str, Any] = {"turn": out.turn, "reason": reason}
        if error is not None:
            data["error"] = error
        data["import"] = self.imp(raw=raw)
        self.emit(out, "turn/end", data, self.key(tag), refs=("turn",))
        out.turn = None
        out.pending.clear()

    def close_interrupted(self, out: Out, tag: str) -> None:
        """Close the open turn like repair does: an error result for each unanswered call
        (outcome unknown if a tool/call was recorded), then turn/end ``interrupted``."""
        self.flush_group(out)
        for i, (call_id, call_vid) in enumerate(list(out.pending.items())):
            recorded = call_vid is not None
            text = OUTCOME_UNKNOWN_TEXT if recorded else NOT_STARTED_TEXT
            code = "TOOL_OUTCOME_UNKNOWN" if recorded else "TOOL_NOT_STARTED"
            error = {"code": code, "message": text}
            data = result_data(
                call_id, text, is_error=True, msg_id=f"interrupted-{call_id}",
                extra={"error": error, "synthetic": True},
            )  # fmt: skip
            data["import"] = self.imp(raw=False)
            sources = [call_vid] if call_vid is not None else None
            self.emit(
                out, "tool/result", data, self.key(f"{tag}:closer:{i}"), sources=sources,
                time=out.last_time,
            )  # fmt: skip
        data = {"turn": out.turn, "reason": "interrupted", "synthetic": True}
        data["import"] = self.imp(raw=False)
        self.emit(out, "turn/end", data, self.key(f"{tag}:interrupted"), refs=("turn",))
        out.turn = None
        out.pending.clear()
