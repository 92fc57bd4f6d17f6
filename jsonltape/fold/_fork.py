"""Forks by reference, and the receipts that close them: merge and discard.

A fork is a new session file whose header names its parent (session id, the seq it forks at,
a path hint and the crc of that line). Nothing is copied: folding the fork folds the parent's
prefix, then the fork's own events. Merging appends to the parent the fork's current messages
(each marked with its origin and keyed, so a second merge adds nothing) followed by a
``fork/merge`` receipt; discarding appends a ``fork/discard`` receipt. No file is deleted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

import msgspec

from .. import _fs
from ..events import Event, ParentRef
from ..ids import new_session_id
from ..reader import header as read_header
from ._fold import FoldError, SessionFold, fold_file
from ._ops import Target, _run

__all__ = ["ForkInfo", "MergeResult", "discard", "fork", "merge"]

_json = msgspec.json.Decoder()
Parents = Mapping[str, Union[str, "os.PathLike[str]"]]


class ForkInfo(msgspec.Struct):
    """A new fork: its file, session id, and where it forks from."""

    path: str
    session: str
    parent: str
    at: int


class MergeResult(msgspec.Struct):
    """What :func:`merge` did: parent seqs of the merged messages and of the receipt."""

    fork: str
    merged: list[int]
    receipt: int | None
    already: bool


def fork(
    parent: str | os.PathLike[str],
    at: int,
    out: str | os.PathLike[str] | None = None,
    *,
    session_id: str | None = None,
    title: str | None = None,
    parents: Parents | None = None,
) -> ForkInfo:
    """Create a fork of ``parent`` as of seq ``at`` (its events 0..at are the fork's prefix).

    ``out`` defaults to ``<new id>.jsonl`` next to the parent. The parent is folded first, so
    an unreadable parent (or a seq it does not have) is refused before any file is created;
    events still queued in an open tape of the parent are not seen (flush it first).
    """
    ppath = _fs.given_path(parent, "parent")
    outp = _fs.given_path(out, "out") if out is not None else None  # refused before any work
    pf = fold_file(ppath, at, parents=parents)
    sid = session_id if session_id is not None else new_session_id()
    target = outp if outp is not None else ppath.with_name(f"{sid}.jsonl")
    hint = os.path.relpath(os.path.abspath(ppath), os.path.dirname(os.path.abspath(target)))
    ref = ParentRef(session=pf.session, seq=at, path=hint, crc=pf.last_crc)
    from ..writer import open as open_tape  # writer imports this package: import late

    with open_tape(
        target,
        create=True,
        session_id=sid,
        title=title if title is not None else pf.header.title,
        cwd=pf.header.cwd,
        agent=pf.header.agent,
        parent=ref,
        durability="manual",
    ) as tape:
        return ForkInfo(path=str(target), session=tape.session_id, parent=pf.session, at=at)


def _fork_of(pf: SessionFold, fork_path: Path, parents: Parents | None) -> SessionFold:
    """Fold the fork, checking it belongs to ``pf``'s session (and that the parent is intact)."""
    header = read_header(fork_path)
    ref = header.parent
    if ref is None:
        raise FoldError("not a fork: its header names no parent session", path=fork_path)
    if ref.session != pf.session:
        raise FoldError(
            f"this fork was made from session {ref.session}, not from {pf.session} "
            f"({pf.path}); merge or discard it in its own parent",
            path=fork_path,
            field="$.data.parent.session",
        )
    known = {pf.session: pf.path, **(parents or {})}
    return fold_file(fork_path, parents=known)


def _receipts(pf: SessionFold, fork_id: str, kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [(s, d) for s, t, d in pf.receipts.get(fork_id, []) if t == kind]


def merge(
    parent: Target,
    fork_path: str | os.PathLike[str],
    *,
    parents: Parents | None = None,
    lock_timeout: float = 0.0,
) -> MergeResult:
    """Append the fork's current messages to its parent, then a ``fork/merge`` receipt.

    Each merged event keeps the fork's type and data plus ``origin: {session, seq}`` and the
    key ``fork:<fork id>:<fork seq>``. Merging again adds only messages the fork gained since
    (nothing if none); a fork whose already-merged messages have changed, or that was
    discarded, is refused.
    """
    fpath = _fs.given_path(fork_path, "fork_path")
    info: dict[str, Any] = {}

    def build(pf: SessionFold, n: int) -> list[dict[str, Any]]:
        ff = _fork_of(pf, fpath, parents)
        fid = ff.session
        info["fork"] = fid
        discarded = _receipts(pf, fid, "fork/discard")
        if discarded:
            raise FoldError(
                f"fork {fid} was discarded at seq {discarded[0][0]}; it cannot be merged",
                path=pf.path,
            )
        merged = pf.merged.get(fid, set())
        own = ff.own_nodes()
        current = {node.seq for node in own}
        changed = sorted(s for s in merged if s not in current)
        if changed:
            raise FoldError(
                f"fork {fid} has replaced or retracted messages that were already merged "
                f"(fork seqs {changed}); a merge cannot rewrite the parent",
                path=fpath,
            )
        new = [node for node in own if node.seq not in merged]
        done = _receipts(pf, fid, "fork/merge")
        info["already"] = done[-1][0] if done else None
        if not new and done:
            return []
        assert ff.header.parent is not None
        items: list[dict[str, Any]] = []
        for node in new:
            data = _json.decode(node.data)
            data.pop("turn", None)  # turn and step seqs belong to the fork's file
            data.pop("step", None)
            data["origin"] = {"session": fid, "seq": node.seq}
            items.append(
                {
                    "type": node.type,
                    "data": data,
                    "surface": "append",
                    "key": f"fork:{fid}:{node.seq}",
                }
            )
        receipt = {
            "fork": fid,
            "at": ff.header.parent.seq,
            "head": ff.last_seq,
            "crc": ff.last_crc,
            "count": len(new),
            "path": _hint(pf.path, fpath),
        }
        items.append(
            {"type": "fork/merge", "data": receipt, "key": f"fork:{fid}:merge:{ff.last_seq}"}
        )
        return items

    events = _run(parent, build, lock_timeout, "parent")
    if not events:
        return MergeResult(info["fork"], [], info["already"], True)
    return MergeResult(info["fork"], [e.seq for e in events[:-1]], events[-1].seq, False)


def discard(
    parent: Target,
    fork_path: str | os.PathLike[str],
    *,
    reason: str | None = None,
    parents: Parents | None = None,
    lock_timeout: float = 0.0,
) -> Event | None:
    """Append a ``fork/discard`` receipt for the fork to its parent (the fork's file stays).

    Discarding twice is a no-op that returns None; a merged fork cannot be discarded.
    """
    fpath = _fs.given_path(fork_path, "fork_path")

    def build(pf: SessionFold, n: int) -> list[dict[str, Any]]:
        ff = _fork_of(pf, fpath, parents)
        fid = ff.session
        merged = _receipts(pf, fid, "fork/merge")
        if merged or pf.merged.get(fid):
            at = f" at seq {merged[0][0]}" if merged else ""
            raise FoldError(f"fork {fid} was merged{at}; it cannot be discarded", path=pf.path)
        if _receipts(pf, fid, "fork/discard"):
            return []
        assert ff.header.parent is not None
        data: dict[str, Any] = {
            "fork": fid,
            "at": ff.header.parent.seq,
            "head": ff.last_seq,
            "crc": ff.last_crc,
            "path": _hint(pf.path, fpath),
        }
        if reason is not None:
            data["reason"] = reason
        return [{"type": "fork/discard", "data": data, "key": f"fork:{fid}:discard"}]

    events = _run(parent, build, lock_timeout, "parent")
    return events[0] if events else None


def _hint(parent_path: str, fork_path: Path) -> str:
    return os.path.relpath(
        os.path.abspath(fork_path), os.path.dirname(os.path.abspath(parent_path))
    )
