"""LangChain messages <-> jsonltape core events (the mapping of ``adapters.langchain``).

Every message is stored twice in its event's data: as a core message (spec §8.2) that every
jsonltape tool reads, and verbatim as ``data.langchain``, LangChain's own serialization
(``message_to_dict``: ``{"type", "data"}``), from which it is rebuilt exactly. A kind the
core vocabulary has no event for (``FunctionMessage``, ``RemoveMessage``, a ``ChatMessage``
with another role) becomes an ignorable ``x-langchain/message`` event that round-trips the
same way. Importing this module imports ``langchain_core``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.messages.tool import ToolCall, invalid_tool_call

from ..errors import FormatError, InvalidArgumentError
from ..events import PART_TYPES
from ..ids import new_session_id

__all__ = ["CLEAR", "EXTENSION", "from_event", "to_event"]

#: The event of a message kind the core vocabulary has no event for (ignorable: a fold skips
#: it, the adapter reads it back in order).
EXTENSION = "x-langchain/message"
#: Written by ``clear()`` after the surface retraction: extension messages before it are gone.
CLEAR = "x-langchain/clear"

#: ChatMessage roles that are the core roles under another spelling.
_CHAT_ROLES = {"user": "user", "human": "user", "system": "system", "developer": "system"}
_MEDIA = {"image": "image", "audio": "audio", "video": "video", "file": None}
#: Content blocks that repeat what ``tool_calls`` / ``invalid_tool_calls`` already say.
_CALL_BLOCKS = frozenset({"tool_call", "tool_call_chunk", "invalid_tool_call"})


def to_event(message: BaseMessage, where: int) -> dict[str, Any]:
    """The ``append_batch`` item of one message; ``where`` is its index in the call.

    Refuses (:class:`InvalidArgumentError`, nothing written) a message that LangChain's own
    serialization would not give back equal: what is read back must be what was added.
    """
    if not isinstance(message, BaseMessage):
        raise InvalidArgumentError(
            f"messages[{where}] is a {type(message).__name__}, not a LangChain BaseMessage",
            field=f"messages[{where}]",
        )
    verbatim = message_to_dict(message)
    try:
        back = messages_from_dict([verbatim])[0]
    except (ValueError, TypeError) as exc:  # a subclass with a type LangChain cannot load
        raise _lossy(where, message, f"LangChain cannot load it back ({exc})") from None
    if back != message:
        raise _lossy(where, message, "LangChain's message_to_dict does not give it back equal")
    core = _core(message)
    if core is None:
        return {"type": EXTENSION, "data": {"langchain": verbatim}, "ignorable": True}
    event_type, data = core
    data["langchain"] = verbatim
    return {"type": event_type, "data": data}


def _lossy(where: int, message: BaseMessage, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"messages[{where}] ({type(message).__name__}) cannot be stored without loss: {why}; "
        "pass JSON values (str, int, float, bool, None, lists, dicts) in content, "
        "additional_kwargs and response_metadata",
        field=f"messages[{where}]",
    )


def _core(m: BaseMessage) -> tuple[str, dict[str, Any]] | None:
    """The core event type and data of ``m`` (without the verbatim copy), or None."""
    if isinstance(m, ToolMessage):
        return "tool/result", _tool_result(m)
    if isinstance(m, AIMessage):
        return "assistant/message", _assistant(m)
    if isinstance(m, HumanMessage):
        return "user/message", {"message": _message(m, "user", _parts(m))}
    if isinstance(m, SystemMessage):
        return "user/message", {"message": _message(m, "system", _parts(m))}
    if isinstance(m, ChatMessage):
        role = _CHAT_ROLES.get(m.role)
        if role is not None:
            return "user/message", {"message": _message(m, role, _parts(m))}
        if m.role in ("assistant", "ai"):
            return "assistant/message", {"message": _message(m, "assistant", _parts(m))}
    return None  # FunctionMessage, RemoveMessage, other roles and kinds


def _message(m: BaseMessage, role: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    # LangChain ids are optional; the core id is not. A made-up one stays out of the verbatim
    # copy, so the message read back keeps id=None.
    out: dict[str, Any] = {"id": m.id if isinstance(m.id, str) and m.id else _new_id("msg")}
    out["role"] = role
    out["parts"] = parts
    if isinstance(m.name, str):
        out["name"] = m.name
    return out


def _new_id(prefix: str) -> str:
    return f"{prefix}_{new_session_id().lower()}"


def _assistant(m: AIMessage) -> dict[str, Any]:
    parts = _parts(m)
    if not any(p["type"] == "reasoning" for p in parts):
        # Providers that return reasoning beside the content (DeepSeek, Ollama, vLLM).
        extra = m.additional_kwargs.get("reasoning_content")
        if isinstance(extra, str) and extra:
            parts.insert(0, {"type": "reasoning", "content": extra})
    for call in m.tool_calls:
        parts.append(_call_part(call["id"], call["name"], call["args"]))
    for bad in m.invalid_tool_calls:  # the model's raw arguments, not valid JSON
        parts.append(_call_part(bad.get("id"), bad.get("name"), bad.get("args")))
    data: dict[str, Any] = {"message": _message(m, "assistant", parts)}
    model = m.response_metadata.get("model_name") or m.response_metadata.get("model")
    if isinstance(model, str) and model:
        data["model"] = model
    if m.usage_metadata:
        data["usage"] = dict(m.usage_metadata)
    return data


def _call_part(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": call_id if isinstance(call_id, str) and call_id else _new_id("call"),
        "name": name if isinstance(name, str) else "",
        "arguments": arguments,
    }


def _tool_result(m: ToolMessage) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response", "id": m.tool_call_id}
    part["response"] = m.content
    if m.status == "error":
        part["is_error"] = True
    return {"call_id": m.tool_call_id, "message": _message(m, "tool", [part])}


def _parts(m: BaseMessage) -> list[dict[str, Any]]:
    """Core parts of ``m``'s content, through LangChain's own standard content blocks (they
    translate provider formats: OpenAI ``image_url``, Anthropic ``thinking``, ...)."""
    blocks: list[Any]
    try:
        blocks = list(m.content_blocks)
    except Exception:  # a translator refusing odd content, or langchain-core < 1.0 (no
        # content_blocks): map the raw content
        blocks = [m.content] if isinstance(m.content, str) else list(m.content)
    parts: list[dict[str, Any]] = []
    for block in blocks:
        part = _part(block)
        if part is not None:
            parts.append(part)
    return parts


def _part(block: Any) -> dict[str, Any] | None:
    if isinstance(block, str):
        return {"type": "text", "content": block}
    if not isinstance(block, Mapping):
        return {"type": "x-langchain/block", "block": block}
    kind = block.get("type")
    if kind in _CALL_BLOCKS:
        return None  # the tool calls come from tool_calls / invalid_tool_calls
    value = block.get("value")
    if kind == "non_standard" and isinstance(value, Mapping) and value.get("type") == "thinking":
        # Anthropic thinking in a message without response_metadata["model_provider"], which
        # LangChain then cannot translate.
        block = {"type": "reasoning", "reasoning": value.get("thinking"), "extras": value}
        kind = "reasoning"
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "content": block["text"]}
    if kind == "reasoning":
        text = block.get("reasoning")
        part: dict[str, Any] = {"type": "reasoning"}
        part["content"] = text if isinstance(text, str) else ""
        extras = block.get("extras")
        signature = extras.get("signature") if isinstance(extras, Mapping) else None
        if isinstance(signature, str):
            part["signature"] = signature
        return part
    if kind in _MEDIA:
        media = _media(block, _MEDIA[kind])
        if media is not None:
            return media
    if isinstance(kind, str) and kind and kind not in PART_TYPES:
        return dict(block)  # a part of its own type (spec §8.2: kept, shown generically)
    return {"type": "x-langchain/block", "block": dict(block)}


def _media(block: Mapping[str, Any], modality: str | None) -> dict[str, Any] | None:
    """An image/audio/video/file block by reference (``uri``, ``file``) or inline (``blob``)."""
    mime = block.get("mime_type")
    part: dict[str, Any]
    if isinstance(block.get("url"), str):
        part = {"type": "uri", "uri": block["url"]}
    elif isinstance(block.get("file_id"), str):
        part = {"type": "file", "file_id": block["file_id"]}
    elif isinstance(block.get("base64"), str):
        part = {"type": "blob", "content": block["base64"]}
        mime = mime if isinstance(mime, str) else "application/octet-stream"
    else:
        return None
    if isinstance(mime, str):
        part["mime_type"] = mime
    if modality is not None:
        part["modality"] = modality
    return part


# -- reading back ---------------------------------------------------------------------------


def from_event(event_type: str, data: Mapping[str, Any], path: str, seq: int) -> BaseMessage:
    """The LangChain message of a stored event: its verbatim copy, else (an event another
    tool wrote: a compaction summary, an import) one made from the core message."""
    verbatim = data.get("langchain")
    if verbatim is not None:
        try:
            return messages_from_dict([verbatim])[0]
        except Exception as exc:  # hand-edited or from a newer LangChain
            raise FormatError(
                f"data.langchain of this {event_type} is not a LangChain message: {exc}",
                path=path,
                line=seq + 1,
                field="$.data.langchain",
            ) from None
    if event_type == EXTENSION:
        raise FormatError(
            f"this {EXTENSION} event has no data.langchain",
            path=path,
            line=seq + 1,
            field="$.data.langchain",
        )
    return _from_core(event_type, data)


def _from_core(event_type: str, data: Mapping[str, Any]) -> BaseMessage:
    message = data["message"]
    parts = message.get("parts", [])
    text = "".join(p["content"] for p in parts if p.get("type") == "text")
    common: dict[str, Any] = {"id": message.get("id")}
    if isinstance(message.get("name"), str):
        common["name"] = message["name"]
    if event_type == "tool/result":
        response = next(p for p in parts if p.get("type") == "tool_call_response")
        content = response.get("response")
        return ToolMessage(
            content=content if isinstance(content, (str, list)) else _json_text(content),
            tool_call_id=data["call_id"],
            status="error" if response.get("is_error") else "success",
            **common,
        )
    if event_type == "assistant/message":
        calls = [p for p in parts if p.get("type") == "tool_call"]
        good = [
            ToolCall(name=p["name"], args=p["arguments"], id=p["id"], type="tool_call")
            for p in calls
            if isinstance(p.get("arguments"), dict)
        ]
        bad = [  # arguments that are not a JSON object: LangChain's invalid tool calls
            invalid_tool_call(name=p["name"], args=_arg_text(p.get("arguments")), id=p["id"])
            for p in calls
            if not isinstance(p.get("arguments"), dict)
        ]
        return AIMessage(content=text, tool_calls=good, invalid_tool_calls=bad, **common)
    if message.get("role") == "system":
        return SystemMessage(content=text, **common)
    return HumanMessage(content=text, **common)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _arg_text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else _json_text(value)
