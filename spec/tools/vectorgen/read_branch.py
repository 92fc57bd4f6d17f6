"""read/ (7 of 7): the branch records a merge writes (spec §8.7.14), whose shape is part of the
good-line test since 1.2.

Each file is a session continued in two places and merged: ours, then a ``branch/start``
receipt naming their version (its lines after the fork point by crc and, in 1.2, by SHA-256)
and one ``branch/event`` per line of theirs, recorded verbatim in ``data.line``, then a
checkpoint. The ``n_`` cases break one rule of the shape each, with a checkpoint after the
broken line (corrupt); one breaks it in the last line (a torn tail).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from .common import Log, after_bad, dumps, frame, frame_obj, msg
from .registry import session

#: A 1.1 writer's session (merges happen to sessions of any minor version).
V11: dict[str, Any] = {"header_extra": {"minor": 1}, "spans": True}


def their_lines(log: Log, texts: list[str]) -> list[bytes]:
    """Their version's lines after the shared prefix (which ends with ``log``'s last line):
    one user message per text, seqs and times as their writer wrote them (without ``\\n``)."""
    out = []
    for i, text in enumerate(texts):
        seq = log.seq + i
        obj = {
            "seq": seq,
            "type": "user/message",
            "time": log.time + 100 + i,
            "data": msg("user", f"t{seq}-", text),
            "surface": "append",
        }
        out.append(frame_obj(obj)[:-1])
    return out


def receipt_data(at: int, theirs: list[bytes], count: int, *, sha: bool = True) -> dict[str, Any]:
    """The data of a ``branch/start`` naming their lines ``theirs`` (seqs ``at+1`` on)."""
    crcs = [line[-10:-2].decode() for line in theirs]
    data: dict[str, Any] = {
        "at": at,
        "head": at + len(theirs),
        "crc": crcs[-1],
        "lines": crcs,
        "count": count,
        "source": "main",
    }
    if sha:
        data["sha256"] = [hashlib.sha256(line).hexdigest() for line in theirs]
    return data


def record(
    log: Log, branch: int, line: bytes, *, data: bytes | None = None, ignorable: bool = True
) -> bytes:
    """A ``branch/event`` at the log's next seq recording ``line`` verbatim (``data``: other
    data text, written as given)."""
    if data is None:
        origin = {"seq": _seq(line), "crc": _crc(line)}
        data = b'{"branch":%d,"origin":%s,"line":%s}' % (branch, dumps(origin), line)
    head = b'{"seq":%d,"type":"branch/event","time":%d,"data":' % (log.seq, log.time)
    return frame(head + data + (b',"ignorable":true' if ignorable else b""))


def merged(log: Log, *, sha: bool = True, theirs_n: int = 2) -> tuple[int, list[bytes]]:
    """Ours (one turn after the shared prefix), then the receipt of their version: returns the
    receipt's seq and their lines, which the caller records."""
    log.exchange("shared question", "shared answer")
    log.flush()
    at = log.seq - 1
    theirs = their_lines(log, [f"their question {i}" for i in range(theirs_n)])
    log.exchange("our question", "our answer")
    log.flush()
    receipt = log.event(
        "branch/start",
        receipt_data(at, theirs, len(theirs), sha=sha),
        key=f"branch:{at}:{at + len(theirs)}:{theirs[-1][-10:-2].decode()}",
        ignorable=True,
    )
    return receipt, theirs


@session(
    "read",
    "clean",
    "A merged file of 1.2: ours, a branch/start receipt naming their two lines by crc and "
    "SHA-256, two branch/event lines recording them verbatim, a checkpoint. Clean.",
    **V11,
)
def y_branch_records(log: Log) -> None:
    receipt, theirs = merged(log)
    for line in theirs:
        log.put(record(log, receipt, line), "branch/event")
    log.flush()


