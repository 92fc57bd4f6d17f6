"""Markdown and HTML renderings of a transcript model (see :func:`export.transcript`).

Both put each tool call together with its result (found by call id), fold reasoning and tool
calls into ``<details>``, and treat every string from the session as data, never as markup.

Message text (text and reasoning parts) is usually Markdown written by a model, so both read
it as Markdown with markdown-it-py (CommonMark plus tables and strikethrough), raw HTML off
and only ``http``, ``https`` and ``mailto`` links taken as links:

* HTML renders the parsed tree (headings, lists, code, emphasis, tables); links get
  ``rel="noopener noreferrer nofollow"``, and an image becomes a link to it (the page loads
  nothing, and a remote image would be a tracking pixel).
* Markdown writes the parsed tree back out as Markdown in which every character of text is
  literal: the characters CommonMark gives a meaning to are backslash-escaped, code spans and
  fences get a backtick run longer than any inside them, links are rebuilt from their parsed
  (safe) address. Escaping the whole text instead would keep it safe too but show a model's
  headings and lists as ``\\#`` and ``\\-``; writing the tree back keeps them, and whatever a
  CommonMark reader makes of the input, the output holds no tag from it (no ``<`` it could
  read as HTML, no link or image it did not get from this writer).

Text longer than :data:`MARKDOWN_LIMIT` (a pasted log or file; markdown-it-py reads about
1 MB/s) is shown as it is, preformatted. Everything else from the session (titles, paths,
tool names, arguments, results) is literal text: HTML-escaped, or Markdown-escaped, or in a
fence longer than any backtick run inside it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

import msgspec
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.tree import SyntaxTreeNode
from markdown_it.utils import EnvType, OptionsDict

from .._time import format_ms
from .redaction import LEDGER_HEADING

__all__ = ["MARKDOWN_LIMIT", "render_html", "render_markdown"]

#: Message text longer than this (in characters) is shown preformatted, not read as Markdown.
MARKDOWN_LIMIT = 256 * 1024

_enc = msgspec.json.Encoder()
_IMAGE_MIME = re.compile(r"^image/(png|jpeg|gif|webp)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
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


# -- Markdown writer: message text as Markdown whose every text character is literal ----------

#: Characters CommonMark (or GitHub's dialect) may give a meaning anywhere in a line: escaped
#: always; ``&`` only where it would start an entity; ``_`` unless inside a word, where it
#: cannot delimit emphasis. (A ``!`` is escaped only before a link: see ``_Inline.bracket``.)
_ACTIVE = re.compile(r"[\\`*\[\]<|~]|&(?=#?[A-Za-z0-9]+;)|(?<![^\W_])_|_(?![^\W_])|[\n\r]")
_ACTIVE_HEADING = re.compile(_ACTIVE.pattern + "|#")
#: What starts a block at the beginning of a line: a heading, quote, list item, setext line.
_LINE_START = re.compile(r"[#>+=-]|\d{1,9}(?=[.)])")
_LEADING_SPACE = re.compile(r"[ \t]+")
_LANG = re.compile(r"[^\w+#.-]")


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    if c == "\n":
        return "&#10;"  # a newline in text (an entity in the source) must not start a block
    if c == "\r":
        return "&#13;"
    return "\\" + c


def _md_escape(text: str, *, line_start: bool = False, heading: bool = False) -> str:
    """``text`` as Markdown that renders as exactly ``text``."""
    out = (_ACTIVE_HEADING if heading else _ACTIVE).sub(_escape_char, text)
    if line_start:
        lead = _LEADING_SPACE.match(out)
        if lead is not None:  # four spaces would start code; any are dropped at line start
            out = lead.group(0).replace(" ", "&#32;").replace("\t", "&#9;") + out[lead.end() :]
        elif (m := _LINE_START.match(out)) is not None:
            out = out[: m.end()] + "\\" + out[m.end() :] if m.group(0)[0].isdigit() else "\\" + out
    return out


def _md_line(text: str, *, heading: bool = False) -> str:
    """A one-line field (title, path, name) as literal Markdown text."""
    return _md_escape(" ".join(text.split()), line_start=True, heading=heading)


def _backticks(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def _fenced(text: str, lang: str = "") -> str:
    """A fenced code block no line of ``text`` can close: the fence is longer than any run."""
    fence = "`" * max(3, _backticks(text) + 1)
    return f"{fence}{lang}\n{text}\n{fence}" if text else f"{fence}{lang}\n{fence}"


def _code_span(code: str, *, table: bool = False) -> str:
    if not code:
        return ""
    if table:
        code = code.replace("|", "\\|")  # a table cell ends at an unescaped | even in code
    fence = "`" * (_backticks(code) + 1)
    # CommonMark strips one space from each end when both are there: pad to keep them, and
    # pad a span that starts or ends with a backtick so it cannot merge with the fence.
    pad = code[0] == "`" or code[-1] == "`" or (code[0] == code[-1] == " " and code.strip(" "))
    space = " " if pad else ""
    return f"{fence}{space}{code}{space}{fence}"


def _url(href: str) -> str:
    """A parsed link address as a link destination: nothing in it can end or break the link."""
    return quote(href, safe=":/?#@!$&*+,;=%~")


class _Inline:
    """Writes an inline tree; knows whether it is at the start of a line."""

    def __init__(self, *, table: bool = False, heading: bool = False) -> None:
        self.table = table
        self.heading = heading
        self.start = True
        self.links = 0
        self.out: list[str] = []

    def text(self, s: str) -> None:
        if s:
            self.out.append(_md_escape(s, line_start=self.start, heading=self.heading))
            self.start = False

    def raw(self, s: str) -> None:
        self.out.append(s)
        self.start = s.endswith("\n")

    def bracket(self) -> None:
        """Open a link's text; a ``!`` of text just before it would make the link an image."""
        if self.out and self.out[-1].endswith("!"):
            self.out[-1] = self.out[-1][:-1] + "\\!"
        self.raw("[")

    def nodes(self, nodes: Sequence[SyntaxTreeNode]) -> None:
        for n in nodes:
            self.node(n)

    def node(self, n: SyntaxTreeNode) -> None:
        kind = n.type
        if kind == "text":
            self.text(n.content)
        elif kind == "softbreak":
            self.raw("\n")
        elif kind == "hardbreak":
            self.raw("\\\n")
        elif kind == "code_inline":
            self.raw(_code_span(n.content, table=self.table))
        elif kind in ("em", "strong", "s"):
            self.raw(n.markup)
            self.nodes(n.children)
            self.raw(n.markup)
        elif kind == "link":  # only links to safe addresses are left (see _unlink)
            self.links += 1
            self.bracket()
            self.nodes(n.children)
            self.raw(f"]({_url(str(n.attrs.get('href')))})")
            self.links -= 1
        elif kind == "image":
            alt = "".join(c.content for c in n.walk() if c.type in ("text", "code_inline"))
            label = f"image: {alt}" if alt else "image"
            if self.links or not _safe(n.attrs.get("src")):  # a badge: the outer link is it
                self.text(f"[{label}]")
            else:
                self.bracket()
                self.text(label)
                self.raw(f"]({_url(str(n.attrs.get('src', '')))})")
        else:  # nothing else is enabled; any future node kind is shown as its text
            self.text(n.content)


