"""Tool-call bookkeeping: a ``tool/call`` for each call a response made (the source ran it),
the calls still waiting for their result, and ``tool/result`` events."""

from __future__ import annotations

from typing import Any

from ..errors import JsonltapeError
from ..events import Replace
from ._core import MapperCore
from ._model import Out

__all__ = ["ToolsMixin", "result_data"]


def result_data(
    call_id: str, response: Any, *, is_error: bool, msg_id: str, extra: dict[str, Any] | None
) -> dict[str, Any]:
    """The data of a ``tool/result`` (without its ``import``)."""
    part: dict[str, Any] = {"type": "tool_call_response", "id": call_id, "response": response}
    if is_error:
        part["is_error"] = True
    data: dict[str, Any] = {
        "call_id": call_id,
        "message": {"id": msg_id, "role": "tool", "parts": [part]},
    }
    if extra:
        data.update(extra)
    return data


class ToolsMixin(MapperCore):
    """Records tool calls and their results; :meth:`after_tool_call` is the hook for extra
    events a call implies."""

    def tool_calls(self, out: Out, parts: list[dict[str, Any]], first: int) -> None:
        """A ``tool/call`` for each tool_call part not recorded yet (the source ran them)."""
        group = out.group
        for p in parts:
            if p.get("type") != "tool_call":
                continue
            call_id = p["id"]
            if group is not None and call_id in group.calls:
                continue
            data: dict[str, Any] = {"call_id": call_id, "name": p["name"]}
            if p.get("arguments") is not None:
                data["arguments"] = p["arguments"]
            refs: tuple[str, ...] = ()
            if out.turn is not None:
                data["turn"] = out.turn
                refs = ("turn",)
            data["import"] = self.imp(raw=False, lines=self._group_lines(out))
            key = self.key(f"call:{call_id}", n=first)
            vid = self.emit(out, "tool/call", data, key, refs=refs)
            if group is not None:
                group.calls.add(call_id)
            if out.turn is not None:
                out.pending[call_id] = vid
            self.after_tool_call(out, p, data["import"], first)

    def after_tool_call(
        self, out: Out, part: dict[str, Any], imp: dict[str, Any], first: int
    ) -> None:
        """Hook: extra events for a tool call (Claude Code's TodoWrite gives a todo/write)."""

    def _group_lines(self, out: Out) -> list[int]:
        return list(out.group.lines) if out.group is not None else [self.n]

    def tool_result(
        self,
        out: Out,
        call_id: str,
        response: Any,
        *,
        is_error: bool,
        msg_id: str,
        tag: str | None = None,
        extra: dict[str, Any] | None = None,
        replaces: int | None = None,
        raw: bool = True,
    ) -> int:
        """A ``tool/result``; ``replaces``: in place of that result node (a result the source
        cleared or dropped, or a dropped one given back); ``raw``: it carries the line."""
        self.flush_group(out)
        data = result_data(call_id, response, is_error=is_error, msg_id=msg_id, extra=extra)
        data["import"] = self.imp(raw=raw)
        if replaces is None:
            return self.emit(out, "tool/result", data, self.key(tag))
        return self.emit(
            out, "tool/result", data, self.key(tag),
            surface=("replace", replaces, replaces), sources=[replaces],
        )  # fmt: skip

    @staticmethod
    def replaceable(out: Out, vid: int, data: dict[str, Any]) -> bool:
        """Whether the surface takes ``data`` (a result's) in place of the result ``vid``."""
        try:
            out.surface.removed_by("tool/result", Replace(vid, vid), None, data)
        except JsonltapeError:
            return False
        return True
