"""The Markdown rendering of a transcript model: message text written back as Markdown whose
every character of text is literal, everything else escaped or fenced (see :mod:`._render`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from markdown_it.tree import SyntaxTreeNode

from ._render_common import (
    _MD,
    MARKDOWN_LIMIT,
    _describe,
    _iso,
    _layout,
    _ledger,
    _meta_line,
    _parts,
    _pretty,
    _response,
    _role,
    _safe,
    _summary_of,
)
from .redaction import LEDGER_HEADING

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
    """A parsed link address as a link destination: nothing in it can end or break the link
    (parentheses escaped, not encoded, as the reader keeps them), and an ``&`` stays itself (a
    destination decodes entities: an autolink's ``&lt;`` is literal)."""
    out = quote(href, safe=":/?#@!$&*+,;=%~'()")
    return out.replace("&", "\\&").replace("(", "\\(").replace(")", "\\)")


def _blank_end(s: str) -> int:
    """Where the whitespace that ends ``s`` begins (line breaks are not part of it)."""
    i = len(s)
    while i > 0 and s[i - 1].isspace() and s[i - 1] not in "\n\r":
        i -= 1
    return i


def _refs(ws: str) -> str:
    """Whitespace where a reader drops it (at a line's start or end) or where it undoes an
    emphasis (inside its delimiters: CommonMark's flanking rules count any Unicode
    whitespace), written as character references."""
    return "".join(f"&#{ord(c)};" for c in ws)


class _Inline:
    """Writes an inline tree; knows whether it is at the start of a line."""

    def __init__(self, *, table: bool = False, heading: bool = False, runs: bool = False) -> None:
        self.table = table
        self.heading = heading
        self.runs = runs
        self.start = True
        self.links = 0
        self.closed = ""  # the delimiter character an emphasis just closed with
        self.opened = False  # an emphasis was just opened
        self.out: list[str] = []

    def text(self, s: str) -> None:
        if s and self.runs and self.closed and s[0] == self.closed:
            # The source had these characters in the closer's own delimiter run: written as
            # one run again (an escape would split it, and CommonMark pairs runs by length).
            rest = s.lstrip(self.closed)
            self.out.append(s[: len(s) - len(rest)])
            s = rest
        self.closed = ""
        if s:
            md = _md_escape(s, line_start=self.start, heading=self.heading)
            if self.start or self.opened:
                lead = len(md) - len(md.lstrip())  # a text holds no line break
                md = _refs(md[:lead]) + md[lead:]
            self.out.append(md)
            self.start = False
        self.opened = False

    def keep_trailing(self) -> None:
        """Write the whitespace the text ended with as references (see ``_refs``): the inline
        ends, a line break or an emphasis's closer follows."""
        last = self.out[-1] if self.out else ""
        end = _blank_end(last)
        if end != len(last):
            self.out[-1] = last[:end] + _refs(last[end:])

    def _join_run(self, c: str) -> None:
        """Literal ``c`` characters the text wrote just before an opener of ``c``, unescaped:
        the source had them in the opener's own delimiter run. Escapes are read left to right,
        as ``_ESCAPE`` does (two backslashes are one backslash, then comes the next escape)."""
        if not self.out or not self.out[-1].endswith(c):
            return
        pieces = re.findall(r"\\.|.", self.out[-1], re.S)
        n = 0
        while n < len(pieces) and pieces[len(pieces) - 1 - n] == "\\" + c:
            n += 1
        if n:
            self.out[-1] = "".join(pieces[: len(pieces) - n]) + c * n

    def raw(self, s: str) -> None:
        self.out.append(s)
        self.opened = False
        self.start = s.endswith("\n")
        self.closed = ""

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
            # Spaces the text kept before the break (after a backslash, as in "\ "): a reader
            # drops one at a line's end and takes two for a hard break.
            self.keep_trailing()
            self.raw("\n")
        elif kind == "hardbreak":
            self.raw("\\\n")
        elif kind == "code_inline":
            self.raw(_code_span(n.content, table=self.table))
        elif kind in ("em", "strong", "s"):
            if self.runs:
                self._join_run(n.markup[0])
            self.raw(n.markup)
            self.opened = True
            self.nodes(n.children)
            self.keep_trailing()
            self.raw(n.markup)
            self.closed = n.markup[:1]
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
    w.keep_trailing()
    md = "".join(w.out)
    # A literal delimiter escaped next to emphasis may split the run it shared with a closer.
    if "\\*" in md or "\\_" in md or "\\~" in md:
        want = _shape(node.children)
        if _inline_shape(md) != want:
            w = _Inline(table=table, heading=heading, runs=True)
            w.nodes(node.children)
            w.keep_trailing()
            other = "".join(w.out)
            if _inline_shape(other) == want:
                return other
    return md


def _shape(nodes: Sequence[SyntaxTreeNode]) -> list[tuple[str, str]]:
    """What an inline tree says: its node kinds and texts, adjacent texts joined."""
    out: list[tuple[str, str]] = []
    for n in nodes:
        if n.type == "text":
            if out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + n.content)
            else:
                out.append(("text", n.content))
            continue
        out.append((n.type, n.content if n.type == "code_inline" else ""))
        out += _shape(n.children)
        out.append(("/" + n.type, ""))
    return out


