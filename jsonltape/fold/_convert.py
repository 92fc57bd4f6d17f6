"""The neutral message form and its OpenAI and Anthropic request shapes.

The neutral form is the surface itself: one item per current message event, carrying the
message exactly as logged (OpenTelemetry GenAI parts) plus where it came from. The two provider
shapes are derived from it by fixed rules (spec "Surface and fold semantics"), so the same
history always converts to the same request body. Nothing here invents content: parts a
provider cannot take are left out, never rewritten into text, and so are tool calls no result
answers where the provider wants one (no synthetic result is made up: spec 8.7.11, 8.7.12).
``_valid`` checks the bodies against the providers' rules.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from decimal import Decimal
from typing import Any, Literal, NamedTuple

import msgspec

from .._surface import Status, SurfaceFold
from ..events import Event
from ._fold import Node, Version
from ._request_keys import ANTHROPIC_KEYS, OPENAI_KEYS

__all__ = [
    "Format",
    "MessageChange",
    "answer_scopes",
    "anthropic_body",
    "anthropic_request",
    "compact_json",
    "js_number",
    "message_changes",
    "message_text",
    "neutral_item",
    "openai_body",
    "openai_request",
    "paired",
    "tool_input",
]

Format = Literal["neutral", "openai", "anthropic"]
_json = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()
#: Request members the folded header fills in; ``params`` never overrides them.
_RESERVED = frozenset({"model", "messages", "tools", "system"})


def neutral_item(node: Node, version: Version | None = None) -> dict[str, Any]:
    """One neutral history item for a message event."""
    data = _json.decode(node.data)
    item: dict[str, Any] = {"seq": node.seq}
    if node.session is not None:
        item["session"] = node.session
    item["time"] = node.time
    item["type"] = node.type
    if version is not None:
        item["status"] = version.status
        if version.by is not None:
            item["by"] = version.by
    item["message"] = data["message"]
    if node.type == "tool/result":
        item["call_id"] = data["call_id"]
        for name in ("error", "synthetic"):
            if data.get(name) not in (None, False):
                item[name] = data[name]
    if isinstance(data.get("origin"), dict):
        item["origin"] = data["origin"]
    return item


def js_number(x: float) -> str:
    """A float as ECMAScript's Number::toString writes it (what ``JSON.stringify`` does):
    the shortest round-trip digits, no ``.0``, exponents only outside 1e-6 <= |x| < 1e21."""
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    _, digits, exp = Decimal(repr(abs(x))).as_tuple()
    assert isinstance(exp, int)
    s = "".join(map(str, digits)).rstrip("0")
    exp += len(digits) - len(s)
    k = len(s)
    n = exp + k  # the value is 0.s * 10**n
    if k <= n <= 21:
        return sign + s + "0" * (n - k)
    if 0 < n <= 21:
        return sign + s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + s
    e = n - 1
    mantissa = s if k == 1 else s[0] + "." + s[1:]
    return f"{sign}{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


def _js_value(value: Any) -> Any:
    if isinstance(value, float):
        return msgspec.Raw(js_number(value).encode())
    if isinstance(value, dict):
        return {k: _js_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_value(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    """JSON text without whitespace, members in stored order, non-ASCII as is, numbers as
    ``JSON.stringify`` writes them: the same text a JavaScript reader produces."""
    return _enc.encode(_js_value(value)).decode()


def _text(value: Any) -> str:
    """A tool response or arguments as text: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else compact_json(value)


def message_text(data: dict[str, Any], *, reasoning: bool = False) -> str:
    """Searchable text of a message event's data: text parts, tool names with their arguments
    and tool responses, one per line (reasoning only if asked)."""
    message = data.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    out: list[str] = []
    for p in parts if isinstance(parts, list) else ():
        if not isinstance(p, dict):
            continue
        kind = p.get("type")
        if kind == "text" or (kind == "reasoning" and reasoning):
            if isinstance(p.get("content"), str):
                out.append(p["content"])
        elif kind == "tool_call":
            out.append(f"{p.get('name')} {_text(p.get('arguments'))}")
        elif kind == "tool_call_response":
            out.append(_text(p.get("response")))
        elif kind == "uri" and isinstance(p.get("uri"), str):
            out.append(p["uri"])
    return "\n".join(out)


def answer_scopes(items: Iterable[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], int | None]]:
    """Each neutral item with, for a ``tool/result``, the position (in ``items``) of the
    assistant message whose call it answers: the latest earlier one declaring its ``call_id``
    (spec 8.7.11). Servers that number calls per response (``call_1``, ``call_2``, ...) reuse an
    id in a later turn; the result belongs to the call of its own turn, not to the first call
    ever made with that id. None for every other item, and for a result no earlier item
    declares."""
    latest: dict[str, int] = {}
    for i, item in enumerate(items):
        if item["type"] == "tool/result":
            yield item, latest.get(item["call_id"])
            continue
        if item["type"] == "assistant/message":
            for p in item["message"]["parts"]:
                if isinstance(p, dict) and p.get("type") == "tool_call":
                    latest[p["id"]] = i
        yield item, None


