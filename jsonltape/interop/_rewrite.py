"""Sources that rewrite a session in place: what an import reads is a *log of versions*.

Some agents rewrite their session whole (Continue saves its history with ``writeFileSync``, VS
Code and Cursor rewrite a request or a bubble when the user edits or re-runs it, Copilot CLI's
``/rewind`` rewrites ``events.jsonl``). The records an earlier import took are kept verbatim in
the session (``data.import.raw``), so nothing of them is lost; what the import reads after such
a rewrite is those records, then the current version's records from the first one that changed
(``k``, moved back to a record where the mapper may start over: :attr:`Mapper.rewrite_start`),
and the *rewrite point* ``(n, k)``: line ``n`` of the log starts record ``k`` of the new version.
The points are kept in the session's ``import/sync`` markers, so a replay maps the same lines
the same way; the current version is rebuilt as :func:`document` says.

A version that only grows (the common case: a chat goes on) adds its new records and no point.
The mapping of a rewrite (:meth:`~._core.MapperCore.feed`) retracts what records ``k`` on made
and maps the new records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from ..errors import JsonltapeError

__all__ = ["Continuation", "continue_log", "document", "points_of"]

_decode = msgspec.json.decode


class Continuation:
    """What the import reads: the log so far and what follows it, as JSONL bytes."""

    __slots__ = ("data", "held", "points")

    def __init__(self, data: bytes, held: int, points: list[tuple[int, int]]) -> None:
        self.data = data
        #: the last bytes that are records still changing (held back until settled)
        self.held = held
        #: every rewrite point of the log, ``(line, record)``
        self.points = points


def points_of(markers: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """The rewrite points recorded by the ``import/sync`` markers (each holds all so far)."""
    found: list[tuple[int, int]] = []
    for m in markers:
        pts = m.get("rewrites")
        if isinstance(pts, list) and len(pts) >= len(found):
            found = [(int(p[0]), int(p[1])) for p in pts]
    return found


def document(lines: list[bytes], points: Iterable[tuple[int, int]]) -> list[bytes]:
    """The version a log ends with: its lines, each rewrite point cutting the records so far
    back to the first ``k`` (line numbers are 1-based)."""
    at = dict(points)
    doc: list[bytes] = []
    for n, line in enumerate(lines, 1):
        k = at.get(n)
        if k is not None:
            del doc[k:]
        doc.append(line)
    return doc


def _start(records: list[bytes], k: int, safe: Callable[[dict[str, Any]], bool]) -> int:
    """The last record at or before ``k`` where a mapping may start over (0 at the latest)."""
    while k > 0:
        try:
            value = _decode(records[k]) if k < len(records) else None
        except (msgspec.DecodeError, RecursionError):
            value = None
        if isinstance(value, dict) and safe(value):
            return k
        k -= 1
    return 0


def continue_log(
    raws: Mapping[int, str],
    marker: Mapping[str, Any],
    points: list[tuple[int, int]],
    records: list[bytes],
    held_from: int,
    tail: bytes,
    safe: Callable[[dict[str, Any]], bool],
    path: Any,
) -> Continuation:
    """The log an earlier import read (rebuilt from the raw lines it kept, checked against its
    last ``import/sync`` marker) continued with the current version: ``records`` (complete
    lines without their newline), of which those from ``held_from`` on may still change, then
    ``tail`` (an unfinished last line, kept as it is)."""
    n = int(marker.get("lines") or 0)
    # the first line not kept is at most one past those kept, whatever count the marker says
    missing = next((i for i in range(1, n + 1) if i not in raws), None)
    if missing is not None:
        raise _changed(path, f"line {missing} of what it imported is not in the session")
    old = [raws[i].encode("utf-8", "surrogatepass") for i in range(1, n + 1)]
    done = b"".join(line + b"\n" for line in old)
    # a last line imported without its newline (a file's, complete as JSON): hashed without it
    hashed = done[:-1] if old and len(done) == marker.get("bytes", 0) + 1 else done
    if len(hashed) != marker.get("bytes") or hashlib.sha256(hashed).hexdigest() != marker.get(
        "sha256"
    ):
        raise _changed(path, "the lines it imported cannot be rebuilt byte for byte")
    points = [p for p in points if p[0] <= n]  # a point of lines held back then is made again
    doc = document(old, points)
    p = 0
    while p < len(doc) and p < len(records) and doc[p] == records[p]:
        p += 1
    if p == len(doc):
        first = p
    else:
        # a version that only lost records is read from the last start before its end, so
        # that the point has a line to stand at
        first = _start(records, min(p, len(records) - 1), safe) if records else 0
        if records:
            points.append((n + 1, first))
    new = records[first:]
    body = b"".join(line + b"\n" for line in new)
    held = sum(len(line) + 1 for line in records[max(held_from, first) :])
    return Continuation(done + body + tail, held, points)


def _changed(path: Any, why: str) -> JsonltapeError:
    from ._discover import SourceError

    return SourceError(
        f"the source was rewritten since it was imported, and {why}: import it into a new root",
        path=path,
    )
