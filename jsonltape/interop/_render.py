"""Markdown and HTML renderings of a transcript model (see :func:`export.transcript`).

Both put each tool call together with its result (found by call id), fold reasoning and tool
calls into ``<details>``, and treat every string from the session as data: HTML escapes all of
it; Markdown escapes ``<`` and ``&`` outside code and puts arguments and results in fences
longer than any backtick run inside them.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import msgspec

__all__ = ["render_html", "render_markdown"]

_enc = msgspec.json.Encoder()
_IMAGE_MIME = re.compile(r"^image/(png|jpeg|gif|webp)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


def _iso(ms: Any) -> str:
    if not isinstance(ms, int):
        return ""
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%d %H:%M:%SZ")


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


# -- Markdown -----------------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    """Neutralise HTML in Markdown prose: ``<`` and ``&`` outside code spans and fences."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            out.append(line)
            if m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m is not None:
            fence = m.group(1)
            out.append(line)
            continue
        pieces, last = [], 0
        for span in _CODE_SPAN.finditer(line):
            pieces.append(_md_plain(line[last : span.start()]))
            pieces.append(span.group(0))
            last = span.end()
        pieces.append(_md_plain(line[last:]))
        out.append("".join(pieces))
    if fence is not None:
        out.append(fence)  # close a fence the text left open, so it cannot swallow the rest
    return "\n".join(out)


def _md_plain(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _fenced(text: str, lang: str = "") -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _md_inline(text: str) -> str:
    return html.escape(" ".join(text.split()), quote=False)


def _md_part(p: dict[str, Any], results: dict[str, list[dict[str, Any]]]) -> str:
    kind = p.get("type")
    if kind == "text":
        return _md_escape(str(p.get("content", "")))
    if kind == "reasoning":
        body = _md_escape(str(p.get("content", "")))
        return f"<details><summary>Reasoning</summary>\n\n{body}\n\n</details>"
    if kind == "tool_call":
        name, cid = str(p.get("name")), str(p.get("id"))
        args = _pretty(p.get("arguments"))
        out = [f"<details><summary>Tool call: {_md_inline(name)} ({_md_inline(cid)})</summary>", ""]
        out += [
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
    return f"_[{_md_inline(_describe(p))}]_"


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
    lines = [f"# {_md_inline(str(title))}", ""]
    for label, value in _summary_of(model):
        lines.append(f"- **{label}:** {_md_inline(value)}")
    for kind, obj, results in _layout(model):
        lines += ["", "---", ""]
        if kind == "note":
            lines.append(f"_{_md_inline(obj['text'])}_ ({_iso(obj.get('time'))})")
            continue
        entry = obj
        lines.append(f"### {_role(entry)} · {_md_inline(_meta_line(entry))}")
        lines.append("")
        if entry.get("type") == "tool/result":
            response, err = _response(entry)
            lines.append(
                f"Result of call `{_md_inline(str(entry.get('call_id')))}`"
                + (" (error):" if err else ":")
            )
            lines += ["", _fenced(_pretty(response))]
            continue
        chunks = [_md_part(p, results or {}) for p in _parts(entry)]
        lines.append("\n\n".join(c for c in chunks if c) or "_(empty message)_")
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
        return f'<div class="text">{_h(p.get("content", ""))}</div>'
    if kind == "reasoning":
        return (
            '<details class="reasoning"><summary>Reasoning</summary>'
            f'<div class="text">{_h(p.get("content", ""))}</div></details>'
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
    out += ["</main></body>", "</html>"]
    return "\n".join(out) + "\n"
