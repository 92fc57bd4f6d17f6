"""The versions a merge recorded (spec §8.7.14): their receipts, each version rebuilt and folded.

A ``branch/start`` receipt at seq R names another version of the session: it shares this
file's lines ``0 … at`` and then had the lines whose crc members are ``lines`` and (1.2) whose
SHA-256 are ``sha256`` (seqs ``at+1 … head``). Each of those lines is *held* by this file when
one of its lines is that line, byte for byte — a ``branch/event`` recording it (any
receipt's), or a native line; a receipt of 1.1 names its lines by crc alone, so the first line
with that seq and crc stands for it. The other version's bookkeeping (checkpoints, receipts)
and its own branch events are never recorded: :func:`their_rows` puts an ignorable placeholder
there, so folding the rows gives that version's model-visible history.

* :func:`fold_their` folds it: ``jsonltape messages PATH --branch SEQ``;
* :func:`branch_item` is the ``--all-versions`` item of a message event a ``branch/event``
  records (status ``branch``, ``by`` its receipt), collected by the fold.

Adopting a version (appending it) is a write: :mod:`jsonltape.git._branch` does it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from .. import _fs
from .._lines import decode
from .._records import BOOKKEEPING, Receipt, receipt, stands_for
from ..errors import FoldError
from ..events import Event
from ._convert import neutral_item
from ._fold import BranchVersion, RecordedSource, SessionFold
from ._stream import Row, header_of, rows

__all__ = ["Receipt", "Their", "branch_item", "fold_their", "read_receipt", "their_rows"]


def _rows(path: Path) -> Iterator[tuple[int, bytes, Event]]:
    """The committed lines of ``path`` (offset, bytes with ``\\n``, event), read as the fold
    reads them."""
    fd = _fs.open_for_read(path)
    try:
        for row in rows(fd, str(path)):
            yield row.offset, row.raw, row.event
    finally:
        os.close(fd)


def read_receipt(path: str | os.PathLike[str], seq: int) -> Receipt:
    """The ``branch/start`` receipt at ``seq`` of ``path``; a seq that is not one is refused."""
    p = Path(path)
    for _off, raw, event in _rows(p):
        if event.seq < seq:
            continue
        if event.type == "branch/start":
            return receipt(seq, raw)  # its shape was judged with the line (spec §10.2)
        break
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
    offset, size) of the line of this file that holds it (a branch/event or a native line),
    and ``recorded``: holder offset -> size for the branch/event holders."""

    receipt: Receipt
    rows: Iterator[tuple[int, bytes, Event]]
    holders: dict[int, tuple[int, int, int]]
    recorded: dict[int, int]


def their_rows(path: str | os.PathLike[str], seq: int) -> Their:
    """Rebuild the version recorded by the receipt at ``seq`` (reads ``path`` twice: once to
    the receipt, once whole). The rows are made as they are iterated; ``holders`` and
    ``recorded`` are complete when the iteration ends."""
    p = Path(path)
    r = read_receipt(p, seq)
    holders: dict[int, tuple[int, int, int]] = {}
    recorded: dict[int, int] = {}
    return Their(r, _rebuild(p, r, holders, recorded), holders, recorded)


def _rebuild(
    path: Path,
    r: Receipt,
    holders: dict[int, tuple[int, int, int]],
    recorded: dict[int, int],
) -> Iterator[tuple[int, bytes, Event]]:
    crcs = [c.encode() for c in r.lines]
    found: dict[int, tuple[int, bytes]] = {}  # their seq -> (holder offset, their line)
    last_time = 0
    for off, raw, event in _rows(path):
        if event.seq <= r.at:
            last_time = event.time
            yield off, raw, event
            continue
        if event.type in BOOKKEEPING:
            continue
        # A branch/event's line is a good line whose seq and crc are its origin (the scan
        # checked it): the line it stands for is looked up like a native one.
        s, line = stands_for(raw[:-1], event.seq, event.type)
        i = s - r.at - 1
        if not 0 <= i < len(crcs) or s in found or line[-10:-2] != crcs[i]:
            continue
        if r.sha256 is not None and hashlib.sha256(line).hexdigest() != r.sha256[i]:
            continue  # the same name, other bytes: not their line
        found[s] = (off, line)
        holders[s] = (event.seq, off, len(raw))
        if event.type == "branch/event":
            recorded[off] = len(raw)
    for s in range(r.at + 1, r.head + 1):
        got = found.get(s)
        if got is None:  # their bookkeeping or branch line: never recorded, never folded
            yield -1, b"", Event(s, "session/flush", last_time, {}, ignorable=True)
            continue
        off, line = got
        event = decode(line)
        last_time = event.time
        yield off, line + b"\n", event


def fold_their(
    path: str | os.PathLike[str], seq: int, *, versions: bool = False
) -> tuple[Their, SessionFold]:
    """Fold the version recorded by the receipt at ``seq`` of ``path``."""
    their = their_rows(path, seq)
    it = iter(their.rows)
    first = next(it)
    f = SessionFold(str(path), header_of(Row(*first), str(path)), versions=versions)
    f.source = RecordedSource(str(path), their.recorded)
    f.apply(Row(*first))
    for row in it:
        f.apply(Row(*row))
    return their, f


def branch_item(v: BranchVersion) -> dict[str, Any]:
    """The neutral item of a recorded message event: status ``branch``, ``by`` the receipt,
    ``branch`` its seq and crc in the version it came from."""
    item = neutral_item(v.node)
    out: dict[str, Any] = {"seq": item.pop("seq"), "time": item.pop("time")}
    out["type"] = item.pop("type")
    out["status"] = "branch"
    out["by"] = v.receipt
    out["branch"] = {"seq": v.origin.seq, "crc": v.origin.crc}
    out.update(item)
    return out
