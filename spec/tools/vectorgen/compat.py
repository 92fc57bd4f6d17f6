"""compat/: unknown members and types, newer minor and major versions (§9)."""

from __future__ import annotations

from .common import (
    T0,
    Log,
    frame_obj,
)
from .expect import (
    Built,
    expect_refused,
    expect_session,
    with_fold,
)
from .registry import case


@case(
    "compat",
    "Unknown members in the header data, the envelope, event data, a message, a part and a "
    "checkpoint: readers ignore them and serve them unchanged.",
)
def unknown_members_everywhere() -> Built:
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
    "An unknown event type without ignorable: read and verify pass it through; folding must "
    "refuse with the type and the line (§9).",
)
def unknown_type_required() -> Built:
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
    "An unknown event type marked ignorable: read and verify pass it through; folding skips it.",
)
def unknown_type_ignorable() -> Built:
    log = Log()
    log.turn_start()
    u = log.user("what does it cost?")
    log.event("com.example/cost", {"usd": 0.002}, ignorable=True)
    a = log.assistant("very little")
    log.turn_end()
    return log.data(), with_fold(expect_session(log, "clean"), log, [u, a])


@case(
    "compat",
    "Minor version 7 with additions a 1.0 reader does not know (a header member, an ignorable "
    "type, a part type, an envelope member): accepted.",
)
def minor_7() -> Built:
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
    "Major version 2, with a header shape a v1 reader does not know (no id, no created): "
    "refused as unsupported-version before the header's shape is looked at; repair refuses "
    "too.",
)
def major_2() -> Built:
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
