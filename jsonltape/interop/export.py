"""Export a session to share it: a transcript people read, or the messages a program sends.

Formats:

* ``markdown``: a transcript (header, then every message in order with its time and model;
  reasoning and tool calls in ``<details>`` blocks, each tool call with its result).
* ``html``: the same as one self-contained file: inline CSS, no scripts, no external
  resources (a Content-Security-Policy forbids any request), readable on a phone, tool calls
  and reasoning collapsible, every text HTML-escaped (event text is data, never markup).
* ``json``: the neutral fold (``jsonltape messages``): the model-visible history as logged.
* ``openai`` / ``anthropic``: the request body a program would send (``jsonltape.fold``).

The transcript shows the conversation as it happened: the current messages and those a
compaction later replaced (the summary appears where the compaction happened); earlier
versions of revised messages and retracted branches are left out and counted in the header.
Times are the source's own for imported sessions.

Redaction (:class:`~jsonltape.interop.redaction.Redactor`) is applied to the data before it is
rendered, and secret masking once more to the rendered text, so nothing a pattern matches can
slip through a field the renderer added. An open or torn session exports its committed part;
:attr:`Export.notes` says so, and so does the end of a transcript (without the local path).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from .. import fold, reader
from ..events import SURFACE_TYPES
from ._render import render_html, render_markdown
from .redaction import Redactor, mask_secrets

__all__ = ["FORMATS", "Export", "ExportFormat", "export", "transcript"]

ExportFormat = Literal["markdown", "html", "json", "openai", "anthropic"]
FORMATS: tuple[str, ...] = ("markdown", "html", "json", "openai", "anthropic")
_enc = msgspec.json.Encoder()
_NOTED = ("turn/end", "compaction/summary", "surface/retract", "compaction/prune")


@dataclass
class Export:
    """An export: the text to write, notes for stderr, and the redaction summary."""

    text: str
    notes: list[str] = field(default_factory=list)
    redacted: str | None = None


def _state_notes(report: reader.Report) -> list[str]:
    """What a reader of the export should know about the session's state, in words."""
    if report.state == "torn-tail":
        cut = report.size - report.committed_bytes
        return [
            f"torn tail at line {report.line}: its last {cut} bytes (after byte "
            f"{report.committed_bytes}) were being written when the writer stopped, or were "
            "copied mid-write; they are not committed and not in this export"
        ]
    if report.open_turn is None:
        return []
    turn = f"the turn that started at seq {report.open_turn} has no end"
    if report.state == "open-turn":  # no clean close: a live or crashed writer
        return [
            f"{turn}: the agent was still running, or it crashed; the transcript shows what "
            "was committed, so its last step may be missing"
        ]
    return [  # closed cleanly with the turn open: left open on purpose (spec: MUST NOT close)
        f"{turn}: its writer closed the session with the turn still open (to go on later); "
        "the transcript shows everything written so far"
    ]


def _json(obj: Any) -> str:
    return msgspec.json.format(_enc.encode(obj), indent=2).decode() + "\n"


