"""The transcript model: the conversation as it happened, the model the Markdown, HTML and
ATIF exports draw (see :func:`transcript`).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import msgspec

from .. import fold, reader
from ..events import SURFACE_TYPES
from .redaction import Redactor

__all__ = ["transcript"]

_NOTED = ("turn/end", "compaction/summary", "surface/retract", "compaction/prune")


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
    """The transcript model the Markdown, HTML and ATIF exports draw (redacted if ``red``):
    the header's fields, the messages shown (current and compacted, in seq order, each with
    its source time, model and usage), notes (turn ends other than completed, compactions,
    prunes, retractions), how many versions are ``hidden`` (superseded, retracted) and the
    number of events of each type (``kinds``)."""
    red = red or Redactor()
    hdr = reader.header(path)
    info = (hdr.meta or {}).get("import") if isinstance(hdr.meta, dict) else None
    versions = fold.messages(path, all_versions=True, parents=parents)
    details: dict[int, dict[str, Any]] = {}
    notes: list[dict[str, Any]] = []
    summaries: set[int] = set()
    title = hdr.title
    kinds: Counter[str] = Counter()
    for e in reader.read(path):
        kinds[e.type] += 1
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
        "kinds": dict(kinds),
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
