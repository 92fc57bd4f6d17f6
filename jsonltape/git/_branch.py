"""Branches a merge recorded (spec §8.7.14): their receipts, their version rebuilt, adopting it.

A ``branch/start`` receipt at seq R names another version of the session exactly: it shares
this file's lines ``0 … at`` and then had the lines whose crc members are ``lines`` (seqs
``at+1 … head``). Each of those lines is *held* by this file when one of its lines has that
identity — a ``branch/event`` recording it (any receipt's), or a native line — except the
other version's bookkeeping (checkpoints, receipts) and its own branch events, which are
never recorded: :func:`their_rows` puts an ignorable placeholder there, so folding the rows
gives that version's model-visible history.

:func:`adopt` makes that history the current one by appending only: a ``surface/retract`` of
our nodes after ``at`` and a copy of each of their current nodes after ``at``, keyed by origin,
through the writer (so every surface rule holds); adopting twice adds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from .. import _framing, _fs
from .._lines import decode
from ..errors import FoldError, FormatError, SurfaceError
from ..events import BranchStartData, Event, Retract
from ._merge import BOOKKEEPING, Identity, identity_of

__all__ = [
    "BOOKKEEPING",
    "Adopted",
    "Receipt",
    "Their",
    "adopt",
    "identity_of",
    "read_receipt",
    "their_rows",
]


class Receipt(NamedTuple):
    """A ``branch/start``: its seq, the fork point, the other version's head and its crc, the
    crc members of that version's lines after ``at``, how many lines it recorded, and where
    that version came from."""

    seq: int
    at: int
    head: int
    crc: str
    lines: list[str]
    recorded: int  #: ``data.count``
    source: str | None


def _rows(path: Path) -> Iterator[tuple[int, bytes, Event]]:
    """The committed lines of ``path`` (offset, bytes with ``\\n``, event), read as the fold
    reads them."""
    from ..fold._stream import rows

    fd = _fs.open_for_read(path)
    try:
        for row in rows(fd, str(path)):
            yield row.offset, row.raw, row.event
    finally:
        os.close(fd)


def read_receipt(path: str | os.PathLike[str], seq: int) -> Receipt:
    """The ``branch/start`` receipt at ``seq`` of ``path``; a seq that is not one is refused."""
    p = Path(path)
    for _off, _raw, event in _rows(p):
        if event.seq < seq:
            continue
        if event.type != "branch/start":
            break
        try:
            d = msgspec.convert(event.data, type=BranchStartData)
        except msgspec.ValidationError as exc:
            raise FormatError(f"bad branch/start: {exc}", path=p, line=seq + 1) from None
        if len(d.lines) != d.head - d.at or d.at >= seq:
            raise FormatError(
                "bad branch/start: `lines` must name the seqs at+1 … head, and `at` must come "
                "before the receipt",
                path=p,
                line=seq + 1,
                field="$.data.lines",
            )
        return Receipt(seq, d.at, d.head, d.crc, d.lines, d.count, d.source)
    raise FoldError(
        f"seq {seq} is not a branch/start receipt (see `jsonltape messages --all-versions`: "
        "recorded branch events name their receipt)",
        path=p,
        field="branch",
    )


class Their(NamedTuple):
    """The other version, rebuilt: its receipt, its rows in seq order (``(offset, raw,
    event)``: the offset is where the line is held in this file; ``raw`` is the line as that
    version wrote it), and, filled once the rows were walked, the holders: their seq -> (seq,
    offset, size) of the line of this file that holds it (a branch/event or a native line)."""

    receipt: Receipt
    rows: Iterator[tuple[int, bytes, Event]]
    holders: dict[int, tuple[int, int, int]]
    recorded: dict[int, int]


def their_rows(path: str | os.PathLike[str], seq: int) -> Their:
    """Rebuild the version recorded by the receipt at ``seq`` (reads ``path`` twice: once to
    the receipt, once whole). The rows are made as they are iterated; ``holders`` and
    ``recorded`` (holder offset -> size, for the branch/event holders) are complete when the
    iteration ends."""
    p = Path(path)
    receipt = read_receipt(p, seq)
    holders: dict[int, tuple[int, int, int]] = {}
    recorded: dict[int, int] = {}
    return Their(receipt, _rebuild(p, receipt, holders, recorded), holders, recorded)


def _rebuild(
    path: Path,
    r: Receipt,
    holders: dict[int, tuple[int, int, int]],
    recorded: dict[int, int],
) -> Iterator[tuple[int, bytes, Event]]:
    wanted: dict[Identity, int] = {
        (r.at + 1 + i, c.encode()): r.at + 1 + i for i, c in enumerate(r.lines)
    }
    found: dict[int, tuple[int, bytes]] = {}  # their seq -> (holder offset, their line)
    last_time = 0
    for off, raw, event in _rows(path):
        if event.seq <= r.at:
            last_time = event.time
            yield off, raw, event
            continue
        ident, line = identity_of(raw[:-1], event.seq, event.type)
        s = wanted.get(ident)
        if s is None or s in found:
            continue
        found[s] = (off, line)
        holders[s] = (event.seq, off, len(raw))
        if line is not raw[:-1] and event.type == "branch/event":
            recorded[off] = len(raw)
    for s in range(r.at + 1, r.head + 1):
        got = found.get(s)
        if got is None:  # their bookkeeping or branch line: never recorded, never folded
            yield -1, b"", Event(s, "session/flush", last_time, {}, ignorable=True)
            continue
        off, line = got
        raw = line + b"\n"
        if not _framing.frame_ok(raw):
            raise FormatError(
                f"the line of seq {s} recorded for branch {r.seq} fails its own checksum",
                path=path,
                offset=off,
            )
        try:
            event = decode(raw)
        except msgspec.DecodeError as exc:
            raise FormatError(
                f"the line of seq {s} recorded for branch {r.seq} is not an event: {exc}",
                path=path,
                offset=off,
            ) from None
        if event.seq != s:
            raise FormatError(
                f"branch {r.seq}: the line recorded for seq {s} says seq {event.seq}",
                path=path,
                offset=off,
            )
        last_time = event.time
        yield off, raw, event


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
    from ..fold._branches import fold_their

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
    from ..fold._fold import fold_file
    from ..writer import open as open_tape

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


def _retracts(ours: Any, fd: int, at: int, keys: set[str]) -> _Retracts:
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
