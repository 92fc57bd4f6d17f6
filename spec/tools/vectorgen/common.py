"""Shared building blocks: the CRC-32, compact JSON, framing and the session-file builder.

Everything here follows the spec's text (§4 framing, §5 checksum, §6 envelope, §10.1 writer
protocol), written again without jsonltape, so the vectors are a second reading of the spec.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .expect import Built, expect_refused, expect_session

SPEC_DIR = Path(__file__).resolve().parent.parent.parent
SPEC_FILE = SPEC_DIR / "jsonltape-v1.md"

T0 = 1764460800000  # 2025-11-30T00:00:00Z, the time of the spec's example
SID = "01KB7X3M0000000000000000AB"

# ----------------------------------------------------------------------------------------------
# Framing (§4, §5)


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


#: ``Log.flush``'s default: the span the rule gives (in a log with ``spans``), else none.
RIGHT_SPAN: Any = object()


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
        spans: bool = False,
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
        self.spans = spans  # a 1.1 writer: flush() puts a span on every checkpoint
        self.span_from = 0  # the offset just after the last session/flush (or header) line
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
        if type_ in ("session/start", "session/flush"):
            self.span_from = self.size
        self.seq += 1
        self.last_time = self.time
        self.time += 1 + (seq * 7919) % 13
        return seq

    def span(self, start: int | None = None) -> dict[str, Any]:
        """The span of a checkpoint written now (format 1.1): ``from`` is ``start``, by default
        just after the last session/flush line (or the header), and ``crc`` the CRC-32 of the
        bytes from there to the end of the file, where the checkpoint starts."""
        start = self.span_from if start is None else start
        return {"from": start, "crc": crc_hex(self.data()[start : self.size])}

    def flush(
        self,
        *,
        closed: bool = False,
        turn: bool = True,
        offset: int | None = None,
        span: Any = RIGHT_SPAN,
    ) -> int:
        """A checkpoint: its own offset, the last seq before it, the open turn, ``closed``, and
        ``span`` (any JSON value, ``None`` included, written as given) or, in a log with
        ``spans``, the right span (the last member, as the reference writer orders them)."""
        data: dict[str, Any] = {"offset": self.size if offset is None else offset}
        data["seq"] = self.seq - 1
        if turn and self.turn is not None:
            data["turn"] = {"seq": self.turn[0], "offset": self.turn[1]}
        if closed:
            data["closed"] = True
        if span is not RIGHT_SPAN:
            data["span"] = span
        elif self.spans:
            data["span"] = self.span()
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
# Text and spec helpers


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
# Files shared by several categories


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


def msg(role: str, prefix: str, text: str) -> dict[str, Any]:
    return {
        "message": {"id": prefix + "1", "role": role, "parts": [{"type": "text", "content": text}]}
    }


def header_line(**data: Any) -> bytes:
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


def with_body(first: bytes) -> bytes:
    """``first`` as line 1, then a few good lines (seq 1..) as a real file would have."""
    log = Log()
    log.exchange("a", "b")
    body = b"".join(log.committed[1:])
    return first + body


def refused_header(first: bytes, error: str = "not-jsonltape", *, repair: bool = False) -> Built:
    """``first`` as line 1 of an otherwise good file, which read and verify must refuse."""
    return with_body(first), expect_refused(error, repair=repair)


def after_bad(log: Log) -> None:
    """Good-looking lines after the damage, then a valid checkpoint (which proves corruption)."""
    log.put(frame_obj(log.envelope("com.example/after", {"n": 1}, ignorable=True)), good=False)
    obj = log.envelope("session/flush", {"offset": log.size, "seq": log.seq - 1}, ignorable=True)
    log.put(frame_obj(obj), good=False)


def damaged(make: Callable[[Log, bytes], bytes], *, prefix_turn: bool = True) -> Built:
    """A good start, one damaged line (``make(log, good_line)``), more lines, a checkpoint."""
    log = Log()
    log.exchange("first", "reply")
    log.flush()
    if prefix_turn:
        log.turn_start()
    good = frame_obj(log.envelope("user/message", msg("user", "u", "damaged?"), surface="append"))
    log.bad(make(log, good))
    log.seq += 1
    after_bad(log)
    return log.data(), expect_session(log, "corrupt")


def corrupt_with_line(prefix_text: str) -> Built:
    """A framed line from hand-written text, then a valid checkpoint: reference says corrupt."""
    log = Log()
    log.turn_start()
    log.bad(frame(prefix_text.replace("SEQ", str(log.seq)).encode("utf-8", "surrogatepass")))
    log.seq += 1
    after_bad(log)
    return log.data(), expect_session(log, "corrupt")
