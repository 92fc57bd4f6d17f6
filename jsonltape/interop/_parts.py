"""The message content every importer builds: jsonltape parts (text, reasoning, tool calls,
media), a source's content blocks walked into them, and token usage renamed to jsonltape's.

Each builder gives its part's members in one fixed order, so every importer writes the same
bytes for the same part. A source module only says how one of its blocks maps
(:func:`parts_of` does the walking, and keeps a block it does not map as a part of its own type).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from ._source import too_deep

#: The part types the format defines (spec 8.2): a source block of one of these types that an
#: importer does not map is not one of them.
FORMAT_PARTS = frozenset(
    {"text", "reasoning", "tool_call", "tool_call_response", "uri", "blob", "file"}
)
#: Who issued a reasoning signature the Anthropic mapping may send back (see
#: :func:`reasoning_part`).
ANTHROPIC = "anthropic"

__all__ = [
    "ANTHROPIC",
    "FORMAT_PARTS",
    "anthropic_assistant_parts",
    "anthropic_result",
    "anthropic_split",
    "anthropic_user_parts",
    "blob_part",
    "data_url",
    "genai_parts",
    "genai_response",
    "json_arguments",
    "member",
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


def member(value: Any, key: str) -> dict[str, Any]:
    """``value[key]`` when both are JSON objects, else an empty one (a source's optional or
    mistyped sub-object read without a check at every use)."""
    inner = value.get(key) if isinstance(value, dict) else None
    return inner if isinstance(inner, dict) else {}


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
    (lossless for block kinds this importer does not know; a type the format defines, whose
    members the block need not have, is kept as ``source:<type>``: Cline's ``file`` block is not
    a jsonltape ``file`` part); anything else is skipped."""
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
            kept = dict(b)
            if kept["type"] in FORMAT_PARTS:
                kept["type"] = f"source:{kept['type']}"
            parts.append(kept)
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


# -- the content shapes several sources share -------------------------------------------------


def anthropic_user_parts(content: Any) -> list[dict[str, Any]]:
    """Anthropic Messages content of a user turn (a string, or text/image/document blocks;
    ``tool_result`` blocks are the caller's) as jsonltape parts."""
    return parts_of(content, _anthropic_user_block)


def anthropic_assistant_parts(content: Any, *, signed_by: str | None) -> list[dict[str, Any]]:
    """Anthropic Messages content of an assistant turn: ``text``, ``thinking`` (reasoning, its
    ``signature`` kept only when ``signed_by`` is Anthropic: :func:`reasoning_part`),
    ``tool_use`` (a tool_call); other blocks kept as parts of their own type."""
    return parts_of(content, lambda b: _anthropic_assistant_block(b, signed_by), empty_text=False)


def anthropic_split(content: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A user turn's Anthropic Messages content split into its ``tool_result`` blocks and
    the parts of everything else (:func:`anthropic_user_parts`)."""
    if isinstance(content, str):
        return [], anthropic_user_parts(content)
    blocks = content if isinstance(content, list) else []
    results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    others = [b for b in blocks if not (isinstance(b, dict) and b.get("type") == "tool_result")]
    return results, anthropic_user_parts(others)


def anthropic_result(content: Any) -> Any:
    """A ``tool_result`` block's content: text blocks joined by newlines into one string,
    anything else as it is."""
    if isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        for b in content
    ):
        return "\n".join(b["text"] for b in content)
    return content


def _anthropic_text(b: dict[str, Any]) -> dict[str, Any] | None:
    if b.get("type") == "text" and isinstance(b.get("text"), str):
        return text_part(b["text"])
    return None


def _anthropic_user_block(b: dict[str, Any]) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind in ("image", "document") and isinstance(b.get("source"), dict):
        return _anthropic_media(b["source"], "image" if kind == "image" else None)
    return _anthropic_text(b)


def _anthropic_media(source: dict[str, Any], modality: str | None) -> dict[str, Any] | None:
    """An image or document ``source`` (base64 data or a URL); None for another kind (the
    block is then kept whole)."""
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return blob_part(source["data"], str(source.get("media_type") or ""), modality)
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return uri_part(source["url"], modality=modality)
    return None


def _anthropic_assistant_block(b: dict[str, Any], signed_by: str | None) -> dict[str, Any] | None:
    kind = b.get("type")
    if kind == "thinking" and isinstance(b.get("thinking"), str):
        return reasoning_part(b["thinking"], b.get("signature"), signed_by=signed_by)
    if kind == "tool_use" and isinstance(b.get("id"), str) and isinstance(b.get("name"), str):
        return tool_call_part(b["id"], b["name"], b.get("input"))
    return _anthropic_text(b)


def genai_parts(content: Any) -> list[dict[str, Any]]:
    """jsonltape parts of Google GenAI content (``PartListUnion``: a string, a ``Part``, or a
    list of either; what Gemini CLI and Qwen Code record): text, thoughts (``thought: true``,
    reasoning; a thought signature is Google's, never an Anthropic one), ``inlineData`` (a blob),
    ``fileData`` (a uri). Calls and responses are the caller's; other parts are skipped."""
    items = content if isinstance(content, list) else [content]
    parts: list[dict[str, Any]] = []
    for p in items:
        if isinstance(p, str):
            if p:
                parts.append(text_part(p))
        elif not isinstance(p, dict):
            continue
        elif isinstance(p.get("text"), str):
            if p["text"]:
                thought = p.get("thought") is True
                parts.append(reasoning_part(p["text"]) if thought else text_part(p["text"]))
        elif isinstance(p.get("inlineData"), dict):
            d = p["inlineData"]
            mime = d.get("mimeType") if isinstance(d.get("mimeType"), str) else ""
            if isinstance(d.get("data"), str):
                modality = mime.split("/")[0] if "/" in mime else "file"
                parts.append(blob_part(d["data"], mime, modality))
        elif isinstance(p.get("fileData"), dict):
            d = p["fileData"]
            uri = d.get("fileUri")
            if isinstance(uri, str):
                mime = d.get("mimeType") if isinstance(d.get("mimeType"), str) else ""
                parts.append(uri_part(uri, mime_type=mime, modality="file"))
    return parts


def genai_response(result: Any) -> Any:
    """What a tool answered in Google GenAI parts (a ``functionResponse`` part, or a list of
    parts holding one): its ``response`` 's ``output`` (or ``error``) text when that is all it
    holds, else its whole ``response``; a result of other parts as it is."""
    items = result if isinstance(result, list) else [result]
    responses = [
        p["functionResponse"].get("response")
        for p in items
        if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
    ]
    if len(responses) == 1 and len(items) == 1:
        r = responses[0]
        if isinstance(r, dict) and len(r) == 1:
            value = r.get("output", r.get("error"))
            if isinstance(value, str):
                return value
        return r
    return result


def json_arguments(value: Any) -> Any:
    """A tool call's arguments as a source writes them (OpenAI's JSON text): the object when
    they are a JSON object text, else as given (not JSON, or another JSON value)."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
        if too_deep(raw) is not None:  # kept as text, whatever the call stack's depth
            return value
        try:
            decoded = msgspec.json.decode(raw)
        except (msgspec.DecodeError, RecursionError):  # not JSON
            return value
        return decoded if isinstance(decoded, dict) else value
    return value
