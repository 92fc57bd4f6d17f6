"""read/ (1 of 7): good lines, and the files a reader accepts (y_): clean, open-turn,
torn-tail; with the wrong-typed optional envelope members (n_envelope_*) beside their null forms.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from .common import (
    Log,
    damaged,
    frame,
    frame_obj,
    spec_block,
    typical,
    words,
)
from .expect import (
    Built,
    expect_session,
)
from .registry import case, session, table


@session("read", "clean", "The smallest session: just the header line.")
def y_header_only(log: Log) -> None:
    pass


@case("read", "The complete example of the spec (§2), byte for byte.")
def y_spec_example() -> Built:
    data = spec_block("## 2. A complete example").encode()
    log = Log(empty=True)
    for line in data.splitlines(keepends=True):
        log.raw(line)
    return data, expect_session(log, "clean")


@session(
    "read",
    "clean",
    "A turn with a tool round trip, checkpoints, a clean close.",
    header_extra={"title": "fix the migration", "cwd": "/home/ada/app"},
)
def y_typical_closed(log: Log) -> None:
    typical(log)
    log.flush(closed=True)


@session("read", "clean", "Complete turns and no checkpoint at all: still clean.")
def y_no_checkpoint(log: Log) -> None:
    log.exchange("hello", "hi there")
    log.exchange("bye", "see you")


@session(
    "read",
    "clean",
    "Raw UTF-8 text: CJK, Arabic, combining marks, emoji (incl. ZWJ sequences), U+2028.",
    header_extra={"title": "移行テストの修正"},
)
def y_unicode_text(log: Log) -> None:
    log.turn_start()
    log.user("テストが失敗する理由は？ 为什么测试失败？ 왜 테스트가 실패하나요?")
    log.assistant("مرحبا — café (e\u0301) — 👩‍💻🏳️‍🌈 — line\u2028separator — 🇯🇵")
    log.turn_end()


@session(
    "read",
    "clean",
    'JSON escapes in strings (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\u00e9 \\u2028 and a '
    "surrogate pair): the CRC covers the escaped bytes as stored.",
)
def y_escaped_characters(log: Log) -> None:
    log.turn_start()
    content = (
        r"quote \" backslash \\ slash \/ controls \b\f\n\r\t nul \u0000 unit \u001f "
        r"e-acute \u00e9 raw é line-sep \u2028 emoji \ud83d\ude00 raw 😀 \u0041\u0062"
    )
    data = (
        '{"message":{"id":"u2","role":"user","parts":[{"type":"text","content":"'
        + content
        + '"}],"na\\u006de":"ad\\u0061"}}'
    )
    prefix = (
        f'{{"seq":{log.seq},"type":"user/message","time":{log.time},"data":{data},'
        '"surface":"append"'
    )
    log.put(frame(prefix.encode("utf-8")), "user/message")
    log.assistant("ok")
    log.turn_end()


@session(
    "read",
    "clean",
    "Insignificant JSON whitespace inside a line is allowed; only the crc suffix has a fixed "
    "shape. Readers must check the CRC on the stored bytes, never on a re-serialization.",
)
def y_whitespace_inside_line(log: Log) -> None:
    obj = log.envelope("turn/start", {"input": {"a": [1, 2, 3]}})
    prefix = json.dumps(obj, indent=None, separators=(", ", ": ")).encode()[:-1]
    log.put(frame(b"{ " + prefix[1:] + b" \t"), "turn/start")
    log.user("spaced")
    log.turn_end()


@session(
    "read",
    "clean",
    "60 turns with a checkpoint after each (about 300 lines): readers must handle many "
    "checkpoints and not stop at the first one.",
)
def y_many_checkpoints(log: Log) -> None:
    rng = random.Random(60)
    for i in range(60):
        log.exchange(f"question {i}: " + words(rng, 8), words(rng, 12 + i % 9))
        log.flush()
    log.flush(closed=True)


@session(
    "read",
    "clean",
    "One message of 75,000 bytes of CJK text, longer than common 64 KiB read buffers; "
    "multi-byte characters straddle every buffer boundary.",
)
def y_long_line(log: Log) -> None:
    rng = random.Random(75)
    log.turn_start()
    log.user("write a long poem")
    text = "".join(rng.choice("日本語中文한국어") for _ in range(25_000))
    log.assistant(text)
    log.turn_end()
    log.flush(closed=True)


@session(
    "read",
    "clean",
    "Unknown envelope members (namespaced and not) are ignored by readers and kept as they are.",
)
def y_unknown_envelope_members(log: Log) -> None:
    log.turn_start()
    log.user("hi", extra={"com.example.trace": {"span": "a1b2"}, "x-note": [1, "two", None]})
    log.assistant("hello", extra={"future": True})
    log.turn_end()


@session(
    "read",
    "clean",
    "Event types the reader does not know (ignorable or not, extension or reserved-looking) "
    "are passed through unchanged by read and verify.",
)
def y_unknown_types(log: Log) -> None:
    log.turn_start()
    log.user("hi")
    log.event("com.example/cost", {"usd": 0.0021}, ignorable=True)
    log.event("x-debug/note", {"text": "not model-visible"}, ignorable=True)
    log.event("com.example/memory-edit", {"op": "forget", "what": "the password"})
    log.assistant("hello")
    log.turn_end()


@session(
    "read",
    "clean",
    "A newer minor version (1.7) with a new header member, a new event type and a new part "
    "type: a 1.0 reader accepts it.",
    header_extra={"minor": 7, "com.example.origin": "importer/2"},
)
def y_minor_version_newer(log: Log) -> None:
    log.turn_start()
    log.event(
        "user/message",
        {
            "message": {
                "id": "u2",
                "role": "user",
                "parts": [
                    {"type": "text", "content": "see the attachment"},
                    {"type": "x-audio", "seconds": 3.5, "transcript": "hello"},
                ],
            }
        },
        surface="append",
    )
    log.event("x-future/annotation", {"label": "important"}, ignorable=True)
    log.assistant("noted")
    log.turn_end()


@session(
    "read",
    "clean",
    "All optional envelope members in use: surface replace and retract, sources, key, ignorable.",
)
def y_envelope_optional_members(log: Log) -> None:
    log.turn_start()
    u = log.user("first draft", key="import:1")
    a = log.assistant("answer one")
    v = log.event(
        "user/message",
        {"message": {"id": "u9", "role": "user", "parts": [{"type": "text", "content": "v2"}]}},
        surface={"op": "replace", "start": u, "end": u},
        sources=[u],
    )
    log.event(
        "surface/retract",
        {"reason": "wrong answer"},
        surface={"op": "retract", "start": a, "end": a},
        sources=[a, v],
    )
    log.event("assistant/chunk", {"delta": "an"}, ignorable=True)
    log.assistant("answer two")
    log.turn_end()


@session(
    "read",
    "clean",
    "surface, sources and key written as null: null means absent (§6), so the lines are good.",
)
def y_envelope_optional_members_null(log: Log) -> None:
    log.turn_start()
    log.event("com.example/a", {}, extra={"surface": None})
    log.event("com.example/b", {}, extra={"sources": None})
    log.event("com.example/c", {}, extra={"key": None})
    log.turn_end()
    log.flush(closed=True)


def retyped(member: str, value: Any) -> Callable[[Log, bytes], bytes]:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj[member] = value
        return frame_obj(obj)

    return make


table(
    "read",
    (
        "n_envelope_key_number",
        "key written as a number: optional members, when present, have the types of §6; corrupt.",
        lambda: damaged(retyped("key", 5)),
    ),
    (
        "n_envelope_sources_not_array",
        "sources written as a string: not a good line (§6, §10.2); corrupt.",
        lambda: damaged(retyped("sources", "none")),
    ),
    (
        "n_envelope_ignorable_string",
        'ignorable written as "yes": not a good line (§6, §10.2); corrupt.',
        lambda: damaged(retyped("ignorable", "yes")),
    ),
    (
        "n_envelope_surface_unknown_op",
        'surface {"op":"insert"}: not one of the three forms of §8.6; not a good line; corrupt.',
        lambda: damaged(retyped("surface", {"op": "insert", "at": 1})),
    ),
)


@session(
    "read",
    "clean",
    "Reading and verifying check framing, CRC and seq, and no data but the branch records' "
    "(§8.7.14, 1.2): core events with data that break §8 (turn/end without reason, a type "
    "that is not namespaced) are still good lines.",
)
def y_core_data_not_validated(log: Log) -> None:
    t = log.turn_start()
    log.event("hello", {"x": 1})
    log.event("turn/end", {"turn": t})


@session(
    "read",
    "clean",
    "JSON number forms inside data (exponents, fractions, negatives): data is data.",
)
def y_number_forms(log: Log) -> None:
    prefix = (
        f'{{"seq":1,"type":"com.example/numbers","time":{log.time},'
        '"data":{"a":1e2,"b":1E-3,"c":-0.5,"d":0.1,"e":123456789012,"f":-7,"g":2.5e+1},'
        '"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/numbers")


@session(
    "read",
    "clean",
    "A session/flush whose data.offset is not its own offset is not a valid checkpoint, but "
    "it is still a good line: the file is clean.",
)
def y_checkpoint_wrong_offset(log: Log) -> None:
    log.exchange("a", "b")
    log.flush(offset=7)
    log.exchange("c", "d")


@session(
    "read",
    "clean",
    "A closed session reopened for more turns: a closed checkpoint in the middle is fine.",
)
def y_reopened_after_close(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.flush(closed=True)
    log.exchange("c", "d")
    log.flush()
    log.flush(closed=True)


@session(
    "read",
    "open-turn",
    "A writer crashed inside a turn (after a checkpoint): every line is good, so all are "
    "served; the state is open-turn.",
)
def y_open_turn(log: Log) -> None:
    log.exchange("a", "b")
    log.turn_start()
    log.user("run the tests")
    log.flush()
    log.assistant(calls=[("c1", "Bash", {"cmd": "pytest"})])


@session(
    "read",
    "clean",
    "A turn left open by a writer that closed cleanly (last line: a checkpoint with "
    "closed: true) is open on purpose: clean.",
)
def y_open_turn_closed_on_purpose(log: Log) -> None:
    log.turn_start()
    log.user("one event per run")
    log.flush()
    log.flush(closed=True)


@session(
    "read",
    "open-turn",
    "A turn is open and the last line is a checkpoint without closed: a crash right after a "
    "flush; open-turn.",
)
def y_open_turn_last_line_checkpoint(log: Log) -> None:
    log.turn_start()
    log.user("hi")
    log.flush()


@session(
    "read",
    "torn-tail",
    "The last line stops in the middle (no newline): a torn tail; it is not served.",
)
def y_torn_tail_mid_line(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {}))[:25])


@session(
    "read",
    "torn-tail",
    "The last line is complete, CRC and all, but has no final newline: not committed (§4).",
)
def y_torn_tail_whole_line_no_newline(log: Log) -> None:
    log.exchange("a", "b")
    log.bad(frame_obj(log.envelope("turn/start", {}))[:-1])


@session(
    "read",
    "torn-tail",
    "The last line has a newline but a wrong CRC, and no checkpoint follows: a torn tail.",
)
def y_torn_tail_bad_crc(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    line = frame_obj(log.envelope("turn/start", {"input": "x"}))
    log.bad(line.replace(b'"x"', b'"y"'))


@session(
    "read",
    "torn-tail",
    "4096 zero bytes after the last good line (a crash before the data reached the disk).",
)
def y_torn_tail_zeros(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.bad(bytes(4096))


@session(
    "read",
    "torn-tail",
    "A torn line followed by complete lines with good CRCs and seqs but no valid checkpoint: "
    "everything from the torn line on is the crash tail and is not served.",
)
def y_torn_tail_then_good_looking_lines(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    torn = frame_obj(log.envelope("turn/start", {}))[:30] + b"\n"
    log.bad(torn)
    log.seq += 1
    log.put(frame_obj(log.envelope("turn/start", {})), good=False)
    log.put(frame_obj(log.envelope("com.example/x", {}, ignorable=True)), good=False)


@session(
    "read",
    "torn-tail",
    "A torn line, then a session/flush line whose CRC does not match: not a witness (a witness "
    "passes its checksum), so the file is torn-tail, not corrupt.",
)
def y_torn_tail_then_checkpoint_with_bad_crc(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {}))[:30] + b"\n")
    log.seq += 1
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    line = frame_obj(obj)
    log.put(line[:-11] + b"00000000" + line[-3:], good=False)


@session(
    "read",
    "torn-tail",
    "The \\n before the last checkpoint is lost, merging the checkpoint into the line before "
    "it: the one kind of damage §10.2 says cannot be told from a crash. No witness is left, so "
    "the file is torn-tail.",
)
def y_newline_lost_before_last_checkpoint(log: Log) -> None:
    log.exchange("a", "b")
    log.flush()
    log.exchange("c", "d")
    last = frame_obj(
        log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    )
    before = log.committed.pop()
    log.parts.pop()
    log.size -= len(before)
    log.lines -= 1
    log.bad(before[:-1] + last)
