"""The branch records of a merge (spec §8.7.14) as the format defines them, read from lines.

``branch/start`` (a receipt naming another version of the session) and ``branch/event`` (one
line of that version, verbatim) are written by the merge driver only (:mod:`jsonltape.git`),
but every reader judges their shape (the good-line test, :mod:`jsonltape._lines`, with
:func:`start_problem` and :func:`event_problem`) and the fold rebuilds the version a receipt
names (:mod:`jsonltape.fold._branches`): all of them read the records through this module.

A line is *named* by its seq and crc member, but a CRC-32 is no identity against a collaborator,
who can write a line with any CRC he likes: a file *holds* a line only when it has that line's
very bytes, as a line of its own or recorded by a ``branch/event``. Where the bytes are not at
hand, the SHA-256 of them (:func:`digest`) stands for them.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from .events import BranchOrigin, BranchStartData, SeqInt

__all__ = [
    "BOOKKEEPING",
    "BRANCH_TYPES",
    "NEVER_RECORDED",
    "Receipt",
    "Recorded",
    "digest",
    "event_problem",
    "receipt",
    "recorded",
    "stands_for",
    "start_data",
    "start_problem",
]

#: The two record types: their data has a shape every reader checks (1.2).
BRANCH_TYPES = frozenset({"branch/start", "branch/event"})
#: Lines a merge never records and that never make a merge non-trivial.
BOOKKEEPING = frozenset({"session/flush", "branch/start"})
#: What a ``branch/event`` never holds: bookkeeping, and branch events (recorded flattened).
NEVER_RECORDED = BOOKKEEPING | {"branch/event"}


class _EventData(msgspec.Struct):
    branch: SeqInt
    origin: BranchOrigin
    line: msgspec.Raw  # the recorded line's bytes as stored, never re-encoded


class _EventLine(msgspec.Struct):
    data: _EventData


class _StartLine(msgspec.Struct):
    data: BranchStartData


_event_line = msgspec.json.Decoder(_EventLine).decode
_start_line = msgspec.json.Decoder(_StartLine).decode


class Recorded(NamedTuple):
    """What a ``branch/event`` records: its receipt's seq, the recorded line's seq and crc
    member (``origin``) and the line's bytes (without a newline)."""

    branch: int
    seq: int
    crc: bytes
    line: bytes


def recorded(body: bytes) -> Recorded:
    """What the ``branch/event`` line ``body`` records (``msgspec.DecodeError`` when its data
    lacks the members of spec §8.7.14; a good line has them)."""
    d = _event_line(body).data
    return Recorded(d.branch, d.origin.seq, d.origin.crc.encode(), bytes(d.line))


def start_data(body: bytes) -> BranchStartData:
    """The data of the ``branch/start`` line ``body`` (``msgspec.DecodeError`` when it lacks
    the shape of spec §8.7.14)."""
    return _start_line(body).data


def stands_for(body: bytes, seq: int, type_: str) -> tuple[int, bytes]:
    """``(seq, line)`` of the line the good line ``body`` (seq ``seq``, type ``type_``, without
    its newline) stands for: a ``branch/event`` the line it records, any other line itself."""
    if type_ == "branch/event":
        rec = recorded(body)
        return rec.seq, rec.line
    return seq, body


def digest(line: bytes) -> bytes:
    """The SHA-256 of a line's bytes (without its newline)."""
    # Loaded here: hashlib loads OpenSSL (10-20 ms), and every reader imports this module.
    import hashlib

    return hashlib.sha256(line).digest()


def start_problem(seq: int, d: BranchStartData) -> str | None:
    """What makes the receipt ``d`` at seq ``seq`` break the rules of spec §8.7.14, or None."""
    if not d.at < d.head or d.at >= seq:
        return "branch/start: `at` must come before `head` and before the receipt itself"
    if len(d.lines) != d.head - d.at or d.lines[-1] != d.crc:
        return (
            "branch/start: `lines` must name the seqs at+1 … head, the last one with `crc` "
            "- at `$.data.lines`"
        )
    if d.sha256 is not None and len(d.sha256) != len(d.lines):
        return "branch/start: `sha256` must have one item per item of `lines` - at `$.data.sha256`"
    return None


def event_problem(seq: int, rec: Recorded, line_seq: int, line_type: str) -> str | None:
    """What makes the record ``rec`` at seq ``seq`` break the rules of spec §8.7.14, given the
    seq and type its line (a good line on its own) has; None when it keeps them."""
    if rec.branch >= seq:
        return "branch/event: `branch` must name an earlier line - at `$.data.branch`"
    if line_type in NEVER_RECORDED:
        return f"branch/event: a merge never records a {line_type} line - at `$.data.line`"
    if line_seq != rec.seq or rec.line[-10:-2] != rec.crc:
        return (
            "branch/event: `origin` must be the seq and crc member of the recorded line "
            "- at `$.data.origin`"
        )
    return None


class Receipt(NamedTuple):
    """A ``branch/start``: its seq, the fork point, the other version's head and its crc, the
    crc members of that version's lines after ``at`` (and, 1.2, their SHA-256 in hex), how
    many lines it recorded, and where that version came from."""

    seq: int
    at: int
    head: int
    crc: str
    lines: list[str]
    recorded: int  #: ``data.count``
    source: str | None
    sha256: list[str] | None


def receipt(seq: int, body: bytes) -> Receipt:
    """The receipt of the good ``branch/start`` line ``body`` at ``seq``."""
    d = start_data(body)
    return Receipt(seq, d.at, d.head, d.crc, d.lines, d.count, d.source, d.sha256)
