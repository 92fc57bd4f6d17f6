"""repair/: classification, the cut, the kept events and the synthesized closers (§10.3)."""

from __future__ import annotations

import random

from .common import (
    Log,
    after_bad,
    frame_obj,
    msg,
    typical,
)
from .expect import (
    Built,
    closer_result,
    closer_step,
    closer_turn,
)
from .read_span import V11, pending_call
from .registry import Closers, case, repair, table


@repair("clean", "A cleanly closed session: nothing to do.")
def clean_closed(log: Log) -> Closers:
    typical(log)
    log.flush(closed=True)
    return []


@repair(
    "clean",
    "Clean but never checkpointed: nothing is cut and nothing closed (repair may add a "
    "closing checkpoint, which is not listed).",
)
def clean_no_checkpoint(log: Log) -> Closers:
    log.exchange("a", "b")
    return []


@repair("torn-tail", "A torn last line outside any turn: cut at its start.")
def torn_mid_line(log: Log) -> Closers:
    log.exchange("a", "b")
    log.flush()
    log.bad(frame_obj(log.envelope("turn/start", {}))[:20])
    return []


@repair(
    "torn-tail",
    "The tail stops inside the crc suffix of the last line, inside a turn: cut, then the "
    "turn is closed.",
)
def torn_in_crc_suffix(log: Log) -> Closers:
    log.exchange("a", "b")
    log.flush()
    t = log.turn_start()
    log.user("hi")
    log.bad(
        frame_obj(
            log.envelope("assistant/message", msg("assistant", "a", "hel"), surface="append")
        )[:-6]
    )
    return [closer_turn(t)]


@repair("torn-tail", "4096 zero bytes after the last checkpoint: cut.")
def zero_filled_tail(log: Log) -> Closers:
    log.exchange("a", "b")
    log.flush()
    log.bad(bytes(4096))
    return []


@repair("torn-tail", "Random bytes (some of them newlines) after the last checkpoint: cut.")
def garbage_tail(log: Log) -> Closers:
    rng = random.Random(6)
    log.exchange("a", "b")
    log.flush()
    junk = bytes(rng.choice(b'\n{}":,abcdef0123456789\x00\xff') for _ in range(700))
    log.bad(b"\x00" + junk)
    return []


@repair(
    "torn-tail",
    "A torn line, then complete lines with good CRCs and seqs (no valid checkpoint): all of "
    "it is the crash tail and is cut; the open turn before it is closed.",
)
def good_looking_lines_after_bad_line(log: Log) -> Closers:
    log.exchange("a", "b")
    log.flush()
    t = log.turn_start()
    log.bad(
        frame_obj(log.envelope("user/message", msg("user", "u", "x"), surface="append"))[:40]
        + b"\n"
    )
    log.seq += 1
    log.put(
        frame_obj(log.envelope("assistant/message", msg("assistant", "a", "y"), surface="append")),
        good=False,
    )
    log.put(frame_obj(log.envelope("turn/end", {"turn": t, "reason": "completed"})), good=False)
    return [closer_turn(t)]


@repair(
    "open-turn",
    "Crash after a tool/call was recorded and before its result: outcome unknown "
    "(TOOL_OUTCOME_UNKNOWN, sources = the tool/call), then step/end and turn/end.",
)
def open_turn_tool_recorded(log: Log) -> Closers:
    t = log.turn_start()
    log.user("delete the temp files")
    s = log.step_start()
    log.assistant(calls=[("call-7", "Bash", {"cmd": "rm -rf tmp/"})])
    c = log.tool_call("call-7", "Bash", {"cmd": "rm -rf tmp/"})
    log.flush()
    return [closer_result("call-7", c), closer_step(s, t), closer_turn(t)]


@repair(
    "open-turn",
    "Crash after the assistant asked for a tool and before the tool/call was recorded: not "
    "started (TOOL_NOT_STARTED, no sources), then step/end and turn/end.",
)
def open_turn_tool_not_recorded(log: Log) -> Closers:
    t = log.turn_start()
    log.user("list the files")
    s = log.step_start()
    log.assistant("Let me look.", calls=[("call-8", "ls", {})])
    return [closer_result("call-8", None), closer_step(s, t), closer_turn(t)]


@repair(
    "open-turn",
    "Four calls in one turn: answered (no closer), recorded (outcome unknown), only asked "
    "(not started), and a tool/call without an assistant part (outcome unknown); closers in "
    "order of first appearance.",
)
def open_turn_mixed_calls(log: Log) -> Closers:
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
    return [
        closer_result("c-b", cb),
        closer_result("c-c", None),
        closer_result("c-d", cd),
        closer_step(s, t),
        closer_turn(t),
    ]


@repair("open-turn", "An open step and no tool calls: step/end then turn/end.")
def open_step(log: Log) -> Closers:
    t = log.turn_start()
    log.user("think")
    s = log.step_start()
    log.assistant("thinking…")
    return [closer_step(s, t), closer_turn(t)]


@repair("open-turn", "An open turn with no step: only turn/end.")
def open_turn_no_step(log: Log) -> Closers:
    t = log.turn_start()
    log.user("hi")
    return [closer_turn(t)]


