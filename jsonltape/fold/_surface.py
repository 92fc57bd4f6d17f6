"""The surface: the ordered list of model-visible message events, folded one event at a time.

Nodes are kept in positional order. A ``replace`` of the current nodes from seq S to seq E puts
the new event where S was; a ``retract`` removes them. Each node carries an *anchor*: its own
seq when it was appended, the anchor of S when it replaced S..E. Anchors are unique among the
current nodes and sorted in positional order, so the list stays sorted by anchor, appends are
O(1), a range is found by bisection, and an index (SQLite) can keep the same order with one
integer column.

Every message event gets a status: ``current`` while it is on the surface, then
``superseded`` (replaced by a revision), ``compacted`` (replaced by a compaction summary or a
prune stub, i.e. a replacement whose ``sources`` name a ``compaction/summary`` or
``compaction/prune`` event) or ``retracted``. The events themselves are never removed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any, Literal

from ..errors import SurfaceError
from ..events import SURFACE_TYPES, Event, Replace, Retract

__all__ = ["COMPACTION_SOURCES", "Status", "SurfaceFold"]

Status = Literal["current", "superseded", "compacted", "retracted"]
#: Event types whose presence in a replacement's ``sources`` marks the shadowed nodes compacted.
COMPACTION_SOURCES = frozenset({"compaction/summary", "compaction/prune"})


class SurfaceFold:
    """Incremental surface state. ``apply`` validates first and changes nothing on error."""

    def __init__(self) -> None:
        self._anchors: list[int] = []  # positional order == ascending anchor
        self._seqs: list[int] = []  # seq of the node at the same position
        self._anchor_of: dict[int, int] = {}  # current seq -> anchor
        self._tool_call: dict[int, str] = {}  # current tool/result seq -> its call id
        self._compaction_seqs: set[int] = set()

    # -- queries --------------------------------------------------------------------------

    @property
    def nodes(self) -> list[int]:
        """Seqs of the current surface, in the order a model sees them."""
        return list(self._seqs)

    def anchor(self, seq: int) -> int | None:
        """The anchor of a current node, or None if ``seq`` is not on the surface."""
        return self._anchor_of.get(seq)

    def is_current(self, seq: int) -> bool:
        return seq in self._anchor_of

    def __len__(self) -> int:
        return len(self._seqs)

    def clone(self) -> SurfaceFold:
        other = SurfaceFold()
        other._anchors = list(self._anchors)
        other._seqs = list(self._seqs)
        other._anchor_of = dict(self._anchor_of)
        other._tool_call = dict(self._tool_call)
        other._compaction_seqs = set(self._compaction_seqs)
        return other

    # -- folding ----------------------------------------------------------------------------

    def apply(self, event: Event) -> list[tuple[int, Status]]:
        """Fold one event (any type); return the status changes it causes, new event first.

        Raises :class:`SurfaceError` (and changes nothing) if the event breaks a surface rule.
        """
        return self.apply_parts(event.seq, event.type, event.surface, event.sources, event.data)

    def apply_parts(
        self,
        seq: int,
        type_: str,
        surface: Any,
        sources: Iterable[int] | None,
        data: dict[str, Any],
    ) -> list[tuple[int, Status]]:
        """Like :meth:`apply` for an event not built yet (the writer validates with it)."""
        if type_ in COMPACTION_SOURCES:
            self._compaction_seqs.add(seq)
            return []
        if type_ not in SURFACE_TYPES and type_ != "surface/retract":
            return []
        if surface is None or surface == "append":
            if type_ == "surface/retract":
                raise SurfaceError("surface/retract needs a range", field="$.surface")
            self._push(seq, seq, type_, data)
            return [(seq, "current")]
        if not isinstance(surface, (Replace, Retract)):
            raise SurfaceError(f"unknown surface operation {surface!r}", field="$.surface")
        lo, hi = self._range(surface)
        shadowed = self._seqs[lo : hi + 1]
        srcs = set(sources or ())
        if isinstance(surface, Retract):
            if type_ != "surface/retract":
                raise SurfaceError("only surface/retract events retract", field="$.surface.op")
            status: Status = "retracted"
        else:
            if type_ == "surface/retract":
                raise SurfaceError("surface/retract takes op 'retract'", field="$.surface.op")
            missing = [s for s in shadowed if s not in srcs]
            if missing:
                raise SurfaceError(
                    f"sources must include every replaced seq; missing {missing}",
                    field="$.sources",
                )
            if type_ == "tool/result" or any(s in self._tool_call for s in shadowed):
                self._check_tool_result_replace(type_, shadowed, data)
            status = "compacted" if srcs & self._compaction_seqs else "superseded"
        anchor = self._anchors[lo]
        for s in shadowed:
            del self._anchor_of[s]
            self._tool_call.pop(s, None)
        del self._anchors[lo : hi + 1]
        del self._seqs[lo : hi + 1]
        changes: list[tuple[int, Status]] = []
        if isinstance(surface, Replace):
            self._anchors.insert(lo, anchor)
            self._seqs.insert(lo, seq)
            self._anchor_of[seq] = anchor
            if type_ == "tool/result":
                self._tool_call[seq] = str(data.get("call_id"))
            changes.append((seq, "current"))
        changes.extend((s, status) for s in shadowed)
        return changes

    def _push(self, seq: int, anchor: int, type_: str, data: dict[str, Any]) -> None:
        if self._anchors and anchor <= self._anchors[-1]:  # pragma: no cover - seqs are dense
            raise SurfaceError(f"seq {seq} is not after the surface end")
        self._anchors.append(anchor)
        self._seqs.append(seq)
        self._anchor_of[seq] = anchor
        if type_ == "tool/result":
            self._tool_call[seq] = str(data.get("call_id"))

    def _range(self, op: Replace | Retract) -> tuple[int, int]:
        idx = []
        for name in ("start", "end"):
            s = getattr(op, name)
            a = self._anchor_of.get(s)
            if a is None:
                raise SurfaceError(
                    f"surface {name} seq {s} is not a current message (already replaced, "
                    "retracted, or not a message)",
                    field=f"$.surface.{name}",
                )
            idx.append(bisect.bisect_left(self._anchors, a))
        if idx[0] > idx[1]:
            raise SurfaceError(
                f"surface start seq {op.start} comes after end seq {op.end} on the surface",
                field="$.surface",
            )
        return idx[0], idx[1]

    def _check_tool_result_replace(
        self, type_: str, shadowed: list[int], data: dict[str, Any]
    ) -> None:
        # A tool result may only be revised (e.g. pruned) in place: one node, same call id,
        # so the tool call it answers stays answered.
        if type_ != "tool/result" or len(shadowed) != 1 or shadowed[0] not in self._tool_call:
            if type_ == "tool/result" or len(shadowed) == 1:
                raise SurfaceError(
                    "a tool/result replaces exactly one tool/result, and a tool/result is "
                    "replaced only by a tool/result",
                    field="$.surface",
                )
            return  # a multi-node replace (compaction) may swallow tool results whole
        old = self._tool_call[shadowed[0]]
        new = str(data.get("call_id"))
        if old != new:
            raise SurfaceError(
                f"a tool/result replacement keeps its call id ({old!r}), got {new!r}",
                field="$.data.call_id",
            )