@session(
    "read",
    "clean",
    "A merged file of 1.1: the receipt has no sha256 member (it is optional for readers). Clean.",
    **V11,
)
def y_branch_records_1_1(log: Log) -> None:
    receipt, theirs = merged(log, sha=False)
    for line in theirs:
        log.put(record(log, receipt, line), "branch/event")
    log.flush()


@session(
    "read",
    "clean",
    "Unknown members in a receipt's and a record's data and in an origin, and a null source: "
    "allowed (§8.7.14: other members allowed; null is absent). Clean.",
    **V11,
)
def y_branch_records_unknown_members(log: Log) -> None:
    log.exchange("shared question", "shared answer")
    log.flush()
    at = log.seq - 1
    theirs = their_lines(log, ["their question"])
    log.exchange("our question", "our answer")
    data = {**receipt_data(at, theirs, 1), "source": None, "x-note": {"why": "test"}}
    receipt = log.event("branch/start", data, ignorable=True)
    line = theirs[0]
    text = b'{"branch":%d,"origin":{"seq":%d,"crc":"%s","x-by":"bob"},"line":%s,"x-n":1}' % (
        receipt,
        at + 1,
        line[-10:-2],
        line,
    )
    log.put(record(log, receipt, line, data=text), "branch/event")
    log.flush()


def _bad_record(name: str, doc: str, make: Callable[[Log, int, bytes], bytes]) -> None:
    """Register ``name``: a merged file whose first record is ``make(log, receipt, their
    line)`` (a bad line), then good-looking lines and a checkpoint: corrupt at that line."""

    def fill(log: Log) -> None:
        receipt, theirs = merged(log)
        log.bad(make(log, receipt, theirs[0]))
        log.seq += 1
        after_bad(log)

    fill.__name__ = name  # the registry names a case after its builder
    session("read", "corrupt", doc, **V11)(fill)


def _origin(seq: Any, crc: Any) -> bytes:
    return dumps({"seq": seq, "crc": crc})


def _data(branch: int, origin: bytes, inner: bytes) -> bytes:
    return b'{"branch":%d,"origin":%s,"line":%s}' % (branch, origin, inner)


def _crc(line: bytes) -> str:
    return line[-10:-2].decode()


def _seq(line: bytes) -> int:
    return int(line.split(b",", 1)[0][7:])


def _recording(log: Log, receipt: int, type_: str, data: dict[str, Any]) -> bytes:
    """A record of a line of type ``type_`` (good on its own, seq 3)."""
    inner = frame_obj({"seq": 3, "type": type_, "time": log.time, "data": data})[:-1]
    return record(log, receipt, inner, data=_data(receipt, _origin(3, _crc(inner)), inner))


def _receipt_line(log: Log, change: Callable[[dict[str, Any]], dict[str, Any]]) -> bytes:
    """A second receipt (naming two more lines of theirs), changed by ``change``."""
    theirs = their_lines(log, ["more of theirs", "and more"])
    data = change(receipt_data(log.seq - 2, theirs, 2))
    return frame_obj(log.envelope("branch/start", data, ignorable=True))


