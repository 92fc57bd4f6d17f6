"""Markdown export against a CommonMark oracle: no tag from session text, ever.

The oracle is markdown-it-py with raw HTML passed through (``html=True``), as GitHub and most
renderers do before any sanitizer: whatever the export holds that a CommonMark reader would
turn into HTML shows up in its output. Every start tag must be one the export's own structure
or a model's Markdown explains (paragraphs, headings, lists, code, links to safe schemes,
our ``<details>``), with no event handler and no address other than http, https or mailto.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

import jsonltape
from jsonltape.interop import export
from jsonltape.interop._render import _MD, MARKDOWN_LIMIT, _md_message

LONG = bool(os.environ.get("JSONLTAPE_LONG"))
#: CommonMark as GitHub runs it before sanitizing: raw HTML on; and the same with GFM tables.
ORACLES = {
    "commonmark": MarkdownIt("commonmark", {"html": True}),
    "commonmark+gfm-tables": MarkdownIt("commonmark", {"html": True}).enable(
        ["table", "strikethrough"]
    ),
}
#: What structure may produce: CommonMark blocks and inlines, GFM tables, our <details>.
STRUCTURE = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "pre"}
STRUCTURE |= {"code", "em", "strong", "a", "hr", "br", "s", "table", "thead", "tbody", "tr"}
STRUCTURE |= {"th", "td", "details", "summary"}
SAFE_URL = re.compile(r"(?i)^(https?:|mailto:)")

HOSTILE = [
    "`<img src=x onerror=alert(1)>``",  # unbalanced backticks: the reported bug
    "``<img src=x onerror=alert(1)>`",
    "```<img src=x onerror=alert(1)>`` `",
    "`` ` `` <img src=x onerror=alert(1)>",
    "`a` `` `b` <img src=x onerror=alert(1)> ``` ``",
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil.example/x.js></SCRIPT>",
    "<!-- hidden --><img src=x onerror=alert(1)>",
    "<![CDATA[<img src=x onerror=alert(1)>]]>",
    "<?xml-stylesheet href='javascript:alert(1)'?>",
    "<!DOCTYPE html><html>",
    "<javascript:alert(1)>",
    "<https://ok.example/?<img src=x>>",
    "[click](javascript:alert(1))",
    "[click](<javascript:alert(1)>)",
    "[click](JaVaScRiPt:alert(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '[click](https://ok.example "title\\" onmouseover=\\"alert(1)")',
    "![x](javascript:alert(1))",
    "![tracker](https://evil.example/pixel.png)",
    "[![badge](https://evil.example/b.svg)](https://ok.example)",
    "\\![x](https://evil.example/pixel.png)",
    "[ref]: javascript:alert(1)\n\n[ref] and [x][ref]",
    "&lt;img src=x onerror=alert(1)&gt;",
    "&#60;img src=x onerror=alert(1)&#62;",
    "&#x3C;script&#x3E;alert(1)&#x3C;/script&#x3E;",
    "&amp;lt;b&amp;gt;",
    "x&#10;<img src=x onerror=alert(1)>&#10;&#10;<script>",
    "    <img src=x onerror=alert(1)>",
    "```\n<img src=x onerror=alert(1)>",  # a fence the text leaves open
    "~~~\n<script>\n~~~\n<script>alert(1)</script>",
    "- item\n  <img src=x onerror=alert(1)>\n- <script>",
    "> <img src=x onerror=alert(1)>",
    "| a | b |\n|---|---|\n| `x|<img src=x onerror=alert(1)>` | y |",
    "<details open ontoggle=alert(1)><summary>x</summary>",
    "</details>\n\n<script>alert(1)</script>",
    "</summary></details><img src=x onerror=alert(1)>",
    "*<b onmouseover=alert(1)>x</b>*",
    "a\\\n<img src=x onerror=alert(1)>",
    "<a href='`'>`</a><img src=x onerror=alert(1)>",
    "<img\nsrc=x\nonerror=alert(1)>",
    "\r<img src=x onerror=alert(1)>\r\n<script>",
]


def _allowed(name: str, value: str) -> bool:
    """An attribute structure makes: a safe link, a code language, a table alignment."""
    if name == "href":
        return bool(SAFE_URL.match(value))
    if name == "class":
        return re.fullmatch(r"language-[\w+#.-]*", value) is not None
    if name == "style":
        return re.fullmatch(r"text-align:(left|right|center)", value) is not None
    return name == "start" and value.isdigit()


class _Tags(HTMLParser):
    """Collects what in rendered HTML did not come from structure."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.bad: list[object] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in STRUCTURE:
            self.bad.append((tag, attrs))
        for name, value in attrs:
            if not _allowed(name, value or ""):
                self.bad.append((tag, name, value))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_comment(self, data: str) -> None:
        self.bad.append(("comment", data))

    def handle_pi(self, data: str) -> None:
        self.bad.append(("processing instruction", data))

    def handle_decl(self, decl: str) -> None:
        self.bad.append(("declaration", decl))

    def unknown_decl(self, data: str) -> None:
        self.bad.append(("declaration", data))


