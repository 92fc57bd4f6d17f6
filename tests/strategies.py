"""Hypothesis strategies for fold and writer tests, and the reference model fold tests use.

:class:`SurfaceModel` is the spec's surface semantics written the slow, obvious way (a Python
list, recomputed from scratch on every operation), independent of the incremental
:class:`jsonltape.fold.SurfaceFold`. :func:`operations` draws random operation sequences from
the model's current state: mostly valid ones, plus some that a rule must refuse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "PLAIN_TYPES",
    "MNode",
    "Op",
    "Refused",
    "SurfaceModel",
    "append_request",
    "event_request",
    "message_text",
    "operation",
]

#: Short texts, including the awkward ones (quotes, backslashes, newlines, non-ASCII).
message_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
)


class Refused(Exception):
    """The model says a rule forbids this operation."""


@dataclass
class MNode:
    seq: int
    type: str
    calls: tuple[str, ...] = ()  # tool calls declared by an assistant message
    call: str | None = None  # the call a tool/result answers


@dataclass
class Op:
    """One batch: events to append (type, data, surface, sources) and what the model expects."""

    name: str
    items: list[dict[str, Any]]
    refused: bool = False


@dataclass
class SurfaceModel:
    nodes: list[MNode] = field(default_factory=list)
    status: dict[int, str] = field(default_factory=dict)
    types: dict[int, MNode] = field(default_factory=dict)  # every message event ever
    compaction: set[int] = field(default_factory=set)
    header: dict[str, Any] | None = None
    todos: list[dict[str, Any]] | None = None

    def apply(self, seq: int, item: dict[str, Any]) -> None:
        """Apply one event, or raise :class:`Refused` (changing nothing)."""
        type_, data = item["type"], item.get("data") or {}
        surface = item.get("surface")
        if type_ in ("compaction/summary", "compaction/prune", "handoff/anchor"):
            self.compaction.add(seq)
            return
        if type_ == "request/header":
            self.header = data
            return
        if type_ == "todo/write":
            self.todos = data["todos"]
            return
        new = _node(seq, type_, data)
        if surface in (None, "append"):
            self.nodes.append(new)
            self.types[seq] = new
            self.status[seq] = "current"
            return
        seqs = [n.seq for n in self.nodes]
        if surface["start"] not in seqs or surface["end"] not in seqs:
            raise Refused("range not on the surface")
        i, j = seqs.index(surface["start"]), seqs.index(surface["end"])
        if i > j:
            raise Refused("start after end")
        shadowed = self.nodes[i : j + 1]
        replace = surface["op"] == "replace"
        if replace:
            results = [n for n in shadowed if n.type == "tool/result"]
            if type_ == "tool/result" or results:
                in_place = type_ == "tool/result" and len(shadowed) == 1 and results
                if in_place:
                    if shadowed[0].call != new.call:
                        raise Refused("a tool result keeps its call id")
                elif type_ == "tool/result" or len(shadowed) == 1:
                    raise Refused("tool results are replaced in place only")
            after = self.nodes[:i] + [new] + self.nodes[j + 1 :]
        else:
            after = self.nodes[:i] + self.nodes[j + 1 :]
        declared_after = {c for n in after for c in n.calls}
        answered_after = {n.call for n in after if n.type == "tool/result"}
        for n in shadowed:
            in_use = n.type == "tool/result" and n.call in declared_after
            if in_use and n.call not in answered_after:
                raise Refused("would leave a call unanswered")
        lost = {c for n in shadowed for c in n.calls} - declared_after
        cascade = [n for n in after if n is not new and n.type == "tool/result" and n.call in lost]
        gone = shadowed + cascade
        sources = set(item.get("sources") or ())
        if replace and not {n.seq for n in gone} <= sources:
            raise Refused("sources miss a replaced seq")
        status = "retracted"
        if replace:
            status = "compacted" if sources & self.compaction else "superseded"
        self.nodes = [n for n in after if n not in cascade]
        for n in gone:
            self.status[n.seq] = status
        if replace:
            self.types[seq] = new
            self.status[seq] = "current"

    def removed(self, start: int, end: int, replacement: MNode | None) -> list[int] | None:
        """Seqs a replace/retract of start..end would remove (None if refused)."""
        trial = SurfaceModel(list(self.nodes), dict(self.status), dict(self.types))
        trial.compaction = set(self.compaction)
        before = {n.seq for n in trial.nodes}
        item: dict[str, Any] = {
            "type": replacement.type if replacement else "surface/retract",
            "data": _data(replacement) if replacement else {},
            "surface": {"op": "replace" if replacement else "retract", "start": start, "end": end},
            "sources": sorted(before),
        }
        try:
            trial.apply(replacement.seq if replacement else 10**9, item)
        except Refused:
            return None
        return sorted(before - {n.seq for n in trial.nodes})


def _node(seq: int, type_: str, data: dict[str, Any]) -> MNode:
    if type_ == "assistant/message":
        calls = [p["id"] for p in data["message"]["parts"] if p["type"] == "tool_call"]
        return MNode(seq, type_, calls=tuple(dict.fromkeys(calls)))
    if type_ == "tool/result":
        return MNode(seq, type_, call=data["call_id"])
    return MNode(seq, type_)


def _data(node: MNode, text: str = "x") -> dict[str, Any]:
    mid = f"m{node.seq}"
    if node.type == "tool/result":
        assert node.call is not None
        part = {"type": "tool_call_response", "id": node.call, "response": text}
        return {"call_id": node.call, "message": {"id": mid, "role": "tool", "parts": [part]}}
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}]
    parts += [{"type": "tool_call", "id": c, "name": "Read", "arguments": {}} for c in node.calls]
    role = "assistant" if node.type == "assistant/message" else "user"
    return {"message": {"id": mid, "role": role, "parts": parts}}


def _item(node: MNode, text: str, **envelope: Any) -> dict[str, Any]:
    return {"type": node.type, "data": _data(node, text), **envelope}


@st.composite
def operation(draw: st.DrawFn, model: SurfaceModel, seq: int) -> Op:
    """One random operation on the model's state; ``seq`` is the seq the batch starts at."""
    nodes = model.nodes
    kinds = ["user", "assistant", "assistant", "header", "todo"]
    declared = [c for n in nodes for c in n.calls]
    if declared:
        kinds += ["result", "result", "result"]
    if nodes:
        kinds += ["revise", "compact", "retract", "bad-range"]
    if any(n.type == "tool/result" for n in nodes):
        kinds += ["prune", "drop-source"]
    if any(s == "retracted" for s in model.status.values()):
        kinds.append("restore")
    kind = draw(st.sampled_from(kinds))
    text = draw(message_text)
    if kind == "user":
        return Op(kind, [_item(MNode(seq, "user/message"), text, surface="append")])
    if kind == "assistant":
        calls = tuple(f"c{seq}.{i}" for i in range(draw(st.integers(0, 2))))
        return Op(kind, [_item(MNode(seq, "assistant/message", calls), text, surface="append")])
    if kind == "header":
        return Op(kind, [{"type": "request/header", "data": {"model": text, "system": text}}])
    if kind == "todo":
        todos = [{"content": text, "status": draw(st.sampled_from(["pending", "completed"]))}]
        return Op(kind, [{"type": "todo/write", "data": {"todos": todos}}])
    if kind == "result":
        call = draw(st.sampled_from([*declared, "orphan"]))
        return Op(kind, [_item(MNode(seq, "tool/result", call=call), text, surface="append")])
    if kind == "restore":
        gone = sorted(s for s, v in model.status.items() if v == "retracted")
        old = model.types[draw(st.sampled_from(gone))]
        copy = MNode(seq, old.type, old.calls, old.call)
        return Op(kind, [_item(copy, text, surface="append", sources=[old.seq])])
    i = draw(st.integers(0, len(nodes) - 1))
    j = draw(st.integers(i, min(len(nodes) - 1, i + 4)))
    start, end = nodes[i].seq, nodes[j].seq
    if kind == "bad-range" and i != j:
        start, end = end, start
    if kind in ("retract", "bad-range"):
        removed = model.removed(start, end, None)
        op = {"op": "retract", "start": start, "end": end}
        item = {"type": "surface/retract", "data": {}, "surface": op}
        return Op(kind, [item], refused=removed is None or (kind == "bad-range" and i != j))
    if kind == "revise":
        old = nodes[i]
        if old.type == "assistant/message":
            keep = draw(st.lists(st.sampled_from(old.calls), unique=True)) if old.calls else []
            new = MNode(seq, old.type, tuple(keep))
        elif old.type == "tool/result":
            same = draw(st.booleans()) or not declared
            new = MNode(seq, old.type, call=old.call if same else declared[0])
        else:
            new = MNode(seq, old.type)
        removed = model.removed(old.seq, old.seq, new)
        op = {"op": "replace", "start": old.seq, "end": old.seq}
        sources = removed if removed is not None else [old.seq]
        item = _item(new, text, surface=op, sources=sources)
        return Op(kind, [item], refused=removed is None)
    if kind == "prune":
        results = [n for n in nodes if n.type == "tool/result"]
        old = draw(st.sampled_from(results))
        new = MNode(seq + 1, "tool/result", call=old.call)
        op = {"op": "replace", "start": old.seq, "end": old.seq}
        prune = {"type": "compaction/prune", "data": {"target": old.seq, "chars": 1}}
        return Op(kind, [prune, _item(new, "[pruned]", surface=op, sources=[old.seq, seq])])
    # compact (a summary event, then the summary message replacing start..end)
    summary = MNode(seq + 1, "user/message")
    removed = model.removed(start, end, summary)
    sources = (removed or [start, end]) + [seq]
    if kind == "drop-source" and removed is not None:
        cascade_or_any = [s for s in removed if s not in (start, end)] or removed
        sources.remove(draw(st.sampled_from(cascade_or_any)))
        refused = True
    else:
        refused = removed is None
    summary_event = {
        "type": "compaction/summary",
        "data": {
            "compaction": seq,
            "summary": f"s{text}",
            "start": start,
            "end": end,
            "count": 1,
            "chars": 1,
            "shadowed_chars": 1,
        },
    }
    op = {"op": "replace", "start": start, "end": end}
    message = _item(summary, text, surface=op, sources=sorted(set(sources)))
    return Op(kind, [summary_event, message], refused=refused)


