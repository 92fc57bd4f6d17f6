"""A redacted copy of a session (``jsonltape redact SRC -o DST``) and the secret finder the
commit guard shares with it.

The copy is a valid session file in which every string the redaction patterns of
:mod:`~jsonltape.interop.redaction` match is masked (``[REDACTED:<kind>]``), in the data of
every event at any depth (object keys included), with everything else kept: seqs, types,
times, surfaces, sources, idempotency keys, member order. Lines without a secret are copied
byte for byte; a line with one is encoded again from its parsed members with only ``data``
changed, and framed with a new CRC. Checkpoints are rewritten for the new byte positions:
``data.offset``, ``data.turn.offset`` and a ``span`` (format 1.1) on every checkpoint, over the
new bytes since the previous checkpoint (or the header), whether the source had spans or not.
A source checkpoint whose offset did not name its own line was not a valid checkpoint and is
copied as it was (masked), so the copy says the same about it.

**A new id.** The copy's id is the source's with ``.redacted`` appended (a hash when that would
be longer than an id may be): its bytes differ from the source's from the first masked line
on, so under the same id it would be a rewritten history of that session — the merge driver
and the commit guard would call every later merge with an unredacted clone a conflict, and the
index would see a session changed underneath. Under its own id it is a derived session; the
header's ``meta`` says where it came from: ``"jsonltape.redacted": {"from": <id>}``. Header
strings other than format, version, id and created (title, cwd, agent, meta) are masked too;
``minor`` is 1 (the copy carries spans).

A torn tail of the source is not committed and is not copied (:attr:`RedactReport.torn_bytes`
says how much was left out); a corrupt source is refused (:class:`CorruptError`): repair it
first. DST is created 0600 and exclusively (through a temp file linked into place: an existing
file or symlink at DST is never replaced, and a crash leaves no half-written DST); SRC is only
read.

:func:`~jsonltape.interop.redaction.mask_value` (re-exported here) is the one walk over a JSON
value, shared with ``Redactor(secrets=True).value``; it also returns what it masked, and a
:func:`fingerprint` of each is what the commit guard reports and its allow list names.
"""

from __future__ import annotations

import hashlib
import os
import re
import zlib
from collections import Counter
from typing import Any, NamedTuple

import msgspec

from .. import _framing, _fs
from .._lines import Bad, scan
from .._scan import read_header, too_deep, witness_after
from ..errors import CorruptError, InvalidArgumentError
from ..ids import validate_session_id
from .redaction import ANY, Secret, mask_text, mask_value

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


