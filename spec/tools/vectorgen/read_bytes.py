"""read/ (5 of 7): §4 covers every byte of a line (unknown members included), §6 ranges,
§7 members present as null.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .common import (
    T0,
    Log,
    corrupt_with_line,
    damaged,
    dumps,
    frame,
    frame_obj,
    header_line,
    refused_header,
)
from .expect import (
    Built,
)
from .registry import Builder, case, session, table


def spliced(member: bytes) -> Callable[[Log, bytes], bytes]:
    """Damage: ``member`` (raw bytes, e.g. ``,"x":1e400``) spliced in before the crc suffix, the
    CRC recomputed: only the bytes of an unknown envelope member make the line bad."""

    def make(log: Log, line: bytes) -> bytes:
        return frame(line[: -len(b',"crc":"xxxxxxxx"}\n')] + member)

    return make


table(
    "read",
    (
        "n_unknown_member_name_invalid_utf8",
        'An unknown envelope member whose name holds a byte that is not UTF-8 ("x\\xffy"), CRC '
        "valid: the good-line test covers every byte of the line (§4, §10.2); corrupt.",
        lambda: damaged(spliced(b',"x\xffy":1')),
    ),
    (
        "n_unknown_member_value_invalid_utf8",
        "An unknown envelope member whose string value holds bytes that are not UTF-8 (an "
        "overlong 0xC0 0xAF), CRC valid: bad like the same bytes in data (§4); corrupt.",
        lambda: damaged(spliced(b',"com.example.note":"a\xc0\xafb"')),
    ),
    (
        "n_unknown_member_name_lone_surrogate",
        'An unknown envelope member named by an escaped lone surrogate ("\\udc00"): no Unicode '
        "text (§4, I-JSON), although the JSON grammar allows it; corrupt.",
        lambda: damaged(spliced(b',"\\udc00":true')),
    ),
    (
        "n_unknown_member_number_out_of_range",
        'An unknown envelope member holding 1e400, a number no double can hold ("x-cost":1e400): '
        "bad wherever it is (§4); corrupt.",
        lambda: damaged(spliced(b',"x-cost":1e400')),
    ),
)


@case(
    "read",
    "A surface object (a valid replace) with an unknown member holding -1e400: the surface "
    "object's bytes are checked like the rest of the line (§4); corrupt.",
)
def n_surface_unknown_member_out_of_range() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"], obj["surface"]
        text = dumps(obj)[:-1]
        seq = log.seq - 1
        return frame(
            text + b',"surface":{"op":"replace","start":%d,"end":%d,"x":-1e400}' % (seq, seq)
        )

    return damaged(make)


table(
    "read",
    (
        "n_integer_out_of_double_range",
        "An integer of 401 digits inside data: integers in data are not range-checked, but no "
        "double holds this one (§4: a number a double cannot hold makes the line bad); corrupt.",
        lambda: corrupt_with_line(
            f'{{"seq":SEQ,"type":"com.example/x","time":{T0},"data":{{"n":-1{"0" * 400}}}'
        ),
    ),
)


@case(
    "read",
    "An unknown member of the header's data whose value holds the byte 0xFF: line 1 is not a "
    "good line, so the file is not a session (§4, §7).",
)
def n_header_unknown_member_invalid_utf8() -> Built:
    line = header_line()
    bad = frame(line[: -len(b'},"crc":"xxxxxxxx"}\n')] + b',"com.example.tag":"\xff"}')
    return refused_header(bad)


@session(
    "read",
    "clean",
    "Envelope members at the ends of their ranges (§6): time 0 and 253402300799999 "
    "(9999-12-31T23:59:59.999Z), sources [0, 2^53-1], a surface retract of 2^53-1 ... 2^53-1, "
    "header created 253402300799999. Reading checks types and ranges, not meaning: clean.",
    header_extra={"created": 253402300799999},
)
def y_envelope_ranges_at_the_bounds(log: Log) -> None:
    top = 2**53 - 1
    log.time = 0
    log.event("com.example/first", {}, ignorable=True)
    log.time = 253402300799999
    log.event("com.example/late", {}, ignorable=True, sources=[0, top])
    log.time = 253402300799999  # (put() moves the clock on)
    log.event("surface/retract", {}, surface={"op": "retract", "start": top, "end": top})


def ranged(member: str, value: str) -> Built:
    """One line whose envelope member ``member`` is the JSON text ``value``; a checkpoint
    follows: corrupt."""

    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj[member] = "\x00VALUE\x00"
        return frame(dumps(obj)[:-1].replace(b'"\\u0000VALUE\\u0000"', value.encode()))

    return damaged(make)


table(
    "read",
    (
        "n_time_beyond_max",
        "time 253402300800000, one millisecond after 9999-12-31T23:59:59.999Z: outside the range "
        "of §6, so not a good line (like a wrong type); corrupt.",
        lambda: ranged("time", "253402300800000"),
    ),
    (
        "n_time_negative",
        "time -1: outside 0 ... 253402300799999 (§6); corrupt.",
        lambda: ranged("time", "-1"),
    ),
    (
        "n_time_beyond_int64",
        "time 18446744073709551616 (2^64): an integer, but outside the range of §6; corrupt.",
        lambda: ranged("time", "18446744073709551616"),
    ),
    (
        "n_sources_beyond_safe_range",
        "sources [9007199254740992]: a seq beyond 2^53-1 (§6); not a good line; corrupt.",
        lambda: ranged("sources", "[1,9007199254740992]"),
    ),
    (
        "n_sources_negative",
        "sources [-1]: a seq is not negative (§6); corrupt.",
        lambda: ranged("sources", "[-1]"),
    ),
    (
        "n_surface_start_beyond_safe_range",
        'surface {"op":"replace","start":9007199254740992,"end":1}: start is a seq, 0 ... 2^53-1 '
        "(§6); not a good line; corrupt.",
        lambda: ranged("surface", '{"op":"replace","start":9007199254740992,"end":1}'),
    ),
    (
        "n_surface_end_negative",
        'surface {"op":"retract","start":1,"end":-1}: end is a seq, never negative (§6); corrupt.',
        lambda: ranged("surface", '{"op":"retract","start":1,"end":-1}'),
    ),
)


@session(
    "read",
    "torn-tail",
    "A torn line, then a session/flush whose seq is 2^53 (CRC valid). A witness's seq is not "
    "compared with its position, but it is a seq (§6: 0 ... 2^53-1), so this line is no "
    "envelope and no witness: torn-tail, not corrupt.",
)
def y_torn_tail_then_witness_seq_out_of_range(log: Log) -> None:
    log.exchange("a", "b")
    line = frame_obj(log.envelope("turn/start", {}))
    log.bad(line[:-4] + (b"1" if line[-4:-3] == b"0" else b"0") + line[-3:])  # a wrong CRC
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    obj["seq"] = 2**53
    log.raw(frame_obj(obj), good=False)


def header_with(member_json: str) -> bytes:
    """A header line with the data member text ``member_json`` (e.g. ``"title":null``) added."""
    line = header_line()
    return frame(line[: -len(b'},"crc":"xxxxxxxx"}\n')] + b"," + member_json.encode() + b"}")


def _header_member_null(member: str) -> Builder:
    return lambda: refused_header(header_with(f'"{member}":null'))


table(
    "read",
    *(
        (
            f"n_header_{member}_null",
            f"data.{member} present as null: null is the wrong type for a member of the §7 table "
            "(only surface, sources and key of the envelope may be null, §6): not a session.",
            _header_member_null(member),
        )
        for member in ("title", "cwd", "agent", "meta", "parent", "minor")
    ),
)


@case(
    "read",
    'data.parent {"session":"s","seq":0,"path":null}: path, if present, is a string (§7); '
    "null is the wrong type: not a session.",
)
def n_header_parent_path_null() -> Built:
    parent = '"parent":{"session":"s","seq":0,"path":null}'
    return refused_header(header_with(parent))


@case(
    "read",
    "data.created 253402300800000, after 9999-12-31T23:59:59.999Z: outside the range of a "
    "time (§6, §7): not a session.",
)
def n_header_created_beyond_max() -> Built:
    line = header_line().replace(b'"created":%d' % T0, b'"created":253402300800000')
    return refused_header(frame(line[:-19]))
