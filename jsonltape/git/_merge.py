"""The three-way merge of a session file (spec §8.7.14): a pure function of three versions.

git hands the merge driver three files: the ancestor (``%O``), ours (``%A``, where the result
goes) and theirs (``%B``). Session files are append-only, so every version is the ancestor plus
lines; the merge never interleaves and never drops:

* one side appended (the other's bytes are a prefix of it): the result is that side, byte for
  byte;
* both appended: the result is ours as it was, then a ``branch/start`` receipt and one
  ``branch/event`` per line of theirs that ours does not hold yet, then a checkpoint. Ours
  holds a line only when it has its very bytes, as a line of its own or recorded by a branch
  event: lines are *named* by ``(seq, crc)``, but anyone on theirs can write a line with a
  chosen seq and CRC-32, and a record whose name collides with a line of ours must not make
  that line count as held (nothing of either side is dropped; both are kept). Those lines are
  ignorable and never on the surface: the model-visible history of ours is unchanged; theirs
  can be rebuilt and adopted (:mod:`jsonltape.fold._branches`, :mod:`._branch`).

A side that is not a session, is torn or corrupt (a malformed branch record included: the scan
judges its shape), or does not extend the ancestor is a :class:`Conflict` with one line saying
which side and where. No git runs here: the CLI (``jsonltape git merge-driver``) reads the
paths and writes the result.

Cost: a 100 MB session is read once per side, and its lines are judged once. The byte prefix
ours and theirs share is judged as part of ours (theirs is the same bytes); theirs is judged
only after it; the ancestor is not judged at all when its bytes are a prefix of both sides
(the usual case), since its lines are then ours. SHA-256 runs over the lines branch events
record and theirs' lines after the shared prefix, never over the shared prefix.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec

from .. import _framing, _fs
from .._commit import checkpoint_line
from .._gate import MAX_DEPTH
from .._lines import Bad, scan
from .._records import BOOKKEEPING, digest, recorded, stands_for
from .._scan import read_header, witness_after
from ..errors import FormatError
from ..events import BranchOrigin, BranchStartData, FlushData, Span, TurnRef

__all__ = ["Conflict", "Merged", "merge_files", "merge_versions"]


class Conflict(NamedTuple):
    """The merge cannot complete: ``line`` says which side is wrong, where and how."""

    line: str


class Merged(NamedTuple):
    """The merge completed: ``result`` is the new content of ours.

    ``outcome`` is ``"ours"`` (ours unchanged: theirs adds nothing), ``"theirs"`` (ours was a
    prefix of theirs: the result is theirs, byte for byte) or ``"branch"`` (theirs recorded as
    a branch: ``receipt`` is the seq of its ``branch/start``, ``recorded`` how many lines).
    """

    result: bytes
    outcome: str
    receipt: int | None = None
    recorded: int = 0


# -- encoding the lines a merge appends ---------------------------------------------------------


class _StartOut(msgspec.Struct):
    seq: int
    type: str
    time: int
    data: BranchStartData
    key: str
    ignorable: bool


class _EventData(msgspec.Struct):
    branch: int
    origin: BranchOrigin
    line: msgspec.Raw  # the recorded line's bytes, verbatim: never re-encoded


class _EventOut(msgspec.Struct):
    seq: int
    type: str
    time: int
    data: _EventData
    ignorable: bool


_enc = msgspec.json.Encoder()


# -- reading one version ---------------------------------------------------------------------


class _Version:
    """One of the three versions: its bytes, an fd the library's scan reads them through, and
    what a walk over its lines learned."""

    def __init__(self, name: str, data: bytes, fd: int | None = None) -> None:
        self.name = name
        self.data = data
        self.fd = _memfd(data) if fd is None else fd  # owned: closed by close()
        self.header_end = 0
        #: where the line of each seq starts (theirs shares ours' for the prefix they share)
        self.starts = array("q")
        #: SHA-256 of each line a branch/event of this version records -> that event's offset
        self.recorded: dict[bytes, int] = {}
        #: (seq, type, body) of the lines kept (those from ``keep_from`` on)
        self.kept: list[tuple[int, str, bytes]] = []
        #: (seq, time) of the last line before ``keep_from``
        self.before_keep = (0, 0)
        self.last_seq = 0
        self.last_time = 0
        self.turn: TurnRef | None = None
        self.closed = False
        self.span_from = 0

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def holds(self, seq: int, line: bytes, sha: bytes | None = None) -> bool:
        """True when this version has the very bytes ``line`` (seq ``seq``, SHA-256 ``sha``
        if known): as its own line ``seq``, or recorded by one of its branch events."""
        starts = self.starts
        if seq < len(starts):
            end = starts[seq + 1] - 1 if seq + 1 < len(starts) else len(self.data) - 1
            if memoryview(self.data)[starts[seq] : end] == line:
                return True
        return bool(self.recorded) and (sha or digest(line)) in self.recorded


def _memfd(data: bytes) -> int:
    """An anonymous file holding ``data``, so the scan (which reads an fd) judges bytes given
    in memory exactly as it judges a file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("jsonltape-merge", os.MFD_CLOEXEC)
    else:  # pragma: no cover - not Linux
        fd, name = tempfile.mkstemp(prefix=".jsonltape-merge")
        os.unlink(name)
    view = memoryview(data)
    at = 0
    while at < len(view):
        at += os.pwrite(fd, view[at:], at)
    return fd


