"""Repair building blocks: cut a torn tail into a sidecar, and compute the closers of a turn.

Nothing is ever thrown away: the cut bytes go to an owner-only sidecar next to the session
before the session is truncated. Closers are deterministic (their time is the last event's
time, never a future one) and marked ``synthetic`` so folds and people can tell them apart.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import msgspec

from . import _framing, _fs
from ._lines import decode as decode_line
from .events import Event

__all__ = ["NOT_STARTED_TEXT", "OUTCOME_UNKNOWN_TEXT", "closers", "cut_tail"]

OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
NOT_STARTED_TEXT = (
    "The tool call was interrupted before it was recorded as started. "
    "Retry it if it is still needed."
)

_decoder = msgspec.json.Decoder(Event)


def sidecar_path(path: Path) -> Path:
    """``<name>.<UTC stamp>.torn``: never ends in .jsonl, so indexers do not pick it up."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    base = path.with_name(f"{path.name}.{stamp}.torn")
    candidate, n = base, 1
    while candidate.exists() or candidate.is_symlink():
        candidate = path.with_name(f"{path.name}.{stamp}-{n}.torn")
        n += 1
    return candidate


def cut_tail(fd: int, path: Path, at: int, ops: _fs.FileOps) -> Path | None:
    """Save bytes ``[at, EOF)`` to a sidecar (durably), then truncate the session to ``at``."""
    size = os.fstat(fd).st_size
    if size <= at:
        return None
    side = sidecar_path(path)
    sfd = _fs.create_exclusive(side)
    try:
        pos = at
        while pos < size:
            chunk = os.pread(fd, min(_framing.CHUNK, size - pos), pos)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                n = os.write(sfd, view)
                view = view[n:]
            pos += len(chunk)
        os.fsync(sfd)
    finally:
        os.close(sfd)
    ops.sync_dir(path.parent)
    ops.truncate(fd, at)
    ops.sync(fd)
    return side


def closers(
    fd: int, turn_offset: int, end: int
) -> list[tuple[str, dict[str, Any], list[int] | None]]:
    """Events that close the turn starting at ``turn_offset``: (type, data, sources) each.

    For every tool call without a result: a synthetic error tool/result (outcome unknown if a
    ``tool/call`` was recorded, not started if the assistant only asked for it); then step/end
    for an open step; then turn/end with reason ``interrupted``.
    """
    turn_seq: int | None = None
    step: int | None = None
    pending: dict[str, int | None] = {}  # call id -> seq of its tool/call event, if recorded
    for _off, raw in _framing.iter_lines(fd, turn_offset, end):
        ev = decode_line(raw)  # unknown members are allowed (spec §6)
        t, d = ev.type, ev.data
        if t == "turn/start":
            turn_seq, step, pending = ev.seq, None, {}
        elif t == "turn/end":
            turn_seq = None
        elif t == "step/start":
            step = ev.seq
        elif t == "step/end":
            step = None
        elif t == "assistant/message":
            message = d.get("message")
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts if isinstance(parts, list) else ():
                # A tool_call whose id is not a string names no call (spec §10.3).
                if (
                    isinstance(part, dict)
                    and part.get("type") == "tool_call"
                    and isinstance(part.get("id"), str)
                ):
                    pending.setdefault(part["id"], None)
        elif t == "tool/call" and isinstance(d.get("call_id"), str):
            pending[d["call_id"]] = ev.seq
        elif t == "tool/result" and isinstance(d.get("call_id"), str):
            pending.pop(d["call_id"], None)
    if turn_seq is None:
        return []
    out: list[tuple[str, dict[str, Any], list[int] | None]] = []
    for call_id, call_seq in pending.items():
        recorded = call_seq is not None
        code = "TOOL_OUTCOME_UNKNOWN" if recorded else "TOOL_NOT_STARTED"
        text = OUTCOME_UNKNOWN_TEXT if recorded else NOT_STARTED_TEXT
        message = {
            "id": f"interrupted-{call_id}",
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": call_id, "response": text, "is_error": True}
            ],
        }
        data = {
            "call_id": call_id,
            "message": message,
            "error": {"code": code, "message": text},
            "synthetic": True,
        }
        out.append(("tool/result", data, [call_seq] if call_seq is not None else None))
    if step is not None:
        out.append(("step/end", {"step": step, "turn": turn_seq, "synthetic": True}, None))
    out.append(("turn/end", {"turn": turn_seq, "reason": "interrupted", "synthetic": True}, None))
    return out