def paired(items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Drop tool results a provider would refuse: those answering no tool call declared by an
    earlier item, and repeated answers to a call already answered (streams). A call is the
    latest declaration of its id (:func:`answer_scopes`): a later turn may use the id again."""
    answered: set[tuple[int, str]] = set()
    for item, scope in answer_scopes(items):
        if item["type"] == "tool/result":
            if scope is None or (scope, item["call_id"]) in answered:
                continue
            answered.add((scope, item["call_id"]))
        yield item


def _is_image(part: dict[str, Any]) -> bool:
    mime = part.get("mime_type")
    return part.get("modality") == "image" or (isinstance(mime, str) and mime.startswith("image/"))


def _params(
    header: dict[str, Any] | None, body: dict[str, Any], defined: frozenset[str]
) -> dict[str, Any]:
    """The header's ``params`` the provider's API ``defined`` as request members, after the
    members the fold sets. A tool's own setting (pi's ``thinking_level``, Codex's
    ``reasoning_effort`` in an Anthropic body) stays in the header only: the API would refuse
    the whole request for it."""
    params = header.get("params") if header else None
    if isinstance(params, dict):
        for k, v in params.items():
            if k in defined and k not in _RESERVED and k not in body:
                body[k] = v
    return body


# -- OpenAI Chat Completions ----------------------------------------------------------------


def _openai_part(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part["content"]}
    if kind == "uri" and _is_image(part):
        return {"type": "image_url", "image_url": {"url": part["uri"]}}
    if kind == "blob":
        url = f"data:{part['mime_type']};base64,{part['content']}"
        if _is_image(part):
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url}}
    if kind == "file":
        return {"type": "file", "file": {"file_id": part["file_id"]}}
    return None


def _openai_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    out = [c for c in (_openai_part(p) for p in parts) if c is not None]
    if not out:
        return None
    if len(out) == 1 and out[0]["type"] == "text":
        return str(out[0]["text"])
    return out


def _openai_message(item: dict[str, Any]) -> dict[str, Any] | None:
    message = item["message"]
    parts = [p for p in message["parts"] if isinstance(p, dict)]
    role = message["role"]
    out: dict[str, Any]
    if item["type"] == "tool/result":
        response = next(p for p in parts if p.get("type") == "tool_call_response")
        return {
            "role": "tool",
            "tool_call_id": item["call_id"],
            "content": _text(response.get("response")),
        }
    if role == "assistant":
        text = [p for p in parts if p.get("type") == "text"]
        calls = [
            {
                "id": p["id"],
                "type": "function",
                "function": {"name": p["name"], "arguments": _text(p.get("arguments"))},
            }
            for p in parts
            if p.get("type") == "tool_call"
        ]
        content = _openai_content(text)
        if content is None and not calls:
            return None
        out = {"role": "assistant", "content": content}
        if calls:
            out["tool_calls"] = calls
    else:
        if role == "system":
            parts = [p for p in parts if p.get("type") == "text"]
        content = _openai_content(parts)
        if content is None:
            return None
        out = {"role": role, "content": content}
    if isinstance(message.get("name"), str):
        out["name"] = message["name"]
    return out


def _openai_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(tool.get("name"), str):
        return tool
    fn: dict[str, Any] = {"name": tool["name"]}
    if "description" in tool:
        fn["description"] = tool["description"]
    schema = tool.get("parameters", tool.get("input_schema"))
    if schema is not None:
        fn["parameters"] = schema
    return {"type": "function", "function": fn}


def openai_request(
    items: Iterable[dict[str, Any]], header: dict[str, Any] | None
) -> dict[str, Any]:
    """A Chat Completions request body: ``model``, ``messages``, ``tools``, then params."""
    body = openai_body(items, header)
    body["messages"] = list(body["messages"])
    return body


def openai_body(items: Iterable[dict[str, Any]], header: dict[str, Any] | None) -> dict[str, Any]:
    """:func:`openai_request` with ``messages`` an iterator, made as it is read (streaming)."""
    body: dict[str, Any] = {}
    if header and isinstance(header.get("model"), str):
        body["model"] = header["model"]
    body["messages"] = _openai_messages(items, header)
    tools = header.get("tools") if header else None
    if isinstance(tools, list) and tools:
        body["tools"] = [_openai_tool(t) if isinstance(t, dict) else t for t in tools]
    return _params(header, body, OPENAI_KEYS)


def _openai_messages(
    items: Iterable[dict[str, Any]], header: dict[str, Any] | None
) -> Iterator[dict[str, Any]]:
    if header and isinstance(header.get("system"), str) and header["system"]:
        yield {"role": "system", "content": header["system"]}
    yield from _openai_answered(
        m for m in (_openai_message(item) for item in paired(items)) if m is not None
    )


def _openai_answered(messages: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Keep only answered calls (spec 8.7.11): an assistant message's tool call stays only if a
    ``tool`` message answers it in the run of ``tool`` messages right after it and no earlier
    call of the message has its id; the others are left out (and the message too if nothing is
    left), as is a ``tool`` message answering no call of the assistant message right before its
    run."""
    held: dict[str, Any] | None = None  # an assistant message with calls, until its run ends
    run: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            ids = {c["id"] for c in held["tool_calls"]} if held is not None else set()
            if m["tool_call_id"] in ids - {r["tool_call_id"] for r in run}:
                run.append(m)
            continue
        if held is not None:
            yield from _openai_close(held, run)
            held, run = None, []
        if m["role"] == "assistant" and m.get("tool_calls"):
            held = m
        else:
            yield m
    if held is not None:
        yield from _openai_close(held, run)


