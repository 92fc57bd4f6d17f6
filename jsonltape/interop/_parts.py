"""The message content every importer builds: jsonltape parts (text, reasoning, tool calls,
media), a source's content blocks walked into them, and token usage renamed to jsonltape's.

Each builder gives its part's members in one fixed order, so every importer writes the same
bytes for the same part. A source module only says how one of its blocks maps
(:func:`parts_of` does the walking, and keeps a block it does not map as a part of its own type).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: Who issued a reasoning signature the Anthropic mapping may send back (see
#: :func:`reasoning_part`).
ANTHROPIC = "anthropic"

__all__ = [
    "ANTHROPIC",
    "blob_part",
    "data_url",
    "parts_of",
    "reasoning_part",
    "renamed_usage",
    "text_of",
    "text_part",
    "tool_call_part",
    "uri_part",
]


def text_part(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def reasoning_part(
    content: str, signature: Any = None, *, signed_by: str | None = None
) -> dict[str, Any]:
    """A reasoning part; its ``signature`` only when it is a non-empty string that Anthropic
    issued (``signed_by="anthropic"``, which the importer knows from where the reply came).

    The Anthropic mapping sends a signed reasoning part back as a ``thinking`` block, and the
    API verifies the signature: whatever else a source keeps in the same place (the field name
    an OpenAI-compatible server streamed the reasoning in, an encrypted OpenAI reasoning item,
    a Gemini thought signature) would be a forgery there. Such reasoning is unsigned, as spec
    8.7.12 says (left out of an Anthropic body); the source line keeps the value verbatim."""
    part: dict[str, Any] = {"type": "reasoning", "content": content}
    if signed_by == ANTHROPIC and isinstance(signature, str) and signature:
        part["signature"] = signature
    return part


def tool_call_part(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def blob_part(data: str, mime_type: str, modality: str | None = None) -> dict[str, Any]:
    """Inline media (base64 ``data``)."""
    part: dict[str, Any] = {"type": "blob", "content": data, "mime_type": mime_type}
    if modality:
        part["modality"] = modality
    return part


def uri_part(
    address: str, *, mime_type: str | None = None, modality: str | None = None
) -> dict[str, Any]:
    """Media by reference."""
    part: dict[str, Any] = {"type": "uri", "uri": address}
    if mime_type is not None:
        part["mime_type"] = mime_type
    if modality:
        part["modality"] = modality
    return part


def data_url(url: str, modality: str | None = None) -> dict[str, Any]:
    """A ``data:<mime>;base64,<data>`` URL as a blob part, any other URL as a uri part."""
    head, sep, data = url.partition(";base64,")
    if url.startswith("data:") and sep:
        return blob_part(data, head[5:], modality)
    return uri_part(url, modality=modality)


def parts_of(
    content: Any,
    block: Callable[[dict[str, Any]], dict[str, Any] | None],
    *,
    empty_text: bool = True,
) -> list[dict[str, Any]]:
    """Parts of a source message's content: a string is one text part (none if it is empty
    and not ``empty_text``); in a list, each object goes through ``block``, and one it does
    not map (None) but that has a string ``type`` is kept whole as a part of that type
    (lossless for block kinds this importer does not know); anything else is skipped."""
    if isinstance(content, str):
        return [text_part(content)] if content or empty_text else []
    parts: list[dict[str, Any]] = []
    for b in content if isinstance(content, list) else ():
        if not isinstance(b, dict):
            continue
        part = block(b)
        if part is not None:
            parts.append(part)
        elif isinstance(b.get("type"), str):
            parts.append(dict(b))
    return parts


def text_of(parts: Iterable[dict[str, Any]]) -> str:
    """The text parts' contents joined by newlines (what a title or a prompt check reads)."""
    return "\n".join(p["content"] for p in parts if p.get("type") == "text")


def renamed_usage(
    usage: Any, names: Iterable[tuple[str, str]], *, ints_only: bool = False
) -> dict[str, Any] | None:
    """A source's token usage under jsonltape's names (``names``: (source, jsonltape) pairs,
    in output order); None if ``usage`` is not an object. ``ints_only`` drops counts that are
    not integers (booleans included)."""
    if not isinstance(usage, dict):
        return None
    return {
        dst: usage[src]
        for src, dst in names
        if src in usage and (not ints_only or type(usage[src]) is int)
    }