_bad_record(
    "n_branch_event_origin_missing",
    "A branch/event without origin: not a good line (§8.7.14 shape, §10.2); corrupt. (Readers "
    "of 1.1 took it for good, and a merge of it failed.)",
    lambda log, r, line: record(log, r, line, data=b'{"branch":%d,"line":%s}' % (r, line)),
)
_bad_record(
    "n_branch_event_origin_seq_string",
    "A branch/event whose origin.seq is a string: not a good line; corrupt.",
    lambda log, r, line: record(
        log, r, line, data=_data(r, _origin(str(_seq(line)), _crc(line)), line)
    ),
)
_bad_record(
    "n_branch_event_origin_not_its_line",
    "A branch/event whose origin names another crc than its line's own crc member (a record "
    "claiming another line's name): not a good line; corrupt.",
    lambda log, r, line: record(log, r, line, data=_data(r, _origin(_seq(line), "0badc0de"), line)),
)
_bad_record(
    "n_branch_event_origin_other_seq",
    "A branch/event whose origin.seq is not its line's seq: not a good line; corrupt.",
    lambda log, r, line: record(
        log, r, line, data=_data(r, _origin(_seq(line) + 1, _crc(line)), line)
    ),
)
_bad_record(
    "n_branch_event_line_bad_crc",
    "A branch/event whose recorded line fails its own checksum (one byte of it changed; the "
    "outer line's crc is right): not a good line; corrupt.",
    lambda log, r, line: record(
        log,
        r,
        line,
        data=_data(r, _origin(_seq(line), _crc(line)), line.replace(b"their", b"THEIR", 1)),
    ),
)
_bad_record(
    "n_branch_event_line_not_object",
    "A branch/event whose line is a string, not the JSON object of a line: not a good line; "
    "corrupt.",
    lambda log, r, line: record(
        log, r, line, data=_data(r, _origin(_seq(line), _crc(line)), dumps(line.decode()))
    ),
)
_bad_record(
    "n_branch_event_records_a_checkpoint",
    "A branch/event recording a session/flush line, good on its own (a merge never records "
    "bookkeeping): not a good line; corrupt.",
    lambda log, r, line: _recording(log, r, "session/flush", {"offset": 0, "seq": 2}),
)
_bad_record(
    "n_branch_event_branch_not_before_it",
    "A branch/event whose branch is its own seq (a receipt comes before its records): not a "
    "good line; corrupt.",
    lambda log, r, line: record(
        log, r, line, data=_data(log.seq, _origin(_seq(line), _crc(line)), line)
    ),
)
_bad_record(
    "n_branch_event_not_ignorable",
    "A branch/event without ignorable: true (both types are always ignorable): not a good line; "
    "corrupt.",
    lambda log, r, line: record(log, r, line, ignorable=False),
)
_bad_record(
    "n_branch_start_lines_short",
    "A branch/start whose lines has one crc fewer than head - at: not a good line; corrupt.",
    lambda log, r, line: _receipt_line(log, lambda d: {**d, "lines": d["lines"][1:]}),
)
_bad_record(
    "n_branch_start_crc_not_head",
    "A branch/start whose crc is not the last of its lines: not a good line; corrupt.",
    lambda log, r, line: _receipt_line(log, lambda d: {**d, "crc": d["lines"][0]}),
)
_bad_record(
    "n_branch_start_sha256_short_digest",
    "A branch/start with a sha256 item of 63 hex digits: not a good line; corrupt.",
    lambda log, r, line: _receipt_line(
        log, lambda d: {**d, "sha256": [d["sha256"][0][1:], d["sha256"][1]]}
    ),
)
_bad_record(
    "n_branch_start_crc_final_newline",
    "A branch/start whose crc and last item of lines are the right digits and a newline "
    '("…\\n", escaped, alike): not 8 hex digits; not a good line; corrupt.',
    lambda log, r, line: _receipt_line(
        log, lambda d: {**d, "crc": d["crc"] + "\n", "lines": [*d["lines"][:-1], d["crc"] + "\n"]}
    ),
)
_bad_record(
    "n_branch_start_at_not_before_head",
    "A branch/start whose at is not before its head: not a good line; corrupt.",
    lambda log, r, line: _receipt_line(log, lambda d: {**d, "at": d["head"], "lines": []}),
)


@session(
    "read",
    "torn-tail",
    "A malformed branch/event (no origin) as the last line, no checkpoint after it: a torn "
    "tail like any bad line without a witness; the lines before it are served.",
    **V11,
)
def y_branch_event_malformed_last_line(log: Log) -> None:
    receipt, theirs = merged(log)
    log.put(record(log, receipt, theirs[0]), "branch/event")
    log.bad(record(log, receipt, theirs[1], data=b'{"branch":%d,"line":%s}' % (receipt, theirs[1])))
