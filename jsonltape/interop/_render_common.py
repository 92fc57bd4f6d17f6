"""What the Markdown and HTML renderings of a transcript share: the message Markdown parser
(see :mod:`._render` for what it accepts) and the walk over the transcript model (which
messages and notes are shown in what order, with each tool call's results, and the words for
roles, metadata lines and the parts shown only as a description: blob, uri, file).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from .._time import format_ms
from ..fold import answer_scopes
from .redaction import LEDGER_HEADING

#: Message text longer than this (in characters) is shown preformatted, not read as Markdown.
MARKDOWN_LIMIT = 256 * 1024

_enc = msgspec.json.Encoder()
_SAFE_SCHEMES = ("http:", "https:", "mailto:")
_REL = "noopener noreferrer nofollow"


class _Markdown(MarkdownIt):
    """CommonMark with tables and strikethrough, no raw HTML, links only to safe schemes."""

    def __init__(self) -> None:
        super().__init__("commonmark", {"html": False})
        self.enable(["table", "strikethrough"])
        self.add_render_rule("link_open", _link_open)
        self.add_render_rule("image", _image)
        self.core.ruler.push("unlink", _unlink)

    def validateLink(self, url: str) -> bool:  # markdown-it calls it by this name
        # Anything else stays text: javascript:, data:, vbscript:, file: and relative links
        # (which point nowhere once the transcript is shared).
        return _safe(url)


def _safe(url: object) -> bool:
    return isinstance(url, str) and url.strip().lower().startswith(_SAFE_SCHEMES)


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", _REL)
    return self.renderToken(tokens, idx, options, env)


def _unlink(state: StateCore) -> None:
    """Drop links without a safe address: markdown-it keeps ``[x]()`` as a link to ``""``."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        kept: list[Token] = []
        dropped: list[bool] = []
        for t in block.children:
            if t.type == "link_open":
                dropped.append(not _safe(t.attrGet("href")))
                if dropped[-1]:
                    continue
            elif t.type == "link_close" and dropped.pop():
                continue
            kept.append(t)
        block.children = kept


def _image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    label = escapeHtml(f"[image: {alt}]" if alt else "[image]")
    depth = sum((t.type == "link_open") - (t.type == "link_close") for t in tokens[:idx])
    if depth > 0 or not _safe(token.attrGet("src")):  # a badge: the link around it is the link
        return label
    return f'<a href="{escapeHtml(str(token.attrGet("src")))}" rel="{_REL}">{label}</a>'


_MD = _Markdown()


def _iso(ms: Any) -> str:
    return "" if ms is None else format_ms(ms)


def _ledger(text: str) -> str | None:
    """The paths of a compaction's file ledger (one per line), if ``text`` is one."""
    if text.startswith(LEDGER_HEADING + "\n"):
        return text[len(LEDGER_HEADING) + 1 :]
    return None


def _pretty(value: Any) -> str:
    """Arguments and responses: strings as they are, other JSON indented."""
    if isinstance(value, str):
        return value
    return msgspec.json.format(_enc.encode(value), indent=2).decode()


def _role(entry: dict[str, Any]) -> str:
    message = entry.get("message") or {}
    role = message.get("role") if isinstance(message, dict) else None
    if entry.get("summary"):
        return "Compaction summary"
    return {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"}.get(
        str(role), str(role)
    )


def _parts(entry: dict[str, Any]) -> list[dict[str, Any]]:
    message = entry.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _layout(model: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """Yield ("message", entry, its calls' results by call id) and ("note", note, None) in seq
    order; a tool result that answers a shown call is attached to that call instead of standing
    alone: to the latest message before it that declares its id (a later turn may use an id
    again, and its result is not the earlier call's)."""
    messages = model["messages"]
    results: dict[int, dict[str, list[dict[str, Any]]]] = {}
    standalone = []
    for m, scope in answer_scopes(messages):
        if scope is None:
            standalone.append(m)
        else:
            results.setdefault(id(messages[scope]), {}).setdefault(str(m["call_id"]), []).append(m)
    events: list[tuple[int, int, str, dict[str, Any]]] = [
        (int(m.get("seq", 0)), 0 if "session" in m else 1, "message", m) for m in standalone
    ]
    events += [(int(n["seq"]), 1, "note", n) for n in model["notes"]]
    inherited = [e for e in events if e[1] == 0]
    own = sorted((e for e in events if e[1] == 1), key=lambda e: (e[0], e[2] != "note"))
    for _seq, _own, kind, obj in inherited + own:
        yield kind, obj, results.get(id(obj), {}) if kind == "message" else None


def _summary_of(model: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("Session", model["id"])]
    src = model.get("source") or {}
    if src:
        text = f"imported from {src.get('source')} file {src.get('name')}"
        if src.get("session"):
            text += f" (session {src['session']})"
        rows.append(("Source", text))
    for label, key in (("Agent", "agent"), ("Working directory", "cwd")):
        if model.get(key):
            rows.append((label, str(model[key])))
    if model.get("created"):
        rows.append(("Created", _iso(model["created"])))
    request = model.get("request") or {}
    if isinstance(request, dict) and isinstance(request.get("model"), str):
        rows.append(("Model", request["model"]))
    parent = model.get("parent")
    if isinstance(parent, dict):
        rows.append(("Forked from", f"{parent.get('session')} at seq {parent.get('seq')}"))
    hidden = model.get("hidden") or {}
    n = len(model["messages"])
    text = f"{n} shown"
    if hidden.get("superseded"):
        text += f"; {hidden['superseded']} earlier versions not shown"
    if hidden.get("retracted"):
        text += f"; {hidden['retracted']} retracted (abandoned branches) not shown"
    rows.append(("Messages", text))
    return rows


def _meta_line(entry: dict[str, Any]) -> str:
    bits = [_iso(entry.get("time"))]
    if isinstance(entry.get("model"), str):
        bits.append(entry["model"])
    usage = entry.get("usage")
    if isinstance(usage, dict):
        i, o = usage.get("input_tokens"), usage.get("output_tokens")
        if isinstance(i, int) or isinstance(o, int):
            bits.append(
                f"{i if isinstance(i, int) else '?'} in / {o if isinstance(o, int) else '?'} out"
            )
    if entry.get("status") == "compacted":
        bits.append("later compacted")
    if "session" in entry:
        bits.append(f"from {entry['session']}")
    return " · ".join(b for b in bits if b)


def _response(result: dict[str, Any]) -> tuple[Any, bool]:
    for p in _parts(result):
        if p.get("type") == "tool_call_response":
            return p.get("response"), p.get("is_error") is True or bool(result.get("error"))
    return None, bool(result.get("error"))


def _describe(p: dict[str, Any]) -> str:
    kind = str(p.get("type"))
    if kind == "blob":
        size = len(str(p.get("content", ""))) * 3 // 4
        return f"{p.get('mime_type') or 'blob'}, {size} bytes"
    if kind == "uri":
        return f"{p.get('mime_type') or p.get('modality') or 'uri'}: {p.get('uri')}"
    if kind == "file":
        return f"file {p.get('file_id')}"
    return f"{kind} part"