class _Refused(Exception):
    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def _header(v: _Version) -> None:
    try:
        _hdr, v.header_end, v.last_time = read_header(v.fd, v.name)
    except FormatError as exc:
        raise _Refused(f"{v.name} is not a jsonltape session: {exc.message}") from None
    v.span_from = v.header_end
    v.starts = array("q", [0])


def _walk(v: _Version, start: int, expected: int, keep_from: int) -> None:
    """Judge the lines of ``v`` from offset ``start`` (seq ``expected``) to its end; a bad line
    refuses the merge. Tracks what the merge needs at its end and keeps the lines from
    ``keep_from`` on."""
    starts = v.starts
    assert len(starts) == expected, "a walk goes on from the last line walked"
    v.before_keep = (v.last_seq, v.last_time)
    for item in scan(v.fd, start, expected):
        if isinstance(item, Bad):
            raise _Refused(_bad_line(v, item))
        off, body, event = item
        t = event.type
        starts.append(off)
        v.last_seq, v.last_time = event.seq, event.time
        if t == "branch/event":
            v.recorded.setdefault(digest(recorded(body).line), off)
        if off >= keep_from:
            v.kept.append((event.seq, t, body))
        else:
            v.before_keep = (event.seq, event.time)
        if t == "session/flush":
            v.span_from = off + len(body) + 1
            v.closed = event.data.get("closed") is True
            continue
        v.closed = False
        if t == "turn/start":
            v.turn = TurnRef(event.seq, off)
        elif t == "turn/end":
            v.turn = None


def _bad_line(v: _Version, bad: Bad) -> str:
    where = f"line {bad.line} (byte {bad.offset})" if bad.line else f"byte {bad.offset}"
    if bad.too_deep:
        return f"{v.name}: {where} nests too deep to decode"
    if witness_after(v.fd, bad.offset + len(bad.raw)):
        return f"{v.name} is corrupt at {where}: {bad.problem}"
    return (
        f"{v.name} has a torn tail at {where}: {bad.problem} (a writer was mid-write when it "
        "was committed; commit it after `jsonltape repair`)"
    )


def _common_prefix(a: bytes, b: bytes, start: int = 0) -> int:
    """The length of the longest common byte prefix of ``a`` and ``b`` (known equal up to
    ``start``): block compares first, then bisection inside the block that differs."""
    n = min(len(a), len(b))
    at = start
    step = 1 << 20
    while at < n and a[at : at + step] == b[at : at + step]:
        at += step
    if at >= n:
        return n
    lo, hi = at, min(at + step, n)  # a[:lo] == b[:lo]; they differ before hi
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while lo < hi and a[lo] == b[lo]:
        lo += 1
    return lo


