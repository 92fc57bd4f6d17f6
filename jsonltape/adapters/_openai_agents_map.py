"""Responses-API input items <-> jsonltape events, for :mod:`jsonltape.adapters.openai_agents`.

Every item is recorded by a model-visible event (the SDK sends every stored item to the model),
so the session's items are exactly those of the fold's current surface and ``pop_item`` /
``clear_session`` are surface operations. The items are kept verbatim in
``data.openai_agents.items``; the event's ``message`` is the spec's reading of them (spec §8.2),
for viewers, search and the provider mappings. An item kind nobody mapped still becomes a
message event, with one part of the extension type ``openai_agents.item`` naming the item's
type, so it round-trips and can be popped like any other.

Importing this module imports no framework: items are plain JSON objects.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import FoldError, InvalidArgumentError

__all__ = ["MEMBER", "UNKNOWN_PART", "events_of", "items_of"]

#: The ``data`` member holding the SDK's own item (spec §9: an extension member).
MEMBER = "openai_agents"
#: The part type of an item kind without a mapping (spec §8.2: kept, shown generically).
UNKNOWN_PART = "openai_agents.item"
_MAX_SAFE = 2**53 - 1
#: Tool call items whose output item names the same ``call_id``: (call type, tool name).
_CALLS = {
    "function_call": None,  # the item's own ``name``
    "custom_tool_call": None,
    "computer_call": "computer",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
}
_OUTPUTS = {f"{t}_output" for t in _CALLS}
_ITEM_META = ("type", "id", "call_id", "status")


def events_of(items: Sequence[Any]) -> list[dict[str, Any]]:
    """The events (``{type, data}``) that record ``items``, in order.

    One event per item, except that consecutive items of the model's side (assistant
    messages, reasoning, tool calls: the output of one response) share one
    ``assistant/message``, as the spec's reading of a response has it: parallel tool calls in
    one message, followed by their results (what a Chat Completions request needs).
    """
    events: list[dict[str, Any]] = []
    run: list[Mapping[str, Any]] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidArgumentError(
                f"a session item is a JSON object (a dict), not {type(item).__name__}",
                field="items",
                batch_item=index,
            )
        if _model_side(item):
            run.append(item)
            continue
        if run:
            events.append(_response(run))
            run = []
        events.append(_single(item))
    if run:
        events.append(_response(run))
    return events


def _model_side(item: Mapping[str, Any]) -> bool:
    kind = item.get("type")
    if kind in (None, "message"):
        return item.get("role") == "assistant"
    return kind == "reasoning" or (kind in _CALLS and _call_id(item) is not None)


def _call_id(item: Mapping[str, Any]) -> str | None:
    call_id = item.get("call_id")
    return call_id if isinstance(call_id, str) and call_id else None


def _response(run: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One ``assistant/message`` for consecutive model-side items."""
    parts: list[dict[str, Any]] = []
    for item in run:
        kind = item.get("type")
        if kind == "reasoning":
            parts += _reasoning_parts(item)
        elif kind in _CALLS:
            call = {"type": "tool_call", "id": item["call_id"], "name": _tool_name(item)}
            parts.append({**call, "arguments": _args(item)})
        else:
            parts += _output_parts(item.get("content"))
    message = _message("assistant", run, parts)
    return {"type": "assistant/message", "data": {"message": message, **_verbatim(run)}}


