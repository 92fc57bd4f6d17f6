"""What the two trace-standard exports (ATIF, OpenTelemetry) share: token counts in the
standards' terms, times, the agent's name and version, image types, the sessions a session
spawned, and the count of what a target format cannot carry.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import reader
from .._time import MAX_TIME
from ..errors import JsonltapeError
from ..events import HeaderData

__all__ = [
    "Child",
    "Dropped",
    "Tokens",
    "agent_name",
    "children",
    "event_time",
    "image_type",
    "import_info",
    "import_source",
    "iso",
    "tokens",
]

#: Image types both standards' consumers take (ATIF's ``ImageSource.media_type`` allows
#: exactly these four).
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_BY_SUFFIX = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png"}
_BY_SUFFIX |= {".gif": "image/gif", ".webp": "image/webp"}


def iso(ms: object) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``2025-11-30T00:00:00.000Z``);
    None for anything that is not a time in the format's range (spec §6)."""
    if type(ms) is not int or not 0 <= ms <= MAX_TIME:
        return None
    when = _dt.datetime.fromtimestamp(ms // 1000, tz=_dt.timezone.utc)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


def event_time(data: dict[str, Any], fallback: int) -> int:
    """When an event happened: the source's own time for an imported event (``data.import
    .time``, spec Appendix B.1), else the envelope's ``time``."""
    info = data.get("import")
    t = info.get("time") if isinstance(info, dict) else None
    return t if type(t) is int and 0 <= t <= MAX_TIME else fallback


def agent_name(agent: str | None) -> tuple[str, str]:
    """``claude-code/1.0.98`` as ``("claude-code", "1.0.98")``; no version: ``"unknown"``."""
    if not agent:
        return "unknown", "unknown"
    name, sep, version = agent.partition("/")
    return (name or agent), (version if sep and version else "unknown")


def image_type(part: dict[str, Any]) -> str | None:
    """The image type of a ``uri`` or ``blob`` part, if it is an image of a type in
    :data:`IMAGE_TYPES` (from its ``mime_type``, else a ``uri``'s file suffix)."""
    mime = part.get("mime_type")
    if isinstance(mime, str):
        mime = mime.strip().lower()
        return mime if mime in IMAGE_TYPES else None
    uri = part.get("uri")
    if isinstance(uri, str):
        path = uri.split("?", 1)[0].split("#", 1)[0]
        return _BY_SUFFIX.get(os.path.splitext(path)[1].lower())
    return None


@dataclass(frozen=True)
class Tokens:
    """A response's tokens as both standards count them: ``prompt`` all input tokens (cached
    ones included), ``cached`` the part of it read from a cache, ``cache_write`` the part
    written to one, ``completion`` the output (reasoning included), ``reasoning`` that part."""

    prompt: int | None
    completion: int | None
    cached: int | None
    cache_write: int | None
    reasoning: int | None
    cost: float | None


def _int(usage: dict[str, Any], key: str) -> int | None:
    v = usage.get(key)
    return v if type(v) is int and v >= 0 else None


def _sum(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def tokens(usage: Any, source: str | None) -> Tokens | None:
    """Read a logged ``usage`` object. Sources name tokens in three ways: Anthropic's (Claude
    Code, pi, OpenCode, native writers: ``input_tokens`` excludes the cache reads and writes
    counted beside it), OpenAI's Responses API (Codex: ``input_tokens`` includes
    ``cached_input_tokens``, ``output_tokens`` includes ``reasoning_output_tokens``) and Gemini
    CLI's import (``input_tokens`` includes ``cache_read_input_tokens``); Chat Completions'
    ``prompt_tokens``/``completion_tokens`` are read too. ``cost`` is a cost the source itself
    recorded (pi's ``usage.cost.total``); nothing is priced here."""
    if not isinstance(usage, dict):
        return None
    cost = usage.get("cost")
    total_cost = cost.get("total") if isinstance(cost, dict) else cost
    spent: float | None = None
    if (
        isinstance(total_cost, (int, float))
        and not isinstance(total_cost, bool)
        and total_cost >= 0
    ):
        spent = float(total_cost)
    cache_read = _int(usage, "cache_read_input_tokens")
    cache_write = _int(usage, "cache_creation_input_tokens")
    if "cached_input_tokens" in usage or source == "codex":
        prompt, cached = _int(usage, "input_tokens"), _int(usage, "cached_input_tokens")
        reasoning = _int(usage, "reasoning_output_tokens")
    elif source == "gemini-cli":
        prompt, cached = _int(usage, "input_tokens"), cache_read
        prompt = _sum(prompt, _int(usage, "tool_use_prompt_tokens"))
        reasoning = _int(usage, "reasoning_tokens")
    elif "prompt_tokens" in usage and "input_tokens" not in usage:
        prompt, cached = _int(usage, "prompt_tokens"), None
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = _int(details, "cached_tokens")
        reasoning = None
        out = usage.get("completion_tokens_details")
        if isinstance(out, dict):
            reasoning = _int(out, "reasoning_tokens")
        completion = _int(usage, "completion_tokens")
        return _made(prompt, completion, cached, None, reasoning, spent)
    else:
        base = _int(usage, "input_tokens")
        prompt = _sum(base, cache_read, cache_write) if base is not None else None
        cached, reasoning = cache_read, None
    completion = _int(usage, "output_tokens")
    if source == "gemini-cli" and completion is not None and reasoning is not None:
        completion += reasoning  # Gemini counts thoughts apart from the candidates
    return _made(prompt, completion, cached, cache_write, reasoning, spent)


def _made(
    prompt: int | None,
    completion: int | None,
    cached: int | None,
    cache_write: int | None,
    reasoning: int | None,
    cost: float | None,
) -> Tokens | None:
    if prompt is None and completion is None and cost is None:
        return None
    return Tokens(prompt, completion, cached, cache_write, reasoning, cost)


@dataclass
class Dropped:
    """What a target format cannot carry, counted by kind, in the order first seen."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, n: int = 1) -> None:
        if n > 0:
            self.counts[kind] += n

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)

    def line(self, fmt: str) -> str | None:
        """One line for stderr, e.g. ``atif cannot carry: earlier versions of revised messages
        (2), turn boundaries (3)``; None when nothing was dropped."""
        if not self.counts:
            return None
        return f"{fmt} cannot carry: " + ", ".join(f"{k} ({n})" for k, n in self.counts.items())


@dataclass(frozen=True)
class Child:
    """A session another one spawned or forked: its file, id, the seq of the parent it
    starts after and the parent's tool call that spawned it (when the import found it)."""

    path: Path
    session: str
    at: int
    spawned_by: str | None


def children(path: str | os.PathLike[str], header: HeaderData) -> list[Child]:
    """The sessions beside ``path`` whose header names it as their parent (forks, imported
    Claude Code sidechains) or, for imported sub-agent files, whose ``meta.import
    .sidechain_of`` is its source session, sorted by id. Only regular ``.jsonl`` files are
    read (no link is followed); a file that is not a readable session is passed over."""
    here = Path(path)
    mine = import_info(header)
    found: list[Child] = []
    try:
        entries = sorted(os.scandir(here.parent or "."), key=lambda e: e.name)
    except OSError:
        return []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name == here.name:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            hdr = reader.header(entry.path)
        except (OSError, JsonltapeError):
            continue
        info = import_info(hdr)
        spawned = info.get("spawned_by")
        spawned_by = spawned if isinstance(spawned, str) else None
        if hdr.parent is not None and hdr.parent.session == header.id:
            found.append(Child(Path(entry.path), hdr.id, hdr.parent.seq, spawned_by))
        elif (
            hdr.parent is None
            and isinstance(mine.get("session"), str)
            and info.get("sidechain_of") == mine["session"]
            and info.get("source") == mine.get("source")
        ):
            found.append(Child(Path(entry.path), hdr.id, 0, spawned_by))
    return sorted(found, key=lambda c: c.session)


def import_info(header: HeaderData) -> dict[str, Any]:
    """The ``meta.import`` of an imported session's header (empty for a native one)."""
    info = header.meta.get("import") if isinstance(header.meta, dict) else None
    return info if isinstance(info, dict) else {}


def import_source(header: HeaderData) -> str | None:
    """The agent an imported session came from (``meta.import.source``)."""
    source = import_info(header).get("source")
    return source if isinstance(source, str) else None