# -- event requests for the writer's two validation paths --------------------------------------

#: Plain-append event types: core types with a data shape, an ignorable one, extensions.
PLAIN_TYPES = (
    "user/message",
    "assistant/message",
    "tool/call",
    "tool/result",
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "todo/write",
    "assistant/chunk",
)

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(bool)
    | message_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(message_text, inner, max_size=3),
    max_leaves=8,
)
_id = st.sampled_from(["c", "d"]) | _json
_part = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "reasoning", "tool_call", "tool_call_response", "blob", "x-ext", 3]
        )
    },
    optional={"content": message_text | _json, "id": _id, "name": message_text},
)
_message = st.fixed_dictionaries(
    {
        "id": message_text | _json,
        "role": st.sampled_from(["user", "assistant", "tool", "system", "robot"]),
        "parts": st.lists(_part, max_size=3) | _json,
    },
    optional={"name": message_text | _json},
)
_good_message = st.fixed_dictionaries(
    {
        "id": message_text,
        "role": st.sampled_from(["user", "assistant", "system"]),
        "parts": st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "content": message_text}), max_size=2
        ),
    }
)
_members = {
    "message": _good_message | _message,
    "call_id": _id,
    "name": message_text,
    "turn": st.integers(-1, 9) | _json,
    "step": st.integers(0, 9),
    "reason": st.sampled_from(["completed", "error", "interrupted", "finished"]),
    "todos": st.lists(
        st.fixed_dictionaries(
            {"content": message_text, "status": st.sampled_from(["pending", "done"])}
        ),
        max_size=2,
    )
    | _json,
    "synthetic": st.booleans(),
}
_REQUIRED = {
    "user/message": ["message"],
    "assistant/message": ["message"],
    "tool/call": ["call_id", "name"],
    "tool/result": ["call_id", "message"],
    "turn/end": ["turn", "reason"],
    "step/end": ["step"],
    "todo/write": ["todos"],
}