# -- the merge -------------------------------------------------------------------------------


def merge_versions(
    ancestor: bytes, ours: bytes, theirs: bytes, *, source: str | None = None
) -> Merged | Conflict:
    """Merge three versions of a session file given as bytes (see the module docstring).

    ``ancestor`` may be empty (the file was added on both sides). ``source`` names where
    theirs came from (recorded in the receipt). The result is deterministic: the same inputs
    give the same bytes.
    """
    versions = [
        _Version("the ancestor", ancestor),
        _Version("ours", ours),
        _Version("theirs", theirs),
    ]
    return _merge(versions, source)


def merge_files(
    ancestor: str | os.PathLike[str],
    ours: str | os.PathLike[str],
    theirs: str | os.PathLike[str],
    *,
    source: str | None = None,
) -> Merged | Conflict:
    """:func:`merge_versions` of three files (nothing is written; the caller writes ours)."""
    versions: list[_Version] = []
    try:
        for name, path in (("the ancestor", ancestor), ("ours", ours), ("theirs", theirs)):
            fd = _fs.open_for_read(Path(path))  # a regular file, no link followed
            try:
                data = _read_all(fd)
            except BaseException:
                os.close(fd)
                raise
            versions.append(_Version(name, data, fd))
    except BaseException:
        for v in versions:
            v.close()
        raise
    return _merge(versions, source)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    parts: list[bytes] = []
    at = 0
    while True:
        chunk = os.pread(fd, max(size - at, 1 << 16), at)
        if not chunk:
            return b"".join(parts) if len(parts) != 1 else parts[0]
        parts.append(chunk)
        at += len(chunk)


def _merge(versions: list[_Version], source: str | None) -> Merged | Conflict:
    try:
        o, a, b = versions
        return _merge_checked(o, a, b, source)
    except _Refused as exc:
        return Conflict(exc.line)
    finally:
        for v in versions:
            v.close()


def _merge_checked(o: _Version, a: _Version, b: _Version, source: str | None) -> Merged:
    _header(a)
    _header(b)
    hend = a.header_end
    if a.data[:hend] != b.data[: b.header_end]:
        raise _Refused("ours and theirs have different headers (line 1): not the same session")
    if o.data:
        _header(o)
        if o.data[: o.header_end] != a.data[:hend]:
            raise _Refused(
                "the ancestor has a different header (line 1) from ours and theirs: not the "
                "same session"
            )
    # Usually the ancestor is a prefix of both sides: then the compare starts after it
    # (startswith is one memcmp, no copy).
    known = hend
    if o.data.endswith(b"\n") and a.data.startswith(o.data) and b.data.startswith(o.data):
        known = max(known, len(o.data))
    shared = _common_prefix(a.data, b.data, known)
    shared = a.data.rfind(b"\n", 0, shared) + 1  # whole lines only
    _walk(a, hend, 1, shared)
    # The lines before `shared` are ours too: the same bytes, judged once, as ours.
    at, b.last_time = a.before_keep
    b.last_seq = at
    b.starts = a.starts[: at + 1]
    b.recorded = {sha: off for sha, off in a.recorded.items() if off < shared}
    _walk(b, shared, at + 1, shared)
    if o.data:
        _check_extension(o, a)
        _check_extension(o, b)
    if shared == len(b.data):
        return Merged(a.data, "ours")
    if shared == len(a.data):
        return Merged(b.data, "theirs")
    return _record(a, b, at, source)