def _openai_close(held: dict[str, Any], run: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    answered = {r["tool_call_id"] for r in run}
    calls = []
    for c in held["tool_calls"]:
        if c["id"] in answered:
            calls.append(c)
            answered.discard(c["id"])  # a message may declare a call twice: the API wants one
    if calls:
        held["tool_calls"] = calls
    else:
        del held["tool_calls"]
        if held["content"] is None:
            return
    yield held
    yield from run


# -- Anthropic Messages ---------------------------------------------------------------------


def _source(part: dict[str, Any]) -> dict[str, Any]:
    kind = part["type"]
    if kind == "uri":
        return {"type": "url", "url": part["uri"]}
    if kind == "blob":
        return {"type": "base64", "media_type": part["mime_type"], "data": part["content"]}
    return {"type": "file", "file_id": part["file_id"]}


def tool_input(arguments: Any) -> dict[str, Any]:
    """Tool call arguments as an object, as the Anthropic mapping sends them (spec §8.7.12):
    an object as is, a string holding a JSON object decoded, ``{}`` for none, else
    ``{"arguments": <arguments>}``."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            decoded = _json.decode(arguments)
        except msgspec.DecodeError:
            decoded = None
        if isinstance(decoded, dict):
            return decoded
    if isinstance(arguments, dict):
        return arguments
    return {"arguments": arguments}


def _anthropic_block(part: dict[str, Any], role: str) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part["content"]} if part["content"] else None
    if kind == "reasoning":
        sig = part.get("signature")
        if role != "assistant" or not isinstance(sig, str) or not sig:
            return None
        return {"type": "thinking", "thinking": part["content"], "signature": sig}
    if kind == "tool_call" and role == "assistant":
        return {
            "type": "tool_use",
            "id": part["id"],
            "name": part["name"],
            "input": tool_input(part.get("arguments")),
        }
    if kind in ("uri", "blob", "file") and role == "user":
        if _is_image(part):
            return {"type": "image", "source": _source(part)}
        if kind == "uri" and part.get("mime_type") != "application/pdf":
            return None
        return {"type": "document", "source": _source(part)}
    return None


def _anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(tool.get("name"), str):
        return tool
    out: dict[str, Any] = {"name": tool["name"]}
    if "description" in tool:
        out["description"] = tool["description"]
    schema = tool.get("parameters", tool.get("input_schema"))
    out["input_schema"] = schema if schema is not None else {"type": "object"}
    return out


def anthropic_request(
    items: Collection[dict[str, Any]], header: dict[str, Any] | None
) -> dict[str, Any]:
    """A Messages API request body: ``model``, ``system``, ``messages``, ``tools``, params."""
    body = anthropic_body(items, header)
    body["messages"] = list(body["messages"])
    return body


def anthropic_body(
    items: Collection[dict[str, Any]], header: dict[str, Any] | None
) -> dict[str, Any]:
    """:func:`anthropic_request` with ``messages`` an iterator (streaming). ``items`` is read
    twice: first for the system prompt, which system messages anywhere in the history join."""
    system: list[str] = []
    if header and isinstance(header.get("system"), str) and header["system"]:
        system.append(header["system"])
    for item in items:
        message = item["message"]
        if message["role"] == "system":
            text = "\n\n".join(
                p["content"]
                for p in message["parts"]
                if isinstance(p, dict) and p.get("type") == "text"
            )
            if text:
                system.append(text)
    body: dict[str, Any] = {}
    if header and isinstance(header.get("model"), str):
        body["model"] = header["model"]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = _anthropic_answered(_anthropic_turns(items))
    tools = header.get("tools") if header else None
    if isinstance(tools, list) and tools:
        body["tools"] = [_anthropic_tool(t) if isinstance(t, dict) else t for t in tools]
    return _params(header, body, ANTHROPIC_KEYS)


def _anthropic_turns(items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Turns of alternating roles: consecutive messages of one role merge into one turn, held
    until the next role starts; in a user turn tool results come first, as the API requires."""
    turn: dict[str, Any] | None = None
    for item in paired(items):
        message = item["message"]
        parts = [p for p in message["parts"] if isinstance(p, dict)]
        if message["role"] == "system":
            continue  # in the system prompt
        if item["type"] == "tool/result":
            response = next(p for p in parts if p.get("type") == "tool_call_response")
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": item["call_id"],
                "content": _text(response.get("response")),
            }
            if response.get("is_error") is True:
                block["is_error"] = True
            role, blocks = "user", [block]
        else:
            role = message["role"]
            blocks = [b for b in (_anthropic_block(p, role) for p in parts) if b is not None]
        if not blocks:
            continue
        if turn is not None and turn["role"] == role:
            turn["content"].extend(blocks)
            continue
        if turn is not None:
            yield _tool_results_first(turn)
        turn = {"role": role, "content": blocks}
    if turn is not None:
        yield _tool_results_first(turn)