@repair(
    "open-turn",
    "The open turn started before the last two checkpoints (which record it in data.turn); "
    "its pending call was made before them.",
)
def open_turn_spanning_checkpoints(log: Log) -> Closers:
    t = log.turn_start()
    log.user("build it")
    s = log.step_start()
    log.assistant(calls=[("c1", "Bash", {"cmd": "make"})])
    c = log.tool_call("c1", "Bash", {"cmd": "make"})
    log.flush()
    log.event("com.example/progress", {"pct": 50}, ignorable=True)
    log.flush()
    return [closer_result("c1", c), closer_step(s, t), closer_turn(t)]


@repair(
    "open-turn",
    "The open turn started before a checkpoint that does not record it (data.turn is "
    "OPTIONAL in §8.5). The turn is open all the same and must be closed.",
)
def open_turn_checkpoint_without_turn(log: Log) -> Closers:
    t = log.turn_start()
    log.user("hi")
    log.flush(turn=False)
    log.assistant("hel")
    return [closer_turn(t)]


@repair(
    "clean", "A turn left open by a writer that closed cleanly: clean, no closers (§10.1 item 6)."
)
def deliberately_open_turn(log: Log) -> Closers:
    log.turn_start()
    log.user("one event per run")
    log.flush()
    log.flush(closed=True)
    return []


@repair(
    "open-turn",
    "A closed checkpoint, then the session was reopened and crashed inside a new turn: "
    "open-turn; the earlier turn's unanswered call is not closed again.",
)
def reopened_then_crashed(log: Log) -> Closers:
    log.turn_start()
    log.user("x")
    log.assistant(calls=[("old", "ls", {})])
    log.turn_end("aborted")
    log.flush()
    log.flush(closed=True)
    t = log.turn_start()
    log.user("again")
    return [closer_turn(t)]


@repair(
    "torn-tail",
    "A torn tail cut first, then the open turn closed; the call recorded before the tear gets "
    "an outcome-unknown result.",
)
def torn_tail_and_pending_call(log: Log) -> Closers:
    t = log.turn_start()
    log.user("fetch it")
    log.assistant(calls=[("c9", "Fetch", {"url": "https://example.com"})])
    c = log.tool_call("c9", "Fetch", {"url": "https://example.com"})
    log.flush()
    log.bad(frame_obj(log.envelope("tool/result", {"call_id": "c9"}))[:33])
    return [closer_result("c9", c), closer_turn(t)]


@case(
    "repair",
    "Damage before a valid checkpoint: repair refuses (unless forced, which is not part of "
    "the protocol) and reports line and offset.",
)
def corrupt_refused() -> Built:
    log = Log()
    log.exchange("a", "b")
    log.bad(frame_obj(log.envelope("turn/start", {"input": "q"})).replace(b'"q"', b'"Q"'))
    log.seq += 1
    after_bad(log)
    assert log.bad_line is not None
    return log.data(), {
        "repair": {"error": "corrupt", "line": log.bad_line, "offset": log.bad_offset}
    }


table(
    "repair",
    (
        "not_a_session",
        "A file that is not a session: refused, nothing written.",
        lambda: (b"just text\n", {"repair": {"error": "not-jsonltape"}}),
    ),
)


# Format 1.1: spans (read_span.py has the read cases and the rules).


@repair(
    "torn-tail",
    "A 1.1 file (spans on its checkpoints) crashed in a turn with a recorded call; the torn "
    "tail holds a torn line and a session/flush line whose CRC does not match (no witness). "
    "Cut at B, then the call and the turn closed. The checkpoint repair writes last (not in "
    "the protocol) has a span from just after the last checkpoint that remains: the file "
    "read/y_span_after_repair.",
    **V11,
)
def span_torn_tail(log: Log) -> Closers:
    t, c = pending_call(log)
    log.bad(frame_obj(log.envelope("tool/result", {"call_id": "c9"}))[:40] + b"\n")
    log.seq += 1
    obj = log.envelope(
        "session/flush",
        {"offset": log.size, "seq": log.seq - 1, "span": log.span()},
        ignorable=True,
    )
    line = frame_obj(obj)
    log.put(line[:-11] + b"00000000" + line[-3:], good=False)  # its CRC no longer matches
    return [closer_result("c9", c), closer_turn(t)]


def _open_turn_closed_with(log: Log, uppercase: bool) -> int:
    """A 1.1 file whose last line closes it with its turn open (on purpose); with
    ``uppercase`` the closing checkpoint's span crc is in uppercase hex (not a span)."""
    log.exchange("a", "b")
    log.flush()
    t = log.turn_start()
    log.user("one event per run")
    span = log.span()
    if uppercase:
        assert span["crc"] != span["crc"].upper(), "pick content whose span crc has a letter"
        span["crc"] = span["crc"].upper()
    log.flush(closed=True, span=span)
    return t


@repair(
    "clean",
    "A 1.1 file whose writer closed cleanly with a turn open on purpose: the closing "
    "checkpoint, span and all, is valid: clean, no closers (as deliberately_open_turn).",
    **V11,
)
def span_closing_checkpoint(log: Log) -> Closers:
    _open_turn_closed_with(log, uppercase=False)
    return []


@repair(
    "open-turn",
    "The same file with the closing checkpoint's span crc in uppercase: that line is good but "
    "not a valid checkpoint, so the last valid checkpoint is the one before the turn and the "
    "turn was left open by a crash: open-turn, closed by repair.",
    **V11,
)
def span_malformed_closing_checkpoint(log: Log) -> Closers:
    t = _open_turn_closed_with(log, uppercase=True)
    return [closer_turn(t)]
