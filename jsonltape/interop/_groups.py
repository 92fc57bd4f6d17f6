"""Growable assistant messages: the lines of one model response (streamed blocks, items of
one response, a message written again whole) gathered into a :class:`Group`, emitted as one
``assistant/message`` with its model and usage, and revised in place when the source grows it
after an earlier import stopped."""

from __future__ import annotations

from typing import Any

from ._model import Group, Out, call_ids
from ._raw import runs
from ._tools import ToolsMixin

__all__ = ["GroupsMixin"]


class GroupsMixin(ToolsMixin):
    """Assembles assistant messages; flushing one also records its tool calls."""

    def group_for(self, out: Out, msg_id: str) -> Group:
        """The open group with this message id, or a new one (closing the previous)."""
        g = out.group
        if g is not None and g.msg_id == msg_id:
            return g
        self.flush_group(out)
        g = Group(out, msg_id, self.time)
        out.group = g
        return g

    def late_usage(
        self, out: Out, g: Group, usage: dict[str, Any], source_id: str | None = None
    ) -> bool:
        """Give the model response ``g`` the usage the source writes after it (Codex's
        ``token_count``, Kimi's ``StatusUpdate``), from the current line: it closes the message
        if it is still open; if a tool result closed it first, the message on the surface is
        revised in place to carry it. Once per response: False (nothing done) when ``g`` has
        its usage already or is no longer on the surface. ``source_id``: the response's own id
        in the source, kept in ``import.ids`` (the key usage reports count it by)."""
        if g.usage is not None:
            return False
        if g is not out.group:
            if g.vid is None or not out.surface.is_current(g.vid):
                return False
            self.flush_group(out)
            out.group = g
        self.add_line(g, source_id)
        g.usage = usage
        self.flush_group(out)
        return True

    def add_line(self, g: Group, source_id: str | None = None) -> None:
        n = self.n  # once: a property, and this runs for every line of a long reply
        g.lines.append(n)
        raw = self.claim()
        if raw is not None:
            g.raw[str(n)] = raw
        if source_id:
            g.ids.append(source_id)

    def flush_group(self, out: Out, *, keep: bool = False) -> None:
        """Emit the open group's message (or a revision of the version emitted at an earlier
        end of the source) and its tool calls; ``keep`` leaves the group open to growth."""
        g = out.group
        if g is None:
            return
        out.group = None
        if g.vid is not None and g.emitted_lines == len(g.lines):
            if keep:
                out.group = g
            return  # nothing new since the version on the surface
        first = g.lines[0]
        if g.model is not None:
            self.set_request(out, model=g.model, n=first)
        data: dict[str, Any] = {"message": {"id": g.msg_id, "role": "assistant", "parts": g.parts}}
        if g.model is not None:
            data["model"] = g.model
        if g.usage is not None:
            data["usage"] = g.usage
        refs: tuple[str, ...] = ()
        if out.turn is not None:
            data["turn"] = out.turn
            refs = ("turn",)
        info: dict[str, Any] = {"source": self.source, "lines": list(g.lines)}
        if g.raw:
            info["raw"] = runs(g.raw)
            g.raw.clear()
        if g.ids:
            info["ids"] = list(g.ids)
        info.update(g.extra)
        info["time"] = g.time
        data["import"] = info
        if g.vid is None or not out.surface.is_current(g.vid):
            vid = self.emit(out, "assistant/message", data, self.key(n=first), refs=refs)
        else:  # the source grew a message emitted at an earlier end: revise it in place
            key = f"{self.key(n=first)}+{g.lines[-1]}"
            vid = self.emit(
                out, "assistant/message", data, key, surface=("replace", g.vid, g.vid),
                sources=[g.vid], refs=refs,
            )  # fmt: skip
        g.vid, g.emitted_lines = vid, len(g.lines)
        for call_id in call_ids(g.parts):
            if call_id not in g.calls and out.turn is not None:
                out.pending.setdefault(call_id, None)
        out.group = g  # tool_calls reads the group's lines and recorded calls
        self.tool_calls(out, g.parts, first)
        out.group = g if keep else None