def _check_extension(o: _Version, side: _Version) -> None:
    """Refuse unless ``side`` extends the ancestor: its committed bytes start with the
    ancestor's, or (a virtual ancestor of a criss-cross merge) it holds every line of the
    ancestor that is not bookkeeping."""
    data = o.data
    if data.endswith(b"\n") and side.data.startswith(data):
        return  # the ancestor's lines are the side's (judged there)
    same = _common_prefix(data, side.data)
    same = data.rfind(b"\n", 0, same) + 1
    if same < o.header_end:
        same = o.header_end
    probe = _Version("the ancestor", data)
    try:
        expected = data.count(b"\n", 0, same)
        for item in scan(probe.fd, same, expected):
            if isinstance(item, Bad):
                if witness_after(probe.fd, item.offset + len(item.raw)):
                    raise _Refused(_bad_line(probe, item))
                return  # a torn tail of the ancestor was never committed: nothing to keep
            off, body, event = item
            if event.type in BOOKKEEPING:
                continue
            if not side.holds(*stands_for(body, event.seq, event.type)):
                # git gives a picked or reverted commit's parent as the ancestor: it need
                # not be an ancestor of the side at all, which three files cannot tell.
                raise _Refused(
                    f"{side.name} lacks seq {event.seq} of the ancestor (byte {off}): either "
                    f"{side.name} rewrote history, or the ancestor git gave is not an ancestor "
                    f"of {side.name} (a cherry-pick or revert gives the picked commit's "
                    "parent: pick the commits before it too, or merge its branch)"
                )
    finally:
        probe.close()


def _candidates(a: _Version, b: _Version) -> Iterator[tuple[int, bytes]]:
    """Theirs' lines after the shared prefix that ours does not hold, flattened, each once:
    ``(seq, line)`` of each."""
    seen: set[bytes] = set()
    for seq, t, body in b.kept:
        if t in BOOKKEEPING:
            continue
        s, line = stands_for(body, seq, t)
        sha = digest(line)
        if sha in seen or a.holds(s, line, sha):
            continue
        seen.add(sha)
        yield s, line


def _record(a: _Version, b: _Version, at: int, source: str | None) -> Merged:
    candidates = list(_candidates(a, b))
    if not candidates:
        return Merged(a.data, "ours")
    for seq, line in candidates:
        if _too_deep(line):
            raise _Refused(
                f"theirs: the line of seq {seq} nests too deep to be recorded in a branch "
                f"event (the format allows {MAX_DEPTH} levels)"
            )
    # Theirs' lines after the shared prefix are exactly its lines at+1 ... head.
    lines = [body[-10:-2].decode() for _s, _t, body in b.kept]
    sha256 = [hashlib.sha256(body).hexdigest() for _s, _t, body in b.kept]
    head = b.last_seq
    now = max(a.last_time, b.last_time)
    seq = a.last_seq + 1
    receipt = seq
    start = BranchStartData(at, head, lines[-1], lines, len(candidates), source, sha256)
    out = [
        _framing.frame(
            _enc.encode(
                _StartOut(seq, "branch/start", now, start, f"branch:{at}:{head}:{start.crc}", True)
            )
        )
    ]
    for oseq, line in candidates:
        seq += 1
        data = _EventData(receipt, BranchOrigin(oseq, line[-10:-2].decode()), msgspec.Raw(line))
        out.append(_framing.frame(_enc.encode(_EventOut(seq, "branch/event", now, data, True))))
    appended = b"".join(out)
    offset = len(a.data) + len(appended)
    crc = zlib.crc32(memoryview(a.data)[a.span_from :])
    crc = zlib.crc32(appended, crc)
    flush = FlushData(offset, seq, a.turn, a.closed, Span(a.span_from, f"{crc:08x}"))
    tail = checkpoint_line(seq + 1, now, flush)
    return Merged(b"".join((a.data, appended, tail)), "branch", receipt, len(candidates))


def _too_deep(line: bytes) -> bool:
    """True when ``line`` nested two levels deeper (inside ``data.line``) would pass the
    format's limit."""
    limit = MAX_DEPTH - 2
    if line.count(b"{") + line.count(b"[") < limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == 0x5C:
                escaped = True
            elif ch == 0x22:
                in_string = False
        elif ch == 0x22:
            in_string = True
        elif ch in (0x7B, 0x5B):
            depth += 1
            if depth > limit:
                return True
        elif ch in (0x7D, 0x5D):
            depth -= 1
    return False
