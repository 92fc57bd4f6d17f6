"""The surface rules: which events carry which surface operation, and the surface they fold to.

Below both the writer and the fold (errors <- events <- here <- writer, fold): the writer
checks each appended event with :func:`check_op` and, once a replace or retract appears, with
the same :class:`SurfaceFold` a reader folds with, so both apply one set of rules.

The surface is the ordered list of model-visible message events, folded one event at a time.

Nodes are kept in positional order. A ``replace`` of the current nodes from seq S to seq E puts
the new event where S was; a ``retract`` removes them. Each node carries an *anchor*: its own
seq when it was appended, the anchor of S when it replaced S..E. Anchors are unique among the
current nodes and sorted in positional order, so the list stays sorted by anchor, appends are
O(1), a range is found by bisection, and an index (SQLite) can keep the same order with one
integer column.

Tool calls and their results stay paired. A tool call is *declared* by a current
``assistant/message`` (a ``tool_call`` part) and *answered* by a current ``tool/result`` with
that ``call_id``. An operation that removes the last declaration of an answered call also
removes the call's results (they "go with it"; a replace must list them in ``sources``), and an
operation that would remove every result of a call that stays declared is refused: a provider
rejects a request with an unanswered call in its history.

Every message event gets a status: ``current`` while it is on the surface, then
``superseded`` (replaced by a revision), ``compacted`` (replaced by a compaction summary, a
prune stub or a handoff, i.e. a replacement whose ``sources`` name a ``compaction/summary``,
``compaction/prune`` or ``handoff/anchor`` event) or ``retracted``. The events themselves are
never removed.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from .errors import InvalidEventError, SurfaceError
from .events import SURFACE_TYPES, Event, Replace, Retract

__all__ = ["COMPACTION_SOURCES", "Status", "SurfaceFold", "check_op", "tool_call_ids"]

Status = Literal["current", "superseded", "compacted", "retracted"]
#: Event types whose presence in a replacement's ``sources`` marks the shadowed nodes compacted.
COMPACTION_SOURCES = frozenset({"compaction/summary", "compaction/prune", "handoff/anchor"})


def tool_call_ids(data: dict[str, Any]) -> tuple[str, ...]:
    """The distinct ids of the ``tool_call`` parts of ``data["message"]``, in part order."""
    message = data.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return ()
    ids = [
        p["id"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == "tool_call" and isinstance(p.get("id"), str)
    ]
    return tuple(dict.fromkeys(ids))


def check_op(type_: str, value: Any, seq: int) -> Literal["append"] | Replace | Retract | None:
    """The surface member of an event of ``type_`` at ``seq``: what it may carry (spec §8.6).

    Message events append (the default) or replace; ``surface/retract`` events retract and
    must say what; every other type takes no surface. A range names earlier events only
    (whether they are on the surface is :class:`SurfaceFold`'s business). Raises
    :class:`InvalidEventError` naming the member.
    """
    if type_ == "surface/retract":
        if value is None or value == "append":
            raise InvalidEventError(
                "surface/retract needs surface {op: retract, start, end}", field="$.surface"
            )
    elif type_ not in SURFACE_TYPES:
        if value is not None:
            raise InvalidEventError(
                f"{type_} is not model-visible and takes no surface", field="$.surface"
            )
        return None
    elif value is None or value == "append":
        return "append"
    if isinstance(value, (Replace, Retract)):
        # A Struct built in Python was never checked: its members go through the same
        # conversion a mapping does (ranges included: out of range is the wrong type, §6).
        value = msgspec.to_builtins(value)
    try:
        op = msgspec.convert(value, type=Replace | Retract)
    except msgspec.ValidationError as exc:
        raise InvalidEventError(
            f'surface must be "append", {{op: replace, start, end}} or '
            f"{{op: retract, start, end}}: {exc}",
            field="$.surface",
        ) from None
    if isinstance(op, Retract) != (type_ == "surface/retract"):
        raise InvalidEventError(
            "only surface/retract events retract; message events append or replace",
            field="$.surface.op",
        )
    for name in ("start", "end"):
        v = getattr(op, name)
        if type(v) is not int or not 0 < v < seq:
            raise InvalidEventError(
                f"surface.{name} must be the seq of an earlier event (1..{seq - 1}), got {v!r}",
                field=f"$.surface.{name}",
            )
    return op


class _Plan:
    """What an operation would do, computed before anything changes."""

    __slots__ = ("cascade", "hi", "lo", "shadowed", "status")

    def __init__(
        self, lo: int, hi: int, shadowed: list[int], cascade: list[int], status: Status
    ) -> None:
        self.lo, self.hi = lo, hi
        self.shadowed = shadowed
        self.cascade = cascade
        self.status = status


class SurfaceFold:
    """Incremental surface state. ``apply`` validates first and changes nothing on error."""

    def __init__(self) -> None:
        self._anchors: list[int] = []  # positional order == ascending anchor
        self._seqs: list[int] = []  # seq of the node at the same position
        self._anchor_of: dict[int, int] = {}  # current seq -> anchor
        self._tool_call: dict[int, str] = {}  # current tool/result seq -> its call id
        self._calls: dict[int, tuple[str, ...]] = {}  # current assistant seq -> its call ids
        self._declared: dict[str, int] = {}  # call id -> current assistant nodes declaring it
        self._answers: dict[str, list[int]] = {}  # call id -> current tool/result seqs
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

    def position(self, seq: int) -> int | None:
        """The index of a current node on the surface (0 = first), or None."""
        a = self._anchor_of.get(seq)
        return None if a is None else bisect.bisect_left(self._anchors, a)

    def call_id(self, seq: int) -> str | None:
        """The call id of a current ``tool/result`` node."""
        return self._tool_call.get(seq)

    def declares(self, call_id: str) -> bool:
        """True when a current assistant message declares tool call ``call_id``."""
        return self._declared.get(call_id, 0) > 0

    def __len__(self) -> int:
        return len(self._seqs)

    def clone(self) -> SurfaceFold:
        other = SurfaceFold()
        other._anchors = list(self._anchors)
        other._seqs = list(self._seqs)
        other._anchor_of = dict(self._anchor_of)
        other._tool_call = dict(self._tool_call)
        other._calls = dict(self._calls)
        other._declared = dict(self._declared)
        other._answers = {k: list(v) for k, v in self._answers.items()}
        other._compaction_seqs = set(self._compaction_seqs)
        return other

    def removed_by(
        self,
        type_: str,
        op: Replace | Retract,
        sources: Iterable[int] | None = None,
        data: dict[str, Any] | None = None,
    ) -> list[int]:
        """Every seq an operation would take off the surface (range first, then results that
        go with their calls), without applying it. Raises like :meth:`apply` would, except that
        ``sources`` are only checked when given."""
        plan = self._plan(type_, op, sources, data or {}, check_sources=sources is not None)
        return plan.shadowed + plan.cascade

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
            if self._anchors and seq <= self._anchors[-1]:
                raise SurfaceError(f"seq {seq} is not after the surface end", field="$.seq")
            self._insert(len(self._seqs), seq, seq, type_, data)
            return [(seq, "current")]
        if not isinstance(surface, (Replace, Retract)):
            raise SurfaceError(f"unknown surface operation {surface!r}", field="$.surface")
        plan = self._plan(type_, surface, sources, data, check_sources=True)
        anchor = self._anchors[plan.lo]
        del self._anchors[plan.lo : plan.hi + 1]
        del self._seqs[plan.lo : plan.hi + 1]
        for s in plan.shadowed:
            self._forget(s)
        changes: list[tuple[int, Status]] = []
        if isinstance(surface, Replace):
            self._insert(plan.lo, seq, anchor, type_, data)
            changes.append((seq, "current"))
        for s in plan.cascade:
            i = bisect.bisect_left(self._anchors, self._anchor_of[s])
            del self._anchors[i]
            del self._seqs[i]
            self._forget(s)
        changes.extend((s, plan.status) for s in plan.shadowed)
        changes.extend((s, plan.status) for s in plan.cascade)
        return changes

    # -- internals ----------------------------------------------------------------------

    def _plan(
        self,
        type_: str,
        op: Replace | Retract,
        sources: Iterable[int] | None,
        data: dict[str, Any],
        *,
        check_sources: bool,
    ) -> _Plan:
        lo, hi = self._range(op)
        shadowed = self._seqs[lo : hi + 1]
        srcs = set(sources or ())
        if isinstance(op, Retract):
            if type_ != "surface/retract":
                raise SurfaceError("only surface/retract events retract", field="$.surface.op")
            status: Status = "retracted"
            new_calls: tuple[str, ...] = ()
            answer: str | None = None
        else:
            if type_ == "surface/retract":
                raise SurfaceError("surface/retract takes op 'retract'", field="$.surface.op")
            if type_ == "tool/result" or any(s in self._tool_call for s in shadowed):
                self._check_tool_result_replace(type_, shadowed, data)
            status = "compacted" if srcs & self._compaction_seqs else "superseded"
            new_calls = tool_call_ids(data) if type_ == "assistant/message" else ()
            answer = str(data.get("call_id")) if type_ == "tool/result" else None
        cascade = self._pairing(shadowed, new_calls, answer)
        if check_sources and isinstance(op, Replace):
            missing = [s for s in shadowed + cascade if s not in srcs]
            if missing:
                extra = [s for s in missing if s in cascade]
                hint = (
                    f" (seqs {extra} are results of tool calls this replace removes; they go "
                    "with their calls)"
                    if extra
                    else ""
                )
                raise SurfaceError(
                    f"sources must include every replaced seq; missing {missing}{hint}",
                    field="$.sources",
                )
        return _Plan(lo, hi, shadowed, cascade, status)

    def _pairing(
        self, shadowed: list[int], new_calls: tuple[str, ...], answer: str | None
    ) -> list[int]:
        """Results that go with their removed calls; refuse leaving an answered call alone."""
        gone = set(shadowed)
        lost: dict[str, int] = {}
        for s in shadowed:
            for c in self._calls.get(s, ()):
                lost[c] = lost.get(c, 0) + 1

        def declared_after(c: str) -> bool:
            return self._declared.get(c, 0) - lost.get(c, 0) + (c in new_calls) > 0

        for s in shadowed:
            call = self._tool_call.get(s)
            if call is None or not declared_after(call) or call == answer:
                continue
            if all(r in gone for r in self._answers.get(call, ())):
                raise SurfaceError(
                    f"seq {s} is the result of tool call {call!r}, whose assistant message "
                    "stays on the surface; removing it would leave the call unanswered "
                    "(include the assistant message in the range, or replace the result in "
                    "place)",
                    field="$.surface",
                )
        cascade: list[int] = []
        for c in lost:
            if not declared_after(c):
                cascade.extend(r for r in self._answers.get(c, ()) if r not in gone)
        if len(cascade) > 1:
            cascade = sorted(set(cascade), key=lambda r: self._anchor_of[r])
        return cascade

    def _insert(self, pos: int, seq: int, anchor: int, type_: str, data: dict[str, Any]) -> None:
        self._anchors.insert(pos, anchor)
        self._seqs.insert(pos, seq)
        self._anchor_of[seq] = anchor
        if type_ == "tool/result":
            c = str(data.get("call_id"))
            self._tool_call[seq] = c
            self._answers.setdefault(c, []).append(seq)
        elif type_ == "assistant/message":
            calls = tool_call_ids(data)
            if calls:
                self._calls[seq] = calls
                for c in calls:
                    self._declared[c] = self._declared.get(c, 0) + 1

    def _forget(self, seq: int) -> None:
        del self._anchor_of[seq]
        c = self._tool_call.pop(seq, None)
        if c is not None:
            answers = self._answers[c]
            answers.remove(seq)
            if not answers:
                del self._answers[c]
        for c in self._calls.pop(seq, ()):
            n = self._declared[c] - 1
            if n:
                self._declared[c] = n
            else:
                del self._declared[c]

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
