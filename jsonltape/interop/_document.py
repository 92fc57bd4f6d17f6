"""Whole-file JSON documents an agent rewrites on every save (a Gemini CLI legacy chat, a
Continue session, a VS Code chat session): read once, rendered as JSONL records.

An agent that saves with a plain ``write`` (not a write to a temporary file and a rename) can
be caught mid-save: the file is then not JSON, and it is refused whole with one verdict naming
it (the next import, after the save, reads it). A document nested deeper than a JSONL line may
be (``_source.MAX_DEPTH``) is refused the same way, naming the byte.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ..errors import FormatError
from ._source import too_deep

__all__ = ["NOFOLLOW", "read_document", "render_records"]

_encode = msgspec.json.Encoder().encode
#: never through a symlink; a FIFO reads as empty instead of blocking the import
NOFOLLOW = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
)


def read_document(path: Path, what: str, noun: str) -> Any:
    """The JSON value of the file at ``path`` (never through a symlink), or one
    :class:`~jsonltape.FormatError` naming it: ``what`` names the format (``not a <what>``),
    ``noun`` the thing not imported."""
    fd = os.open(path, NOFOLLOW)
    with open(fd, "rb") as f:
        data = f.read()
    deep = too_deep(data)
    if deep is not None:
        raise FormatError(f"{deep}; nothing of this {noun} is imported", path=path)
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        why = "empty" if not data.strip() else f"malformed JSON ({exc})"
        raise FormatError(
            f"not a {what}: {why} (a save in progress is read at the next import)", path=path
        ) from None


def render_records(records: list[Any], held: int, settled: bool) -> tuple[bytes, int]:
    """``records`` as JSONL (compact JSON, one a line) and how many bytes at the end are the
    last ``held`` records, which may still change (0 when ``settled``)."""
    lines = [_encode(r) for r in records]
    data = b"".join(line + b"\n" for line in lines)
    if settled or held <= 0:
        return data, 0
    return data, sum(len(line) + 1 for line in lines[len(lines) - held :])
