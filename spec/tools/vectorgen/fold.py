"""fold/: the model-visible messages in the neutral form (§8.7.10); only §8.6 surface ops."""

from __future__ import annotations

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
from .registry import case, fold, table


@fold("A session with no messages folds to an empty history.")
def header_only(log: Log) -> list[int]:
    return []


@fold(
    "User, assistant tool call, tool result, assistant: every message appended in order; turns, "
    "steps, tool/call, request/header and checkpoints are not messages."
)
def tool_round_trip(log: Log) -> list[int]:
    typical(log)
    return [3, 5, 8, 10]


@fold(
    "A user/message with role system, a reasoning part, an extension part type (kept as is) "
    "and a tool_call_response with is_error."
)
def system_and_parts(log: Log) -> list[int]:
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
    return [1, u, a, r]


@fold(
    "A revision replaces one message in place (surface replace S..S, sources [S]); the old "
    "event stays in the file but leaves the history."
)
def replace_one(log: Log) -> list[int]:
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
    return [v, a]


@fold(
    "One event replaces a range of three messages (S..E, sources list all three); it takes the "
    "place of S."
)
def replace_range(log: Log) -> list[int]:
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
    return [first, r, last]


@fold("surface/retract removes a range of messages without a replacement.")
def retract(log: Log) -> list[int]:
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
    return [u, c]


@fold(
    "A turn closed by repair: the synthetic error tool/result is a message like any other "
    "(with its error and synthetic members); step/end and turn/end are not messages."
)
def repaired_turn(log: Log) -> list[int]:
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
    return [u, a, seqs[0]]


@fold("Only committed events fold: a message in a torn tail is not in the history.")
def torn_tail(log: Log) -> list[int]:
    u = log.user("hello")
    a = log.assistant("hi")
    log.flush()
    log.bad(frame_obj(log.envelope("user/message", msg("user", "u", "lost")))[:50])
    return [u, a]


@fold("A crashed, still open turn folds to the messages logged so far (folding does not repair).")
def open_turn(log: Log) -> list[int]:
    log.turn_start()
    u = log.user("run it")
    a = log.assistant(calls=[("c1", "Bash", {"cmd": "make"})])
    log.tool_call("c1", "Bash", {"cmd": "make"})
    return [u, a]


@fold("Streaming chunks, checkpoints and unknown ignorable events are skipped.")
def skips_ignorable(log: Log) -> list[int]:
    log.turn_start()
    u = log.user("stream it")
    log.event("assistant/chunk", {"delta": "str"}, ignorable=True)
    log.event("assistant/chunk", {"delta": "eamed"}, ignorable=True)
    log.event("com.example/latency", {"ms": 812}, ignorable=True)
    log.flush()
    a = log.assistant("streamed")
    log.turn_end()
    log.flush(closed=True)
    return [u, a]


@case("fold", "Damage before a checkpoint: folding refuses, like reading.")
def corrupt() -> Built:
    log = Log()
    log.user("a")
    log.bad(frame_obj(log.envelope("turn/start", {"input": "q"})).replace(b'"q"', b'"Q"'))
    log.seq += 1
    after_bad(log)
    return log.data(), {"fold": {"error": "corrupt"}}


table(
    "fold",
    (
        "not_a_session",
        "A file that is not a session: folding refuses.",
        lambda: (b"[]\n", {"fold": {"error": "not-jsonltape"}}),
    ),
)
