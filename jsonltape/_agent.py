"""What the agent helpers of :class:`jsonltape.Tape` append: message data and turn/step blocks.

The builders turn a helper's arguments into an event's data (refusing what no event could
carry, naming the member); the Tape method appends it through the one ``append`` pipeline,
which checks everything else. Nothing here touches the writer's state: the turn and step blocks
take any :class:`Appender` (what they need of a writer, which :class:`jsonltape.Tape` is), so
this module sits below the writer and never imports it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .errors import InvalidEventError, JsonltapeError

if TYPE_CHECKING:
    from .events import Event

__all__ = [
    "Appender",
    "TurnHandle",
    "assistant_data",
    "message_id",
    "step",
    "tool_call_data",
    "tool_result_data",
    "turn",
    "user_data",
]

# Message ids need to be unique, not secret: 64 random bits from a generator seeded by the OS
# (a getrandom() call per id costs more than the rest of building a message), reseeded in a
# forked child so parent and child never hand out the same ids.
_ids = random.Random(os.urandom(32))
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def message_id() -> str:
    """A fresh message id: 16 lowercase hex digits."""
    return f"{_ids.getrandbits(64):016x}"


class Appender(Protocol):
    """What a turn or step block needs of a writer: :class:`jsonltape.Tape` is one."""

    @property
    def open_turn(self) -> int | None:
        """Seq of the ``turn/start`` of the turn currently open, if any."""

    def append(self, type: str, data: Mapping[str, Any] | None = None) -> Event:
        """Append one event through the writer's pipeline and return it as written."""


class TurnHandle:
    """Yielded by :meth:`Tape.turn`; set ``reason`` to end the turn other than "completed"."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.reason = "completed"


def _parts(content: object, path: Path) -> list[Any]:
    """A message's content parts from text or a list of parts; anything else is refused."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    if not isinstance(content, (list, tuple)):
        raise InvalidEventError(
            f"content must be text or a list of content parts, not {type(content).__name__}",
            field="$.data.message.parts",
            path=path,
        )
    return list(content)


def _stamp(data: dict[str, Any], turn: int | None, step: int | None) -> dict[str, Any]:
    if turn is not None:
        data["turn"] = turn
    if step is not None:
        data["step"] = step
    return data


def user_data(content: object, id: str | None, path: Path) -> dict[str, Any]:
    """``user/message`` data: text or a list of content parts."""
    return {"message": {"id": id or message_id(), "role": "user", "parts": _parts(content, path)}}


def assistant_data(
    content: object,
    tool_calls: object,
    model: str | None,
    usage: object,
    id: str | None,
    turn: int | None,
    step: int | None,
    path: Path,
) -> dict[str, Any]:
    """``assistant/message`` data; ``tool_calls`` are ``{id?, name, arguments}`` mappings."""
    parts = [] if content is None or content == "" else _parts(content, path)
    if isinstance(tool_calls, (str, bytes, Mapping)) or not isinstance(tool_calls, Iterable):
        raise InvalidEventError(
            f"tool_calls must be a list of {{id?, name, arguments}} mappings, not "
            f"{type(tool_calls).__name__}",
            field="$.data.message.parts",
            path=path,
        )
    for call in tool_calls:
        if not isinstance(call, Mapping) or "name" not in call:
            raise InvalidEventError(
                f"a tool call must be a mapping with a 'name', not {call!r:.80}",
                field=f"$.data.message.parts[{len(parts)}]",
                path=path,
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
                path=path,
            )
        data["usage"] = dict(usage)
    return _stamp(data, turn, step)


def tool_call_data(
    name: object, arguments: Any, call_id: str | None, turn: int | None, step: int | None
) -> dict[str, Any]:
    """``tool/call`` data: a call about to run."""
    return _stamp(
        {"call_id": call_id or message_id(), "name": name, "arguments": arguments}, turn, step
    )


def tool_result_data(call_id: object, result: Any, is_error: object, path: Path) -> dict[str, Any]:
    """``tool/result`` data: the model-visible result of call ``call_id``."""
    part: dict[str, Any] = {"type": "tool_call_response", "id": call_id, "response": result}
    if type(is_error) is not bool:
        raise InvalidEventError(
            f"is_error must be True or False, not {is_error!r}",
            field="$.data.message.parts[0].is_error",
            path=path,
        )
    if is_error:
        part["is_error"] = True
    message = {"id": message_id(), "role": "tool", "parts": [part]}
    return {"call_id": call_id, "message": message}


@contextmanager
def turn(tape: Appender, input: Any) -> Iterator[TurnHandle]:
    """``turn/start`` now, ``turn/end`` when the block ends (``error`` if it raised)."""
    start = tape.append("turn/start", {"input": input} if input is not None else {})
    handle = TurnHandle(start.seq)
    try:
        yield handle
    except BaseException as exc:
        reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
        _end_quietly(
            tape,
            "turn/end",
            {
                "turn": start.seq,
                "reason": reason,
                "error": {"code": type(exc).__name__, "message": str(exc)[:4000]},
            },
        )
        raise
    tape.append("turn/end", {"turn": start.seq, "reason": handle.reason})


@contextmanager
def step(tape: Appender) -> Iterator[int]:
    """``step/start`` now and ``step/end`` when the block ends; yields the step's seq."""
    data = {"turn": tape.open_turn} if tape.open_turn is not None else {}
    start = tape.append("step/start", data)
    try:
        yield start.seq
    except BaseException:
        _end_quietly(tape, "step/end", {"step": start.seq, **data})
        raise
    tape.append("step/end", {"step": start.seq, **data})


def _end_quietly(tape: Appender, type_: str, data: dict[str, Any]) -> None:
    # The block's own exception is what the caller needs to see; a writer that has failed
    # cannot record the end and its repair will close the turn instead.
    try:
        tape.append(type_, data)
    except JsonltapeError:
        pass
