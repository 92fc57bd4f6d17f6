#!/usr/bin/env python3
"""Generate the conformance vectors in spec/vectors/ from the spec's rules, byte for byte.

Usage::

    python spec/tools/gen_vectors.py            # rewrite spec/vectors/
    python spec/tools/gen_vectors.py --out DIR  # write the tree somewhere else
    python spec/tools/gen_vectors.py --check    # exit 1 if spec/vectors/ differs from a rebuild

Only the standard library is used, and jsonltape is *not* imported: every input is built line by
line here (CRC-32 from zlib, JSON from the json module), and every expected result is stated by
the case that builds it (the damaged line, the state, the closers), so the vectors are a second
reading of the spec, not a recording of the library's behaviour. Randomness comes from
``random.Random`` with a fixed seed per case, and nothing depends on the clock, the machine or
dict ordering, so a rebuild is identical to the checked-in tree.

Layout: ``<dir>/<name>.<ext>`` is the input (``.jsonl`` for sessions, ``.bin``/``.txt`` for the
checksum command) and ``<dir>/<name>.<cmd>.json`` the expected answer to ``cmd`` (see
spec/conformance.md). ``spec/vectors/README.md`` lists every case with what it checks.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import random
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SPEC_DIR = Path(__file__).resolve().parent.parent
SPEC_FILE = SPEC_DIR / "jsonltape-v1.md"
VECTORS = SPEC_DIR / "vectors"
CATEGORIES = ("checksum", "read", "repair", "fold", "compat")

T0 = 1764460800000  # 2025-11-30T00:00:00Z, the time of the spec's example
SID = "01KB7X3M0000000000000000AB"

OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. "
    "Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the "
    "operation is read-only or idempotent; if it may have side effects, first verify external "
    "state or ask the user. Do not retry blindly."
)
NOT_STARTED_TEXT = (
    "The tool call was interrupted before it was recorded as started. "
    "Retry it if it is still needed."
)

# ----------------------------------------------------------------------------------------------
# Building session files


def crc_hex(data: bytes) -> str:
    return f"{zlib.crc32(data):08x}"


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8, non-ASCII kept as is (what a typical writer emits)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def frame(prefix: bytes) -> bytes:
    """``prefix`` is an object text without its closing brace; add the crc suffix and ``\\n``."""
    return prefix + b',"crc":"' + crc_hex(prefix).encode() + b'"}\n'


def frame_obj(obj: dict[str, Any]) -> bytes:
    return frame(dumps(obj)[:-1])


class Log:
    """A session file under construction: lines, offsets, seqs, the open turn and step.

    Good lines are added with :meth:`event` and friends; damage with :meth:`bad`, which records
    the first bad line B (its 1-based line number and byte offset). ``committed`` is the list of
    good lines before B: what a reader serves.
    """

    def __init__(
        self,
        *,
        header: dict[str, Any] | None = None,
        header_extra: dict[str, Any] | None = None,
        t0: int = T0,
        empty: bool = False,
    ) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.lines = 0  # complete lines so far (the position of the next line)
        self.seq = 0
        self.time = t0
        self.last_time = t0  # time of the last event line
        self.turn: tuple[int, int] | None = None  # (seq, offset) of the open turn/start
        self.step: int | None = None
        self.bad_line: int | None = None
        self.bad_offset: int | None = None
        self.committed: list[bytes] = []
        if empty:
            return
        if header is None:
            header = {"format": "jsonltape", "version": 1, "minor": 0, "id": SID, "created": t0}
        if header_extra:
            header = {**header, **header_extra}
        self.event("session/start", header)

    # -- raw bytes --------------------------------------------------------------------------

    def raw(self, data: bytes, *, good: bool = True) -> int:
        """Append bytes; return their offset. Lines before the first bad one are committed."""
        off = self.size
        if not good and self.bad_offset is None:
            self.bad_line, self.bad_offset = self.lines + 1, off
        elif good and self.bad_offset is None:
            self.committed.append(data)
        self.parts.append(data)
        self.size += len(data)
        self.lines += data.count(b"\n")
        return off

    def bad(self, data: bytes) -> int:
        """Append damage (one or more lines, or a fragment); the first one becomes B."""
        return self.raw(data, good=False)

    def data(self) -> bytes:
        return b"".join(self.parts)

    # -- events -----------------------------------------------------------------------------

    def envelope(
        self,
        type_: str,
        data: dict[str, Any] | None = None,
        *,
        surface: Any = None,
        sources: list[int] | None = None,
        key: str | None = None,
        ignorable: bool = False,
        extra: dict[str, Any] | None = None,
        seq: int | None = None,
    ) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "seq": self.seq if seq is None else seq,
            "type": type_,
            "time": self.time,
            "data": {} if data is None else data,
        }
        if surface is not None:
            obj["surface"] = surface
        if sources is not None:
            obj["sources"] = sources
        if key is not None:
            obj["key"] = key
        if ignorable:
            obj["ignorable"] = True
        if extra:
            obj.update(extra)
        return obj

    def event(self, type_: str, data: dict[str, Any] | None = None, **kw: Any) -> int:
        """Append a good event line; return its seq."""
        obj = self.envelope(type_, data, **kw)
        return self.put(frame_obj(obj), type_)

    def put(self, line: bytes, type_: str = "x/raw", *, good: bool = True) -> int:
        """Append a framed line as the next event (advancing seq and time); return its seq."""
        seq = self.seq
        off = self.raw(line, good=good)
        if type_ == "turn/start":
            self.turn, self.step = (seq, off), None
        elif type_ == "turn/end":
            self.turn, self.step = None, None
        elif type_ == "step/start":
            self.step = seq
        elif type_ == "step/end":
            self.step = None
        self.seq += 1
        self.last_time = self.time
        self.time += 1 + (seq * 7919) % 13
        return seq

    def flush(self, *, closed: bool = False, turn: bool = True, offset: int | None = None) -> int:
        """A checkpoint: its own offset, the last seq before it, the open turn, ``closed``."""
        data: dict[str, Any] = {"offset": self.size if offset is None else offset}
        data["seq"] = self.seq - 1
        if turn and self.turn is not None:
            data["turn"] = {"seq": self.turn[0], "offset": self.turn[1]}
        if closed:
            data["closed"] = True
        return self.event("session/flush", data, ignorable=True)

    # -- the core vocabulary ----------------------------------------------------------------

    def turn_start(self, **data: Any) -> int:
        return self.event("turn/start", data)

    def turn_end(self, reason: str = "completed") -> int:
        assert self.turn is not None
        return self.event("turn/end", {"turn": self.turn[0], "reason": reason})

    def step_start(self) -> int:
        assert self.turn is not None
        return self.event("step/start", {"turn": self.turn[0]})

    def step_end(self) -> int:
        assert self.step is not None and self.turn is not None
        return self.event("step/end", {"step": self.step, "turn": self.turn[0]})

    def user(self, text: str, **kw: Any) -> int:
        msg = {"id": f"u{self.seq}", "role": "user", "parts": [{"type": "text", "content": text}]}
        return self.event("user/message", {"message": msg}, surface="append", **kw)

    def assistant(
        self,
        text: str | None = None,
        *,
        calls: tuple[tuple[str, str, Any], ...] | list[tuple[str, str, Any]] = (),
        **kw: Any,
    ) -> int:
        parts: list[dict[str, Any]] = []
        if text is not None:
            parts.append({"type": "text", "content": text})
        for call_id, name, args in calls:
            parts.append({"type": "tool_call", "id": call_id, "name": name, "arguments": args})
        data: dict[str, Any] = {
            "message": {"id": f"a{self.seq}", "role": "assistant", "parts": parts},
            "model": "gpt-5",
        }
        if self.turn is not None:
            data["turn"] = self.turn[0]
        if self.step is not None:
            data["step"] = self.step
        return self.event("assistant/message", data, surface="append", **kw)

    def tool_call(self, call_id: str, name: str, args: Any) -> int:
        data: dict[str, Any] = {"call_id": call_id, "name": name, "arguments": args}
        if self.turn is not None:
            data["turn"] = self.turn[0]
        if self.step is not None:
            data["step"] = self.step
        return self.event("tool/call", data)

    def tool_result(self, call_id: str, response: Any, **kw: Any) -> int:
        msg = {
            "id": f"r{self.seq}",
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": call_id, "response": response}],
        }
        return self.event(
            "tool/result", {"call_id": call_id, "message": msg}, surface="append", **kw
        )

    def exchange(self, question: str, answer: str) -> None:
        """A whole completed turn: user, assistant, turn/end."""
        self.turn_start()
        self.user(question)
        self.assistant(answer)
        self.turn_end()


# ----------------------------------------------------------------------------------------------
# Expected results


def read_ok(log: Log) -> dict[str, Any]:
    return {"ok": True, "events": [json.loads(line) for line in log.committed]}


def read_err(error: str, line: int | None = None, offset: int | None = None) -> dict[str, Any]:
    return {"ok": False, "error": error, "line": line, "offset": offset}


def verify_of(log: Log, state: str) -> dict[str, Any]:
    return {
        "state": state,
        "events": len(log.committed),
        "line": log.bad_line,
        "offset": log.bad_offset,
    }


def expect_session(log: Log, state: str) -> dict[str, Any]:
    """read + verify expectations of a file the spec accepts (clean/open-turn/torn-tail/corrupt)."""
    if state == "corrupt":
        assert log.bad_line is not None
        read = read_err("corrupt", log.bad_line, log.bad_offset)
    else:
        if state == "torn-tail":
            assert log.bad_offset is not None, "a torn tail needs a bad line"
        else:
            assert log.bad_offset is None, f"{state} file with a bad line"
        read = read_ok(log)
    return {"read": read, "verify": verify_of(log, state)}


def expect_refused(error: str, *, repair: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"read": read_err(error), "verify": {"error": error}}
    if repair:
        out["repair"] = {"error": error}
    return out


def closer_result(call_id: str, recorded: int | None) -> dict[str, Any]:
    text = OUTCOME_UNKNOWN_TEXT if recorded is not None else NOT_STARTED_TEXT
    code = "TOOL_OUTCOME_UNKNOWN" if recorded is not None else "TOOL_NOT_STARTED"
    out: dict[str, Any] = {
        "type": "tool/result",
        "data": {
            "call_id": call_id,
            "message": {
                "id": f"interrupted-{call_id}",
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_call_response",
                        "id": call_id,
                        "response": text,
                        "is_error": True,
                    }
                ],
            },
            "error": {"code": code, "message": text},
            "synthetic": True,
        },
        "surface": "append",
    }
    if recorded is not None:
        out["sources"] = [recorded]
    return out


def closer_step(step: int, turn: int) -> dict[str, Any]:
    return {"type": "step/end", "data": {"step": step, "turn": turn, "synthetic": True}}


def closer_turn(turn: int) -> dict[str, Any]:
    return {
        "type": "turn/end",
        "data": {"turn": turn, "reason": "interrupted", "synthetic": True},
    }


def expect_repair(log: Log, state: str, closers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "repair": {
            "state": state,
            "cut": log.bad_offset,
            "kept": len(log.committed),
            "closers": closers,
        }
    }


# ----------------------------------------------------------------------------------------------
# The case registry


@dataclass
class Case:
    category: str
    name: str
    doc: str
    data: bytes
    ext: str
    expect: dict[str, Any] = field(default_factory=dict)


Builder = Callable[[], tuple[bytes, dict[str, Any]] | tuple[bytes, dict[str, Any], str]]
_BUILDERS: list[tuple[str, str, str, Builder]] = []


def case(category: str, name: str, doc: str) -> Callable[[Builder], Builder]:
    """Register a builder returning ``(input, {cmd: expected})`` (and optionally an extension)."""

    def deco(fn: Builder) -> Builder:
        _BUILDERS.append((category, name, doc, fn))
        return fn

    return deco


VOCABULARY = (
    "the a migration test fails because column email has no default value we add it then run "
    "again file path read write tool call result model user agent session"
)


def words(rng: random.Random, n: int) -> str:
    vocab = VOCABULARY.split(" ")
    return " ".join(rng.choice(vocab) for _ in range(n))


def spec_block(heading: str, nth: int = 0) -> str:
    """The ``nth`` fenced code block after ``heading`` in the spec text."""
    text = SPEC_FILE.read_text(encoding="utf-8")
    start = text.index(heading)
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text[start:], flags=re.S | re.M)
    return str(blocks[nth])


# ----------------------------------------------------------------------------------------------
# checksum/


def _checksum(data: bytes, ext: str = "bin") -> tuple[bytes, dict[str, Any], str]:
    return data, {"checksum": {"crc": crc_hex(data)}}, ext


@case("checksum", "check_value", 'The CRC-32 check value: the nine ASCII bytes "123456789".')
def _c1() -> Any:
    data, expect, ext = _checksum(b"123456789", "txt")
    assert expect["checksum"]["crc"] == "cbf43926"
    return data, expect, ext


@case("checksum", "empty", "No bytes at all: CRC 00000000.")
def _c2() -> Any:
    return _checksum(b"")


@case("checksum", "one_zero_byte", "A single 0x00 byte.")
def _c3() -> Any:
    return _checksum(b"\x00")


@case("checksum", "four_ff_bytes", "Four 0xFF bytes: CRC ffffffff (all-ones output).")
def _c4() -> Any:
    return _checksum(b"\xff" * 4)


@case("checksum", "all_byte_values", "The 256 byte values 0x00..0xFF in order.")
def _c5() -> Any:
    return _checksum(bytes(range(256)))


@case("checksum", "leading_zeros", "Text whose CRC starts with zeros: the hex is zero-padded.")
def _c6() -> Any:
    i = 0
    while zlib.crc32(f"jsonltape {i}".encode()) >= 0x00100000:
        i += 1
    return _checksum(f"jsonltape {i}".encode(), "txt")


@case("checksum", "newlines_crlf", "CR and LF bytes: input is bytes, never newline-translated.")
def _c7() -> Any:
    return _checksum(b"a\r\nb\nc\rd\r\n")


@case("checksum", "invalid_utf8", "Bytes that are not UTF-8: the CRC is over bytes, not text.")
def _c8() -> Any:
    return _checksum(b"\xc3\x28\xa0\xa1\xff\xfe\xed\xa0\x80")


@case("checksum", "utf8_cjk", "UTF-8 text with CJK, accents and an emoji (multi-byte sequences).")
def _c9() -> Any:
    return _checksum("日本語のテキスト, café, 😀\n".encode(), "txt")


@case(
    "checksum",
    "spec_worked_example",
    "The checked bytes of the worked example in the spec (§5): CRC 6ddf222e.",
)
def _c10() -> Any:
    line = spec_block("Worked example:").strip().encode()
    data = line[: -len(',"crc":"6ddf222e"}')]
    assert crc_hex(data) == "6ddf222e", crc_hex(data)
    return _checksum(data, "txt")


@case("checksum", "random_4096", "4096 pseudo-random bytes (seed 4096).")
def _c11() -> Any:
    return _checksum(random.Random(4096).randbytes(4096))


@case("checksum", "zeros_4096", "4096 zero bytes (what a crash can leave at the end of a file).")
def _c12() -> Any:
    return _checksum(bytes(4096))


# ----------------------------------------------------------------------------------------------
# read/: y_ must accept


def typical(log: Log) -> None:
    """One turn with a tool round trip and a checkpoint, like a real agent writes."""
    log.event(
        "request/header",
        {"model": "gpt-5", "provider": "openai", "system": "You are a careful coding agent."},
    )
    log.turn_start()
    log.user("Why does test_migration fail?")
    log.step_start()
    log.assistant(calls=[("call-1", "Read", {"path": "migrations/0042.sql"})])
    log.tool_call("call-1", "Read", {"path": "migrations/0042.sql"})
    log.flush()
    log.tool_result("call-1", "ALTER TABLE users ADD COLUMN email TEXT NOT NULL;")
    log.step_end()
    log.assistant("The new NOT NULL column has no default.")
    log.turn_end()
    log.flush()


@case("read", "y_header_only", "The smallest session: just the header line.")
def _y1() -> Any:
    log = Log()
    return log.data(), expect_session(log, "clean")


@case("read", "y_spec_example", "The complete example of the spec (§2), byte for byte.")
def _y2() -> Any:
    data = spec_block("## 2. A complete example").encode()
    log = Log(empty=True)
    for line in data.splitlines(keepends=True):
        log.raw(line)
    return data, expect_session(log, "clean")


@case("read", "y_typical_closed", "A turn with a tool round trip, checkpoints, a clean close.")
def _y3() -> Any:
    log = Log(header_extra={"title": "fix the migration", "cwd": "/home/ada/app"})
    typical(log)
    log.flush(closed=True)
    return log.data(), expect_session(log, "clean")


@case("read", "y_no_checkpoint", "Complete turns and no checkpoint at all: still clean.")
def _y4() -> Any:
    log = Log()
    log.exchange("hello", "hi there")
    log.exchange("bye", "see you")
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_unicode_text",
    "Raw UTF-8 text: CJK, Arabic, combining marks, emoji (incl. ZWJ sequences), U+2028.",
)
def _y5() -> Any:
    log = Log(header_extra={"title": "移行テストの修正"})
    log.turn_start()
    log.user("テストが失敗する理由は？ 为什么测试失败？ 왜 테스트가 실패하나요?")
    log.assistant("مرحبا — café (e\u0301) — 👩‍💻🏳️‍🌈 — line\u2028separator — 🇯🇵")
    log.turn_end()
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_escaped_characters",
    'JSON escapes in strings (\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\u00e9 \\u2028 and a '
    "surrogate pair): the CRC covers the escaped bytes as stored.",
)
def _y6() -> Any:
    log = Log()
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
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_whitespace_inside_line",
    "Insignificant JSON whitespace inside a line is allowed; only the crc suffix has a fixed "
    "shape. Readers must check the CRC on the stored bytes, never on a re-serialization.",
)
def _y7() -> Any:
    log = Log()
    obj = log.envelope("turn/start", {"input": {"a": [1, 2, 3]}})
    prefix = json.dumps(obj, indent=None, separators=(", ", ": ")).encode()[:-1]
    log.put(frame(b"{ " + prefix[1:] + b" \t"), "turn/start")
    log.user("spaced")
    log.turn_end()
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_many_checkpoints",
    "60 turns with a checkpoint after each (about 300 lines): readers must handle many "
    "checkpoints and not stop at the first one.",
)
def _y8() -> Any:
    rng = random.Random(60)
    log = Log()
    for i in range(60):
        log.exchange(f"question {i}: " + words(rng, 8), words(rng, 12 + i % 9))
        log.flush()
    log.flush(closed=True)
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_long_line",
    "One message of 75,000 bytes of CJK text, longer than common 64 KiB read buffers; "
    "multi-byte characters straddle every buffer boundary.",
)
def _y9() -> Any:
    rng = random.Random(75)
    log = Log()
    log.turn_start()
    log.user("write a long poem")
    text = "".join(rng.choice("日本語中文한국어") for _ in range(25_000))
    log.assistant(text)
    log.turn_end()
    log.flush(closed=True)
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_unknown_envelope_members",
    "Unknown envelope members (namespaced and not) are ignored by readers and kept as they are.",
)
def _y10() -> Any:
    log = Log()
    log.turn_start()
    log.user("hi", extra={"com.example.trace": {"span": "a1b2"}, "x-note": [1, "two", None]})
    log.assistant("hello", extra={"future": True})
    log.turn_end()
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_unknown_types",
    "Event types the reader does not know (ignorable or not, extension or reserved-looking) "
    "are passed through unchanged by read and verify.",
)
def _y11() -> Any:
    log = Log()
    log.turn_start()
    log.user("hi")
    log.event("com.example/cost", {"usd": 0.0021}, ignorable=True)
    log.event("x-debug/note", {"text": "not model-visible"}, ignorable=True)
    log.event("com.example/memory-edit", {"op": "forget", "what": "the password"})
    log.assistant("hello")
    log.turn_end()
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_minor_version_newer",
    "A newer minor version (1.7) with a new header member, a new event type and a new part "
    "type: a 1.0 reader accepts it.",
)
def _y12() -> Any:
    log = Log(header_extra={"minor": 7, "com.example.origin": "importer/2"})
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
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_envelope_optional_members",
    "All optional envelope members in use: surface replace and retract, sources, key, ignorable.",
)
def _y13() -> Any:
    log = Log()
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
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_envelope_optional_members_null",
    "surface, sources and key written as null: null means absent (§6), so the lines are good.",
)
def _y14() -> Any:
    log = Log()
    log.turn_start()
    log.event("com.example/a", {}, extra={"surface": None})
    log.event("com.example/b", {}, extra={"sources": None})
    log.event("com.example/c", {}, extra={"key": None})
    log.turn_end()
    log.flush(closed=True)
    return log.data(), expect_session(log, "clean")


def _retyped(member: str, value: Any) -> Callable[[Log, bytes], bytes]:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj[member] = value
        return frame_obj(obj)

    return make


@case(
    "read",
    "n_envelope_key_number",
    "key written as a number: optional members, when present, have the types of §6; corrupt.",
)
def _n14a() -> Any:
    return _damaged(_retyped("key", 5))


@case(
    "read",
    "n_envelope_sources_not_array",
    "sources written as a string: not a good line (§6, §10.2); corrupt.",
)
def _n14b() -> Any:
    return _damaged(_retyped("sources", "none"))


@case(
    "read",
    "n_envelope_ignorable_string",
    'ignorable written as "yes": not a good line (§6, §10.2); corrupt.',
)
def _n14c() -> Any:
    return _damaged(_retyped("ignorable", "yes"))


@case(
    "read",
    "n_envelope_surface_unknown_op",
    'surface {"op":"insert"}: not one of the three forms of §8.6; not a good line; corrupt.',
)
def _n14d() -> Any:
    return _damaged(_retyped("surface", {"op": "insert", "at": 1}))


@case(
    "read",
    "y_core_data_not_validated",
    "Reading and verifying check framing, CRC and seq only: core events with data that break "
    "§8 (turn/end without reason, a type that is not namespaced) are still good lines.",
)
def _y15() -> Any:
    log = Log()
    t = log.turn_start()
    log.event("hello", {"x": 1})
    log.event("turn/end", {"turn": t})
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_number_forms",
    "JSON number forms inside data (exponents, fractions, negatives): data is data.",
)
def _y16() -> Any:
    log = Log()
    prefix = (
        f'{{"seq":1,"type":"com.example/numbers","time":{log.time},'
        '"data":{"a":1e2,"b":1E-3,"c":-0.5,"d":0.1,"e":123456789012,"f":-7,"g":2.5e+1},'
        '"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/numbers")
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_checkpoint_wrong_offset",
    "A session/flush whose data.offset is not its own offset is not a valid checkpoint, but "
    "it is still a good line: the file is clean.",
)
def _y17() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush(offset=7)
    log.exchange("c", "d")
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_reopened_after_close",
    "A closed session reopened for more turns: a closed checkpoint in the middle is fine.",
)
def _y18() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.flush(closed=True)
    log.exchange("c", "d")
    log.flush()
    log.flush(closed=True)
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_open_turn",
    "A writer crashed inside a turn (after a checkpoint): every line is good, so all are "
    "served; the state is open-turn.",
)
def _y19() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.turn_start()
    log.user("run the tests")
    log.flush()
    log.assistant(calls=[("c1", "Bash", {"cmd": "pytest"})])
    return log.data(), expect_session(log, "open-turn")


@case(
    "read",
    "y_open_turn_closed_on_purpose",
    "A turn left open by a writer that closed cleanly (last line: a checkpoint with "
    "closed: true) is open on purpose: clean.",
)
def _y20() -> Any:
    log = Log()
    log.turn_start()
    log.user("one event per run")
    log.flush()
    log.flush(closed=True)
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_open_turn_last_line_checkpoint",
    "A turn is open and the last line is a checkpoint without closed: a crash right after a "
    "flush; open-turn.",
)
def _y21() -> Any:
    log = Log()
    log.turn_start()
    log.user("hi")
    log.flush()
    return log.data(), expect_session(log, "open-turn")


def _torn(log: Log, frag: bytes) -> Any:
    log.bad(frag)
    return log.data(), expect_session(log, "torn-tail")


@case(
    "read",
    "y_torn_tail_mid_line",
    "The last line stops in the middle (no newline): a torn tail; it is not served.",
)
def _y22() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    line = frame_obj(log.envelope("turn/start", {}))
    return _torn(log, line[:25])


@case(
    "read",
    "y_torn_tail_whole_line_no_newline",
    "The last line is complete, CRC and all, but has no final newline: not committed (§4).",
)
def _y23() -> Any:
    log = Log()
    log.exchange("a", "b")
    line = frame_obj(log.envelope("turn/start", {}))
    return _torn(log, line[:-1])


@case(
    "read",
    "y_torn_tail_bad_crc",
    "The last line has a newline but a wrong CRC, and no checkpoint follows: a torn tail.",
)
def _y24() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    line = frame_obj(log.envelope("turn/start", {"input": "x"}))
    return _torn(log, line.replace(b'"x"', b'"y"'))


@case(
    "read",
    "y_torn_tail_zeros",
    "4096 zero bytes after the last good line (a crash before the data reached the disk).",
)
def _y25() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    return _torn(log, bytes(4096))


@case(
    "read",
    "y_torn_tail_then_good_looking_lines",
    "A torn line followed by complete lines with good CRCs and seqs but no valid checkpoint: "
    "everything from the torn line on is the crash tail and is not served.",
)
def _y26() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    torn = frame_obj(log.envelope("turn/start", {}))[:30] + b"\n"
    log.bad(torn)
    log.seq += 1
    log.put(frame_obj(log.envelope("turn/start", {})), good=False)
    log.put(frame_obj(log.envelope("com.example/x", {}, ignorable=True)), good=False)
    return log.data(), expect_session(log, "torn-tail")


@case(
    "read",
    "y_torn_tail_then_checkpoint_with_bad_crc",
    "A torn line, then a session/flush line whose CRC does not match: not a witness (a witness "
    "passes its checksum), so the file is torn-tail, not corrupt.",
)
def _y26b() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {}))[:30] + b"\n")
    log.seq += 1
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    line = frame_obj(obj)
    log.put(line[:-11] + b"00000000" + line[-3:], good=False)
    return log.data(), expect_session(log, "torn-tail")


@case(
    "read",
    "y_newline_lost_before_last_checkpoint",
    "The \\n before the last checkpoint is lost, merging the checkpoint into the line before "
    "it: the one kind of damage §10.2 says cannot be told from a crash. No witness is left, so "
    "the file is torn-tail.",
)
def _y27() -> Any:
    log = Log()
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
    return log.data(), expect_session(log, "torn-tail")


# ----------------------------------------------------------------------------------------------
# read/: n_ must reject


def _header_line(**data: Any) -> bytes:
    base: dict[str, Any] = {
        "format": "jsonltape",
        "version": 1,
        "minor": 0,
        "id": SID,
        "created": T0,
    }
    base.update(data)
    base = {k: v for k, v in base.items() if v is not None}
    return frame_obj({"seq": 0, "type": "session/start", "time": T0, "data": base})


def _with_body(first: bytes) -> bytes:
    """``first`` as line 1, then a few good lines (seq 1..) as a real file would have."""
    log = Log()
    log.exchange("a", "b")
    body = b"".join(log.committed[1:])
    return first + body


@case("read", "n_empty_file", "An empty file is not a session.")
def _n1() -> Any:
    return b"", expect_refused("not-jsonltape", repair=True)


@case("read", "n_only_newline", "A file holding one newline: line 1 is not a header.")
def _n2() -> Any:
    return b"\n", expect_refused("not-jsonltape")


@case("read", "n_plain_text", "A text file that is not JSON at all.")
def _n3() -> Any:
    return b"hello world\nthis is not a session\n", expect_refused("not-jsonltape")


@case(
    "read",
    "n_bom",
    "A UTF-8 byte order mark before the header (an editor added it): the file is UTF-8 "
    "without BOM (§4) and line 1's checked bytes no longer match its CRC.",
)
def _n4() -> Any:
    return b"\xef\xbb\xbf" + _with_body(_header_line()), expect_refused("not-jsonltape")


@case(
    "read",
    "n_crlf_line_endings",
    "Every line ends in \\r\\n (CRLF conversion): the 18 bytes before \\n are not the crc "
    "suffix, so line 1 is bad.",
)
def _n5() -> Any:
    data = _with_body(_header_line()).replace(b"\n", b"\r\n")
    return data, expect_refused("not-jsonltape")


@case(
    "read",
    "n_crlf_one_line",
    "One line in the middle ends in \\r\\n and a valid checkpoint follows: corrupt.",
)
def _n6() -> Any:
    log = Log()
    log.turn_start()
    log.bad(frame_obj(log.envelope("com.example/x", {}, ignorable=True))[:-1] + b"\r\n")
    log.seq += 1
    _after_bad(log)
    return log.data(), expect_session(log, "corrupt")


def _after_bad(log: Log) -> None:
    """Good-looking lines after the damage, then a valid checkpoint (which proves corruption)."""
    log.put(frame_obj(log.envelope("com.example/after", {"n": 1}, ignorable=True)), good=False)
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)


def _damaged(make: Callable[[Log, bytes], bytes], *, prefix_turn: bool = True) -> Any:
    """A good start, one damaged line (``make(log, good_line)``), more lines, a checkpoint."""
    log = Log()
    log.exchange("first", "reply")
    log.flush()
    if prefix_turn:
        log.turn_start()
    good = frame_obj(log.envelope("user/message", _msg("user", "u", "damaged?"), surface="append"))
    log.bad(make(log, good))
    log.seq += 1
    _after_bad(log)
    return log.data(), expect_session(log, "corrupt")


def _msg(role: str, prefix: str, text: str) -> dict[str, Any]:
    return {
        "message": {"id": prefix + "1", "role": role, "parts": [{"type": "text", "content": text}]}
    }


@case(
    "read",
    "n_crc_uppercase",
    "The CRC is right but written in uppercase hex: a bad line (§5); a checkpoint follows.",
)
def _n7() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        digits = line[-11:-3]
        assert digits != digits.upper(), "pick content whose crc has a letter"
        return line[:-11] + digits.upper() + line[-3:]

    return _damaged(make)


@case("read", "n_crc_missing", "A line without the crc member; a checkpoint follows.")
def _n8() -> Any:
    return _damaged(lambda log, line: line[:-19] + b"}\n")


@case(
    "read",
    "n_crc_not_last",
    "The crc member (with the right value) is not the last member; a checkpoint follows.",
)
def _n9() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        crc = line[-11:-3]
        body = line[1:-19]
        return b'{"crc":"' + crc + b'",' + body + b"}\n"

    return _damaged(make)


@case("read", "n_crc_mismatch", "One byte of data changed after writing; a checkpoint follows.")
def _n10() -> Any:
    return _damaged(lambda log, line: line.replace(b"damaged?", b"damaged!"))


@case("read", "n_crc_seven_digits", "The crc has 7 hex digits instead of 8; a checkpoint follows.")
def _n11() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        prefix = line[:-19]
        return prefix + b',"crc":"' + crc_hex(prefix)[1:].encode() + b'"}\n'

    return _damaged(make)


@case(
    "read",
    "n_crc_suffix_spaced",
    'The crc member written with spaces (`, "crc": "…"}`): the suffix has a fixed shape.',
)
def _n12() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        prefix = line[:-19]
        return prefix + b', "crc": "' + crc_hex(prefix).encode() + b'"}\n'

    return _damaged(make)


@case(
    "read",
    "n_seq_gap",
    "A writer skipped a seq (…, 4, 6, 7, …) and a checkpoint follows: corrupt. After the gap "
    "every seq differs from its position, the checkpoint's included: a witness's seq is not "
    "checked (§10.2).",
)
def _n13() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.turn_start()
    log.seq += 1  # the gap
    log.bad(frame_obj(log.envelope("user/message", _msg("user", "u", "x"), surface="append")))
    log.seq += 1
    log.put(frame_obj(log.envelope("com.example/after", {}, ignorable=True)), good=False)
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "n_seq_duplicate",
    "A writer wrote the same seq twice (…, 5, 5, 6, …) and a checkpoint follows: corrupt (the "
    "witness's seq is one less than its position, which does not matter).",
)
def _n14() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    s = log.turn_start()
    log.bad(
        frame_obj(log.envelope("user/message", _msg("user", "u", "x"), surface="append", seq=s))
    )
    log.put(frame_obj(log.envelope("com.example/after", {}, ignorable=True)), good=False)
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "n_seq_swap",
    "Two adjacent lines in swapped order (seq 7 before 6) before a valid checkpoint: corrupt.",
)
def _n15() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.turn_start()
    s = log.seq
    first = frame_obj(log.envelope("user/message", _msg("user", "u", "x"), surface="append"))
    log.seq += 1
    second = frame_obj(log.envelope("com.example/y", {}, ignorable=True))
    log.seq -= 1
    log.bad(second)
    log.raw(first, good=False)
    log.seq = s + 2
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "n_line_not_object",
    "A line that is a JSON array, not an object, before a valid checkpoint: corrupt.",
)
def _n16() -> Any:
    return _damaged(lambda log, line: b'[1,2,3,"crc"]\n')


@case(
    "read",
    "n_line_not_json",
    "A line whose CRC matches but whose JSON is malformed (a missing comma): corrupt.",
)
def _n17() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        return frame(line[:-19].replace(b',"type"', b' "type"', 1))

    return _damaged(make)


@case(
    "read",
    "n_envelope_missing_time",
    "A framed JSON object without the required time member: not a good line; corrupt.",
)
def _n18() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["time"], obj["crc"]
        return frame_obj(obj)

    return _damaged(make)


@case(
    "read",
    "n_envelope_data_not_object",
    "data is an array instead of an object: not a good line; corrupt.",
)
def _n19() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj["data"] = ["x"]
        return frame_obj(obj)

    return _damaged(make)


@case(
    "read",
    "n_envelope_seq_string",
    'seq written as a string ("7"): not a good line; corrupt.',
)
def _n20() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj["seq"] = str(obj["seq"])
        return frame_obj(obj)

    return _damaged(make)


@case(
    "read",
    "n_envelope_type_missing",
    "A framed object without type: not a good line; corrupt.",
)
def _n21() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"], obj["type"]
        return frame_obj(obj)

    return _damaged(make)


@case(
    "read",
    "n_blank_line",
    "An empty line in the middle (writers never write one) before a valid checkpoint: corrupt.",
)
def _n22() -> Any:
    return _damaged(lambda log, line: b"\n")


@case(
    "read",
    "n_damage_early_in_long_file",
    "One flipped byte in line 5 of a file with 40 later checkpoints: corrupt at line 5. "
    "Verification must check every line, not only the tail.",
)
def _n23() -> Any:
    rng = random.Random(40)
    log = Log()
    log.turn_start()
    log.user("start")
    log.flush()
    good = frame_obj(log.envelope("user/message", _msg("user", "u", "flip me"), surface="append"))
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
    return log.data(), expect_session(log, "corrupt")


def _edited(edit: Callable[[list[bytes]], int]) -> Any:
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
    "n_line_deleted",
    "A whole line deleted before a checkpoint (a bad edit): later seqs and checkpoint offsets "
    "shift, but the checkpoint lines still pass their checksums, so they are witnesses "
    "(§10.2): corrupt.",
)
def _n23a() -> Any:
    def edit(lines: list[bytes]) -> int:
        del lines[2]
        return 2

    return _edited(edit)


@case(
    "read",
    "n_line_duplicated",
    "One line appears twice (a bad merge), before a checkpoint: corrupt at the copy.",
)
def _n23b() -> Any:
    def edit(lines: list[bytes]) -> int:
        lines.insert(3, lines[2])
        return 3

    return _edited(edit)


@case(
    "read",
    "n_witness_with_wrong_offset",
    "A bad line, then a good session/flush line whose data.offset is not its own offset. It "
    "is not a valid checkpoint, but it is a witness (only its framing, checksum, envelope and "
    "type count): corrupt.",
)
def _n23c() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.bad(b'{"seq":' + str(log.seq).encode() + b',"type":"turn/st\n')
    log.seq += 1
    obj = log.envelope(
        "session/flush", {"offset": log.size - 1, "seq": log.seq - 1}, ignorable=True
    )
    log.put(frame_obj(obj), good=False)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "n_witness_type_escaped",
    'A bad line, then a checkpoint whose type is written with a JSON escape ("session\\/flush"). '
    "The type is the decoded string, so it is a witness: corrupt. A reader that looks for the "
    "bytes session/flush misses it.",
)
def _n23d() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {"input": "q"})).replace(b'"q"', b'"Q"'))
    log.seq += 1
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    line = frame(dumps(obj)[:-1].replace(b'"session/flush"', b'"session\\/flush"'))
    log.put(line, good=False)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "n_header_not_first",
    "Line 1 is a turn/start (seq 0) and the header comes second: not a session.",
)
def _n24() -> Any:
    first = frame_obj({"seq": 0, "type": "turn/start", "time": T0, "data": {}})
    hdr = json.loads(_header_line())
    del hdr["crc"]
    hdr["seq"] = 1
    return first + frame_obj(hdr), expect_refused("not-jsonltape")


@case("read", "n_header_bad_crc", "The header's CRC does not match: not a session.")
def _n25() -> Any:
    line = _header_line().replace(SID.encode(), SID[:-1].encode() + b"C")
    return _with_body(line), expect_refused("not-jsonltape", repair=True)


@case(
    "read",
    "n_header_torn",
    "The header line has no newline (a torn first line): not a session.",
)
def _n26() -> Any:
    return _header_line()[:-1], expect_refused("not-jsonltape")


@case("read", "n_header_wrong_format", 'data.format is "jsonl", not "jsonltape".')
def _n27() -> Any:
    return _with_body(_header_line(format="jsonl")), expect_refused("not-jsonltape")


@case("read", "n_header_no_format", "The header has no data.format.")
def _n28() -> Any:
    return _with_body(_header_line(format=None)), expect_refused("not-jsonltape")


@case(
    "read",
    "n_header_title_number",
    "data.title is a number: a header member of the wrong type (§7) makes the file not a session.",
)
def _n28a() -> Any:
    return _with_body(_header_line(title=5)), expect_refused("not-jsonltape")


@case(
    "read",
    "n_header_parent_string",
    "data.parent is a string, not {session, seq}: not a session (§7).",
)
def _n28b() -> Any:
    return _with_body(_header_line(parent="abc")), expect_refused("not-jsonltape")


@case(
    "read",
    "y_ignorable_false",
    'An extension event with "ignorable": false: a boolean, the same as absent (§6); a good line.',
)
def _y_ign_false() -> Any:
    log = Log()
    log.event("com.example/x", {}, extra={"ignorable": False})
    log.flush(closed=False)
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "y_closing_checkpoint_without_seq",
    "An open turn, then a session/flush with closed: true but no data.seq: not the shape of §8.5, "
    "so not a valid checkpoint and it cannot close; the turn was left open by a crash.",
)
def _y_close_noseq() -> Any:
    log = Log()
    log.turn_start()
    log.user("hi")
    log.event("session/flush", {"offset": log.size, "closed": True}, ignorable=True)
    return log.data(), expect_session(log, "open-turn")


@case("read", "n_header_seq_1", "The header line carries seq 1: not a session.")
def _n29() -> Any:
    hdr = json.loads(_header_line())
    del hdr["crc"]
    hdr["seq"] = 1
    return _with_body(frame_obj(hdr)), expect_refused("not-jsonltape")


@case("read", "n_header_not_object", "Line 1 is a JSON array: not a session.")
def _n30() -> Any:
    return _with_body(b'["jsonltape",1]\n'), expect_refused("not-jsonltape")


@case(
    "read",
    "n_version_newer_major",
    "Header version 2: written by a newer major version; refused as unsupported (§7).",
)
def _n31() -> Any:
    return _with_body(_header_line(version=2)), expect_refused("unsupported-version", repair=True)


@case("read", "n_version_zero", "Header version 0: smaller than 1, refused as unsupported.")
def _n32() -> Any:
    return _with_body(_header_line(version=0)), expect_refused("unsupported-version")


@case("read", "n_version_string", 'Header version "1" (a string): not an integer, unsupported.')
def _n33() -> Any:
    return _with_body(_header_line(version="1")), expect_refused("unsupported-version")


# ----------------------------------------------------------------------------------------------
# read/: i_ implementation-defined (the expected file holds the reference behaviour)


@case(
    "read",
    "i_header_missing_id",
    "A header without the REQUIRED id (§7). Reference: refused as not-jsonltape (a header "
    "that breaks §7 is not a good header). A reader that only checks seq, type and format "
    "would accept it.",
)
def _i1() -> Any:
    return _with_body(_header_line(id=None)), expect_refused("not-jsonltape")


@case(
    "read",
    "i_header_version_float",
    "Header version 1.0 (a JSON number with a fraction part). Reference: refused as "
    "unsupported-version (not an integer); readers whose JSON numbers are all doubles see 1.",
)
def _i2() -> Any:
    line = _header_line().replace(b'"version":1,', b'"version":1.0,')
    return _with_body(frame(line[:-19])), expect_refused("unsupported-version")


@case(
    "read",
    "i_header_version_missing",
    "A header without data.version. Reference: refused as unsupported-version.",
)
def _i3() -> Any:
    return _with_body(_header_line(version=None)), expect_refused("unsupported-version")


def _i_bad_line(prefix_text: str) -> Any:
    """A framed line from hand-written text, then a valid checkpoint: reference says corrupt."""
    log = Log()
    log.turn_start()
    log.bad(frame(prefix_text.replace("SEQ", str(log.seq)).encode("utf-8", "surrogatepass")))
    log.seq += 1
    _after_bad(log)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "i_seq_as_float",
    "seq written as 2.0. Reference: not an integer, so a bad line (corrupt here, a checkpoint "
    "follows); readers whose numbers are doubles accept it.",
)
def _i4() -> Any:
    return _i_bad_line(f'{{"seq":SEQ.0,"type":"com.example/x","time":{T0},"data":{{}}')


@case(
    "read",
    "n_lone_surrogate_escape",
    "A string holding an unpaired surrogate escape (\\ud800). Valid JSON grammar, but no "
    "Unicode text: the line is bad (§4, I-JSON); corrupt here.",
)
def _i5() -> Any:
    return _i_bad_line(f'{{"seq":SEQ,"type":"com.example/x","time":{T0},"data":{{"s":"a\\ud800b"}}')


@case(
    "read",
    "n_invalid_utf8_in_string",
    "A string holding bytes that are not UTF-8 (0xFF): the line is bad (§4; corrupt here). A "
    "decoder that substitutes U+FFFD would accept it, wrongly.",
)
def _i6() -> Any:
    log = Log()
    log.turn_start()
    prefix = b'{"seq":%d,"type":"com.example/x","time":%d,"data":{"s":"a\xffb"}' % (log.seq, T0)
    log.bad(frame(prefix))
    log.seq += 1
    _after_bad(log)
    return log.data(), expect_session(log, "corrupt")


@case(
    "read",
    "n_number_out_of_range",
    "A number too large for a double (1e400) in data: the line is bad (§4; corrupt here). "
    "Some parsers read it as infinity, wrongly.",
)
def _i7() -> Any:
    return _i_bad_line(f'{{"seq":SEQ,"type":"com.example/x","time":{T0},"data":{{"x":1e400}}')


@case(
    "read",
    "i_nesting_deeper_than_128",
    "Arrays nested 200 deep in data (writers must not nest a line deeper than 128, §6). "
    "Reference: accepted; a reader whose parser stops earlier reports an error for the file "
    "and must not treat the line as damage.",
)
def _i9() -> Any:
    log = Log()
    prefix = (
        f'{{"seq":1,"type":"com.example/deep","time":{log.time},'
        f'"data":{{"v":{"[" * 200}{"]" * 200}}},"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/deep")
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "i_integer_beyond_safe_range",
    "An integer beyond ±(2^53-1) in data (writers must not write one, §6). Reference: "
    "accepted with the exact value; readers with double-only numbers round it.",
)
def _i8() -> Any:
    log = Log()
    prefix = (
        f'{{"seq":1,"type":"com.example/big","time":{log.time},'
        '"data":{"n":9007199254740993},"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/big")
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "i_duplicate_member",
    'An object with a duplicate member name inside data ({"a":1,"a":2}). Reference: '
    "accepted, the last value wins.",
)
def _i9b() -> Any:
    log = Log()
    prefix = (
        f'{{"seq":1,"type":"com.example/dup","time":{log.time},'
        '"data":{"a":1,"a":2},"ignorable":true'
    )
    log.put(frame(prefix.encode()), "com.example/dup")
    return log.data(), expect_session(log, "clean")


@case(
    "read",
    "n_line_leading_space",
    "A line starting with a space before its {, CRC computed over every byte before the "
    "suffix (the space included): a line starts with { (§5), so it is bad; corrupt.",
)
def _n_leading_space() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        return frame(b" " + line[: -len(b',"crc":"xxxxxxxx"}\n')])

    return _damaged(make)


@case(
    "read",
    "i_closed_checkpoint_wrong_offset",
    "An open turn and a last line session/flush with closed: true whose data.offset is wrong "
    "(not a valid checkpoint). Reference: open-turn (only a valid checkpoint can close).",
)
def _i11() -> Any:
    log = Log()
    log.turn_start()
    log.user("hi")
    log.flush(closed=True, offset=3)
    return log.data(), expect_session(log, "open-turn")


@case(
    "read",
    "i_turn_end_for_another_turn",
    "A turn/end whose data.turn names another seq than the open turn. Reference: any "
    "turn/end closes the open turn (clean).",
)
def _i12() -> Any:
    log = Log()
    log.turn_start()
    log.user("hi")
    log.event("turn/end", {"turn": 99, "reason": "completed"})
    return log.data(), expect_session(log, "clean")


# ----------------------------------------------------------------------------------------------
# read/: §4 covers every byte of a line, unknown members included; §6 ranges; §7 null members


def _spliced(member: bytes) -> Callable[[Log, bytes], bytes]:
    """Damage: ``member`` (raw bytes, e.g. ``,"x":1e400``) spliced in before the crc suffix, the
    CRC recomputed: only the bytes of an unknown envelope member make the line bad."""

    def make(log: Log, line: bytes) -> bytes:
        return frame(line[: -len(b',"crc":"xxxxxxxx"}\n')] + member)

    return make


@case(
    "read",
    "n_unknown_member_name_invalid_utf8",
    'An unknown envelope member whose name holds a byte that is not UTF-8 ("x\\xffy"), CRC '
    "valid: the good-line test covers every byte of the line (§4, §10.2); corrupt.",
)
def _n40() -> Any:
    return _damaged(_spliced(b',"x\xffy":1'))


@case(
    "read",
    "n_unknown_member_value_invalid_utf8",
    "An unknown envelope member whose string value holds bytes that are not UTF-8 (an "
    "overlong 0xC0 0xAF), CRC valid: bad like the same bytes in data (§4); corrupt.",
)
def _n41() -> Any:
    return _damaged(_spliced(b',"com.example.note":"a\xc0\xafb"'))


@case(
    "read",
    "n_unknown_member_name_lone_surrogate",
    'An unknown envelope member named by an escaped lone surrogate ("\\udc00"): no Unicode '
    "text (§4, I-JSON), although the JSON grammar allows it; corrupt.",
)
def _n42() -> Any:
    return _damaged(_spliced(b',"\\udc00":true'))


@case(
    "read",
    "n_unknown_member_number_out_of_range",
    'An unknown envelope member holding 1e400, a number no double can hold ("x-cost":1e400): '
    "bad wherever it is (§4); corrupt.",
)
def _n43() -> Any:
    return _damaged(_spliced(b',"x-cost":1e400'))


@case(
    "read",
    "n_surface_unknown_member_out_of_range",
    "A surface object (a valid replace) with an unknown member holding -1e400: the surface "
    "object's bytes are checked like the rest of the line (§4); corrupt.",
)
def _n44() -> Any:
    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"], obj["surface"]
        text = dumps(obj)[:-1]
        seq = log.seq - 1
        return frame(
            text + b',"surface":{"op":"replace","start":%d,"end":%d,"x":-1e400}' % (seq, seq)
        )

    return _damaged(make)


@case(
    "read",
    "n_integer_out_of_double_range",
    "An integer of 401 digits inside data: integers in data are not range-checked, but no "
    "double holds this one (§4: a number a double cannot hold makes the line bad); corrupt.",
)
def _n45() -> Any:
    return _i_bad_line(
        f'{{"seq":SEQ,"type":"com.example/x","time":{T0},"data":{{"n":-1{"0" * 400}}}'
    )


@case(
    "read",
    "n_header_unknown_member_invalid_utf8",
    "An unknown member of the header's data whose value holds the byte 0xFF: line 1 is not a "
    "good line, so the file is not a session (§4, §7).",
)
def _n46() -> Any:
    line = _header_line()
    bad = frame(line[: -len(b'},"crc":"xxxxxxxx"}\n')] + b',"com.example.tag":"\xff"}')
    return _with_body(bad), expect_refused("not-jsonltape")


@case(
    "read",
    "y_envelope_ranges_at_the_bounds",
    "Envelope members at the ends of their ranges (§6): time 0 and 253402300799999 "
    "(9999-12-31T23:59:59.999Z), sources [0, 2^53-1], a surface retract of 2^53-1 ... 2^53-1, "
    "header created 253402300799999. Reading checks types and ranges, not meaning: clean.",
)
def _y40() -> Any:
    top = 2**53 - 1
    log = Log(header_extra={"created": 253402300799999})
    log.time = 0
    log.event("com.example/first", {}, ignorable=True)
    log.time = 253402300799999
    log.event("com.example/late", {}, ignorable=True, sources=[0, top])
    log.time = 253402300799999  # (put() moves the clock on)
    log.event("surface/retract", {}, surface={"op": "retract", "start": top, "end": top})
    return log.data(), expect_session(log, "clean")


def _ranged(member: str, value: str) -> Any:
    """One line whose envelope member ``member`` is the JSON text ``value``; a checkpoint
    follows: corrupt."""

    def make(log: Log, line: bytes) -> bytes:
        obj = json.loads(line)
        del obj["crc"]
        obj[member] = "\x00VALUE\x00"
        return frame(dumps(obj)[:-1].replace(b'"\\u0000VALUE\\u0000"', value.encode()))

    return _damaged(make)


@case(
    "read",
    "n_time_beyond_max",
    "time 253402300800000, one millisecond after 9999-12-31T23:59:59.999Z: outside the range "
    "of §6, so not a good line (like a wrong type); corrupt.",
)
def _n47() -> Any:
    return _ranged("time", "253402300800000")


@case("read", "n_time_negative", "time -1: outside 0 ... 253402300799999 (§6); corrupt.")
def _n48() -> Any:
    return _ranged("time", "-1")


@case(
    "read",
    "n_time_beyond_int64",
    "time 18446744073709551616 (2^64): an integer, but outside the range of §6; corrupt.",
)
def _n49() -> Any:
    return _ranged("time", "18446744073709551616")


@case(
    "read",
    "n_sources_beyond_safe_range",
    "sources [9007199254740992]: a seq beyond 2^53-1 (§6); not a good line; corrupt.",
)
def _n50() -> Any:
    return _ranged("sources", "[1,9007199254740992]")


@case("read", "n_sources_negative", "sources [-1]: a seq is not negative (§6); corrupt.")
def _n51() -> Any:
    return _ranged("sources", "[-1]")


@case(
    "read",
    "n_surface_start_beyond_safe_range",
    'surface {"op":"replace","start":9007199254740992,"end":1}: start is a seq, 0 ... 2^53-1 '
    "(§6); not a good line; corrupt.",
)
def _n52() -> Any:
    return _ranged("surface", '{"op":"replace","start":9007199254740992,"end":1}')


@case(
    "read",
    "n_surface_end_negative",
    'surface {"op":"retract","start":1,"end":-1}: end is a seq, never negative (§6); corrupt.',
)
def _n53() -> Any:
    return _ranged("surface", '{"op":"retract","start":1,"end":-1}')


@case(
    "read",
    "y_torn_tail_then_witness_seq_out_of_range",
    "A torn line, then a session/flush whose seq is 2^53 (CRC valid). A witness's seq is not "
    "compared with its position, but it is a seq (§6: 0 ... 2^53-1), so this line is no "
    "envelope and no witness: torn-tail, not corrupt.",
)
def _y41() -> Any:
    log = Log()
    log.exchange("a", "b")
    line = frame_obj(log.envelope("turn/start", {}))
    log.bad(line[:-4] + (b"1" if line[-4:-3] == b"0" else b"0") + line[-3:])  # a wrong CRC
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    obj["seq"] = 2**53
    log.raw(frame_obj(obj), good=False)
    return log.data(), expect_session(log, "torn-tail")


def _header_with(member_json: str) -> bytes:
    """A header line with the data member text ``member_json`` (e.g. ``"title":null``) added."""
    line = _header_line()
    return frame(line[: -len(b'},"crc":"xxxxxxxx"}\n')] + b"," + member_json.encode() + b"}")


for _member in ("title", "cwd", "agent", "meta", "parent", "minor"):

    @case(
        "read",
        f"n_header_{_member}_null",
        f"data.{_member} present as null: null is the wrong type for a member of the §7 table "
        "(only surface, sources and key of the envelope may be null, §6): not a session.",
    )
    def _n_null(member: str = _member) -> Any:
        return _with_body(_header_with(f'"{member}":null')), expect_refused("not-jsonltape")


@case(
    "read",
    "n_header_parent_path_null",
    'data.parent {"session":"s","seq":0,"path":null}: path, if present, is a string (§7); '
    "null is the wrong type: not a session.",
)
def _n54() -> Any:
    parent = '"parent":{"session":"s","seq":0,"path":null}'
    return _with_body(_header_with(parent)), expect_refused("not-jsonltape")


@case(
    "read",
    "n_header_created_beyond_max",
    "data.created 253402300800000, after 9999-12-31T23:59:59.999Z: outside the range of a "
    "time (§6, §7): not a session.",
)
def _n55() -> Any:
    line = _header_line().replace(b'"created":%d' % T0, b'"created":253402300800000')
    return _with_body(frame(line[:-19])), expect_refused("not-jsonltape")


# ----------------------------------------------------------------------------------------------
# repair/


def _repair_case(log: Log, state: str, closers: list[dict[str, Any]]) -> Any:
    return log.data(), expect_repair(log, state, closers)


@case("repair", "clean_closed", "A cleanly closed session: nothing to do.")
def _r1() -> Any:
    log = Log()
    typical(log)
    log.flush(closed=True)
    return _repair_case(log, "clean", [])


@case(
    "repair",
    "clean_no_checkpoint",
    "Clean but never checkpointed: nothing is cut and nothing closed (repair may add a "
    "closing checkpoint, which is not listed).",
)
def _r2() -> Any:
    log = Log()
    log.exchange("a", "b")
    return _repair_case(log, "clean", [])


@case("repair", "torn_mid_line", "A torn last line outside any turn: cut at its start.")
def _r3() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {}))[:20])
    return _repair_case(log, "torn-tail", [])


@case(
    "repair",
    "torn_in_crc_suffix",
    "The tail stops inside the crc suffix of the last line, inside a turn: cut, then the "
    "turn is closed.",
)
def _r4() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    t = log.turn_start()
    log.user("hi")
    log.bad(
        frame_obj(
            log.envelope("assistant/message", _msg("assistant", "a", "hel"), surface="append")
        )[:-6]
    )
    return _repair_case(log, "torn-tail", [closer_turn(t)])


@case("repair", "zero_filled_tail", "4096 zero bytes after the last checkpoint: cut.")
def _r5() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    log.bad(bytes(4096))
    return _repair_case(log, "torn-tail", [])


@case(
    "repair",
    "garbage_tail",
    "Random bytes (some of them newlines) after the last checkpoint: cut.",
)
def _r6() -> Any:
    rng = random.Random(6)
    log = Log()
    log.exchange("a", "b")
    log.flush()
    junk = bytes(rng.choice(b'\n{}":,abcdef0123456789\x00\xff') for _ in range(700))
    log.bad(b"\x00" + junk)
    return _repair_case(log, "torn-tail", [])


@case(
    "repair",
    "good_looking_lines_after_bad_line",
    "A torn line, then complete lines with good CRCs and seqs (no valid checkpoint): all of "
    "it is the crash tail and is cut; the open turn before it is closed.",
)
def _r7() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.flush()
    t = log.turn_start()
    log.bad(
        frame_obj(log.envelope("user/message", _msg("user", "u", "x"), surface="append"))[:40]
        + b"\n"
    )
    log.seq += 1
    log.put(
        frame_obj(log.envelope("assistant/message", _msg("assistant", "a", "y"), surface="append")),
        good=False,
    )
    log.put(frame_obj(log.envelope("turn/end", {"turn": t, "reason": "completed"})), good=False)
    return _repair_case(log, "torn-tail", [closer_turn(t)])


@case(
    "repair",
    "open_turn_tool_recorded",
    "Crash after a tool/call was recorded and before its result: outcome unknown "
    "(TOOL_OUTCOME_UNKNOWN, sources = the tool/call), then step/end and turn/end.",
)
def _r8() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("delete the temp files")
    s = log.step_start()
    log.assistant(calls=[("call-7", "Bash", {"cmd": "rm -rf tmp/"})])
    c = log.tool_call("call-7", "Bash", {"cmd": "rm -rf tmp/"})
    log.flush()
    return _repair_case(
        log, "open-turn", [closer_result("call-7", c), closer_step(s, t), closer_turn(t)]
    )


@case(
    "repair",
    "open_turn_tool_not_recorded",
    "Crash after the assistant asked for a tool and before the tool/call was recorded: not "
    "started (TOOL_NOT_STARTED, no sources), then step/end and turn/end.",
)
def _r9() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("list the files")
    s = log.step_start()
    log.assistant("Let me look.", calls=[("call-8", "ls", {})])
    return _repair_case(
        log, "open-turn", [closer_result("call-8", None), closer_step(s, t), closer_turn(t)]
    )


@case(
    "repair",
    "open_turn_mixed_calls",
    "Four calls in one turn: answered (no closer), recorded (outcome unknown), only asked "
    "(not started), and a tool/call without an assistant part (outcome unknown); closers in "
    "order of first appearance.",
)
def _r10() -> Any:
    log = Log()
    log.exchange("warm-up", "ok")
    t = log.turn_start()
    log.user("do three things")
    s = log.step_start()
    log.assistant(
        calls=[
            ("c-a", "Read", {"path": "a"}),
            ("c-b", "Edit", {"path": "b"}),
            ("c-c", "Bash", {"cmd": "make"}),
        ]
    )
    log.tool_call("c-a", "Read", {"path": "a"})
    log.tool_result("c-a", "contents of a")
    cb = log.tool_call("c-b", "Edit", {"path": "b"})
    cd = log.tool_call("c-d", "Fetch", {"url": "https://example.com"})
    return _repair_case(
        log,
        "open-turn",
        [
            closer_result("c-b", cb),
            closer_result("c-c", None),
            closer_result("c-d", cd),
            closer_step(s, t),
            closer_turn(t),
        ],
    )


@case("repair", "open_step", "An open step and no tool calls: step/end then turn/end.")
def _r11() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("think")
    s = log.step_start()
    log.assistant("thinking…")
    return _repair_case(log, "open-turn", [closer_step(s, t), closer_turn(t)])


@case("repair", "open_turn_no_step", "An open turn with no step: only turn/end.")
def _r12() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("hi")
    return _repair_case(log, "open-turn", [closer_turn(t)])


@case(
    "repair",
    "open_turn_spanning_checkpoints",
    "The open turn started before the last two checkpoints (which record it in data.turn); "
    "its pending call was made before them.",
)
def _r13() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("build it")
    s = log.step_start()
    log.assistant(calls=[("c1", "Bash", {"cmd": "make"})])
    c = log.tool_call("c1", "Bash", {"cmd": "make"})
    log.flush()
    log.event("com.example/progress", {"pct": 50}, ignorable=True)
    log.flush()
    return _repair_case(
        log, "open-turn", [closer_result("c1", c), closer_step(s, t), closer_turn(t)]
    )


@case(
    "repair",
    "open_turn_checkpoint_without_turn",
    "The open turn started before a checkpoint that does not record it (data.turn is "
    "OPTIONAL in §8.5). The turn is open all the same and must be closed.",
)
def _r14() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("hi")
    log.flush(turn=False)
    log.assistant("hel")
    return _repair_case(log, "open-turn", [closer_turn(t)])


@case(
    "repair",
    "deliberately_open_turn",
    "A turn left open by a writer that closed cleanly: clean, no closers (§10.1 item 6).",
)
def _r15() -> Any:
    log = Log()
    log.turn_start()
    log.user("one event per run")
    log.flush()
    log.flush(closed=True)
    return _repair_case(log, "clean", [])


@case(
    "repair",
    "reopened_then_crashed",
    "A closed checkpoint, then the session was reopened and crashed inside a new turn: "
    "open-turn; the earlier turn's unanswered call is not closed again.",
)
def _r16() -> Any:
    log = Log()
    log.turn_start()
    log.user("x")
    log.assistant(calls=[("old", "ls", {})])
    log.turn_end("aborted")
    log.flush()
    log.flush(closed=True)
    t = log.turn_start()
    log.user("again")
    return _repair_case(log, "open-turn", [closer_turn(t)])


@case(
    "repair",
    "torn_tail_and_pending_call",
    "A torn tail cut first, then the open turn closed; the call recorded before the tear gets "
    "an outcome-unknown result.",
)
def _r17() -> Any:
    log = Log()
    t = log.turn_start()
    log.user("fetch it")
    log.assistant(calls=[("c9", "Fetch", {"url": "https://example.com"})])
    c = log.tool_call("c9", "Fetch", {"url": "https://example.com"})
    log.flush()
    log.bad(frame_obj(log.envelope("tool/result", {"call_id": "c9"}))[:33])
    return _repair_case(log, "torn-tail", [closer_result("c9", c), closer_turn(t)])


@case(
    "repair",
    "corrupt_refused",
    "Damage before a valid checkpoint: repair refuses (unless forced, which is not part of "
    "the protocol) and reports line and offset.",
)
def _r18() -> Any:
    log = Log()
    log.exchange("a", "b")
    log.bad(frame_obj(log.envelope("turn/start", {"input": "q"})).replace(b'"q"', b'"Q"'))
    log.seq += 1
    _after_bad(log)
    assert log.bad_line is not None
    return log.data(), {
        "repair": {"error": "corrupt", "line": log.bad_line, "offset": log.bad_offset}
    }


@case("repair", "not_a_session", "A file that is not a session: refused, nothing written.")
def _r19() -> Any:
    return b"just text\n", {"repair": {"error": "not-jsonltape"}}


# ----------------------------------------------------------------------------------------------
# fold/: the neutral form is the one of jsonltape.fold.messages() (jsonltape/fold/_convert.py
# neutral_item) until the spec's fold section is written; see spec/README.md.


def neutral(log: Log, seq: int) -> dict[str, Any]:
    """The neutral item of the committed message event ``seq``."""
    obj = next(o for o in map(json.loads, log.committed) if o["seq"] == seq)
    data = obj["data"]
    item: dict[str, Any] = {
        "seq": obj["seq"],
        "time": obj["time"],
        "type": obj["type"],
        "message": data["message"],
    }
    if obj["type"] == "tool/result":
        item["call_id"] = data["call_id"]
        for name in ("error", "synthetic"):
            if data.get(name) not in (None, False):
                item[name] = data[name]
    if isinstance(data.get("origin"), dict):
        item["origin"] = data["origin"]
    return item


def expect_fold(log: Log, seqs: list[int]) -> dict[str, Any]:
    return {"fold": {"messages": [neutral(log, s) for s in seqs]}}


def with_fold(expect: dict[str, Any], log: Log, seqs: list[int]) -> dict[str, Any]:
    return {**expect, **expect_fold(log, seqs)}


@case("fold", "header_only", "A session with no messages folds to an empty history.")
def _f1() -> Any:
    log = Log()
    return log.data(), expect_fold(log, [])


@case(
    "fold",
    "tool_round_trip",
    "User, assistant tool call, tool result, assistant: every message appended in order; turns, "
    "steps, tool/call, request/header and checkpoints are not messages.",
)
def _f2() -> Any:
    log = Log()
    typical(log)
    return log.data(), expect_fold(log, [3, 5, 8, 10])


@case(
    "fold",
    "system_and_parts",
    "A user/message with role system, a reasoning part, an extension part type (kept as is) "
    "and a tool_call_response with is_error.",
)
def _f3() -> Any:
    log = Log()
    log.event(
        "user/message",
        {
            "message": {
                "id": "s1",
                "role": "system",
                "parts": [{"type": "text", "content": "Be brief."}],
            }
        },
        surface="append",
    )
    log.turn_start()
    u = log.user("draw it")
    a = log.event(
        "assistant/message",
        {
            "message": {
                "id": "a1",
                "role": "assistant",
                "parts": [
                    {"type": "reasoning", "content": "a square", "signature": "c2ln"},
                    {"type": "x-svg", "svg": "<svg/>"},
                    {"type": "tool_call", "id": "k1", "name": "Render", "arguments": "not json"},
                ],
            }
        },
        surface="append",
    )
    r = log.event(
        "tool/result",
        {
            "call_id": "k1",
            "message": {
                "id": "r1",
                "role": "tool",
                "parts": [
                    {"type": "tool_call_response", "id": "k1", "response": "E", "is_error": True}
                ],
            },
        },
        surface="append",
    )
    log.turn_end()
    return log.data(), expect_fold(log, [1, u, a, r])


@case(
    "fold",
    "replace_one",
    "A revision replaces one message in place (surface replace S..S, sources [S]); the old "
    "event stays in the file but leaves the history.",
)
def _f4() -> Any:
    log = Log()
    log.turn_start()
    u = log.user("frist draft")
    a = log.assistant("an answer")
    v = log.event(
        "user/message",
        {"message": {"id": "u9", "role": "user", "parts": [{"type": "text", "content": "first"}]}},
        surface={"op": "replace", "start": u, "end": u},
        sources=[u],
    )
    log.turn_end()
    return log.data(), expect_fold(log, [v, a])


@case(
    "fold",
    "replace_range",
    "One event replaces a range of three messages (S..E, sources list all three); it takes the "
    "place of S.",
)
def _f5() -> Any:
    log = Log()
    first = log.user("keep me")
    s = log.user("one")
    m = log.assistant("two")
    e = log.user("three")
    r = log.event(
        "user/message",
        {"message": {"id": "sum", "role": "user", "parts": [{"type": "text", "content": "1-3"}]}},
        surface={"op": "replace", "start": s, "end": e},
        sources=[s, m, e],
    )
    last = log.assistant("after")
    return log.data(), expect_fold(log, [first, r, last])


@case(
    "fold",
    "retract",
    "surface/retract removes a range of messages without a replacement.",
)
def _f6() -> Any:
    log = Log()
    u = log.user("hello")
    a = log.assistant("bad answer")
    b = log.assistant("worse answer")
    log.event(
        "surface/retract",
        {"reason": "wrong"},
        surface={"op": "retract", "start": a, "end": b},
        sources=[a, b],
    )
    c = log.assistant("good answer")
    return log.data(), expect_fold(log, [u, c])


@case(
    "fold",
    "repaired_turn",
    "A turn closed by repair: the synthetic error tool/result is a message like any other "
    "(with its error and synthetic members); step/end and turn/end are not messages.",
)
def _f7() -> Any:
    log = Log()
    t = log.turn_start()
    u = log.user("delete the temp files")
    s = log.step_start()
    a = log.assistant(calls=[("call-7", "Bash", {"cmd": "rm -rf tmp/"})])
    c = log.tool_call("call-7", "Bash", {"cmd": "rm -rf tmp/"})
    log.flush()
    last = log.last_time  # closers carry the time of the last committed event (§10.3)
    closers = [closer_result("call-7", c), closer_step(s, t), closer_turn(t)]
    seqs = []
    for closer in closers:
        log.time = last
        seqs.append(
            log.event(
                closer["type"],
                closer["data"],
                surface=closer.get("surface"),
                sources=closer.get("sources"),
            )
        )
    log.time = last
    log.flush()
    return log.data(), expect_fold(log, [u, a, seqs[0]])


@case(
    "fold",
    "torn_tail",
    "Only committed events fold: a message in a torn tail is not in the history.",
)
def _f8() -> Any:
    log = Log()
    u = log.user("hello")
    a = log.assistant("hi")
    log.flush()
    log.bad(frame_obj(log.envelope("user/message", _msg("user", "u", "lost")))[:50])
    return log.data(), expect_fold(log, [u, a])


@case(
    "fold",
    "open_turn",
    "A crashed, still open turn folds to the messages logged so far (folding does not repair).",
)
def _f9() -> Any:
    log = Log()
    log.turn_start()
    u = log.user("run it")
    a = log.assistant(calls=[("c1", "Bash", {"cmd": "make"})])
    log.tool_call("c1", "Bash", {"cmd": "make"})
    return log.data(), expect_fold(log, [u, a])


@case(
    "fold",
    "skips_ignorable",
    "Streaming chunks, checkpoints and unknown ignorable events are skipped.",
)
def _f10() -> Any:
    log = Log()
    log.turn_start()
    u = log.user("stream it")
    log.event("assistant/chunk", {"delta": "str"}, ignorable=True)
    log.event("assistant/chunk", {"delta": "eamed"}, ignorable=True)
    log.event("com.example/latency", {"ms": 812}, ignorable=True)
    log.flush()
    a = log.assistant("streamed")
    log.turn_end()
    log.flush(closed=True)
    return log.data(), expect_fold(log, [u, a])


@case("fold", "corrupt", "Damage before a checkpoint: folding refuses, like reading.")
def _f11() -> Any:
    log = Log()
    log.user("a")
    log.bad(frame_obj(log.envelope("turn/start", {"input": "q"})).replace(b'"q"', b'"Q"'))
    log.seq += 1
    _after_bad(log)
    return log.data(), {"fold": {"error": "corrupt"}}


@case("fold", "not_a_session", "A file that is not a session: folding refuses.")
def _f12() -> Any:
    return b"[]\n", {"fold": {"error": "not-jsonltape"}}


# ----------------------------------------------------------------------------------------------
# compat/


@case(
    "compat",
    "unknown_members_everywhere",
    "Unknown members in the header data, the envelope, event data, a message, a part and a "
    "checkpoint: readers ignore them and serve them unchanged.",
)
def _m1() -> Any:
    log = Log(header_extra={"com.example.team": "infra", "x-flags": [1, 2]})
    log.event(
        "request/header",
        {"model": "gpt-5", "com.example.temperature": 0.2},
        extra={"com.example.env": "ci"},
    )
    log.turn_start()
    log.event(
        "user/message",
        {
            "message": {
                "id": "u3",
                "role": "user",
                "parts": [{"type": "text", "content": "hi", "com.example.lang": "en"}],
                "com.example.channel": "slack",
            },
            "com.example.source": "web",
        },
        surface="append",
        extra={"com.example.trace": "t-1"},
    )
    a = log.assistant("hello")
    log.turn_end()
    log.event(
        "session/flush",
        {"offset": log.size, "seq": log.seq - 1, "com.example.fs": "ext4"},
        ignorable=True,
    )
    return log.data(), with_fold(expect_session(log, "clean"), log, [3, a])


@case(
    "compat",
    "unknown_type_required",
    "An unknown event type without ignorable: read and verify pass it through; folding must "
    "refuse with the type and the line (§9).",
)
def _m2() -> Any:
    log = Log()
    log.turn_start()
    log.user("remember this")
    bad = log.event("com.example/memory-edit", {"op": "forget", "what": "u2"})
    log.assistant("done")
    log.turn_end()
    refused = {"error": "unknown-type", "type": "com.example/memory-edit", "line": bad + 1}
    return log.data(), {**expect_session(log, "clean"), "fold": refused}


@case(
    "compat",
    "unknown_type_ignorable",
    "An unknown event type marked ignorable: read and verify pass it through; folding skips it.",
)
def _m3() -> Any:
    log = Log()
    log.turn_start()
    u = log.user("what does it cost?")
    log.event("com.example/cost", {"usd": 0.002}, ignorable=True)
    a = log.assistant("very little")
    log.turn_end()
    return log.data(), with_fold(expect_session(log, "clean"), log, [u, a])


@case(
    "compat",
    "minor_7",
    "Minor version 7 with additions a 1.0 reader does not know (a header member, an ignorable "
    "type, a part type, an envelope member): accepted.",
)
def _m4() -> Any:
    log = Log(header_extra={"minor": 7, "x-encoding": "v7"})
    log.turn_start()
    log.event(
        "user/message",
        {
            "message": {
                "id": "u2",
                "role": "user",
                "parts": [
                    {"type": "text", "content": "listen"},
                    {"type": "x-audio", "uri": "file:///a.ogg", "seconds": 2},
                ],
            }
        },
        surface="append",
        extra={"x-priority": 1},
    )
    log.event("x-future/marker", {"label": "v7"}, ignorable=True)
    a = log.assistant("heard")
    log.turn_end()
    return log.data(), with_fold(expect_session(log, "clean"), log, [2, a])


@case(
    "compat",
    "major_2",
    "Major version 2, with a header shape a v1 reader does not know (no id, no created): "
    "refused as unsupported-version before the header's shape is looked at; repair refuses "
    "too.",
)
def _m5() -> Any:
    hdr = {
        "seq": 0,
        "type": "session/start",
        "time": T0,
        "data": {"format": "jsonltape", "version": 2, "session": {"uuid": "b1c2"}},
    }
    log = Log()
    log.exchange("a", "b")
    expect = expect_refused("unsupported-version", repair=True)
    expect["fold"] = {"error": "unsupported-version"}
    return frame_obj(hdr) + b"".join(log.committed[1:]), expect


# ----------------------------------------------------------------------------------------------
# Writing the tree


def render(obj: dict[str, Any]) -> str:
    """Expected results, readable: one member per line, lists of objects one item per line."""
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    items = list(obj.items())
    out = ["{"]
    for i, (k, v) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(v, list) and v:
            out.append(f"  {enc.encode(k)}: [")
            for j, item in enumerate(v):
                out.append("    " + enc.encode(item) + ("," if j < len(v) - 1 else ""))
            out.append("  ]" + comma)
        else:
            out.append(f"  {enc.encode(k)}: {enc.encode(v)}{comma}")
    out.append("}")
    return "\n".join(out) + "\n"


def build() -> list[Case]:
    cases: list[Case] = []
    seen: set[tuple[str, str]] = set()
    for category, name, doc, fn in _BUILDERS:
        assert (category, name) not in seen, f"duplicate case {category}/{name}"
        seen.add((category, name))
        result = fn()
        data, expect = result[0], result[1]
        ext = str(result[2]) if len(result) == 3 else "jsonl"
        cases.append(Case(category, name, doc, data, ext, expect))
    return cases


COMMAND_ORDER = ("checksum", "read", "verify", "repair", "fold")


def readme(cases: list[Case]) -> str:
    out = [
        "# Conformance vectors",
        "",
        "Generated by `spec/tools/gen_vectors.py` (do not edit by hand; change the generator and "
        "rerun it). The protocol, the file layout and how to run them are in "
        "[../conformance.md](../conformance.md).",
        "",
        "Naming in `read/`: `y_` must be accepted by `read` (torn tails and open turns are "
        "accepted: the committed prefix is served), `n_` must be rejected, `i_` is "
        "implementation-defined: the expected file holds the behaviour of the reference "
        "implementation, and a different answer is reported but is not a failure.",
        "",
    ]
    titles = {
        "checksum": "checksum/: CRC-32 of the input bytes",
        "read": "read/: framing, checksum, seq, header, classification",
        "repair": "repair/: classification, the cut, kept events and synthesized closers",
        "fold": "fold/: the model-visible messages in the neutral form",
        "compat": "compat/: unknown members and types, newer minor and major versions",
    }
    for category in CATEGORIES:
        mine = [c for c in cases if c.category == category]
        out += [f"## {titles[category]}", ""]
        if category == "fold":
            out += [
                "Provisional: the items follow the neutral form of jsonltape's "
                "`jsonltape.fold.messages()` (`seq`, `time`, `type`, `message`, and for tool "
                "results `call_id` plus `error`/`synthetic` when set) until the spec's fold "
                "section defines it; the cases only use §8.6 (append, replace, retract).",
                "",
            ]
        if not mine:
            out += ["No cases yet.", ""]
            continue
        out += ["| case | commands | what it checks |", "| --- | --- | --- |"]
        for c in mine:
            cmds = ", ".join(k for k in COMMAND_ORDER if k in c.expect)
            doc = c.doc.replace("|", "\\|")
            out.append(f"| `{c.name}.{c.ext}` | {cmds} | {doc} |")
        out.append("")
    counts = ", ".join(f"{cat} {sum(1 for c in cases if c.category == cat)}" for cat in CATEGORIES)
    total = sum(len(c.expect) for c in cases)
    out += [f"{len(cases)} inputs ({counts}); {total} expected results.", ""]
    return "\n".join(out)


def write_tree(out: Path) -> list[Case]:
    cases = build()
    for category in CATEGORIES:
        d = out / category
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    for c in cases:
        d = out / c.category
        (d / f"{c.name}.{c.ext}").write_bytes(c.data)
        for cmd, expected in c.expect.items():
            assert cmd in COMMAND_ORDER, cmd
            (d / f"{c.name}.{cmd}.json").write_text(render(expected), encoding="utf-8")
    (out / "README.md").write_text(readme(cases), encoding="utf-8")
    # Inputs are exact bytes (CRLF, NUL, invalid UTF-8): keep git's hands off them.
    (out / ".gitattributes").write_text("* -text\n*.json text eol=lf\n*.md text eol=lf\n")
    return cases


def compare_trees(a: Path, b: Path) -> list[str]:
    """Relative paths that differ between two trees (missing on one side or different bytes)."""

    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}

    fa, fb = files(a), files(b)
    diff = sorted(fa ^ fb)
    diff += sorted(p for p in fa & fb if not filecmp.cmp(a / p, b / p, shallow=False))
    return diff


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=Path, default=VECTORS, help="where to write (default: %(default)s)"
    )
    ap.add_argument(
        "--check", action="store_true", help="compare a rebuild with --out, write nothing"
    )
    args = ap.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(Path(tmp))
            diff = compare_trees(Path(tmp), args.out)
        for p in diff:
            print(f"differs: {p}")
        print(
            "vectors are up to date"
            if not diff
            else f"{len(diff)} file(s) differ; rerun the generator"
        )
        return 1 if diff else 0
    cases = write_tree(args.out)
    print(f"wrote {len(cases)} cases to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
