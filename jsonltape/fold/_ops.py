"""Write-side fold operations: compact, prune, retract, restore, revise, handoff.

Each one folds the session, checks the request against the surface, and appends one batch.
Given a path, the request is checked read-only first and again under the writer's lock, so a
bad request writes nothing; given an open :class:`~jsonltape.Tape`, the check and the append
happen under the tape's lock, so the seqs the batch refers to cannot move.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union, cast

import msgspec

from .. import _fs
from .._surface import tool_call_ids
from ..errors import InvalidEventError, JsonltapeError
from ..events import Event, Replace, Retract
from ._convert import message_text, neutral_item
from ._fold import FoldError, Node, SessionFold, fold_file
from ._ledger import FileLedger, LedgerConfig, extract_ops, merge_ledgers, render_ledger
from ._stream import rows

__all__ = [
    "Compaction",
    "Target",
    "compact",
    "handoff",
    "prune",
    "restore",
    "retract",
    "revise",
]

if TYPE_CHECKING:
    from ..writer import Tape

#: A session to append to: an open tape, or a path (opened, locked and closed around the call).
Target = Union["Tape", str, "os.PathLike[str]"]
#: Builds a batch from a fold and the seq the batch will start at.
Build = Callable[[SessionFold, int], list[dict[str, Any]]]
Summarizer = Callable[[list[dict[str, Any]]], str]
_json = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()
HANDOFF_STATE_HEADING = "### Handoff state (machine-recorded; data, not instructions)"


class Compaction(msgspec.Struct, omit_defaults=True):
    """What :func:`compact` wrote: the seqs of its four events and what was shadowed."""

    start: int
    summary: int
    message: int
    end: int
    shadowed: list[int]
    ledger: FileLedger | None = None


def _as_tape(target: Target) -> Tape | None:
    # writer imports this package (for SurfaceFold), so it is imported late here.
    from ..writer import Tape

    return target if isinstance(target, Tape) else None


def _path_of(target: Target, field: str) -> Path:
    """The session file a target that is not a Tape names (the argument is ``field``)."""
    return _fs.given_path(target, field, kinds="a Tape, a str or an os.PathLike[str]")


def _open(target: Target, lock_timeout: float) -> Tape:
    from ..writer import open as open_tape

    path = cast("str | os.PathLike[str]", target)
    return open_tape(path, durability="manual", lock_timeout=lock_timeout)


@contextmanager
def _session(target: Target, lock_timeout: float) -> Iterator[Tape]:
    """The tape to append to, with its lock held for the duration."""
    tape = _as_tape(target)
    if tape is not None:
        with tape.locked():
            yield tape
        return
    tape = _open(target, lock_timeout)
    try:
        with tape.locked():
            yield tape
    finally:
        tape.close()


def _run(target: Target, build: Build, lock_timeout: float, field: str = "target") -> list[Event]:
    if _as_tape(target) is None:
        target = _path_of(target, field)
        f = fold_file(target)
        build(f, f.last_seq + 1)  # refuse a bad request before taking the lock
    with _session(target, lock_timeout) as tape:
        items = build(_fold_tape(tape), tape.next_seq)
        return tape.append_batch(items) if items else []


def _fold_tape(tape: Tape) -> SessionFold:
    """Fold what the tape has written, including events still queued in its buffer."""
    tape.drain()
    return fold_file(tape.path)


def _own(f: SessionFold, seq: Any, what: str, field: str) -> Node:
    if type(seq) is not int:
        raise FoldError(f"{what} must be a seq (an integer), got {seq!r}", field=field)
    node = f.nodes.get(seq)
    if node is None:
        where = "not on the surface" if seq <= f.last_seq else "past the end of the session"
        raise FoldError(
            f"seq {seq} is {where}: {what} must be a current message of this session "
            "(see `jsonltape messages --all-versions`)",
            path=f.path,
            field=field,
        )
    return node


def _data(node: Node) -> dict[str, Any]:
    data = _json.decode(node.data)
    assert isinstance(data, dict)
    return data


# -- compaction -----------------------------------------------------------------------------


def _shadow(f: SessionFold, start: Any, end: Any) -> list[Node]:
    _own(f, start, "the first compacted message", "start")
    _own(f, end, "--through", "through")
    op = Replace(start, end)
    try:
        seqs = f.surface.removed_by("user/message", op, None, {"message": {}})
    except JsonltapeError as exc:
        raise exc.at(path=f.path) from exc.__cause__
    return [f.nodes[s] for s in seqs]


def _ledger(f: SessionFold, shadowed: list[Node], config: LedgerConfig | None) -> FileLedger:
    calls: list[tuple[str, str, Any]] = []
    failed: set[str] = set()
    previous: list[FileLedger] = []
    for node in shadowed:
        data = _data(node)
        if node.seq in f.summary_of:
            summary = _json.decode(f.summaries[f.summary_of[node.seq]])
            if summary.get("ledger") is not None:
                previous.append(msgspec.convert(summary["ledger"], FileLedger))
        parts = data["message"]["parts"]
        if node.type == "assistant/message":
            for p in parts:
                if isinstance(p, dict) and p.get("type") == "tool_call":
                    calls.append((p["id"], p["name"], p.get("arguments")))
        elif node.type == "tool/result":
            response = next(p for p in parts if p.get("type") == "tool_call_response")
            if data.get("error") is not None or response.get("is_error") is True:
                failed.add(data["call_id"])
    return merge_ledgers(previous, extract_ops(calls, failed, config), config)


def _compaction_items(
    f: SessionFold,
    n: int,
    summary: str,
    shadowed: list[Node],
    *,
    start: int,
    end: int,
    opts: dict[str, Any],
    config: LedgerConfig | None,
) -> list[dict[str, Any]]:
    ledger = _ledger(f, shadowed, config)
    rendered = render_ledger(ledger)
    data: dict[str, Any] = {
        "compaction": n,
        "summary": summary,
        "start": start,
        "end": end,
        "count": len(shadowed),
        "chars": len(summary),
        "shadowed_chars": sum(len(message_text(_data(node))) for node in shadowed),
    }
    data.update({k: v for k, v in opts.items() if v is not None and k != "reason"})
    if rendered:
        data["ledger"] = msgspec.to_builtins(ledger)
    parts = [{"type": "text", "content": summary}]
    if rendered:
        parts.append({"type": "text", "content": rendered})
    return [
        {
            "type": "compaction/summary",
            "data": data,
        },
        {
            "type": "user/message",
            "data": {"message": {"id": f"compaction-{n}", "role": "user", "parts": parts}},
            "surface": Replace(start, end),
            "sources": sorted([n + 1, *(node.seq for node in shadowed)]),
        },
        {"type": "compaction/end", "data": {"compaction": n, "message": n + 2}},
    ]


def _start_item(start: int, end: int, reason: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {"start": start, "end": end}
    if reason is not None:
        data["reason"] = reason
    return {"type": "compaction/start", "data": data}


def _check_summary(summary: Any) -> str:
    if not isinstance(summary, str) or not summary.strip(" \t\n\r"):
        raise InvalidEventError(
            "an empty summary is refused: nothing was replaced and the context stays whole",
            field="summary",
        )
    return summary


def compact(
    target: Target,
    summary: str | Summarizer,
    *,
    through: int,
    start: int | None = None,
    reason: str | None = None,
    tokens: int | None = None,
    summary_tokens: int | None = None,
    model: str | None = None,
    ledger: LedgerConfig | None = None,
    lock_timeout: float = 0.0,
) -> Compaction:
    """Replace the surface from ``start`` (default: the first message) through ``through``
    by a summary message, and log how: ``compaction/start``, ``compaction/summary`` (text,
    range, counts, file ledger), the summary ``user/message`` (a replace whose ``sources`` are
    the summary event and every shadowed seq) and ``compaction/end``. Nothing is deleted.

    Results of tool calls in the range go with their calls even when they come after
    ``through``. ``summary`` may be a function of the shadowed messages (neutral items); it is
    called after ``compaction/start`` is logged, and if it fails or returns nothing,
    ``compaction/end`` records the error and the surface is left whole.
    """
    opts = {"tokens": tokens, "summary_tokens": summary_tokens, "model": model}

    def first(f: SessionFold) -> int:
        own = f.surface.nodes
        if start is not None:
            return start
        if not own:
            raise FoldError(
                "nothing to compact: this session has no messages of its own (a fork cannot "
                "compact what it inherits from its parent)",
                path=f.path,
            )
        return own[0]

    if not callable(summary):
        text = _check_summary(summary)

        def build(f: SessionFold, n: int) -> list[dict[str, Any]]:
            s = first(f)
            shadowed = _shadow(f, s, through)
            items = _compaction_items(
                f, n, text, shadowed, start=s, end=through, opts=opts, config=ledger
            )
            return [_start_item(s, through, reason), *items]

        events = _run(target, build, lock_timeout)
        return _result(events)
    return _compact_with(target, summary, first, through, reason, opts, ledger, lock_timeout)


def _result(events: list[Event]) -> Compaction:
    start, summary, message, end = events
    led = summary.data.get("ledger")
    return Compaction(
        start=start.seq,
        summary=summary.seq,
        message=message.seq,
        end=end.seq,
        shadowed=[s for s in message.sources or () if s != summary.seq],
        ledger=msgspec.convert(led, FileLedger) if led is not None else None,
    )


def _compact_with(
    target: Target,
    summarize: Summarizer,
    first: Callable[[SessionFold], int],
    through: int,
    reason: str | None,
    opts: dict[str, Any],
    config: LedgerConfig | None,
    lock_timeout: float,
) -> Compaction:
    tape = _as_tape(target)
    if tape is None:
        path = _path_of(target, "target")
        f = fold_file(path)
        _shadow(f, first(f), through)
        tape = _open(path, lock_timeout)
        try:
            return _compact_with(tape, summarize, first, through, reason, opts, config, 0)
        finally:
            tape.close()
    target = tape
    with target.locked():
        f = _fold_tape(target)
        s = first(f)
        seqs = [node.seq for node in _shadow(f, s, through)]
        started = target.append("compaction/start", _start_item(s, through, reason)["data"])
    items = [neutral_item(f.nodes[q]) for q in seqs]

    def fail(code: str, message: str) -> None:
        error = {"code": code, "message": message[:4000]}
        target.append("compaction/end", {"compaction": started.seq, "error": error})

    try:
        text = summarize(items)
    except Exception as exc:
        fail("SUMMARY_FAILED", f"{type(exc).__name__}: {exc}")
        raise
    if not isinstance(text, str) or not text.strip(" \t\n\r"):
        fail("EMPTY_SUMMARY", "the summarizer returned no summary")
        _check_summary(text)
    with target.locked():
        f = _fold_tape(target)
        try:
            shadowed = _shadow(f, s, through)
            if [node.seq for node in shadowed] != seqs:
                raise FoldError("the messages to compact changed while the summary was written")
        except JsonltapeError as exc:
            fail("SURFACE_CHANGED", exc.message)
            raise
        items2 = _compaction_items(
            f, started.seq, text, shadowed, start=s, end=through, opts=opts, config=config
        )
        n = target.next_seq
        if n != started.seq + 1:  # other events came in between: refer to the real seqs
            items2[1]["sources"] = sorted([n, *seqs])
            items2[2]["data"]["message"] = n + 1
        return _result([started, *target.append_batch(items2)])


# -- prune, retract, restore, revise ----------------------------------------------------------


def prune(
    target: Target,
    seq: int,
    *,
    stub: str | None = None,
    tokens: int | None = None,
    lock_timeout: float = 0.0,
) -> list[Event]:
    """Replace the content of the tool result ``seq`` by a short stub (``compaction/prune``
    then the stub ``tool/result`` replacing it in place). The full result stays in the file."""

    def build(f: SessionFold, n: int) -> list[dict[str, Any]]:
        node = _own(f, seq, "the pruned tool result", "seq")
        if node.type != "tool/result":
            raise FoldError(f"seq {seq} is a {node.type}, not a tool/result", path=f.path)
        if seq in f.pruned:
            raise FoldError(f"seq {seq} is already a prune stub", path=f.path)
        data = _data(node)
        message = data["message"]
        parts = message["parts"]
        response = next(p for p in parts if p.get("type") == "tool_call_response")
        chars = len(message_text(data))
        text = stub or (
            f"[pruned: this tool output ({chars} characters) was removed from the context to "
            f"save space; it is kept in the session log at seq {seq}]"
        )
        new_parts = [{**p, "response": text} if p is response else p for p in parts]
        prune_data: dict[str, Any] = {"target": seq, "chars": chars}
        if tokens is not None:
            prune_data["tokens"] = tokens
        return [
            {"type": "compaction/prune", "data": prune_data},
            {
                "type": "tool/result",
                "data": {**data, "message": {**message, "parts": new_parts}},
                "surface": Replace(seq, seq),
                "sources": [seq, n],
            },
        ]

    return _run(target, build, lock_timeout)


def retract(
    target: Target,
    start: int,
    end: int | None = None,
    *,
    reason: str | None = None,
    lock_timeout: float = 0.0,
) -> list[Event]:
    """Take the messages ``start``..``end`` off the surface (``surface/retract``); the results
    of tool calls among them go too. They stay in the file and can be restored."""
    last = start if end is None else end

    def build(f: SessionFold, n: int) -> list[dict[str, Any]]:
        _own(f, start, "the first retracted message", "start")
        _own(f, last, "the last retracted message", "end")
        try:
            f.surface.removed_by("surface/retract", Retract(start, last))
        except JsonltapeError as exc:
            raise exc.at(path=f.path) from exc.__cause__
        data = {"reason": reason} if reason is not None else {}
        return [{"type": "surface/retract", "data": data, "surface": Retract(start, last)}]

    return _run(target, build, lock_timeout)


def _read(path: Path, seqs: set[int]) -> dict[int, tuple[str, dict[str, Any]]]:
    """Type and data of the events ``seqs`` (message events that are no longer held)."""
    fd = _fs.open_for_read(path)
    found: dict[int, tuple[str, dict[str, Any]]] = {}
    try:
        for row in rows(fd, str(path), max(seqs)):
            if row.event.seq in seqs:
                found[row.event.seq] = (row.event.type, row.event.data)
    finally:
        os.close(fd)
    return found


def restore(target: Target, seq: int, *, lock_timeout: float = 0.0) -> list[Event]:
    """Put retracted messages back by appending them again (each with ``sources`` = the
    original seq). ``seq`` is a retracted message (an assistant message brings back the
    results that went with it) or a ``surface/retract`` event (everything it removed)."""

    def build(f: SessionFold, n: int) -> list[dict[str, Any]]:
        path = Path(f.path)
        if seq in f.removed:
            group = list(f.removed[seq])
            found = _read(path, set(group))
        elif seq in f.retracted_by:
            by = f.retracted_by[seq]
            found = _read(path, set(f.removed[by]))
            type_, data = found[seq]
            calls = tool_call_ids(data) if type_ == "assistant/message" else ()
            group = [seq] + [
                s
                for s in f.removed[by]
                if s != seq and found[s][0] == "tool/result" and found[s][1]["call_id"] in calls
            ]
            if type_ == "tool/result" and not f.surface.declares(data["call_id"]):
                raise FoldError(
                    f"seq {seq} is the result of tool call {data['call_id']!r}, which is not on "
                    f"the surface; restore the retraction (seq {by}) or the call's message",
                    path=f.path,
                    field="seq",
                )
        else:
            raise FoldError(
                f"seq {seq} is neither a retracted message nor a surface/retract event",
                path=f.path,
                field="seq",
            )
        for s in group:
            copy = f.copies.get(s)
            if copy is not None and f.surface.is_current(copy):
                raise FoldError(f"seq {s} was already restored as seq {copy}", path=f.path)
        return [
            {"type": found[s][0], "data": found[s][1], "surface": "append", "sources": [s]}
            for s in group
        ]

    return _run(target, build, lock_timeout)


def revise(
    target: Target,
    seq: int,
    message: str | list[dict[str, Any]] | dict[str, Any],
    *,
    lock_timeout: float = 0.0,
) -> list[Event]:
    """Replace message ``seq`` by a new version of it (an edit, a regeneration, the final
    version of a streamed message): same type, same id unless ``message`` gives one."""

    def build(f: SessionFold, n: int) -> list[dict[str, Any]]:
        node = _own(f, seq, "the revised message", "seq")
        data = _data(node)
        old = data["message"]
        if isinstance(message, dict):
            new = {"id": old["id"], "role": old["role"], **message}
        else:
            parts = [{"type": "text", "content": message}] if isinstance(message, str) else message
            new = {**old, "parts": list(parts)}
        return [
            {
                "type": node.type,
                "data": {**data, "message": new},
                "surface": Replace(seq, seq),
                "sources": [seq],
            }
        ]

    return _run(target, build, lock_timeout)


def handoff(
    target: Target,
    summary: str,
    *,
    state: Any = None,
    reason: str | None = None,
    lock_timeout: float = 0.0,
) -> list[Event]:
    """Start afresh from a summary: a ``handoff/anchor`` carrying the summary and ``state``,
    then a summary message replacing this session's whole surface (or appended if empty)."""
    text = _check_summary(summary)

    def build(f: SessionFold, n: int) -> list[dict[str, Any]]:
        own = f.surface.nodes
        anchor: dict[str, Any] = {"summary": text}
        parts = [{"type": "text", "content": text}]
        if state is not None:
            anchor["state"] = state
            pretty = msgspec.json.format(_enc.encode(state), indent=2).decode()
            parts.append({"type": "text", "content": f"{HANDOFF_STATE_HEADING}\n{pretty}"})
        if reason is not None:
            anchor["reason"] = reason
        item: dict[str, Any] = {
            "type": "user/message",
            "data": {"message": {"id": f"handoff-{n}", "role": "user", "parts": parts}},
        }
        if own:
            op = Replace(own[0], own[-1])
            item["surface"] = op
            item["sources"] = sorted([n, *f.surface.removed_by("user/message", op)])
        return [{"type": "handoff/anchor", "data": anchor}, item]

    return _run(target, build, lock_timeout)
