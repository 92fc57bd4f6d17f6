"""read/ (3 of 7): the header line (§7) and the version (n_header_*, n_version_*), with the
two y_ cases about checkpoint and ignorable shapes that the README lists among them.
"""

from __future__ import annotations

import json

from .common import (
    SID,
    T0,
    Log,
    frame_obj,
    header_line,
    refused_header,
)
from .expect import (
    Built,
    expect_refused,
)
from .registry import case, session, table


@case("read", "Line 1 is a turn/start (seq 0) and the header comes second: not a session.")
def n_header_not_first() -> Built:
    first = frame_obj({"seq": 0, "type": "turn/start", "time": T0, "data": {}})
    hdr = json.loads(header_line())
    del hdr["crc"]
    hdr["seq"] = 1
    return first + frame_obj(hdr), expect_refused("not-jsonltape")


@case("read", "The header's CRC does not match: not a session.")
def n_header_bad_crc() -> Built:
    line = header_line().replace(SID.encode(), SID[:-1].encode() + b"C")
    return refused_header(line, repair=True)


table(
    "read",
    (
        "n_header_torn",
        "The header line has no newline (a torn first line): not a session.",
        lambda: (header_line()[:-1], expect_refused("not-jsonltape")),
    ),
    (
        "n_header_wrong_format",
        'data.format is "jsonl", not "jsonltape".',
        lambda: refused_header(header_line(format="jsonl")),
    ),
    (
        "n_header_no_format",
        "The header has no data.format.",
        lambda: refused_header(header_line(format=None)),
    ),
    (
        "n_header_title_number",
        "data.title is a number: a header member of the wrong type (§7) makes the file not a "
        "session.",
        lambda: refused_header(header_line(title=5)),
    ),
    (
        "n_header_parent_string",
        "data.parent is a string, not {session, seq}: not a session (§7).",
        lambda: refused_header(header_line(parent="abc")),
    ),
)


@session(
    "read",
    "clean",
    'An extension event with "ignorable": false: a boolean, the same as absent (§6); a good line.',
)
def y_ignorable_false(log: Log) -> None:
    log.event("com.example/x", {}, extra={"ignorable": False})
    log.flush(closed=False)


@session(
    "read",
    "open-turn",
    "An open turn, then a session/flush with closed: true but no data.seq: not the shape of §8.5, "
    "so not a valid checkpoint and it cannot close; the turn was left open by a crash.",
)
def y_closing_checkpoint_without_seq(log: Log) -> None:
    log.turn_start()
    log.user("hi")
    log.event("session/flush", {"offset": log.size, "closed": True}, ignorable=True)


@case("read", "The header line carries seq 1: not a session.")
def n_header_seq_1() -> Built:
    hdr = json.loads(header_line())
    del hdr["crc"]
    hdr["seq"] = 1
    return refused_header(frame_obj(hdr))


table(
    "read",
    (
        "n_header_not_object",
        "Line 1 is a JSON array: not a session.",
        lambda: refused_header(b'["jsonltape",1]\n'),
    ),
    (
        "n_version_newer_major",
        "Header version 2: written by a newer major version; refused as unsupported (§7).",
        lambda: refused_header(header_line(version=2), "unsupported-version", repair=True),
    ),
    (
        "n_version_zero",
        "Header version 0: smaller than 1, refused as unsupported.",
        lambda: refused_header(header_line(version=0), "unsupported-version"),
    ),
    (
        "n_version_string",
        'Header version "1" (a string): not an integer, unsupported.',
        lambda: refused_header(header_line(version="1"), "unsupported-version"),
    ),
)