def _inline_shape(md: str) -> list[tuple[str, str]]:
    """The :func:`_shape` of ``md`` read back as one paragraph's inline text."""
    root = SyntaxTreeNode(_MD.parse(md))
    kids = root.children[0].children if root.children else []
    return _shape(kids[0].children) if kids else []


def _md_blocks(nodes: Sequence[SyntaxTreeNode], *, tight: bool = False) -> list[str]:
    out: list[str] = []
    last = ("", "")  # the kind and marker of the block before, when it was a list
    for n in nodes:
        if out and not tight:
            out.append("")
        if n.type in ("bullet_list", "ordered_list"):
            # Two lists in a row with one marker would read back as one list: the second
            # takes another marker (the same <ul>/<ol>).
            markup = n.markup
            if last == (n.type, markup):
                markup = _OTHER_MARKER.get(markup, markup)
            out += _md_list(n, markup)
            last = (n.type, markup)
        else:
            out += _md_block(n)
            last = ("", "")
    return out


_OTHER_MARKER = {"-": "*", "*": "-", "+": "-", ".": ")", ")": "."}


_ESCAPE = re.compile(r"\\(.)")  # one backslash escape, read left to right


def _md_block(n: SyntaxTreeNode) -> list[str]:
    kind = n.type
    if kind == "paragraph":
        return _md_inline(n.children[0]).split("\n") if n.children else []
    if kind == "heading":
        level = int(n.tag[1:])
        text = _md_inline(n.children[0], heading=True) if n.children else ""
        if "\n" in text and level <= 2:  # only an underlined heading spans lines
            lines = text.split("\n")
            # A last line holding a | over "---" reads as a table header (GFM): the pipe as an
            # entity there, which no table rule counts.
            lines[-1] = _ESCAPE.sub(lambda m: "&#124;" if m[1] == "|" else m[0], lines[-1])
            return [*lines, "===" if level == 1 else "---"]
        return [f"{'#' * level} {text}".rstrip().replace("\n", " ")]
    if kind in ("fence", "code_block"):
        lang = _LANG.sub("", n.info.split()[0])[:40] if kind == "fence" and n.info.split() else ""
        return _fenced(n.content.removesuffix("\n"), lang).split("\n")
    if kind == "blockquote":
        return [f"> {line}" if line else ">" for line in _md_blocks(n.children)] or [">"]
    if kind in ("bullet_list", "ordered_list"):
        return _md_list(n, n.markup)
    if kind == "hr":
        return ["***"]
    if kind == "table":
        return _md_table(n)
    w = _Inline()  # nothing else is enabled; any future block kind is shown as its text
    w.text(n.content)
    return "".join(w.out).split("\n")


def _md_list(n: SyntaxTreeNode, markup: str) -> list[str]:
    tight = any(c.hidden for item in n.children for c in item.children)
    start = n.attrs.get("start", 1)
    out: list[str] = []
    for i, item in enumerate(n.children):
        if n.type == "ordered_list":
            number = item.info if item.info.isdigit() else str(int(start) + i)
            marker = number[:9] + markup
        else:
            marker = markup
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


def _md_message(text: str) -> str:
    """Message text (Markdown by a model) as Markdown holding no markup of its own."""
    paths = _ledger(text)
    if paths is not None:  # machine-made lines: kept one per line
        heading = _md_line(LEDGER_HEADING.removeprefix("### "), heading=True)
        return f"### {heading}\n\n{_fenced(paths)}"
    if len(text) > MARKDOWN_LIMIT:
        return _fenced(text)
    return "\n".join(_md_blocks(SyntaxTreeNode(_MD.parse(text)).children))


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
