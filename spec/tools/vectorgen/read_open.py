"""read/ (4 of 7): questions the spec leaves open (i_, the reference answer), and the
Unicode and number rules of §4 it decides (n_).
"""

from __future__ import annotations

from .common import (
    T0,
    Log,
    after_bad,
    corrupt_with_line,
    damaged,
    frame,
    header_line,
    refused_header,
)
from .expect import (
    Built,
)
from .registry import case, session, table

table(
    "read",
    (
        "i_header_missing_id",
        "A header without the REQUIRED id (§7). Reference: refused as not-jsonltape (a header "
        "that breaks §7 is not a good header). A reader that only checks seq, type and format "
        "would accept it.",
        lambda: refused_header(header_line(id=None)),
    ),
)


@case(
    "read",
    "Header version 1.0 (a JSON number with a fraction part). Reference: refused as "
    "unsupported-version (not an integer); readers whose JSON numbers are all doubles see 1.",
)
def i_header_version_float() -> Built:
    line = header_line().replace(b'"version":1,', b'"version":1.0,')
    return refused_header(frame(line[:-19]), "unsupported-version")


table(
    "read",
    (
        "i_header_version_missing",
        "A header without data.version. Reference: refused as unsupported-version.",
        lambda: refused_header(header_line(version=None), "unsupported-version"),
    ),
)


table(
    "read",
    (
        "i_seq_as_float",
        "seq written as 2.0. Reference: not an integer, so a bad line (corrupt here, a checkpoint "
        "follows); readers whose numbers are doubles accept it.",
        lambda: corrupt_with_line(f'{{"seq":SEQ.0,"type":"com.example/x","time":{T0},"data":{{}}'),
    ),
    (
        "n_lone_surrogate_escape",
        "A string holding an unpaired surrogate escape (\\ud800). Valid JSON grammar, but no "
        "Unicode text: the line is bad (§4, I-JSON); corrupt here.",
        lambda: corrupt_with_line(
            f'{{"seq":SEQ,"type":"com.example/x","time":{T0},"data":{{"s":"a\\ud800b"}}'
        ),
    ),
)


@session(
    "read",
    "corrupt",
    "A string holding bytes that are not UTF-8 (0xFF): the line is bad (§4; corrupt here). A "
    "decoder that substitutes U+FFFD would accept it, wrongly.",
)
def n_invalid_utf8_in_string(log: Log) -> None:
    log.turn_start()
    prefix = b'{"seq":%d,"type":"com.example/x","time":%d,"data":{"s":"a\xffb"}' % (log.seq, T0)
    log.bad(frame(prefix))
    log.seq += 1
    after_bad(log)


table(
    "read",
    (
        "n_number_out_of_range",
        "A number too large for a double (1e400) in data: the line is bad (§4; corrupt here). "
        "Some parsers read it as infinity, wrongly.",
        lambda: corrupt_with_line(
            f'{{"seq":SEQ,"type":"com.example/x","time":{T0},"data":{{"x":1e400}}'
        ),
    ),
)


@session(
    "read",
    "clean",
    "Arrays nested 200 deep in data (writers must not nest a line deeper than 128, §6). "
    "Reference: accepted; a reader whose parser stops earlier reports an error for the file "
    "and must not treat the line as damage.",
)
def i_nesting_deeper_than_128(log: Log) -> None:
    prefix = (
        f'{{"seq":1,"type":"com.example/deep","time":{log.time},'
        f'"data":{{"v":{"[" * 200}{"]" * 200}}},"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/deep")


@session(
    "read",
    "clean",
    "An integer beyond ±(2^53-1) in data (writers must not write one, §6). Reference: "
    "accepted with the exact value; readers with double-only numbers round it.",
)
def i_integer_beyond_safe_range(log: Log) -> None:
    prefix = (
        f'{{"seq":1,"type":"com.example/big","time":{log.time},'
        '"data":{"n":9007199254740993},"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/big")


@session(
    "read",
    "clean",
    'An object with a duplicate member name inside data ({"a":1,"a":2}). Reference: '
    "accepted, the last value wins.",
)
def i_duplicate_member(log: Log) -> None:
    prefix = (
        f'{{"seq":1,"type":"com.example/dup","time":{log.time},'
        '"data":{"a":1,"a":2},"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/dup")


@case(
    "read",
    "A line starting with a space before its {, CRC computed over every byte before the "
    "suffix (the space included): a line starts with { (§5), so it is bad; corrupt.",
)
def n_line_leading_space() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        return frame(b" " + line[: -len(b',"crc":"xxxxxxxx"}\n')])

    return damaged(make)


@session(
    "read",
    "open-turn",
    "An open turn and a last line session/flush with closed: true whose data.offset is wrong "
    "(not a valid checkpoint). Reference: open-turn (only a valid checkpoint can close).",
)
def i_closed_checkpoint_wrong_offset(log: Log) -> None:
    log.turn_start()
    log.user("hi")
    log.flush(closed=True, offset=3)


@session(
    "read",
    "clean",
    "A turn/end whose data.turn names another seq than the open turn. Reference: any "
    "turn/end closes the open turn (clean).",
)
def i_turn_end_for_another_turn(log: Log) -> None:
    log.turn_start()
    log.user("hi")
    log.event("turn/end", {"turn": 99, "reason": "completed"})
