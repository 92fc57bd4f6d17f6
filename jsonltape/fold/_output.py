"""The folded history as a request body whose messages are made as they are read, and a JSON
writer that streams it: ``jsonltape messages`` of a session with hundreds of thousands of
messages holds the fold (where each message is) and one message at a time, not the body.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

import msgspec

from ._convert import Format, anthropic_body, neutral_item, openai_body
from ._fold import FoldError, Node, SessionFold, fold_file

__all__ = ["message_body", "write_json"]

_enc = msgspec.json.Encoder()


class _Items(Collection[dict[str, Any]]):
    """The neutral items of some nodes, made (their data read and decoded) each time they are
    iterated: a body that needs two passes reads the file twice instead of holding them."""

    def __init__(self, nodes: list[Node]) -> None:
        self._nodes = nodes

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (neutral_item(node) for node in self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, item: object) -> bool:
        return any(i == item for i in self)


def message_body(
    path: str | os.PathLike[str],
    at: int | None = None,
    format: Format = "neutral",
    all_versions: bool = False,
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
    branch: int | None = None,
    branches: bool = False,
) -> dict[str, Any]:
    """What :func:`jsonltape.fold.messages` returns, with ``messages`` an iterator.

    ``branch``: fold the version recorded by the ``branch/start`` at that seq instead (spec
    §8.7.14); ``branches``: with ``all_versions``, list the message events recorded by
    branch events too (status ``branch``).
    """
    if format not in ("neutral", "openai", "anthropic"):
        raise FoldError(f"format must be neutral, openai or anthropic, not {format!r}")
    if all_versions and format != "neutral":
        raise FoldError("all_versions lists every version with its status: neutral format only")
    if branch is not None:
        if at is not None:
            raise FoldError("a branch is folded whole: --at and --branch do not combine")
        from ._branches import fold_their

        f = fold_their(path, branch, versions=all_versions)[1]
    else:
        f = fold_file(path, at, versions=all_versions, parents=parents)
    header = f.request_header()
    if format == "neutral":
        out: dict[str, Any] = {"session": f.session, "seq": f.last_seq}
        if header is not None:
            out["header"] = header
        if all_versions and branches and f.branch_events:
            out["messages"] = _with_branches(f)
        elif all_versions:
            out["messages"] = (neutral_item(v.node, v) for v in f.versions())
        else:
            out["messages"] = iter(_Items(f.current()))
        return out
    if format == "openai":
        return openai_body(_Items(f.current()), header)
    return anthropic_body(_Items(f.current()), header)


def _with_branches(f: SessionFold) -> Iterator[dict[str, Any]]:
    """Every version, then the recorded message events among the file's own, in seq order."""
    from ._branches import branch_item

    every = f.versions()
    inherited = len(f.base.versions) if f.base is not None else 0
    for v in every[:inherited]:
        yield neutral_item(v.node, v)
    recorded = f.branch_events or []
    merged = heapq.merge(
        ((v.node.seq, 0, i) for i, v in enumerate(every[inherited:], inherited)),
        ((b.node.seq, 1, i) for i, b in enumerate(recorded)),
    )
    for _seq, kind, i in merged:
        if kind:
            yield branch_item(recorded[i])
        else:
            yield neutral_item(every[i].node, every[i])


def _formatted(value: Any, indent: int) -> bytes:
    return msgspec.json.format(_enc.encode(value), indent=2).replace(b"\n", b"\n" + b" " * indent)


def write_json(write: Callable[[bytes], object], body: Mapping[str, Any]) -> None:
    """Write ``body`` as ``msgspec.json.format(..., indent=2)`` would, and a newline; a member
    whose value is an iterator is written item by item as it is made."""
    if not body:
        write(b"{}\n")
        return
    sep = b"{\n"
    for key, value in body.items():
        write(sep + b"  " + _enc.encode(key) + b": ")
        sep = b",\n"
        if not isinstance(value, Iterator):
            write(_formatted(value, 2))
            continue
        item_sep = b"[\n    "
        for item in value:
            write(item_sep + _formatted(item, 4))
            item_sep = b",\n    "
        write(b"[]" if item_sep == b"[\n    " else b"\n  ]")
    write(b"\n}\n")
