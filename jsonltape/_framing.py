"""Bytes only: the line framing and its CRC-32 suffix.

A committed line is ``P + b',"crc":"xxxxxxxx"}' + b"\\n"`` where ``P`` is a JSON object text
without its closing brace and ``xxxxxxxx`` is ``zlib.crc32(P)`` in 8 lowercase hex digits. The
check runs on raw bytes, so readers never re-serialize anything to verify a line.

Nothing here decodes JSON; the callers decide what a valid line means beyond its frame.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator

__all__ = [
    "CRC_CHECK_VALUE",
    "LINE_END",
    "LINE_SUFFIX",
    "SUFFIX_LEN",
    "crc_of",
    "frame",
    "frame_ok",
    "iter_lines",
    "iter_lines_reverse",
]

#: ``,"crc":"`` + 8 hex digits + ``"}``: the fixed suffix every line ends with (before ``\n``).
SUFFIX_LEN = 18
_SUFFIX_HEAD = b',"crc":"'
_SUFFIX_TAIL = b'"}'
#: CRC-32 (zlib, ISO-HDLC) of the nine bytes ``123456789``.
CRC_CHECK_VALUE = 0xCBF43926
_HEX = b"%08x"
#: What :func:`frame` appends to ``P``: the suffix and ``\n``, with a ``%08x`` for the CRC.
LINE_END = b',"crc":"%08x"}\n'
#: The same without the newline: what a good line split on ``\n`` ends with.
LINE_SUFFIX = LINE_END[:-1]
#: The one read size of every scan, forward and backward: big enough to amortize syscalls
#: and the per-chunk split, small enough that a tail scan stays cheap.
CHUNK = 1 << 20


def crc_of(line: bytes) -> str | None:
    """Return the 8-hex CRC member of a line (with or without its ``\\n``), or None if absent."""
    body = line[:-1] if line.endswith(b"\n") else line
    if len(body) < SUFFIX_LEN + 1 or body[-SUFFIX_LEN:-10] != _SUFFIX_HEAD:
        return None
    return body[-10:-2].decode("ascii", "replace")


def frame(obj_json: bytes) -> bytes:
    """Turn an encoded JSON object ``{...}`` into a framed, newline-terminated line."""
    if len(obj_json) < 3 or obj_json[-1] != 0x7D:  # "}"; "{}" has no member to follow
        raise ValueError("frame() expects the JSON text of a non-empty object")
    prefix = obj_json[:-1]
    # One copy of the prefix and a join beat %-formatting a memoryview (~0.45 vs ~0.6 µs).
    return b"".join((prefix, LINE_END % zlib.crc32(prefix)))


def frame_ok(line: bytes) -> bool:
    """True when ``line`` (ending in ``\\n``) carries the fixed suffix and a matching CRC."""
    n = len(line)
    if n < SUFFIX_LEN + 3 or line[n - 1] != 0x0A or line[0] != 0x7B:  # "\n" at the end, "{" first
        return False
    end = n - 1
    if line[end - SUFFIX_LEN : end - 10] != _SUFFIX_HEAD or line[end - 2 : end] != _SUFFIX_TAIL:
        return False
    # Formatting the computed CRC and comparing bytes also enforces lowercase hex.
    return _HEX % zlib.crc32(line[: end - SUFFIX_LEN]) == line[end - 10 : end - 2]


def iter_lines(fd: int, start: int, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for each ``\\n``-terminated line in ``[start, end)``.

    A final fragment without ``\\n`` is yielded as-is (it is the caller's job to reject it),
    so callers can tell a torn last line from a clean end.
    """
    pos = start
    # A line that has not ended yet, in pieces: joined once when its newline arrives, so a
    # line of L bytes costs O(L), not O(L²/CHUNK).
    pending: list[bytes] = []
    carry_off = start
    while True:
        want = CHUNK if end is None else min(CHUNK, end - pos)
        if want <= 0:
            break
        chunk = os.pread(fd, want, pos)
        if not chunk:
            break
        pos += len(chunk)
        if chunk.find(b"\n") < 0:
            pending.append(chunk)
            continue
        buf = b"".join((*pending, chunk)) if pending else chunk
        pending = []
        base = carry_off
        i = 0
        while True:
            j = buf.find(b"\n", i)
            if j < 0:
                break
            yield base + i, buf[i : j + 1]
            i = j + 1
        if i < len(buf):
            pending.append(buf[i:])
        carry_off = base + i
    if pending:
        yield carry_off, b"".join(pending)


def iter_lines_reverse(fd: int, end: int, stop: int = 0) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` from ``end`` backwards, newest first, down to ``stop``.

    Every yielded line ends in ``\\n`` except possibly the first (a torn fragment). A line is
    only yielded once its start is known (the byte before it is ``\\n`` or it starts at
    ``stop``), so a line is never split at a chunk boundary.
    """
    pos = end
    # The line that continues past the current chunk, as pieces read right to left: joined
    # once its start is found, so a long line is not copied again with every chunk.
    pieces: list[bytes] = []
    while pos > stop:
        size = min(CHUNK, pos - stop)
        pos -= size
        chunk = os.pread(fd, size, pos)
        if pieces:
            if chunk.find(b"\n") < 0:
                pieces.append(chunk)
                continue
            buf = b"".join((chunk, *reversed(pieces)))
            pieces = []
        else:
            buf = chunk
        j = len(buf)
        while True:
            i = buf.rfind(b"\n", 0, j - 1) if j > 0 else -1
            if i < 0:
                break
            yield pos + i + 1, buf[i + 1 : j]
            j = i + 1
        if j:
            pieces.append(buf[:j])
    if pieces:
        yield stop, b"".join(reversed(pieces))
