"""read/ (2 of 7): damage a reader must refuse (n_): files that are not sessions, bad crc
suffixes, seq errors, bad lines before a witness (corrupt).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from .common import (
    Log,
    after_bad,
    crc_hex,
    damaged,
    dumps,
    frame,
    frame_obj,
    header_line,
    msg,
    with_body,
    words,
)
from .expect import (
    Built,
    expect_refused,
    expect_session,
)
from .registry import case, session, table

table(
    "read",
    (
        "n_empty_file",
        "An empty file is not a session.",
        lambda: (b"", expect_refused("not-jsonltape", repair=True)),
    ),
    (
        "n_only_newline",
        "A file holding one newline: line 1 is not a header.",
        lambda: (b"\n", expect_refused("not-jsonltape")),
    ),
    (
        "n_plain_text",
        "A text file that is not JSON at all.",
        lambda: (b"hello world\nthis is not a session\n", expect_refused("not-jsonltape")),
    ),
    (
        "n_bom",
        "A UTF-8 byte order mark before the header (an editor added it): the file is UTF-8 "
        "without BOM (§4) and line 1's checked bytes no longer match its CRC.",
        lambda: (b"\xef\xbb\xbf" + with_body(header_line()), expect_refused("not-jsonltape")),
    ),
)


@case(
    "read",
    "Every line ends in \\r\\n (CRLF conversion): the 18 bytes before \\n are not the crc "
    "suffix, so line 1 is bad.",
)
def n_crlf_line_endings() -> Built:
    data = with_body(header_line()).replace(b"\n", b"\r\n")
    return data, expect_refused("not-jsonltape")


@session(
    "read",
    "corrupt",
    "One line in the middle ends in \\r\\n and a valid checkpoint follows: corrupt.",
)
def n_crlf_one_line(log: Log) -> None:
    log.turn_start()
    log.bad(frame_obj(log.envelope("com.example/x", {}, ignorable=True))[:-1] + b"\r\n")
    log.seq += 1
    after_bad(log)


@case(
    "read", "The CRC is right but written in uppercase hex: a bad line (§5); a checkpoint follows."
)
def n_crc_uppercase() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        digits = line[-11:-3]
        assert digits != digits.upper(), "pick content whose crc has a letter"
        return line[:-11] + digits.upper() + line[-3:]

    return damaged(make)


table(
    "read",
    (
        "n_crc_missing",
        "A line without the crc member; a checkpoint follows.",
        lambda: damaged(lambda log, line: line[:-19] + b"}\n"),
    ),
)


@case("read", "The crc member (with the right value) is not the last member; a checkpoint follows.")
def n_crc_not_last() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        crc = line[-11:-3]
        body = line[1:-19]
        return b'{"crc":"' + crc + b'",' + body + b"}\n"

    return damaged(make)


table(
    "read",
    (
        "n_crc_mismatch",
        "One byte of data changed after writing; a checkpoint follows.",
        lambda: damaged(lambda log, line: line.replace(b"damaged?", b"damaged!")),
    ),
)


@case("read", "The crc has 7 hex digits instead of 8; a checkpoint follows.")
def n_crc_seven_digits() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        prefix = line[:-19]
        return prefix + b',"crc":"' + crc_hex(prefix)[1:].encode() + b'"}\n'

    return damaged(make)


@case("read", 'The crc member written with spaces (`, "crc": "…"}`): the suffix has a fixed shape.')
def n_crc_suffix_spaced() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        prefix = line[:-19]
        return prefix + b', "crc": "' + crc_hex(prefix).encode() + b'"}\n'

    return damaged(make)


@session(
    "read",
    "corrupt",
    "A writer skipped a seq (…, 4, 6, 7, …) and a checkpoint follows: corrupt. After the gap "
    "every seq differs from its position, the checkpoint's included: a witness's seq is not "
    "checked (§10.2).",
)
def n_seq_gap(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.turn_start()
    log.seq += 1  # the gap
    log.bad(frame_obj(log.envelope("user/message", msg("user", "u", "x"), surface="append")))
    log.seq += 1
    log.put(frame_obj(log.envelope("com.example/after", {}, ignorable=True)), good=False)
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)


@session(
    "read",
    "corrupt",
    "A writer wrote the same seq twice (…, 5, 5, 6, …) and a checkpoint follows: corrupt (the "
    "witness's seq is one less than its position, which does not matter).",
)
def n_seq_duplicate(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    s = log.turn_start()
    log.bad(frame_obj(log.envelope("user/message", msg("user", "u", "x"), surface="append", seq=s)))
    log.put(frame_obj(log.envelope("com.example/after", {}, ignorable=True)), good=False)
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)


@session(
    "read",
    "corrupt",
    "Two adjacent lines in swapped order (seq 7 before 6) before a valid checkpoint: corrupt.",
)
def n_seq_swap(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.turn_start()
    s = log.seq
    first = frame_obj(log.envelope("user/message", msg("user", "u", "x"), surface="append"))
    log.seq += 1
    second = frame_obj(log.envelope("com.example/y", {}, ignorable=True))
    log.seq -= 1
    log.bad(second)
    log.raw(first, good=False)
    log.seq = s + 2
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)


table(
    "read",
    (
        "n_line_not_object",
        "A line that is a JSON array, not an object, before a valid checkpoint: corrupt.",
        lambda: damaged(lambda log, line: b'[1,2,3,"crc"]\n'),
    ),
)


@case("read", "A line whose CRC matches but whose JSON is malformed (a missing comma): corrupt.")
def n_line_not_json() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        return frame(line[:-19].replace(b',"type"', b' "type"', 1))

    return damaged(make)


@case("read", "A framed JSON object without the required time member: not a good line; corrupt.")
def n_envelope_missing_time() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["time"], obj["crc"]
        return frame_obj(obj)

    return damaged(make)


@case("read", "data is an array instead of an object: not a good line; corrupt.")
def n_envelope_data_not_object() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj["data"] = ["x"]
        return frame_obj(obj)

    return damaged(make)


@case("read", 'seq written as a string ("7"): not a good line; corrupt.')
def n_envelope_seq_string() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj["seq"] = str(obj["seq"])
        return frame_obj(obj)

    return damaged(make)


@case("read", "A framed object without type: not a good line; corrupt.")
def n_envelope_type_missing() -> Built:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"], obj["type"]
        return frame_obj(obj)

    return damaged(make)


table(
    "read",
    (
        "n_blank_line",
        "An empty line in the middle (writers never write one) before a valid checkpoint: corrupt.",
        lambda: damaged(lambda log, line: b"\n"),
    ),
)


@session(
    "read",
    "corrupt",
    "One flipped byte in line 5 of a file with 40 later checkpoints: corrupt at line 5. "
    "Verification must check every line, not only the tail.",
)
def n_damage_early_in_long_file(log: Log) -> None:
    rng = random.Random(40)
    log.turn_start()
    log.user("start")
    log.flush()
    good = frame_obj(log.envelope("user/message", msg("user", "u", "flip me"), surface="append"))
    log.bad(good.replace(b"flip me", b"flip mE"))
    log.seq += 1
    for i in range(40):
        log.put(
            frame_obj(
                log.envelope("com.example/tick", {"i": i, "w": words(rng, 4)}, ignorable=True)
            ),
            good=False,
        )
        obj = log.envelope(
            "session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True
        )
        log.put(frame_obj(obj), good=False)


def edited(edit: Callable[[list[bytes]], int]) -> Built:
    """A clean two-turn file with checkpoints, edited by ``edit(lines)`` which returns the
    index of the first line the edit made bad."""
    full = Log()
    full.exchange("a", "b")
    full.flush()
    full.exchange("c", "d")
    full.flush()
    lines = full.data().splitlines(keepends=True)
    first_bad = edit(lines)
    log = Log(empty=True)
    for i, line in enumerate(lines):
        log.raw(line, good=i < first_bad)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "A whole line deleted before a checkpoint (a bad edit): later seqs and checkpoint offsets "
    "shift, but the checkpoint lines still pass their checksums, so they are witnesses "
    "(§10.2): corrupt.",
)
def n_line_deleted() -> Built:
    def edit(lines: list[bytes]) -> int:
        del lines[2]
        return 2

    return edited(edit)


@case("read", "One line appears twice (a bad merge), before a checkpoint: corrupt at the copy.")
def n_line_duplicated() -> Built:
    def edit(lines: list[bytes]) -> int:
        lines.insert(3, lines[2])
        return 3

    return edited(edit)


@session(
    "read",
    "corrupt",
    "A bad line, then a good session/flush line whose data.offset is not its own offset. It "
    "is not a valid checkpoint, but it is a witness (only its framing, checksum, envelope and "
    "type count): corrupt.",
)
def n_witness_with_wrong_offset(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.bad(b'{"seq":' + str(log.seq).encode() + b',"type":"turn/st\n')
    log.seq += 1
    obj = log.envelope(
        "session/flush", {"offset": log.size - 1, "seq": log.seq - 1}, ignorable=True
    )
    log.put(frame_obj(obj), good=False)


@session(
    "read",
    "corrupt",
    'A bad line, then a checkpoint whose type is written with a JSON escape ("session\\/flush"). '
    "The type is the decoded string, so it is a witness: corrupt. A reader that looks for the "
    "bytes session/flush misses it.",
)
def n_witness_type_escaped(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {"input": "q"})).replace(b'"q"', b'"Q"'))
    log.seq += 1
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    line = frame(dumps(obj)[:-1].replace(b'"session/flush"', b'"session\\/flush"'))
    log.put(line, good=False)