@st.composite
def event_request(draw: st.DrawFn) -> tuple[str, Any]:
    """(type, data): mostly the members the type needs, each valid or broken, plus others;
    now and then a value the lossless gate refuses (NaN, a big integer, a tuple, -0.0)."""
    # An unknown type that is not ignorable: both paths must refuse it alike (spec §8.7.1).
    type_ = draw(st.sampled_from((*PLAIN_TYPES, "x.test/data")))
    # sampled_from, not integers: hypothesis favours the bounds of a range, not of a sample.
    keys = [k for k in _REQUIRED.get(type_, []) if draw(st.sampled_from(range(10))) != 3]
    keys += draw(st.lists(st.sampled_from(sorted(_members)), max_size=2, unique=True))
    data: dict[str, Any] = {k: draw(_members[k]) for k in keys}
    if type_ == "tool/result" and draw(st.booleans()):  # a good one needs a matching response
        call = draw(message_text)
        response = {"type": "tool_call_response", "id": call, "response": draw(_json)}
        message = {"id": draw(message_text), "role": "tool", "parts": [response]}
        data.update(call_id=call, message=message)
    if draw(st.sampled_from(range(10))) == 3:
        data["odd"] = draw(st.sampled_from([float("nan"), 2**60, (1, 2), -0.0]))
    return type_, data