def _md_inline(node: SyntaxTreeNode, *, table: bool = False, heading: bool = False) -> str:
    w = _Inline(table=table, heading=heading)
    w.nodes(node.children)
    return "".join(w.out)


def _md_blocks(nodes: Sequence[SyntaxTreeNode], *, tight: bool = False) -> list[str]:
    out: list[str] = []
    for n in nodes:
        if out and not tight:
            out.append("")
        out += _md_block(n)
    return out


def _md_block(n: SyntaxTreeNode) -> list[str]:
    kind = n.type
    if kind == "paragraph":
        return _md_inline(n.children[0]).split("\n") if n.children else []
    if kind == "heading":
        level = int(n.tag[1:])
        text = _md_inline(n.children[0], heading=True) if n.children else ""
        if "\n" in text and level <= 2:  # only an underlined heading spans lines
            return [*text.split("\n"), "===" if level == 1 else "---"]
        return [f"{'#' * level} {text}".rstrip().replace("\n", " ")]
    if kind in ("fence", "code_block"):
        lang = _LANG.sub("", n.info.split()[0])[:40] if kind == "fence" and n.info.split() else ""
        return _fenced(n.content.removesuffix("\n"), lang).split("\n")
    if kind == "blockquote":
        return [f"> {line}" if line else ">" for line in _md_blocks(n.children)] or [">"]
    if kind in ("bullet_list", "ordered_list"):
        return _md_list(n)
    if kind == "hr":
        return ["***"]
    if kind == "table":
        return _md_table(n)
    w = _Inline()  # nothing else is enabled; any future block kind is shown as its text
    w.text(n.content)
    return "".join(w.out).split("\n")


