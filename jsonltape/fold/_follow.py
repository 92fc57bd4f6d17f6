"""Follow a live session's model-visible history: the fold of ``messages`` fed one committed
line at a time as :func:`jsonltape._follow.follow_lines` serves them (``messages --follow``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .. import _fs
from .._follow import follow_lines
from ._convert import neutral_item
from ._fold import SessionFold, _base
from ._stream import Row, header_of

__all__ = ["follow_messages"]


def follow_messages(
    path: str | os.PathLike[str],
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
    idle_timeout: float | None = None,
    on_wait: Callable[[], object] | None = None,
) -> Iterator[dict[str, Any]]:
    """The model-visible history of ``path`` as it grows: each message (the neutral item of
    ``messages``) once it becomes visible, and a marker when messages leave the surface.

    The fold is the one ``messages`` runs (``fold.SessionFold``), fed one committed line at a
    time. A message is yielded when its event is folded (a fork's inherited history first).
    A later event that takes shown messages off the surface (a retraction, a revision, a
    compaction) yields ``{"removed": [seq, ...], "status": "retracted" | "superseded" |
    "compacted", "by": seq}`` before the message that replaces them, if any; the replacing
    message takes the place of the removed ones in the history (``messages`` shows the
    resulting order). Nothing shown is ever yielded twice.
    """
    p = _fs.given_path(path)
    lines = follow_lines(p, idle_timeout=idle_timeout, on_wait=on_wait)
    try:
        first = next(lines, None)
        if first is None:
            return
        row = Row(first.offset, first.raw, first.event)
        header = header_of(row, str(p))
        base = _base(p, header, parents, (), False) if header.parent else None
        fold = SessionFold(str(p), header, base, versions=True)
        fold.apply(row)
        for node in base.nodes if base is not None else ():
            yield neutral_item(node)
        shown: set[int] = set()
        for line in lines:
            event = line.event
            fold.apply(Row(line.offset, line.raw, event))
            if event.surface is not None and event.surface != "append":
                gone: dict[str, list[int]] = {}
                for s in sorted(shown - fold.nodes.keys()):
                    gone.setdefault(fold.status[s][0], []).append(s)
                    shown.discard(s)
                for status, seqs in gone.items():
                    yield {"removed": seqs, "status": status, "by": event.seq}
            now = fold.nodes.get(event.seq)
            if now is not None and event.seq not in shown:
                shown.add(event.seq)
                yield neutral_item(now)
    finally:
        lines.close()