def rendered_tags(markdown: str) -> list[str]:
    """Render ``markdown`` with every oracle; fail on anything structure did not make."""
    tags: list[str] = []
    for name, oracle in ORACLES.items():
        parser = _Tags()
        parser.feed(oracle.render(markdown))
        parser.close()
        assert not parser.bad, f"{name} renders markup from session text: {parser.bad}"
        tags = parser.tags
    return tags


def session(path: Path, text: str) -> Path:
    """A session with ``text`` in every field the transcript shows."""
    with jsonltape.open(
        path, create=True, title=text, cwd=text, agent=text, durability="manual"
    ) as tape:
        tape.append("request/header", {"model": text, "system": text})
        turn = tape.append("turn/start", {})
        tape.user([{"type": "text", "content": text}, {"type": "uri", "uri": text}])
        tape.assistant(
            [{"type": "reasoning", "content": text}, {"type": "text", "content": text}],
            tool_calls=[{"id": text, "name": text, "arguments": {text: text}}],
            model=text,
        )
        tape.tool_result(text, text)
        tape.append(
            "tool/result",
            {
                "call_id": "unasked",
                "message": {
                    "id": "r2",
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": "unasked", "response": text}],
                },
            },
        )
        error = {"code": "X", "message": text}
        tape.append("turn/end", {"turn": turn.seq, "reason": "error", "error": error})
    return path


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_renders_as_text_in_every_field(tmp_path: Path, text: str) -> None:
    out = export(session(tmp_path / "s.jsonl", text), "markdown").text
    rendered_tags(out)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_in_message_markdown_renders_as_text(text: str) -> None:
    rendered_tags(_md_message(text))


