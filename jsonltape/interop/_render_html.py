"""The HTML rendering of a transcript model: one self-contained page (inline CSS, a Content
Security Policy that loads nothing but inline styles and ``data:`` images), message text
rendered from its parsed Markdown, everything else HTML-escaped (see :mod:`._render`).
"""

from __future__ import annotations

import html
import re
from typing import Any

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
    _summary_of,
)
from .redaction import LEDGER_HEADING

_IMAGE_MIME = re.compile(r"^image/(png|jpeg|gif|webp)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")


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


def _html_message(text: str) -> str:
    paths = _ledger(text)
    if paths is not None:
        title = _h(LEDGER_HEADING.removeprefix("### "))
        return f'<div class="md"><h3>{title}</h3><pre>{_h(paths)}</pre></div>'
    if len(text) > MARKDOWN_LIMIT:
        return f'<div class="text">{_h(text)}</div>'
    return f'<div class="md">{_MD.render(text)}</div>'


def message_html(text: str) -> str:
    """A message's text as the HTML export shows it (a viewer shows it the same way): its
    Markdown rendered safely (no raw HTML, only safe links; a file ledger as a list of paths),
    or, over :data:`MARKDOWN_LIMIT` characters, escaped and preformatted."""
    return _html_message(text)


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
