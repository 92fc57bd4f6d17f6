"""The searchable text of a model-visible message event.

Text and reasoning parts give their content; a tool call gives its name and JSON arguments; a
tool response its response (JSON unless it is a string); uri and file parts their reference.
Blobs (base64) are skipped. Unknown part types contribute a string ``content`` or ``text``
member if they have one, so a new part type is searchable before anyone teaches us about it.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["MAX_TEXT", "message_fields"]

#: Longest text indexed per message; longer texts are cut here and flagged ``truncated``.
MAX_TEXT = 256 * 1024
_ROLE_OF_TYPE = {"user/message": "user", "assistant/message": "assistant", "tool/result": "tool"}
_enc = msgspec.json.Encoder()


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return _enc.encode(value).decode()
    except (TypeError, msgspec.EncodeError):  # pragma: no cover - decoded JSON re-encodes
        return str(value)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return ""
    kind = part.get("type")
    if kind in ("text", "reasoning"):
        content = part.get("content")
        return content if isinstance(content, str) else ""
    if kind == "tool_call":
        args = part.get("arguments")
        name = part.get("name")
        name = name if isinstance(name, str) else ""
        return f"{name} {_json(args)}" if args is not None else name
    if kind == "tool_call_response":
        return _json(part.get("response"))
    if kind == "uri":
        return str(part.get("uri") or "")
    if kind == "file":
        return str(part.get("file_id") or "")
    if kind == "blob":
        return ""
    for key in ("content", "text"):
        value = part.get(key)
        if isinstance(value, str):
            return value
    return ""


def message_fields(type_: str, data: dict[str, Any]) -> tuple[str, str, int]:
    """Return ``(role, text, truncated)`` of a message event's data (never raises)."""
    message = data.get("message")
    role = _ROLE_OF_TYPE.get(type_, "unknown")
    if not isinstance(message, dict):
        return role, "", 0
    if isinstance(message.get("role"), str):
        role = message["role"]
    parts = message.get("parts")
    if not isinstance(parts, list):
        return role, "", 0
    text = "\n".join(t for t in map(_part_text, parts) if t)
    if len(text) > MAX_TEXT:
        return role, text[:MAX_TEXT], 1
    return role, text, 0
