"""read/ (6 of 7): the span checksum of format 1.1 (``session/flush`` data member ``span``).

A span ``{"from": F, "crc": C}`` is the CRC-32 of the bytes from just after the previous
session/flush line (or the header) to where its checkpoint starts. It may spare a reader the
line CRCs inside it, but it never changes a verdict on a file a conforming writer wrote: a span
that does not match, or cannot be used, says nothing about which line is damaged, and every
line is still judged by its own CRC. A span of the wrong shape makes its line a good line that
is not a valid checkpoint. No case here makes a span match over a line whose own crc is wrong
(a forged span): readers may differ there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .common import Log
from .expect import Built, closer_result, closer_turn, expect_session
from .registry import Builder, session, table

#: How a 1.1 writer starts a session: header minor 1, a span on every checkpoint.
V11: dict[str, Any] = {"header_extra": {"minor": 1}, "spans": True}


@session(
    "read",
    "clean",
    "A 1.1 file (header minor 1) with a span on every checkpoint, the closing one included: "
    "each span covers the lines since the previous checkpoint (or the header); clean.",
    **V11,
)
def y_span_clean(log: Log) -> None:
    log.event("request/header", {"model": "gpt-5", "provider": "openai"})
    log.flush()  # the first span starts just after the header
    for i in range(3):
        log.turn_start()
        log.user(f"question {i}")
        log.assistant(f"answer {i}")
        log.flush()
        log.turn_end()
    log.flush(closed=True)


@session(
    "read",
    "clean",
    "An empty span: a closing checkpoint right after a checkpoint has from equal to its own "
    'offset and crc "00000000" (CRC-32 of no bytes). It is a valid checkpoint, so the turn '
    "left open on purpose makes the file clean.",
    **V11,
)
def y_span_empty(log: Log) -> None:
    log.turn_start()
    log.user("one event per run")
    log.flush()
    assert log.span() == {"from": log.size, "crc": "00000000"}
    log.flush(closed=True)


@session(
    "read",
    "clean",
    "A 1.0 file appended to by a 1.1 writer: the header says minor 0, the old checkpoints "
    "have no span, the new ones do (the first from just after the last span-less checkpoint). "
    "Readers do not look at minor to use spans; clean.",
)
def y_span_in_minor_0_file(log: Log) -> None:
    log.exchange("written by 1.0", "ok")
    log.flush()
    log.flush(closed=True)
    log.spans = True
    log.exchange("appended by 1.1", "ok")
    log.flush()
    log.flush(closed=True)


def _closing(state: str, make: Callable[[Log, dict[str, Any]], Any]) -> Builder:
    """A 1.1 file whose turn is open, ending in a checkpoint with closed: true whose span is
    ``make(log, right_span)``. Valid (clean) when the span has the valid shape, whether or not
    it matches; otherwise the line is good but no valid checkpoint, so it cannot close
    (open-turn)."""

    def build() -> Built:
        log = Log(**V11)
        log.exchange("a", "b")
        log.flush()
        log.turn_start()
        log.user("one event per run, and a line for the span to cover")
        log.flush(closed=True, span=make(log, log.span()))
        return log.data(), expect_session(log, state)

    return build


def _uppercase(log: Log, span: dict[str, Any]) -> dict[str, Any]:
    assert span["crc"] != span["crc"].upper(), "pick content whose span crc has a letter"
    return {"from": span["from"], "crc": span["crc"].upper()}


def _wrong_crc(log: Log, span: dict[str, Any]) -> dict[str, Any]:
    wrong = f"{int(span['crc'], 16) ^ 0x00000001:08x}"
    return {"from": span["from"], "crc": wrong}


def _from_header(log: Log, span: dict[str, Any]) -> dict[str, Any]:
    """from is the end of the header, not of the previous checkpoint; crc matches that range."""
    start = len(log.committed[0])
    assert start < span["from"]
    return log.span(start)


table(
    "read",
    (
        "y_span_crc_wrong",
        "The closing checkpoint's span crc does not match its bytes, yet every line is intact: "
        "every line passes its own CRC, so all are good (the span says nothing about which line "
        "is damaged), and a span of the valid shape leaves the checkpoint valid: clean.",
        _closing("clean", _wrong_crc),
    ),
    (
        "y_span_from_not_previous_checkpoint",
        "The closing checkpoint's span starts just after the header, not after the previous "
        "checkpoint (its crc matches that range). A reader cannot use it and checks each line "
        "by its own CRC; the shape is valid (0 <= from <= offset), so the checkpoint is valid: "
        "clean.",
        _closing("clean", _from_header),
    ),
    (
        "y_span_unknown_member",
        "A span with an unknown member beside from and crc (additive, like any unknown member): "
        "the checkpoint is valid and closes the open turn: clean.",
        _closing("clean", lambda log, span: {**span, "com.example.algo": "crc32"}),
    ),
    (
        "y_span_null",
        "A closing checkpoint whose span is null: like a turn of null, the same as no span "
        "(spec §10.2), so the checkpoint is valid and closes the open turn: clean.",
        _closing("clean", lambda log, span: None),
    ),
    (
        "y_span_crc_uppercase",
        "The closing checkpoint's span crc is right but in uppercase hex: not the shape of a "
        "span (8 lowercase hex digits), so the line is good but not a valid checkpoint and "
        "cannot close the open turn: open-turn.",
        _closing("open-turn", _uppercase),
    ),
    (
        "y_span_crc_seven_digits",
        "A span crc of 7 hex digits: the line is good, but not a valid checkpoint; the turn "
        "stays open: open-turn.",
        _closing("open-turn", lambda log, span: {**span, "crc": span["crc"][1:]}),
    ),
    (
        "y_span_crc_final_newline",
        'A span crc of its 8 right digits and a newline ("…\\n", escaped): not 8 hex digits, '
        "so not a valid checkpoint (a regex whose $ matches before a final newline would let "
        "it through): open-turn.",
        _closing("open-turn", lambda log, span: {**span, "crc": span["crc"] + "\n"}),
    ),
    (
        "y_span_crc_not_string",
        "A span crc written as a number (the CRC's integer value): not a string of 8 hex "
        "digits, so not a valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: {**span, "crc": int(span["crc"], 16)}),
    ),
    (
        "y_span_crc_missing",
        "A span without crc: not the shape of a span, so not a valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: {"from": span["from"]}),
    ),
    (
        "y_span_from_beyond_offset",
        "A span whose from is one byte past the checkpoint's own offset (from > offset): not a "
        "valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: {"from": log.size + 1, "crc": "00000000"}),
    ),
    (
        "y_span_from_negative",
        "A span whose from is -1: not a valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: {**span, "from": -1}),
    ),
    (
        "y_span_from_missing",
        "A span without from: not a valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: {"crc": span["crc"]}),
    ),
    (
        "y_span_from_not_integer",
        "A span whose from is a string (the right offset, quoted): not an integer, so not a "
        "valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: {**span, "from": str(span["from"])}),
    ),
    (
        "y_span_not_object",
        "A span written as a string (the crc alone): span, if present, is an object; not a "
        "valid checkpoint: open-turn.",
        _closing("open-turn", lambda log, span: span["crc"]),
    ),
)


def _replayed(log: Log, line: int, old: bytes, new: bytes, state: str) -> Built:
    """``log``'s file with ``old`` replaced by ``new`` (same length) in its 0-based ``line``,
    after the writer wrote it (spans and line CRCs are those of the original bytes)."""
    lines = log.data().splitlines(keepends=True)
    assert len(old) == len(new) and lines[line].count(old) == 1
    lines[line] = lines[line].replace(old, new)
    out = Log(empty=True)
    for i, raw in enumerate(lines):
        out.raw(raw, good=i < line)
    return out.data(), expect_session(out, state)


def _damaged_in_span(after_last_checkpoint: bool) -> Builder:
    def build() -> Built:
        log = Log(**V11)
        log.exchange("a", "b")
        log.flush()
        log.turn_start()
        log.user("before")
        target = log.lines
        log.user("damaged?")
        log.assistant("after")
        if not after_last_checkpoint:
            log.flush()
            log.turn_end()
            log.flush(closed=True)
        state = "torn-tail" if after_last_checkpoint else "corrupt"
        return _replayed(log, target, b"damaged?", b"damaged!", state)

    return build


table(
    "read",
    (
        "n_span_damaged_byte",
        "One byte changed inside a line covered by a span (the JSON still parses): the span no "
        "longer matches, which says nothing about which line is damaged; the line's own CRC "
        "does not match, so it is B, and the checkpoint after it is a witness: corrupt at that "
        "line.",
        _damaged_in_span(False),
    ),
    (
        "y_span_damaged_byte_after_last_checkpoint",
        "The same one-byte damage in a line after the last checkpoint of a 1.1 file: B is that "
        "line and no witness follows: torn-tail.",
        _damaged_in_span(True),
    ),
)


def pending_call(log: Log) -> tuple[int, int]:
    """A 1.1 session crashed in a turn with a recorded tool call after a checkpoint; returns
    (turn seq, tool/call seq). Shared with repair/span_torn_tail."""
    log.exchange("warm-up", "ok")
    log.flush()
    t = log.turn_start()
    log.user("fetch it")
    log.assistant(calls=[("c9", "Fetch", {"url": "https://example.com"})])
    c = log.tool_call("c9", "Fetch", {"url": "https://example.com"})
    log.flush()
    return t, c


@session(
    "read",
    "clean",
    "repair/span_torn_tail after repair: the torn tail (with the session/flush line in it) "
    "cut, the closers appended with the time of the last committed event, then a checkpoint "
    "whose span starts just after the last checkpoint that remains and covers the closers.",
    **V11,
)
def y_span_after_repair(log: Log) -> None:
    t, c = pending_call(log)
    start = log.span_from  # just after the checkpoint line pending_call ended with
    last = log.last_time  # closers carry the time of the last committed event (§10.3)
    for closer in (closer_result("c9", c), closer_turn(t)):
        log.time = last
        log.event(
            closer["type"],
            closer["data"],
            surface=closer.get("surface"),
            sources=closer.get("sources"),
        )
    log.time = last
    assert log.span()["from"] == start
    log.flush()
