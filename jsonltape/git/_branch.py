"""Adopting a version a merge recorded (spec §8.7.14): making it the current one.

The fold rebuilds the version a ``branch/start`` receipt names
(:func:`jsonltape.fold._branches.fold_their`); :func:`adopt` makes that history the current
one by appending only: a ``surface/retract`` of our nodes after ``at`` and a copy of each of
their current nodes after ``at``, keyed by origin, through the writer (so every surface rule
holds); adopting twice adds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from .. import _fs
from .._records import Receipt
from ..errors import SurfaceError
from ..events import Retract
from ..fold._branches import fold_their
from ..fold._fold import SessionFold, fold_file

__all__ = ["Adopted", "adopt"]


# -- adopting their version --------------------------------------------------------------------


class Adopted(NamedTuple):
    """What :func:`adopt` appended: the retract seqs and the copies of their nodes (empty
    when their version was current already)."""

    receipt: int
    retracted: list[int]
    appended: list[int]


class _Keyed(msgspec.Struct):
    key: str | None = None


_keyed = msgspec.json.Decoder(_Keyed).decode
_json = msgspec.json.Decoder()
#: Members of a message event's data that are seqs of the file it was written in.
_LOCAL_SEQS = ("turn", "step")


def _their_nodes(path: Path, seq: int) -> tuple[Receipt, list[dict[str, Any]]]:
    """The appends that make their current nodes after ``at`` ours: one item each."""
    their, f = fold_their(path, seq)
    r = their.receipt
    items: list[dict[str, Any]] = []
    for node in f.own_nodes():
        if node.seq <= r.at:
            continue
        data = _json.decode(node.data)
        for name in _LOCAL_SEQS:
            data.pop(name, None)
        holder = their.holders[node.seq][0]
        items.append(
            {
                "type": node.type,
                "data": data,
                "surface": "append",
                "sources": [holder],
                "key": f"branch:{r.lines[node.seq - r.at - 1]}:{node.seq}",
            }
        )
    return r, items


def adopt(path: str | os.PathLike[str], seq: int, *, lock_timeout: float = 0.0) -> Adopted:
    """Make the version recorded by the receipt at ``seq`` the current one, appending only.

    Our current nodes after the fork point that are not copies of theirs are retracted (one
    ``surface/retract`` per run of them on the surface; a tool result whose call stays
    current is kept, as the pairing rules require); then each of their current nodes after the
    fork point is appended (``sources``: the line holding it; ``key``:
    ``branch:<crc>:<seq>``). Adopting again adds nothing.
    """
    from ..writer import open as open_tape  # the writer is loaded only to write

    p = Path(path)
    receipt, items = _their_nodes(p, seq)
    keys = {item["key"] for item in items}
    tape = open_tape(p, durability="manual", lock_timeout=lock_timeout)
    try:
        with tape.locked():
            tape.drain()
            ours = fold_file(tape.path)
            fd = _fs.open_for_read(tape.path)
            try:
                retracts = _retracts(ours, fd, receipt.at, keys)
            finally:
                os.close(fd)
            # A call answered by a result we keep needs no second answer from theirs.
            kept_answers = {
                ours.surface.call_id(s)
                for s in ours.surface.nodes
                if s > receipt.at and ours.surface.call_id(s) is not None
            } - retracts.answers
            batch = [
                *(
                    {
                        "type": "surface/retract",
                        "data": {"reason": f"adopt branch {seq}"},
                        "surface": op,
                    }
                    for op in retracts.ops
                ),
                *(
                    i
                    for i in items
                    if not (i["type"] == "tool/result" and i["data"].get("call_id") in kept_answers)
                ),
            ]
            first = tape.next_seq
            events = tape.append_batch(batch) if batch else []
            tape.flush()
    finally:
        tape.close()
    new = [e for e in events if e.seq >= first]
    return Adopted(
        seq,
        [e.seq for e in new if e.type == "surface/retract"],
        [e.seq for e in new if e.type != "surface/retract"],
    )


class _Retracts(NamedTuple):
    ops: list[Retract]
    answers: set[str | None]  # call ids of the tool results retracted


def _retracts(ours: SessionFold, fd: int, at: int, keys: set[str]) -> _Retracts:
    """The retracts that take our nodes after ``at`` off the surface (but the copies of
    theirs, by key), as runs of neighbours on the surface, checked in order on a copy."""
    surface = ours.surface.clone()
    doomed: list[int] = []
    for s in surface.nodes:
        if s <= at:
            continue
        node = ours.nodes[s]
        raw = os.pread(fd, node.size, node.offset)
        if _keyed(raw).key not in keys:
            doomed.append(s)
    ops: list[Retract] = []
    answers: set[str | None] = set()
    gone: set[int] = set()
    seq = 1 << 52  # the retracts are checked on the copy with seqs no line has
    for run in _runs(surface.nodes, set(doomed)):
        for part in _parts(surface, run):
            before = set(surface.nodes)
            try:
                surface.apply_parts(seq, "surface/retract", Retract(part[0], part[-1]), None, {})
            except SurfaceError:
                continue  # a result whose call stays current: kept
            seq += 1
            ops.append(Retract(part[0], part[-1]))
            removed = before - set(surface.nodes)
            gone |= removed
    for s in gone:
        answers.add(ours.surface.call_id(s))
    answers.discard(None)
    return _Retracts(ops, answers)


def _runs(nodes: list[int], doomed: set[int]) -> Iterator[list[int]]:
    run: list[int] = []
    for s in nodes:
        if s in doomed:
            run.append(s)
        elif run:
            yield run
            run = []
    if run:
        yield run


def _parts(surface: Any, run: list[int]) -> Iterator[list[int]]:
    """The run whole, or, when the surface refuses it, its nodes one by one (those still
    current when their turn comes)."""
    probe = surface.clone()
    try:
        probe.apply_parts(1 << 53, "surface/retract", Retract(run[0], run[-1]), None, {})
    except SurfaceError:
        for s in run:
            if surface.is_current(s):
                yield [s]
        return
    yield run
