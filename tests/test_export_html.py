"""HTML export: message Markdown rendered as HTML, and nothing in it a browser would run or load.

Hostile payloads go through a real session and :func:`jsonltape.interop.export`; the output is
parsed with :mod:`html.parser` and every tag and attribute checked.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import jsonltape
from jsonltape.interop import export
from jsonltape.interop._render import MARKDOWN_LIMIT

from .test_export_markdown import HOSTILE, session

SAFE_HREF = re.compile(r"(?i)^(https?:|mailto:)")


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.bad: list[object] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag in ("script", "iframe", "object", "embed", "link", "form", "base", "svg", "math"):
            self.bad.append(tag)
        for k, v in a.items():
            if k.startswith("on") or k in ("srcdoc", "formaction", "action", "background"):
                self.bad.append((tag, k, v))
            if k == "href" and not SAFE_HREF.match(v):
                self.bad.append((tag, k, v))
            if k == "src" and not (tag == "img" and v.startswith("data:image/")):
                self.bad.append((tag, k, v))
            if k == "style":
                self.bad.append((tag, k, v))  # CSS lives in the one <style>, never inline
        if tag == "a" and a.get("rel") != "noopener noreferrer nofollow":
            self.bad.append((tag, "rel", a.get("rel")))
        if tag == "meta" and a.get("http-equiv") == "refresh":
            self.bad.append((tag, a))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.bad.append(("comment", data))


def parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_runs_and_loads_nothing(tmp_path: Path, text: str) -> None:
    page = export(session(tmp_path / "s.jsonl", text), "html").text
    p = parse(page)
    assert not p.bad, p.bad
    assert [t for t, _ in p.tags].count("style") == 1
    assert "javascript:" not in "".join(v for _, a in p.tags for v in a.values()).lower()


def _one_message(path: Path, text: str) -> Path:
    with jsonltape.open(path, create=True, durability="manual") as tape, tape.turn():
        tape.assistant(text)
    return path


def test_message_markdown_renders_as_html(tmp_path: Path) -> None:
    text = (
        "## Plan\n\n1. read the **migration**\n2. add a *default*\n\n- `NOT NULL` fails\n"
        "- see [the docs](https://www.postgresql.org/docs/)\n\n```sql\nALTER TABLE users;\n```\n"
        "\n| col | type |\n| --- | --- |\n| email | text |\n"
    )
    page = export(_one_message(tmp_path / "m.jsonl", text), "html").text
    p = parse(page)
    assert not p.bad, p.bad
    tags = {t for t, _ in p.tags}
    assert {"h2", "ol", "ul", "li", "strong", "em", "code", "pre", "table", "td"} <= tags
    assert '<code class="language-sql">ALTER TABLE users;\n</code>' in page
    link = next(a for t, a in p.tags if t == "a")
    assert link == {
        "href": "https://www.postgresql.org/docs/",
        "rel": "noopener noreferrer nofollow",
    }
    assert "##" not in "".join(p.text) and "**" not in "".join(p.text)


def test_unsafe_links_stay_text_and_images_become_links(tmp_path: Path) -> None:
    text = (
        "[a](javascript:alert(1)) [b](data:text/html,x) [c](file:///etc/passwd) [d]() "
        "![pixel](https://evil.example/p.png) <img src=x onerror=alert(1)>"
    )
    page = export(_one_message(tmp_path / "l.jsonl", text), "html").text
    p = parse(page)
    assert not p.bad, p.bad
    anchors = [a for t, a in p.tags if t == "a"]
    assert anchors == [
        {"href": "https://evil.example/p.png", "rel": "noopener noreferrer nofollow"}
    ]
    shown = "".join(p.text)
    assert "[a](javascript:alert(1))" in shown and "[image: pixel]" in shown
    assert "<img src=x onerror=alert(1)>" in shown  # shown as text
    assert not any(t == "img" for t, _ in p.tags)


def test_text_over_the_limit_is_escaped_preformatted(tmp_path: Path) -> None:
    text = "## big <script>alert(1)</script>\n" + "x" * MARKDOWN_LIMIT
    page = export(_one_message(tmp_path / "b.jsonl", text), "html").text
    assert '<div class="text">## big &lt;script&gt;alert(1)&lt;/script&gt;\n' in page
    assert not parse(page).bad
