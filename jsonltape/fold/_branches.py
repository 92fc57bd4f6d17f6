"""Folding the branches a merge recorded (spec §8.7.14).

* :func:`fold_their` folds the version a ``branch/start`` receipt names, rebuilt by
  :func:`jsonltape.git._branch.their_rows`: ``jsonltape messages PATH --branch SEQ``.
* :func:`recorded_version` makes a ``branch/event`` that records a message event an entry of
  ``--all-versions`` (status ``branch``, ``by`` its receipt), and :func:`branch_item` its item.

A recorded message's data is read back from the ``branch/event`` line that holds it (the fold
holds where each message is, never its body): :class:`RecordedSource`.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from .. import _framing, _fs
from ..errors import ConcurrentModificationError
from ..events import SURFACE_TYPES, BranchOrigin
from ._convert import neutral_item
from ._fold import Node, SessionFold, Source
from ._stream import Row, header_of, line_data

if TYPE_CHECKING:
    from ..git._branch import Their

__all__ = ["BranchVersion", "RecordedSource", "branch_item", "fold_their", "recorded_version"]


class _HolderData(msgspec.Struct):
    branch: int
    origin: BranchOrigin
    line: msgspec.Raw


class _Holder(msgspec.Struct):
    seq: int
    data: _HolderData


_holder = msgspec.json.Decoder(_Holder).decode


class RecordedSource(Source):
    """A :class:`Source` whose lines at the offsets in ``recorded`` (offset -> size) are
    ``branch/event`` lines: a node there reads the data of the line it records. The node's
    seq is the holder's (an ``--all-versions`` entry) or the recorded line's (a rebuilt
    version)."""

    __slots__ = ("recorded",)

    def __init__(self, path: str, recorded: dict[int, int]) -> None:
        super().__init__(path)
        self.recorded = recorded

    def data(self, seq: int, offset: int, size: int) -> bytes:
        held = self.recorded.get(offset)
        if held is None:
            return super().data(seq, offset, size)
        raw = self._read(offset, held)
        try:
            holder = _holder(raw) if _framing.frame_ok(raw) else None
            line = line_data(bytes(holder.data.line)) if holder is not None else None
        except msgspec.DecodeError:
            holder = line = None
        if holder is None or line is None or seq not in (holder.seq, line.seq):
            raise ConcurrentModificationError(
                f"the branch event holding seq {seq} changed while the session was being read",
                path=self.path,
                offset=offset,
            )
        return bytes(line.data)

    def _read(self, offset: int, size: int) -> bytes:
        if self._fd is None:
            self._fd = _fs.open_for_read(Path(self.path))
            weakref.finalize(self, os.close, self._fd)
        return os.pread(self._fd, size, offset)


def fold_their(
    path: str | os.PathLike[str], seq: int, *, versions: bool = False
) -> tuple[Their, SessionFold]:
    """Fold the version recorded by the receipt at ``seq`` of ``path``."""
    from ..git._branch import their_rows

    their = their_rows(path, seq)
    it = iter(their.rows)
    first = next(it)
    f = SessionFold(str(path), header_of(Row(*first), str(path)), versions=versions)
    f.source = RecordedSource(str(path), their.recorded)
    f.apply(Row(*first))
    for row in it:
        f.apply(Row(*row))
    return their, f


class BranchVersion(NamedTuple):
    """A recorded message event in ``--all-versions``: the node (its seq is the
    ``branch/event``'s), the receipt that recorded it and its origin in that version."""

    node: Node
    receipt: int
    origin: BranchOrigin


class _Line(msgspec.Struct):
    seq: int
    type: str
    time: int


_line = msgspec.json.Decoder(_Line).decode


def recorded_version(fold: SessionFold, row: Row) -> BranchVersion | None:
    """The ``--all-versions`` entry of a ``branch/event`` row (None unless it records a
    message event)."""
    try:
        holder = _holder(row.raw)
        line = _line(bytes(holder.data.line))
    except msgspec.DecodeError:
        return None  # not the shape of §8.7.14: nothing to list
    if line.type not in SURFACE_TYPES:
        return None
    src = fold.recorded_source
    if not isinstance(src, RecordedSource):
        src = fold.recorded_source = RecordedSource(fold.path, {})
    src.recorded[row.offset] = len(row.raw)
    node = Node(row.event.seq, line.time, line.type, row.offset, len(row.raw), src)
    return BranchVersion(node, holder.data.branch, holder.data.origin)


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
