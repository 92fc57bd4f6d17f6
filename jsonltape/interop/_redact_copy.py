"""A redacted copy of a session (``jsonltape redact SRC -o DST``) and the finder the commit guard
shares with it.

The copy is a valid session file in which every secret the rules of
:mod:`~jsonltape.interop._secret_rules` find is masked (``[REDACTED:<kind>]``), in every member
of every event a reader may show (:mod:`~jsonltape.interop._secret_events`: data at any depth,
object keys included, the idempotency key, members the envelope does not know; a secret in the
type becomes ``redacted``), in each string as written and as a reader sees it, in the text parts
of a message joined, and in the deltas of a run of ``assistant/chunk`` events joined (a secret
split across chunks is masked in each chunk it covers: every one of them changes). Everything
else is kept: seqs, times, surfaces, sources, member order. Lines without a secret are copied
byte for byte; a line with one is encoded again from its parsed members with only the masked
strings changed, and framed with a new CRC. Checkpoints are rewritten for the new byte
positions: ``data.offset``, ``data.turn.offset`` and a ``span`` (format 1.1) on every
checkpoint, over the new bytes since the previous checkpoint (or the header), whether the source
had spans or not. A source checkpoint whose offset did not name its own line was not a valid
checkpoint and is copied as it was (masked), so the copy says the same about it.

**A new id.** The copy's id is the source's with ``.redacted`` appended (a hash when that would
be longer than an id may be, or when the id itself holds a secret): its bytes differ from the
source's from the first masked line on, so under the same id it would be a rewritten history of
that session — the merge driver and the commit guard would call every later merge with an
unredacted clone a conflict, and the index would see a session changed underneath. Under its own
id it is a derived session; the header's ``meta`` says where it came from:
``"jsonltape.redacted": {"from": <id>}``. Header members other than format, version, id and
created are masked too; ``minor`` is 1 (the copy carries spans).

A torn tail of the source is not committed and is not copied (:attr:`RedactReport.torn_bytes`
says how much was left out); a corrupt source is refused (:class:`CorruptError`): repair it
first. DST is created 0600 and exclusively (through a temp file linked into place: an existing
file or symlink at DST is never replaced, and a crash leaves no half-written DST); SRC is only
read (twice when it may hold chunks: the runs of chunks are scanned first).

:func:`~jsonltape.interop._secret_mask.mask_value` (re-exported here) is the one walk over a
JSON value, shared with ``Redactor(secrets=True).value``; it also returns what it masked, and a
:func:`fingerprint` of each is what the commit guard reports and its allow list names.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections import Counter
from typing import Any, NamedTuple

import msgspec

from .. import _framing, _fs
from .._lines import Bad, scan
from .._scan import read_header, too_deep, witness_after
from ..errors import CorruptError, InvalidArgumentError
from ..ids import validate_session_id
from ._secret_events import CHUNK, Chunks, mask_members, scan_chunks
from ._secret_mask import Masker, Secret, mask_text, mask_value
from ._secret_scan import ANY, spans
from ._secret_screen import may_hold_secret, screen

__all__ = [
    "RedactReport",
    "Secret",
    "fingerprint",
    "mask_text",
    "mask_value",
    "may_hold_secret",
    "redact_copy",
    "redacted_id",
    "screen",
]

_any = msgspec.json.Decoder().decode
_enc = msgspec.json.Encoder()
_MAX_ID = 128
SUFFIX = ".redacted"
#: Where the header's meta records the source of a redacted copy.
META_KEY = "jsonltape.redacted"
#: Header members that are kept as they are (the id gets its own new value).
_HEADER_KEPT = frozenset({"format", "version", "minor", "id", "created"})


def fingerprint(kind: str, matched: str) -> str:
    """``<kind>:<12 hex>``, the first 48 bits of SHA-256 over kind and matched text: names a
    match in an allow list without showing it (a high-entropy key cannot be recovered from
    it; a dictionary password could be confirmed by someone guessing, as with any hash)."""
    digest = hashlib.sha256(f"{kind}\0{matched}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kind}:{digest[:12]}"


def redacted_id(session_id: str) -> str:
    """The id of the redacted copy of ``session_id``: ``<id>.redacted``, or a shortened id
    with a hash of the original when that would exceed 128 characters (only the hash when the
    id itself holds a secret)."""
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:12]
    if spans(session_id, ANY):
        return validate_session_id(f"redacted-{digest}{SUFFIX}")
    candidate = session_id + SUFFIX
    if len(candidate) > _MAX_ID:
        candidate = f"{session_id[: _MAX_ID - len(SUFFIX) - 13]}-{digest}{SUFFIX}"
    return validate_session_id(candidate)


class RedactReport(NamedTuple):
    """What :func:`redact_copy` did."""

    source_id: str
    id: str
    events: int  #: lines written, header included
    masked: dict[str, int]  #: masked matches by kind
    lines_changed: int  #: lines that held a secret
    torn_bytes: int  #: bytes of a torn tail of the source that were not copied

    def summary(self) -> str:
        found = ", ".join(f"{n} {k}" for k, n in sorted(self.masked.items())) or "none found"
        return f"redacted secrets: {found} ({self.lines_changed} lines changed)"


def redact_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> RedactReport:
    """Write the redacted copy of session ``src`` to the new file ``dst`` (see the module doc).

    Raises :class:`~jsonltape.errors.SessionExistsError` if anything exists at ``dst``,
    :class:`~jsonltape.errors.CorruptError` for a corrupt source, and
    :class:`~jsonltape.errors.FormatError` for a file that is not a session.
    """
    src_p, dst_p = _fs.session_path(src), _fs.session_path(dst)
    if os.path.lexists(dst_p):
        raise InvalidArgumentError(
            "the destination exists; redact never overwrites a file (choose a new name)",
            path=dst_p,
        )
    fd = _fs.open_for_read(src_p)
    try:
        tmp = dst_p.with_name(f".{dst_p.name}.{os.urandom(6).hex()}.tmp")
        out = _fs.create_exclusive(tmp)
        try:
            with os.fdopen(out, "wb", buffering=1 << 20, closefd=False) as sink:
                report = _copy(fd, str(src_p), sink)
                sink.flush()
                os.fsync(out)
            os.close(out)
            out = -1
            _fs.publish(tmp, dst_p)
        finally:
            if out >= 0:
                os.close(out)
            if os.path.lexists(tmp):
                os.unlink(tmp)
        _fs.fsync_dir(dst_p.parent)
        return report
    finally:
        os.close(fd)


class _Out:
    """Where the copy is: the new offset of each line, the last checkpoint's end."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.pos = 0
        self.span_from = 0
        self.span_crc = 0

    def write(self, line: bytes) -> None:
        self.sink.write(line)
        self.pos += len(line)
        self.span_crc = zlib.crc32(line, self.span_crc)