def _md_list(n: SyntaxTreeNode) -> list[str]:
    tight = any(c.hidden for item in n.children for c in item.children)
    start = n.attrs.get("start", 1)
    out: list[str] = []
    for i, item in enumerate(n.children):
        if n.type == "ordered_list":
            number = item.info if item.info.isdigit() else str(int(start) + i)
            marker = number[:9] + n.markup
        else:
            marker = n.markup
        body = _md_blocks(item.children, tight=tight)
        pad = " " * (len(marker) + 1)
        if out and not tight:
            out.append("")
        out.append(f"{marker} {body[0]}" if body else marker)
        out += [pad + line if line else "" for line in body[1:]]
    return out


def _md_table(n: SyntaxTreeNode) -> list[str]:
    rows = [tr for part in n.children for tr in part.children]
    if not rows:
        return []
    out = []
    for r, tr in enumerate(rows):
        cells = [_md_inline(c.children[0], table=True) if c.children else "" for c in tr.children]
        out.append("| " + " | ".join(cells) + " |")
        if r == 0:
            align = []
            for c in tr.children:
                style = str(c.attrs.get("style", ""))
                left = style.endswith(("left", "center"))
                right = style.endswith(("right", "center"))
                align.append((":" if left else "") + "---" + (":" if right else ""))
            out.append("| " + " | ".join(align) + " |")
    return out


def _ledger(text: str) -> str | None:
    """The paths of a compaction's file ledger (one per line), if ``text`` is one."""
    if text.startswith(LEDGER_HEADING + "\n"):
        return text[len(LEDGER_HEADING) + 1 :]
    return None


def _md_message(text: str) -> str:
    """Message text (Markdown by a model) as Markdown holding no markup of its own."""
    paths = _ledger(text)
    if paths is not None:  # machine-made lines: kept one per line
        heading = _md_line(LEDGER_HEADING.removeprefix("### "), heading=True)
        return f"### {heading}\n\n{_fenced(paths)}"
    if len(text) > MARKDOWN_LIMIT:
        return _fenced(text)
    return "\n".join(_md_blocks(SyntaxTreeNode(_MD.parse(text)).children))


def _html_message(text: str) -> str:
    paths = _ledger(text)
    if paths is not None:
        title = _h(LEDGER_HEADING.removeprefix("### "))
        return f'<div class="md"><h3>{title}</h3><pre>{_h(paths)}</pre></div>'
    if len(text) > MARKDOWN_LIMIT:
        return f'<div class="text">{_h(text)}</div>'
    return f'<div class="md">{_MD.render(text)}</div>'


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
    """Yield ("message", entry, results-by-call-id) and ("note", note, None) in seq order;
    tool results that answer a shown call are attached to it instead of standing alone."""
    messages = model["messages"]
    declared = {
        p.get("id")
        for m in messages
        if m.get("type") == "assistant/message"
        for p in _parts(m)
        if p.get("type") == "tool_call"
    }
    results: dict[str, list[dict[str, Any]]] = {}
    standalone = []
    for m in messages:
        if m.get("type") == "tool/result" and m.get("call_id") in declared:
            results.setdefault(str(m["call_id"]), []).append(m)
        else:
            standalone.append(m)
    events: list[tuple[int, int, str, dict[str, Any]]] = [
        (int(m.get("seq", 0)), 0 if "session" in m else 1, "message", m) for m in standalone
    ]
    events += [(int(n["seq"]), 1, "note", n) for n in model["notes"]]
    inherited = [e for e in events if e[1] == 0]
    own = sorted((e for e in events if e[1] == 1), key=lambda e: (e[0], e[2] != "note"))
    for _seq, _own, kind, obj in inherited + own:
        yield kind, obj, results if kind == "message" else None


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


