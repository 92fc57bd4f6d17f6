"""Conveniences an agent author expects: message helpers and turn/step context managers.

A mixin over :class:`jsonltape.Tape`; everything here goes through ``append``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._prepare import message_id, parts_of
from .errors import InvalidEventError, JsonltapeError
from .events import Event, TurnRef

__all__ = ["AgentHelpers", "TurnHandle"]


def _parts(content: object, path: Path) -> list[dict[str, Any]]:
    """A message's content parts from text or a list of parts; anything else is refused."""
    if not isinstance(content, (str, list, tuple)):
        raise InvalidEventError(
            f"content must be text or a list of content parts, not {type(content).__name__}",
            field="$.data.message.parts",
            path=path,
        )
    return parts_of(content if isinstance(content, str) else list(content))


class TurnHandle:
    """Yielded by :meth:`Tape.turn`; set ``reason`` to end the turn other than "completed"."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.reason = "completed"


class AgentHelpers:
    """Helpers mixed into Tape; they only call ``append``."""

    if TYPE_CHECKING:
        path: Path
        _turn: TurnRef | None
        _step: int | None

        def append(
            self,
            type: str,
            data: Mapping[str, Any] | None = None,
            *,
            surface: Any = None,
            sources: Iterable[int] | None = None,
            key: str | None = None,
            ignorable: bool | None = None,
        ) -> Event: ...

    # -- conveniences for agent authors -------------------------------------------------

    def user(
        self, content: str | list[dict[str, Any]], *, id: str | None = None, key: str | None = None
    ) -> Event:
        """Append a ``user/message`` with text or a list of content parts."""
        message = {"id": id or message_id(), "role": "user", "parts": _parts(content, self.path)}
        return self.append("user/message", {"message": message}, key=key)

    def assistant(
        self,
        content: str | list[dict[str, Any]] = "",
        *,
        tool_calls: Iterable[Mapping[str, Any]] = (),
        model: str | None = None,
        usage: Mapping[str, Any] | None = None,
        id: str | None = None,
        key: str | None = None,
    ) -> Event:
        """Append an ``assistant/message``; ``tool_calls`` are ``{id?, name, arguments}``."""
        parts = [] if content is None or content == "" else _parts(content, self.path)
        if isinstance(tool_calls, (str, bytes, Mapping)) or not isinstance(tool_calls, Iterable):
            raise InvalidEventError(
                f"tool_calls must be a list of {{id?, name, arguments}} mappings, not "
                f"{type(tool_calls).__name__}",
                field="$.data.message.parts",
                path=self.path,
            )
        for call in tool_calls:
            where = f"$.data.message.parts[{len(parts)}]"
            if not isinstance(call, Mapping) or "name" not in call:
                raise InvalidEventError(
                    f"a tool call must be a mapping with a 'name', not {call!r:.80}",
                    field=where,
                    path=self.path,
                )
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id") or message_id(),
                    "name": call["name"],
                    "arguments": call.get("arguments"),
                }
            )
        data: dict[str, Any] = {
            "message": {"id": id or message_id(), "role": "assistant", "parts": parts}
        }
        if model is not None:
            data["model"] = model
        if usage is not None:
            if not isinstance(usage, Mapping):
                raise InvalidEventError(
                    f"usage must be a mapping, not {type(usage).__name__}",
                    field="$.data.usage",
                    path=self.path,
                )
            data["usage"] = dict(usage)
        self._stamp(data)
        return self.append("assistant/message", data, key=key)

    def tool_call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        key: str | None = None,
    ) -> Event:
        """Record that a tool call is about to run (``tool/call``), before running it."""
        data = {"call_id": call_id or message_id(), "name": name, "arguments": arguments}
        self._stamp(data)
        return self.append("tool/call", data, key=key)

    def tool_result(
        self, call_id: str, result: Any, *, is_error: bool = False, key: str | None = None
    ) -> Event:
        """Append the model-visible ``tool/result`` of call ``call_id``."""
        part: dict[str, Any] = {"type": "tool_call_response", "id": call_id, "response": result}
        if type(is_error) is not bool:
            raise InvalidEventError(
                f"is_error must be True or False, not {is_error!r}",
                field="$.data.message.parts[0].is_error",
                path=self.path,
            )
        if is_error:
            part["is_error"] = True
        message = {"id": message_id(), "role": "tool", "parts": [part]}
        return self.append("tool/result", {"call_id": call_id, "message": message}, key=key)

    def _stamp(self, data: dict[str, Any]) -> None:
        if self._turn is not None:
            data["turn"] = self._turn.seq
        if self._step is not None:
            data["step"] = self._step

    @contextmanager
    def turn(self, input: Any = None) -> Iterator[TurnHandle]:
        """``turn/start`` now, ``turn/end`` when the block ends (``error`` if it raised)."""
        start = self.append("turn/start", {"input": input} if input is not None else {})
        handle = TurnHandle(start.seq)
        try:
            yield handle
        except BaseException as exc:
            reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
            self._end_quietly(
                "turn/end",
                {
                    "turn": start.seq,
                    "reason": reason,
                    "error": {"code": type(exc).__name__, "message": str(exc)[:4000]},
                },
            )
            raise
        self.append("turn/end", {"turn": start.seq, "reason": handle.reason})

    @contextmanager
    def step(self) -> Iterator[int]:
        """``step/start`` now and ``step/end`` when the block ends; yields the step's seq."""
        data = {"turn": self._turn.seq} if self._turn is not None else {}
        start = self.append("step/start", data)
        try:
            yield start.seq
        except BaseException:
            self._end_quietly("step/end", {"step": start.seq, **data})
            raise
        self.append("step/end", {"step": start.seq, **data})

    def _end_quietly(self, type_: str, data: dict[str, Any]) -> None:
        # The block's own exception is what the caller needs to see; a writer that has
        # failed cannot record the end and its repair will close the turn instead.
        try:
            self.append(type_, data)
        except JsonltapeError:
            pass