def _chunks(fd: int, start: int, path: str) -> Chunks:
    """The first pass: the runs of chunk events, scanned joined (none when no line can be a
    chunk: every chunk line holds ``chunk`` in its type, or a ``\\u`` escape)."""
    if not _may_have_chunks(fd):
        return Chunks()
    return scan_chunks(fd, start, 1, Chunks())


def _may_have_chunks(fd: int) -> bool:
    at, tail = 0, b""
    while True:
        block = os.pread(fd, 1 << 20, at)
        if not block:
            return False
        window = tail + block
        if b"chunk" in window or b"\\u" in window:
            return True
        tail, at = window[-8:], at + len(block)


def _copy(fd: int, path: str, sink: Any) -> RedactReport:
    header, hend, _time = read_header(fd, path)
    masked: Counter[str] = Counter()
    chunks = _chunks(fd, hend, path)
    out = _Out(sink)
    first = os.pread(fd, hend, 0)
    new_id = redacted_id(header.id)
    out.write(_header_line(first, new_id, masked))
    out.span_from, out.span_crc = out.pos, 0
    moved: dict[int, int] = {}  # old offset of a turn/start line -> its new offset
    changed = 0
    events = 1
    torn = 0
    masked.update(c.secret.kind for c in chunks.secrets)
    for item in scan(fd, hend, 1):
        if isinstance(item, Bad):
            if item.too_deep:
                raise too_deep(path, item.line, item.offset)
            if witness_after(fd, item.offset + len(item.raw)):
                raise CorruptError(
                    f"{item.problem}; repair the source first (jsonltape repair --force)",
                    path=path,
                    line=item.line,
                    offset=item.offset,
                )
            torn = os.fstat(fd).st_size - item.offset
            break
        off, body, event = item
        if event.type == "turn/start":
            moved[off] = out.pos
        events += 1
        found: list[Secret] = []
        extras = chunks.masks.get(off)
        kinds = may_hold_secret(body)
        if event.type == "session/flush" and event.data.get("offset") == off:
            members = _masked(body, found, kinds or (), extras)
            out.write(_checkpoint(members, out, moved))
            out.span_from, out.span_crc = out.pos, 0
            changed += bool(found)
        elif kinds is None and not extras:  # (a chunk's data is judged joined, in `chunks`)
            out.write(body + b"\n")
        else:
            members = _members(body)
            joined = ("data",) if event.type == CHUNK and chunks.active else None
            new = mask_members(members, Masker(found, kinds or (), extras=extras, joined=joined))
            if new == members:
                out.write(body + b"\n")
            else:
                out.write(_framing.frame(_enc.encode(new)))
                changed += 1
        masked.update(s.kind for s in found)
    return RedactReport(header.id, new_id, events, dict(masked), changed, torn)


def _members(body: bytes) -> dict[str, Any]:
    members: dict[str, Any] = _any(body)
    members.pop("crc", None)
    return members


def _masked(body: bytes, found: list[Secret], kinds: Any, extras: Any = None) -> dict[str, Any]:
    return mask_members(_members(body), Masker(found, kinds, extras=extras))


def _header_line(raw: bytes, new_id: str, masked: Counter[str]) -> bytes:
    found: list[Secret] = []
    members = _members(raw)
    data = dict(members["data"])
    masker = Masker(found, ANY)
    for name in list(data):
        if name not in _HEADER_KEPT:
            data[name] = masker.value(data[name], ("data", name))
    meta = dict(data["meta"]) if isinstance(data.get("meta"), dict) else {}
    meta[META_KEY] = {"from": mask_text(data["id"], found, ANY)}
    data["id"] = new_id
    data["minor"] = max(1, int(data.get("minor", 0)))
    data["meta"] = meta
    out: dict[str, Any] = {}
    for k, v in members.items():  # every member in its place, the others masked
        if k == "data":
            out[k] = data
        else:
            out.update(mask_members({k: v}, masker))
    masked.update(s.kind for s in found)
    return _framing.frame(_enc.encode(out))


def _checkpoint(members: dict[str, Any], out: _Out, moved: dict[int, int]) -> bytes:
    data = members["data"]
    new = {k: v for k, v in data.items() if k != "span"}
    new["offset"] = out.pos
    turn = new.get("turn")
    if isinstance(turn, dict) and isinstance(turn.get("offset"), int):
        new["turn"] = {**turn, "offset": moved.get(turn["offset"], turn["offset"])}
    new["span"] = {"from": out.span_from, "crc": f"{out.span_crc:08x}"}
    return _framing.frame(_enc.encode({**members, "data": new}))