def fingerprint(kind: str, matched: str) -> str:
    """``<kind>:<12 hex>``, the first 48 bits of SHA-256 over kind and matched text: names a
    match in an allow list without showing it (a high-entropy key cannot be recovered from
    it; a dictionary password could be confirmed by someone guessing, as with any hash)."""
    digest = hashlib.sha256(f"{kind}\0{matched}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kind}:{digest[:12]}"


# -- the screen: which lines can hold a match at all ------------------------------------------
#
# Running every pattern over every string costs ~100x a read; almost no line holds a secret.
# Each pattern needs a literal in the line's raw JSON text: a literal of the decoded string
# appears in the raw bytes as it is, except through a \u escape (a line with one is walked
# with every pattern) or an escaped "/" (":\/" is looked for too). The case-insensitive ones
# (bearer, authorization, the assignment keywords) are looked for in an ASCII-lowercased copy,
# a keyword only when ":" or "=" follows it (after an optional quote and blanks).
#
# The needles are grouped under one byte each, one regex a group, the byte first and the rest
# checked around it (lookbehinds): a regex that starts with a literal byte is searched for at
# ~2.5 GB/s when that byte is rare and checks the rest in C, where a bytes.find of a 2-5 byte
# needle runs at ~1 GB/s (and a Python loop over the hits of a common word, "token", costs
# more than the search), and a regex whose branches start with different bytes tries every
# position (~10x slower). So each group is led by a byte rarer than the needle's first
# ("k" for token, "z" for authorization, "J" for eyJ) and shared where it can be.
# Gap: a keyword spelt with a non-ASCII letter that Unicode case folding maps to ASCII (the
# Kelvin sign for "k") is masked by redact but not screened here.
_ALL = ANY
_FOLLOW = rb"""(?:\\?["'])?(?:[ \t\r]|\\t)*[:=]"""
#: (regex, the kinds its matches admit): on the raw bytes.
_RAW_GROUPS: list[tuple[re.Pattern[bytes], tuple[str, ...]]] = [
    (
        re.compile(rb"-(?:(?<=sk-)|(?<=xox[abposr]-)|(?<=xapp-)|----BEGIN)"),
        ("anthropic-key", "openai-key", "slack-token", "private-key"),
    ),
    (re.compile(rb"g(?:h[pousr]_|ithub_pat_)"), ("github-token",)),
    (re.compile(rb"A(?:KIA|SIA|BIA|CCA|Iza)"), ("aws-access-key", "google-api-key")),
    (re.compile(rb"J(?<=eyJ)"), ("jwt",)),
    (re.compile(rb"/(?:(?<=:/)/|(?<=:\\/))"), ("url-password",)),  # :// and :\/
    (re.compile(rb"\\u"), (_ALL,)),
]
#: The same, on the ASCII-lowercased bytes.
_LOWER_GROUPS: list[tuple[re.Pattern[bytes], tuple[str, ...]]] = [
    (re.compile(rb"b(?:earer)"), ("bearer",)),
    (re.compile(rb"z(?<=authoriz)ation"), ("bearer",)),
    (re.compile(rb"p(?:ass(?:word|wd|phrase)?|wd)" + _FOLLOW), ("assignment",)),
    (re.compile(rb"k(?:(?<=tok)en|ey)" + _FOLLOW), ("assignment",)),
    (re.compile(rb"c(?:(?<=sec)ret|redentials?)" + _FOLLOW), ("assignment",)),
]


def screen(buf: bytes) -> list[tuple[int, tuple[str, ...]]]:
    """``(offset, kinds)`` in ``buf`` (raw JSONL text) where a redaction pattern of those kinds
    may match (``"*"``: any); none found means no string of any line in ``buf`` holds one."""
    hits: list[tuple[int, tuple[str, ...]]] = []
    for text, groups in ((buf, _RAW_GROUPS), (buf.lower(), _LOWER_GROUPS)):
        for regex, kinds in groups:
            hits += [(m.start(), kinds) for m in regex.finditer(text)]
    return hits


def may_hold_secret(line: bytes) -> frozenset[str] | None:
    """The kinds of pattern that may match in a string of the JSON text ``line`` (``"*"``:
    any), or None when none can."""
    hits = screen(line)
    return frozenset(k for _at, kinds in hits for k in kinds) if hits else None


def redacted_id(session_id: str) -> str:
    """The id of the redacted copy of ``session_id``: ``<id>.redacted``, or a shortened id
    with a hash of the original when that would exceed 128 characters."""
    candidate = session_id + SUFFIX
    if len(candidate) > _MAX_ID:
        digest = hashlib.sha256(session_id.encode()).hexdigest()[:12]
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


def _copy(fd: int, path: str, sink: Any) -> RedactReport:
    header, hend, _time = read_header(fd, path)
    masked: Counter[str] = Counter()
    out = _Out(sink)
    first = os.pread(fd, hend, 0)
    new_id = redacted_id(header.id)
    out.write(_header_line(first, new_id, masked))
    out.span_from, out.span_crc = out.pos, 0
    moved: dict[int, int] = {}  # old offset of a turn/start line -> its new offset
    changed = 0
    events = 1
    torn = 0
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
        if event.type == "session/flush" and event.data.get("offset") == off:
            found: list[Secret] = []
            data = mask_value(event.data, found)
            out_line = _checkpoint(body, data, out, moved)
            out.write(out_line)
            out.span_from, out.span_crc = out.pos, 0
        else:
            found = []
            kinds = may_hold_secret(body)
            data = mask_value(event.data, found, kinds) if kinds is not None else event.data
            out.write(_with_data(body, data) if found else body + b"\n")
        if found:
            changed += 1
            masked.update(s.kind for s in found)
    return RedactReport(header.id, new_id, events, dict(masked), changed, torn)


def _members(body: bytes) -> dict[str, Any]:
    members: dict[str, Any] = _any(body)
    members.pop("crc", None)
    return members


def _with_data(body: bytes, data: Any) -> bytes:
    """The line ``body`` with its ``data`` replaced, every other member kept in its order."""
    members = _members(body)
    members["data"] = data
    return _framing.frame(_enc.encode(members))


def _header_line(raw: bytes, new_id: str, masked: Counter[str]) -> bytes:
    members = _members(raw)
    data = dict(members["data"])
    found: list[Secret] = []
    for name in ("title", "cwd", "agent", "meta"):
        if name in data:
            data[name] = mask_value(data[name], found)
    masked.update(s.kind for s in found)
    meta = dict(data.get("meta") or {})
    meta[META_KEY] = {"from": data["id"]}
    data["id"] = new_id
    data["minor"] = max(1, int(data.get("minor", 0)))
    data["meta"] = meta
    members["data"] = data
    return _framing.frame(_enc.encode(members))


def _checkpoint(body: bytes, data: dict[str, Any], out: _Out, moved: dict[int, int]) -> bytes:
    new = {k: v for k, v in data.items() if k != "span"}
    new["offset"] = out.pos
    turn = new.get("turn")
    if isinstance(turn, dict) and isinstance(turn.get("offset"), int):
        new["turn"] = {**turn, "offset": moved.get(turn["offset"], turn["offset"])}
    new["span"] = {"from": out.span_from, "crc": f"{out.span_crc:08x}"}
    return _with_data(body, new)