def export(
    path: str | os.PathLike[str],
    format: ExportFormat,
    *,
    redact_tools: bool = False,
    redact_secrets: bool = False,
    parents: dict[str, str | os.PathLike[str]] | None = None,
) -> Export:
    """Export the session at ``path`` (its committed part) in ``format``."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    state = _state_notes(reader.verify(path))
    red = Redactor(tools=redact_tools, secrets=redact_secrets)
    if format in ("json", "openai", "anthropic"):
        neutral = fold.messages(path, parents=parents)
        items = [red.item(i) for i in neutral["messages"]]
        header = red.value(neutral.get("header"))
        if format == "json":
            out: dict[str, Any] = {"session": red.text(neutral["session"]), "seq": neutral["seq"]}
            if header is not None:
                out["header"] = header
            out["messages"] = items
            text = _json(out)
        elif format == "openai":
            text = _json(fold.openai_request(items, header))
        else:
            text = _json(fold.anthropic_request(items, header))
    else:
        model = transcript(path, red, parents=parents)
        model["state"] = state  # a transcript says it at its end, where it stops
        text = render_markdown(model) if format == "markdown" else render_html(model)
    if redact_secrets:
        text = mask_secrets(text, red.masked)  # anything a renderer put together
    notes = [f"{path}: {note}" for note in state]
    return Export(text, notes, red.summary() if red.active else None)


def _time(data: dict[str, Any], fallback: int) -> int:
    info = data.get("import")
    t = info.get("time") if isinstance(info, dict) else None
    return t if isinstance(t, int) else fallback


def transcript(
    path: str | os.PathLike[str],
    red: Redactor | None = None,
    *,
    parents: dict[str, str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """The transcript model the Markdown and HTML renderers draw (redacted if ``red``)."""
    red = red or Redactor()
    hdr = reader.header(path)
    info = (hdr.meta or {}).get("import") if isinstance(hdr.meta, dict) else None
    versions = fold.messages(path, all_versions=True, parents=parents)
    details: dict[int, dict[str, Any]] = {}
    notes: list[dict[str, Any]] = []
    summaries: set[int] = set()
    title = hdr.title
    for e in reader.read(path):
        if e.type == "session/title" and isinstance(e.data.get("title"), str):
            title = e.data["title"]  # a later title wins (spec §8.4)
        if e.type in SURFACE_TYPES:
            details[e.seq] = {
                "time": _time(e.data, e.time),
                "model": e.data.get("model"),
                "usage": e.data.get("usage"),
                "summary": bool(summaries.intersection(e.sources or ())),
            }
        if e.type in ("compaction/summary", "handoff/anchor"):
            summaries.add(e.seq)
        if e.type in _NOTED:
            note = _note(e.type, e.data)
            if note is not None:
                notes.append({"seq": e.seq, "time": _time(e.data, e.time), "text": note})
    shown: list[dict[str, Any]] = []
    hidden = {"superseded": 0, "retracted": 0}
    for item in versions["messages"]:
        status = item.get("status", "current")
        if status in hidden:
            hidden[status] += 1
            continue
        d = details.get(item["seq"], {}) if "session" not in item else {}
        entry = dict(item)
        entry["time"] = d.get("time", item["time"])
        for k in ("model", "usage", "summary"):
            if d.get(k):
                entry[k] = d[k]
        shown.append(red.item(entry))
    created = info.get("created") if isinstance(info, dict) else None
    model: dict[str, Any] = {
        "id": red.text(hdr.id),
        "title": red.text(title) if title else None,
        "cwd": red.text(hdr.cwd) if hdr.cwd else None,
        "agent": red.text(hdr.agent) if hdr.agent else None,
        "created": created if isinstance(created, int) else hdr.created,
        "parent": red.value(msgspec.to_builtins(hdr.parent)) if hdr.parent else None,
        "source": red.value(_source_info(info)) if isinstance(info, dict) else None,
        "request": red.value(versions.get("header")),
        "messages": shown,
        "notes": [red.item(n) for n in notes],
        "hidden": hidden,
    }
    return model


def _source_info(info: dict[str, Any]) -> dict[str, Any]:
    keep = ("source", "name", "session", "version")
    return {k: info[k] for k in keep if isinstance(info.get(k), str)}


def _note(type_: str, data: dict[str, Any]) -> str | None:
    if type_ == "turn/end":
        reason = data.get("reason")
        if reason == "completed":
            return None
        text = f"turn ended: {reason}"
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            text += f" ({error['message']})"
        return text
    if type_ == "compaction/summary":
        count = data.get("count")
        tokens = data.get("tokens")
        extra = f", about {tokens} tokens" if isinstance(tokens, int) else ""
        return f"context compacted: {count} messages replaced by a summary{extra}"
    if type_ == "compaction/prune":
        return f"a tool result (seq {data.get('target')}) was pruned from the context"
    if type_ == "surface/retract":
        reason = data.get("reason")
        return "messages retracted" + (f" ({reason})" if isinstance(reason, str) else "")
    return None  # pragma: no cover - only the types in _NOTED come here