#: Characters and runs that mean something to CommonMark, and pieces of the usual attacks.
_PIECES = [
    *"<>&`*_[]()!#\n\r\t -+=.:/|~\\\"';1aZé",
    *["<img src=x onerror=alert(1)>", "<script>", "</script>", "<!--", "-->", "<?", "?>"],
    *["<![CDATA[", "]]>", "<!X", "javascript:", "https://ok.example/", "mailto:a@b.c", "&lt;"],
    *["&#60;", "&#x3c;", "&#10;", "&amp;", "```", "~~~", "    ", "> ", "- ", "1. ", "1) "],
    *["[a]: ", "](", "![", "\\`", "``", "|---|", "<a href=", " onerror=", "<details>"],
]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
_MANY = settings(
    max_examples=5000 if LONG else 400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_MANY
@given(text=_TEXTS)
def test_no_text_ever_renders_a_tag_of_its_own(tmp_path: Path, text: str) -> None:
    rendered_tags(_md_message(text))


@settings(_MANY, max_examples=1000 if LONG else 60)
@given(text=_TEXTS)
def test_no_text_renders_a_tag_through_the_whole_export(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.jsonl"
    path.unlink(missing_ok=True)
    rendered_tags(export(session(path, text), "markdown").text)


#: The export's own reading of message Markdown: raw HTML off, links only to safe schemes.
_PLAIN = _MD


def _normal(html: str) -> str:
    # The writer drops what a fence's info string holds beyond a language name, and closes a
    # fence the text left open (adding the newline before it).
    return re.sub(r' class="language-[^"]*"', "", html).replace("\n</code>", "</code>")


@_MANY
@given(text=_TEXTS)
def test_message_markdown_reads_as_the_model_wrote_it(text: str) -> None:
    """Read as the export reads messages (raw HTML off, safe links only), the export's Markdown
    renders exactly as the message does (images aside: they become links)."""
    if any(t.type == "image" for b in _PLAIN.parse(text) for t in b.children or ()):
        return
    assert _normal(_PLAIN.render(_md_message(text))) == _normal(_PLAIN.render(text))


@pytest.mark.parametrize(
    "text",
    [
        "*> *<***",  # a literal star in the closer's own delimiter run
        "<https://ok.example/&lt;>",  # an autolink's & is literal; a destination decodes it
        "- \n\n\n- ",  # two lists in a row with one marker
        "1. a\n\n\n2) b",
        "<https://ok.example/'>",  # the reader keeps ' and parentheses in an address
        "[w](https://en.wikipedia.org/wiki/A_(b))",
        "\\ \n<",  # a space kept at a line's end (after a backslash)
        "a\\  \nb",
        "a\\   \nb",  # ... and before a hard break
        "***<*<*",  # a literal star in an opener's own delimiter run
        "a&#32;",  # spaces a reader drops: at a paragraph's end ...
        "*a&#32;*",  # ... inside an emphasis (where they also undo it) ...
        "*&#32;a*",
        "- a&#32;",  # ... at the end of a list item, a heading, a table cell ...
        "# a&#32;",
        "| a&#32; | b |\n|---|---|\n| c | d |",
        "&#32;a\n&#9;b",  # ... and at a line's start
        "*a&#160;*",  # any Unicode whitespace, a no-break space too
        "*&#160;a*",
        "# a&#160;",
        "- a&#12288;",
    ],
)
def test_edge_cases_the_property_found_read_as_written(text: str) -> None:
    assert _normal(_PLAIN.render(_md_message(text))) == _normal(_PLAIN.render(text))


def test_a_models_markdown_keeps_its_structure() -> None:
    text = (
        "## Plan\n\n1. read the **migration**\n2. add a *default*\n\n- `NOT NULL` fails\n"
        "- see [the docs](https://www.postgresql.org/docs/)\n\n```sql\nALTER TABLE users;\n```\n"
        "\n> quoted\n\n| col | type |\n| --- | --- |\n| email | text |\n"
    )
    out = _md_message(text)
    assert out.startswith("## Plan\n\n1. read the **migration**\n2. add a *default*")
    assert "```sql\nALTER TABLE users;\n```" in out
    tags = set(rendered_tags(out))
    assert {"h2", "ol", "ul", "li", "strong", "em", "code", "pre", "a", "blockquote"} <= tags
    assert "[the docs](https://www.postgresql.org/docs/)" in out


def test_plain_prose_stays_readable() -> None:
    text = "Fixed it: snake_case_names, R&D, a -> b, 2 > 1, 100% done! See ~/x."
    assert (
        _md_message(text) == "Fixed it: snake_case_names, R&D, a -> b, 2 > 1, 100% done! See \\~/x."
    )


def test_images_become_links_and_load_nothing() -> None:
    out = _md_message("![diagram](https://evil.example/pixel.png)")
    assert out == "[image: diagram](https://evil.example/pixel.png)"
    assert "img" not in rendered_tags(out)


def test_text_over_the_limit_is_shown_preformatted_and_closed() -> None:
    text = "# not a heading <img src=x onerror=alert(1)>\n" + "`" * 7 + "x" * MARKDOWN_LIMIT
    out = _md_message(text)
    assert out.startswith("`" * 8 + "\n# not a heading") and out.endswith("\n" + "`" * 8)
    assert rendered_tags(out) == ["pre", "code"]


def test_an_underlined_heading_over_a_pipe_does_not_turn_into_a_table() -> None:
    # Found by the property test above: "---" under a line with a pipe is a GFM table.
    for text in ("<\n|\n- ", "plan\nstep | done\n---"):
        assert _normal(_PLAIN.render(_md_message(text))) == _normal(_PLAIN.render(text))
        assert "<table>" not in _PLAIN.render(_md_message(text))
