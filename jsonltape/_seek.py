"""Where a read starts: after the header's check, at a byte offset the caller saw before, or
at a seq found by bisection (so starting late in a big file is cheap).

``reader`` (``read``, ``lines``) and ``_follow`` (``read(follow=True)``, ``--follow``) both
start here; neither imports the other for it.
"""

from __future__ import annotations

import os

from ._scan import check, read_header
from .errors import FormatError

__all__ = ["start_of"]

_PROBE = 1 << 16


def start_of(fd: int, path: str, min_seq: int, from_offset: int | None) -> tuple[int, int | None]:
    """Where a read starts and the seq expected there (None: whatever the first line has)."""
    _hdr, hend, _ = read_header(fd, path)
    if from_offset is not None:
        return from_offset, None
    if min_seq <= 0:
        return 0, 0
    return _seek_seq(fd, min_seq, hend)


def _line_at(fd: int, pos: int, limit: int) -> tuple[int, bytes] | None:
    """Return the first complete line that starts after ``pos`` (skipping a partial one)."""
    buf = b""
    at = pos
    while at < limit:
        # A probe, not a scan: small reads, since a bisection makes a few dozen of them.
        chunk = os.pread(fd, min(_PROBE, limit - at), at)
        if not chunk:
            return None
        buf += chunk
        at += len(chunk)
        i = buf.find(b"\n")
        if i < 0:
            continue
        j = buf.find(b"\n", i + 1)
        if j >= 0:
            return pos + i + 1, buf[i + 1 : j + 1]
    return None


def _seek_seq(fd: int, target: int, hend: int) -> tuple[int, int]:
    """Find (offset, seq) of a committed line with seq <= target, as close to it as cheap."""
    lo, lo_seq = hend, 1
    hi = os.fstat(fd).st_size
    while hi - lo > _PROBE:
        mid = (lo + hi) // 2
        found = _line_at(fd, mid - 1, hi)
        if found is None:
            hi = mid
            continue
        off, raw = found
        try:
            head, problem = check(raw, None)
        except FormatError:  # too deep to decode: the read itself will say where
            head, problem = None, "too deep"
        if problem is not None or head is None or head.seq > target:
            hi = mid
            continue
        lo, lo_seq = off, head.seq
        if head.seq == target:
            break
    return lo, lo_seq