def _single(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    role = item.get("role")
    verbatim = _verbatim([item])
    if kind in (None, "message") and role in ("user", "system", "developer"):
        message = _message("user" if role == "user" else "system", [item], _input_parts(item))
        return {"type": "user/message", "data": {"message": message, **verbatim}}
    call_id = _call_id(item)
    if kind in _OUTPUTS and call_id is not None:
        response = {"type": "tool_call_response", "id": call_id, "response": item.get("output")}
        message = _message("tool", [item], [response])
        return {"type": "tool/result", "data": {"call_id": call_id, "message": message, **verbatim}}
    # Not mapped (yet): a message event all the same, whose one part says what the item is.
    part = {"type": UNKNOWN_PART, "item_type": kind if isinstance(kind, str) else None}
    if role in ("user", "system", "developer"):
        message = _message("user" if role == "user" else "system", [item], [part])
        return {"type": "user/message", "data": {"message": message, **verbatim}}
    message = _message("assistant", [item], [part])
    return {"type": "assistant/message", "data": {"message": message, **verbatim}}


def _verbatim(items: list[Mapping[str, Any]]) -> dict[str, Any]:
    return {MEMBER: {"items": [dict(item) for item in items]}}


def items_of(type_: str, data: Mapping[str, Any], seq: int, path: str) -> list[dict[str, Any]]:
    """The items an event on the surface stands for: the verbatim ones this adapter wrote,
    or, for a message another tool wrote (a compaction summary, a message appended with
    ``Tape.user``), its text as an easy input message or function call output."""
    member = data.get(MEMBER)
    if isinstance(member, Mapping) and isinstance(member.get("items"), list):
        items: list[dict[str, Any]] = member["items"]
        return items
    return [_foreign(type_, data, seq, path)]


def _foreign(type_: str, data: Mapping[str, Any], seq: int, path: str) -> dict[str, Any]:
    message = data.get("message")
    parts = message.get("parts") if isinstance(message, Mapping) else None
    parts = parts if isinstance(parts, list) else []
    if type_ == "tool/result":
        response = next(
            (p.get("response") for p in parts if p.get("type") == "tool_call_response"), None
        )
        output = response if isinstance(response, str) else json.dumps(response)
        return {"type": "function_call_output", "call_id": data.get("call_id"), "output": output}
    if all(p.get("type") == "text" for p in parts) and isinstance(message, Mapping):
        role = message.get("role")
        text = "".join(str(p.get("content", "")) for p in parts)
        return {
            "role": role if role in ("user", "system", "assistant") else "user",
            "content": text,
        }
    raise FoldError(
        f"seq {seq} is a {type_} that neither this adapter nor plain text can stand for as an "
        "Agents SDK item (it holds non-text parts and no data.openai_agents.items)",
        path=path,
        line=seq + 1,
        field="$.data.message.parts",
    )


# -- the spec's reading of an item ----------------------------------------------------------


def _message(
    role: str, items: list[Mapping[str, Any]], parts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The message: the first item id there is, else a fresh one (an input item usually has
    no id; a message needs one, spec §8.2)."""
    ids = [i["id"] for i in items if isinstance(i.get("id"), str) and i["id"]]
    return {"id": ids[0] if ids else f"oa-{uuid.uuid4().hex}", "role": role, "parts": parts}


def _input_parts(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for p in content if isinstance(content, list) else ():
        kind = p.get("type") if isinstance(p, Mapping) else None
        if kind in ("input_text", "output_text") and isinstance(p.get("text"), str):
            parts.append({"type": "text", "content": p["text"]})
        elif kind == "input_image" and isinstance(p.get("image_url"), str):
            parts.append({"type": "uri", "uri": p["image_url"], "modality": "image"})
        elif kind in ("input_image", "input_file") and isinstance(p.get("file_id"), str):
            modality = {"modality": "image"} if kind == "input_image" else {}
            parts.append({"type": "file", "file_id": p["file_id"], **modality})
        elif kind == "input_file" and isinstance(p.get("file_url"), str):
            parts.append({"type": "uri", "uri": p["file_url"]})
        else:  # audio, inline file data, what comes next: kept in the item, named here
            parts.append(
                {"type": UNKNOWN_PART, "item_type": kind if isinstance(kind, str) else None}
            )
    return parts


def _output_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for p in content if isinstance(content, list) else ():
        kind = p.get("type") if isinstance(p, Mapping) else None
        if kind in ("output_text", "input_text") and isinstance(p.get("text"), str):
            parts.append({"type": "text", "content": p["text"]})
        elif kind == "refusal" and isinstance(p.get("refusal"), str):
            parts.append({"type": "text", "content": p["refusal"]})
        else:
            parts.append(
                {"type": UNKNOWN_PART, "item_type": kind if isinstance(kind, str) else None}
            )
    return parts


def _reasoning_parts(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for key in ("summary", "content"):  # summary_text, then reasoning_text
        for p in item.get(key) or ():
            if isinstance(p, Mapping) and isinstance(p.get("text"), str):
                parts.append({"type": "reasoning", "content": p["text"]})
    return parts


def _tool_name(item: Mapping[str, Any]) -> str:
    fixed = _CALLS[item["type"]]
    name = item.get("name")
    return fixed if fixed is not None else (name if isinstance(name, str) else item["type"])


def _args(item: Mapping[str, Any]) -> Any:
    kind = item["type"]
    if kind == "function_call":
        return _json_or_text(item.get("arguments"))
    if kind == "custom_tool_call":
        return item.get("input")
    return {k: v for k, v in item.items() if k not in _ITEM_META}


def _json_or_text(text: Any) -> Any:
    """Arguments as an object when the model produced a JSON object, else the raw string."""
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, dict) and _storable(value, 0) else text


def _refuse(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON (spec §6)


def _storable(value: Any, depth: int) -> bool:
    """Within the spec's limits (§6): integers within ±(2**53-1), nesting well under 128."""
    if depth > 100:
        return False
    if isinstance(value, dict):
        return all(_storable(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(_storable(v, depth + 1) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return -_MAX_SAFE <= value <= _MAX_SAFE
    return True