def _md_part(p: dict[str, Any], results: dict[str, list[dict[str, Any]]]) -> str:
    kind = p.get("type")
    if kind == "text":
        return _md_message(str(p.get("content", "")))
    if kind == "reasoning":
        body = _md_message(str(p.get("content", "")))
        return f"<details><summary>Reasoning</summary>\n\n{body}\n\n</details>"
    if kind == "tool_call":
        name, cid = str(p.get("name")), str(p.get("id"))
        args = _pretty(p.get("arguments"))
        # This line is an HTML block (it ends at the blank line after it): HTML escapes.
        out = [f"<details><summary>Tool call: {_html_line(name)} ({_html_line(cid)})</summary>"]
        out += [
            "",
            "Arguments:",
            "",
            _fenced(args, "" if isinstance(p.get("arguments"), str) else "json"),
        ]
        for r in results.get(cid, []):
            response, err = _response(r)
            out += ["", "Result (error):" if err else "Result:", "", _fenced(_pretty(response))]
        if cid not in results:
            out += ["", "_No result recorded._"]
        out += ["", "</details>"]
        return "\n".join(out)
    if kind == "tool_call_response":
        return _fenced(_pretty(p.get("response")))
    return f"_\\[{_md_line(_describe(p))}\\]_"


def _html_line(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False)


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


def render_markdown(model: dict[str, Any]) -> str:
    title = model.get("title") or model["id"]
    lines = [f"# {_md_line(str(title), heading=True)}", ""]
    for label, value in _summary_of(model):
        lines.append(f"- **{label}:** {_md_line(value)}")
    for kind, obj, results in _layout(model):
        lines += ["", "---", ""]
        if kind == "note":
            lines.append(f"_{_md_line(obj['text'])}_ ({_md_line(_iso(obj.get('time')))})")
            continue
        entry = obj
        heading = _md_line(f"{_role(entry)} · {_meta_line(entry)}", heading=True)
        lines += [f"### {heading}", ""]
        if entry.get("type") == "tool/result":
            response, err = _response(entry)
            lines.append(
                f"Result of call {_code_span(str(entry.get('call_id')))}"
                + (" (error):" if err else ":")
            )
            lines += ["", _fenced(_pretty(response))]
            continue
        chunks = [_md_part(p, results or {}) for p in _parts(entry)]
        lines.append("\n\n".join(c for c in chunks if c) or "_(empty message)_")
    for text in model.get("state") or ():
        lines += ["", "---", "", f"**Note:** {_md_line(text)}"]
    return "\n".join(lines).rstrip("\n") + "\n"


# -- HTML -------------------------------------------------------------------------------------

_CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1d1d1f;--mut:#6e6e73;--line:#d2d2d7;
--user:#eef4ff;--asst:#f6f6f8;--tool:#f3f8f1;--note:#fff8e6;--code:#f2f2f4}
@media (prefers-color-scheme:dark){:root{--bg:#111;--fg:#eee;--mut:#a1a1a6;--line:#3a3a3c;
--user:#1b2533;--asst:#1c1c1e;--tool:#18231a;--note:#2b2515;--code:#232326}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.5 -apple-system,
BlinkMacSystemFont,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
main{max-width:52rem;margin:0 auto;padding:1rem}
h1{font-size:1.4rem;margin:.5rem 0 1rem;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;font-size:.9rem;
margin:0 0 1.5rem}
dt{color:var(--mut)}dd{margin:0;overflow-wrap:anywhere}
section{border:1px solid var(--line);border-radius:.6rem;padding:.6rem .8rem;margin:.8rem 0}
section.user{background:var(--user)}section.assistant{background:var(--asst)}
section.tool{background:var(--tool)}section.summary{background:var(--note)}
section.system{background:var(--code)}
.head{font-size:.8rem;color:var(--mut);margin-bottom:.3rem;overflow-wrap:anywhere}
.head b{color:var(--fg);font-size:.9rem}
.text{white-space:pre-wrap;overflow-wrap:anywhere}
.md{overflow-wrap:anywhere}.md>:first-child{margin-top:0}.md>:last-child{margin-bottom:0}
.md p,.md ul,.md ol,.md blockquote,.md table{margin:.4rem 0}.md ul,.md ol{padding-left:1.4rem}
.md h1,.md h2,.md h3,.md h4,.md h5,.md h6{font-size:1rem;margin:.6rem 0 .3rem}
.md h1,.md h2{font-size:1.1rem}
.md blockquote{padding-left:.7rem;border-left:3px solid var(--line);color:var(--mut)}
.md code{background:var(--code);border-radius:.2rem;padding:0 .2rem;font-size:.9em}
.md pre code{background:none;padding:0}
.md table{border-collapse:collapse;display:block;overflow-x:auto}
.md th,.md td{border:1px solid var(--line);padding:.2rem .5rem}
.md hr{border:0;border-top:1px solid var(--line)}
a{color:inherit}
pre{background:var(--code);padding:.5rem;border-radius:.4rem;overflow-x:auto;font-size:.85rem;
white-space:pre-wrap;overflow-wrap:anywhere;margin:.3rem 0}
details{margin:.4rem 0;border-left:3px solid var(--line);padding-left:.6rem}
summary{cursor:pointer;color:var(--mut);overflow-wrap:anywhere}
.label{font-size:.8rem;color:var(--mut);margin-top:.4rem}
.err{color:#c62828}
p.note{font-size:.85rem;color:var(--mut);text-align:center;margin:.6rem 0}
img{max-width:100%;height:auto}
""".strip()


def _h(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _html_part(p: dict[str, Any], results: dict[str, list[dict[str, Any]]]) -> str:
    kind = p.get("type")
    if kind == "text":
        return _html_message(str(p.get("content", "")))
    if kind == "reasoning":
        return (
            '<details class="reasoning"><summary>Reasoning</summary>'
            f"{_html_message(str(p.get('content', '')))}</details>"
        )
    if kind == "tool_call":
        cid = str(p.get("id"))
        out = [
            f'<details class="tool"><summary>Tool call: <b>{_h(p.get("name"))}</b> '
            f"<small>{_h(cid)}</small>"
        ]
        errs = [r for r in results.get(cid, []) if _response(r)[1]]
        if errs:
            out.append(' <span class="err">error</span>')
        if cid not in results:
            out.append(" <small>(no result)</small>")
        out.append("</summary>")
        out.append(
            f'<div class="label">Arguments</div><pre>{_h(_pretty(p.get("arguments")))}</pre>'
        )
        for r in results.get(cid, []):
            response, err = _response(r)
            label = "Result (error)" if err else "Result"
            out.append(f'<div class="label">{label}</div><pre>{_h(_pretty(response))}</pre>')
        out.append("</details>")
        return "".join(out)
    if kind == "tool_call_response":
        return f"<pre>{_h(_pretty(p.get('response')))}</pre>"
    if kind == "blob" and _IMAGE_MIME.match(str(p.get("mime_type", ""))):
        data = str(p.get("content", ""))
        if _BASE64.match(data):
            src = f"data:{p['mime_type']};base64,{''.join(data.split())}"
            return f'<img alt="image" src="{_h(src)}">'
    return f"<p><em>[{_h(_describe(p))}]</em></p>"


def render_html(model: dict[str, Any]) -> str:
    title = str(model.get("title") or model["id"])
    out = [
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">",
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_h(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body><main>",
        f"<h1>{_h(title)}</h1>",
        "<dl>",
    ]
    for label, value in _summary_of(model):
        out.append(f"<dt>{_h(label)}</dt><dd>{_h(value)}</dd>")
    out.append("</dl>")
    for kind, obj, results in _layout(model):
        if kind == "note":
            out.append(f'<p class="note">{_h(obj["text"])} · {_h(_iso(obj.get("time")))}</p>')
            continue
        entry = obj
        role = _role(entry)
        message = entry.get("message") or {}
        css = "summary" if entry.get("summary") else str(message.get("role", "user"))
        out.append(f'<section class="{_h(css)}">')
        out.append(f'<div class="head"><b>{_h(role)}</b> · {_h(_meta_line(entry))}</div>')
        if entry.get("type") == "tool/result":
            response, err = _response(entry)
            label = f"Result of call {entry.get('call_id')}" + (" (error)" if err else "")
            out.append(
                f'<details class="tool" open><summary>{_h(label)}</summary>'
                f"<pre>{_h(_pretty(response))}</pre></details>"
            )
        else:
            body = [_html_part(p, results or {}) for p in _parts(entry)]
            out.append("".join(body) or "<p><em>(empty message)</em></p>")
        out.append("</section>")
    for text in model.get("state") or ():
        out.append(f'<p class="note"><b>Note:</b> {_h(text)}</p>')
    out += ["</main></body>", "</html>"]
    return "\n".join(out) + "\n"
