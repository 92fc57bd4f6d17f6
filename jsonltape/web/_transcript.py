"""A transcript page: the events of one seq range of a session file, as blocks to draw.

A page is read from the file by seq (``jsonltape.lines(from_seq=...)``, a bisection, then at
most one page of lines), never the whole file: a 100,000-event session costs what one page
costs. Message statuses (superseded, retracted, compacted) come from the index. Each tool call
is drawn with its results (found by call id on the page); a result whose call is on another
page stands alone. Message text is rendered as the HTML export renders it
(``interop.message_html``: Markdown, raw HTML off, safe links); every other string from the
session is left to the template, which escapes it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
from markupsafe import Markup, escape

import jsonltape
from jsonltape import Event, interop

from ._edits import edit_diff

__all__ = ["IMAGE_LIMIT", "Block", "blocks_of", "page_events", "pretty"]

#: Base64 characters of an inline image at most (about 1.5 MB); a larger one is described.
IMAGE_LIMIT = 2 * 1024 * 1024
#: Characters of a tool's arguments or result shown at most (the rest is cut, and says so).
TEXT_LIMIT = 200_000
#: Message text longer than this is shown preformatted, not as Markdown: a browser lays out a
#: long unbroken run of proportional text in time that grows with its square (200,000
#: characters took over 30 s in Chromium; preformatted, 0.1 s).
MARKDOWN_LIMIT = 20_000

_IMAGE_MIME = re.compile(r"^image/(png|jpeg|gif|webp)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
_enc = msgspec.json.Encoder()
Block = dict[str, Any]


def pretty(value: Any) -> str:
    """Arguments and results: a string as it is, other JSON indented; cut past the limit."""
    text = value if isinstance(value, str) else _json(value)
    if len(text) > TEXT_LIMIT:
        return text[:TEXT_LIMIT] + f"\n… ({len(text) - TEXT_LIMIT} more characters)"
    return text


def _json(value: Any) -> str:
    try:
        return msgspec.json.format(_enc.encode(value), indent=2).decode()
    except (TypeError, ValueError):  # pragma: no cover - decoded JSON always encodes
        return repr(value)


def page_events(path: str | os.PathLike[str], start: int, count: int) -> Iterator[Event]:
    """The committed events with ``start <= seq < start + count`` (read by bisection)."""
    for line in jsonltape.lines(path, from_seq=start):
        if line.event.seq >= start + count:
            return
        yield line.event


def _parts(message: Any) -> list[dict[str, Any]]:
    parts = message.get("parts") if isinstance(message, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _image(p: dict[str, Any]) -> dict[str, Any]:
    mime = str(p.get("mime_type", ""))
    data = p.get("content")
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    if (
        _IMAGE_MIME.match(mime)
        and isinstance(data, str)
        and len(data) <= IMAGE_LIMIT
        and _BASE64.match(data)
    ):
        return {"kind": "image", "src": f"data:{mime};base64,{''.join(data.split())}"}
    why = "too large to show" if size and len(str(data)) > IMAGE_LIMIT else "not shown"
    return {"kind": "other", "text": f"{mime or 'blob'}, {size} bytes ({why})"}


def _text(content: Any) -> Markup:
    """Message text as the export renders it (Markdown); past :data:`MARKDOWN_LIMIT`
    characters (a pasted log) preformatted, and past :data:`TEXT_LIMIT` its start only and
    how much more there is (the download has it all)."""
    text = str(content)
    if len(text) <= MARKDOWN_LIMIT:
        return Markup(interop.message_html(text))
    return Markup('<pre class="long">') + escape(pretty(text)) + Markup("</pre>")


def _part(p: dict[str, Any], calls: dict[str, dict[str, Any]]) -> dict[str, Any]:
    kind = p.get("type")
    if kind == "text":
        return {"kind": "text", "html": _text(p.get("content", ""))}
    if kind == "reasoning":
        return {"kind": "reasoning", "html": _text(p.get("content", ""))}
    if kind == "tool_call":
        name = str(p.get("name", ""))
        args = p.get("arguments")
        cid = str(p.get("id", ""))
        call: dict[str, Any] = {
            "kind": "call",
            "id": cid,
            "name": name,
            "args": pretty(args),
            "diffs": edit_diff(name, args),
            "results": [],
        }
        calls.setdefault(cid, call)
        return call
    if kind == "tool_call_response":
        return {"kind": "response", "text": pretty(p.get("response"))}
    if kind == "blob":
        return _image(p)
    if kind == "uri":
        return {"kind": "other", "text": f"{p.get('mime_type') or 'link'}: {p.get('uri')}"}
    return {"kind": "other", "text": f"{kind} part"}


def _result(e: Event) -> tuple[str, bool]:
    error = bool(e.data.get("error"))
    texts = []
    for p in _parts(e.data.get("message")):
        if p.get("type") == "tool_call_response":
            texts.append(pretty(p.get("response")))
            error = error or p.get("is_error") is True
        elif p.get("type") == "text":
            texts.append(str(p.get("content", "")))
    return "\n".join(texts), error


def _note(e: Event) -> Block | None:
    d = e.data
    text: str | None = None
    kind = "note"
    if e.type == "turn/end" and d.get("reason") != "completed":
        error = d.get("error")
        text = f"turn ended: {d.get('reason')}"
        if isinstance(error, dict) and error.get("message"):
            text += f" ({error['message']})"
    elif e.type == "surface/retract" and isinstance(e.surface, jsonltape.Retract):
        text = f"messages #{e.surface.start}–#{e.surface.end} retracted"
        if isinstance(d.get("reason"), str):
            text += f" ({d['reason']})"
    elif e.type == "compaction/prune":
        text = f"the result at #{d.get('target')} was pruned from the context"
    elif e.type == "session/title" and isinstance(d.get("title"), str):
        text = f"title: {d['title']}"
    elif e.type == "request/header" and isinstance(d.get("model"), str):
        text = f"model: {d['model']}"
    elif e.type in ("compaction/summary", "handoff/anchor"):
        kind = "compaction"
        if e.type == "compaction/summary":
            text = f"context compacted: {d.get('count')} messages (#{d.get('start')}–"
            text += f"#{d.get('end')}) replaced by this summary"
        else:
            text = "handoff: the context starts afresh from this summary"
        return {
            "kind": kind,
            "seq": e.seq,
            "time": e.time,
            "text": text,
            "html": _text(d.get("summary", "")),
        }
    elif e.type in ("fork/merge", "fork/discard"):
        verb = "merged" if e.type == "fork/merge" else "discarded"
        return {"kind": "fork", "seq": e.seq, "time": e.time, "verb": verb, "fork": d.get("fork")}
    elif e.type == "branch/start":
        return {
            "kind": "branch",
            "seq": e.seq,
            "time": e.time,
            "count": d.get("count"),
            "at": d.get("at"),
        }
    elif e.type == "todo/write" and isinstance(d.get("todos"), list):
        todos = [t for t in d["todos"] if isinstance(t, dict)]
        return {"kind": "todo", "seq": e.seq, "time": e.time, "todos": todos}
    if text is None:
        return None
    return {"kind": kind, "seq": e.seq, "time": e.time, "text": text}


def blocks_of(
    events: Iterable[Event],
    statuses: dict[int, str],
    *,
    calls: dict[str, dict[str, Any]] | None = None,
) -> Iterator[Block]:
    """The blocks of ``events`` in order. ``calls`` (call id -> its call part) is shared
    across calls so that a result finds a call drawn earlier on the page; a result attached
    to its call yields nothing of its own."""
    calls = {} if calls is None else calls
    for e in events:
        if e.type not in ("user/message", "assistant/message", "tool/result"):
            note = _note(e)
            if note is not None:
                yield note
            continue
        message = e.data.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        status = statuses.get(e.seq, "current")
        revises = None
        if e.surface is not None and not isinstance(e.surface, str):
            revises = (e.surface.start, e.surface.end)
        if e.type == "tool/result":
            text, error = _result(e)
            cid = str(e.data.get("call_id", ""))
            result = {"seq": e.seq, "text": text, "error": error, "status": status}
            call = calls.get(cid)
            if call is not None:
                call["results"].append(result)
                continue
            yield {
                "kind": "result",
                "seq": e.seq,
                "time": e.time,
                "call_id": cid,
                "status": status,
                **result,
            }
            continue
        usage = e.data.get("usage")
        yield {
            "kind": "message",
            "seq": e.seq,
            "time": e.time,
            "role": str(role or "user"),
            "status": status,
            "model": e.data.get("model") if isinstance(e.data.get("model"), str) else None,
            "usage": _tokens(usage),
            "revises": revises,
            "parts": [_part(p, calls) for p in _parts(message)],
        }


def _tokens(usage: Any) -> str | None:
    if not isinstance(usage, dict):
        return None
    i, o = usage.get("input_tokens"), usage.get("output_tokens")
    if not isinstance(i, int) and not isinstance(o, int):
        return None
    return f"{i if isinstance(i, int) else '?'} in · {o if isinstance(o, int) else '?'} out"