#: Envelope values the writer must refuse beside good ones, member by member.
_bad_surfaces = st.sampled_from(
    [
        "prepend",
        5,
        {"op": "replace", "start": 1},
        {"op": "replace", "start": 1, "end": 2, "x": 1},
        {"op": "swap", "start": 1, "end": 2},
        {"op": "replace", "start": "1", "end": 2},
    ]
)
_ops = st.builds(
    lambda op, a, b, as_dict: {"op": op, "start": a, "end": b} if as_dict else (op, a, b),
    st.sampled_from(["replace", "retract"]),
    st.integers(-1, 9),
    st.integers(-1, 9),
    st.booleans(),
)
_sources = st.lists(st.integers(-1, 9), max_size=4) | st.sampled_from(
    ["01", 5, (1, 2), range(2), [True], [1.0], [2**60], [1, None], {"a": 1}]
)
_keys = st.sampled_from(["k", "", "x" * 1024, "x" * 1025, 5, "\udc80", "import:a:1"])
_ignorables = st.sampled_from([True, False, 1, "yes"])
_times = st.integers(0, 253_402_300_799_999) | st.sampled_from(
    [-1, 253_402_300_799_999, 253_402_300_800_000, 1.5, True, "now", 2**64]
)


@st.composite
def append_request(draw: st.DrawFn) -> dict[str, Any]:
    """One request to the append pipeline, every member drawn (for seq 7): mostly the
    defaults and good values, now and then a value some rule refuses, so that requests
    breaking two or more rules at once show which rule wins."""
    from jsonltape.events import Replace, Retract

    drawn, data = draw(event_request())
    others: list[Any] = ["surface/retract", "session/flush", "Bad Type", 5, "x.b/c"]
    type_ = draw(st.sampled_from([drawn] * 6 + others))
    if draw(st.sampled_from(range(12))) == 3:
        data = draw(st.sampled_from([None, 5, [1], "text"]))
    often = st.sampled_from(range(4))
    surface: Any = None
    if draw(often) == 0:
        surface = draw(st.just("append") | _bad_surfaces | _ops)
        if isinstance(surface, tuple):
            op, a, b = surface
            surface = (Replace if op == "replace" else Retract)(a, b)
    return {
        "type": type_,
        "data": data,
        "surface": surface,
        "sources": draw(_sources) if draw(often) == 0 else None,
        "key": draw(_keys) if draw(often) == 0 else None,
        "ignorable": draw(_ignorables) if draw(often) == 0 else None,
        "time": draw(_times),
    }