def _anthropic_answered(turns: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Keep only answered calls (spec 8.7.12): a ``tool_use`` block stays only if the next
    message is a user message with a ``tool_result`` for it and no earlier ``tool_use`` of its
    message has its id (merged messages can repeat a call); a ``tool_result`` stays only if it
    answers a kept ``tool_use`` of the message right before. A message left with no blocks is
    left out and its neighbours, now of one role, merge. The last two messages stay held: the
    newest assistant one until the next user message says which of its calls were answered,
    the user one below it in case that assistant message is emptied and the next user message
    merges into it."""
    held: list[dict[str, Any]] = []
    for turn in turns:
        top = held[-1] if held else None
        if turn["role"] == "user":
            uses: set[str] = set()
            if top is not None and top["role"] == "assistant":
                uses = {b["id"] for b in top["content"] if b["type"] == "tool_use"}
            seen: set[str] = set()
            content: list[dict[str, Any]] = []
            for b in turn["content"]:
                if b["type"] == "tool_result":
                    if b["tool_use_id"] not in uses or b["tool_use_id"] in seen:
                        continue
                    seen.add(b["tool_use_id"])
                content.append(b)
            turn["content"] = content
            if top is not None and top["role"] == "assistant":
                kept: set[str] = set()  # one tool_use per id: merged messages may repeat one
                blocks = []
                for b in top["content"]:
                    if b["type"] == "tool_use":
                        if b["id"] not in seen or b["id"] in kept:
                            continue
                        kept.add(b["id"])
                    blocks.append(b)
                top["content"] = blocks
                if not top["content"]:
                    held.pop()
                    top = held[-1] if held else None
        elif top is not None and top["role"] == "assistant":  # its user message was emptied
            top["content"] = [b for b in top["content"] if b["type"] != "tool_use"]
        if turn["content"]:
            if top is not None and top["role"] == turn["role"]:
                top["content"].extend(turn["content"])
            else:
                held.append(turn)
        while len(held) > 2:
            yield held.pop(0)
    if held and held[-1]["role"] == "assistant":
        last = held[-1]
        last["content"] = [b for b in last["content"] if b["type"] != "tool_use"]
        if not last["content"]:
            held.pop()
    yield from held


def _tool_results_first(turn: dict[str, Any]) -> dict[str, Any]:
    if turn["role"] == "user":
        content = turn["content"]
        turn["content"] = [b for b in content if b["type"] == "tool_result"] + [
            b for b in content if b["type"] != "tool_result"
        ]
    return turn


class MessageChange(NamedTuple):
    """A status change from :func:`message_changes`; ``type``, ``role`` and ``text`` are set
    for the event that became current, None for the events it removed."""

    seq: int
    status: Status
    type: str | None = None
    role: str | None = None
    text: str | None = None


def message_changes(surface: SurfaceFold, event: Event) -> list[MessageChange]:
    """Apply ``event`` to ``surface`` and say what changed, with the role and searchable text
    of a new message: what an incremental indexer needs (statuses as in the spec)."""
    out = []
    for seq, status in surface.apply(event):
        if seq == event.seq and status == "current":
            message = event.data.get("message")
            role = message.get("role") if isinstance(message, dict) else None
            text = message_text(event.data)
            out.append(MessageChange(seq, status, event.type, role, text))
        else:
            out.append(MessageChange(seq, status))
    return out
