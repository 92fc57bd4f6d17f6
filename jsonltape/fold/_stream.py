"""Committed lines for folding, from the one good-line scan every reader uses.

Each row carries the decoded event (``data`` as a dict, which the fold reads for the events it
interprets); :func:`raw_data` gives the JSON bytes of ``data`` for the events the fold keeps,
which it holds instead of the dicts (smaller, and decoded again only when shown).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from .._lines import Bad, scan
from .._scan import too_deep, witness_after
from ..errors import CorruptError, FormatError
from ..events import Event, HeaderData, check_header

__all__ = ["LineData", "Row", "header_of", "line_data", "raw_data", "rows"]


class Row(NamedTuple):
    """One committed line: where it starts, its bytes (with ``\\n``) and its event."""

    offset: int
    raw: bytes
    event: Event


class LineData(msgspec.Struct):
    """A line's seq and its ``data`` member as stored (the rest is skipped, not checked)."""

    seq: int
    data: msgspec.Raw


# Lines given to these were checked whole by scan: this only finds where data lies.
line_data = msgspec.json.Decoder(LineData).decode


def raw_data(row: Row) -> bytes:
    """The JSON text of the row's ``data`` member, as stored in the file."""
    return bytes(line_data(row.raw).data)


def header_of(row: Row, path: str) -> HeaderData:
    """Validate line 1 (seq 0) as the session header."""
    return check_header(row.event, path)


def rows(fd: int, path: str, stop: int | None = None) -> Iterator[Row]:
    """Yield committed rows in order, through seq ``stop`` if given.

    A bad line followed by a valid checkpoint is damage, not a crash: :class:`CorruptError`
    is raised at that line after every row before it was yielded. A bad line with no
    checkpoint after it starts a torn tail, which is not committed and not served.
    """
    for item in scan(fd, 0, 0):
        if isinstance(item, Bad):
            if item.too_deep:
                raise too_deep(path, item.line, item.offset)
            if item.offset == 0:  # line 1: nothing before it can prove damage (spec §7)
                raise FormatError(
                    f"not a jsonltape session: line 1: {item.problem}", path=path, line=1, offset=0
                )
            if witness_after(fd, item.offset + len(item.raw)):
                raise CorruptError(item.problem, path=path, line=item.line, offset=item.offset)
            return
        off, body, event = item
        yield Row(off, body + b"\n", event)
        if stop is not None and event.seq >= stop:
            return
