"""Fold benchmark: how long folding a big session takes, against bare decoding of its lines.

Builds a session of N events (default 1,000,000) shaped like a real agent log: per turn a user
message, streamed chunks, an assistant message, every other turn a tool call and its result,
checkpoints every 64 events, a revision every 100 turns and a compaction every 2,000 turns.
About one event in ten is a message. Then it times, on the same file:

* ``read``: iterating the raw lines (the I/O floor);
* ``decode``: ``msgspec.json.decode`` of every line into plain objects (the baseline);
* ``decode-event``: every line into :class:`jsonltape.Event` (what ``jsonltape.read`` does);
* ``fold``: ``jsonltape.fold.fold_file`` (CRC check, surface fold, validation of messages);
* ``messages``: the neutral ``messages()`` output, and ``openai``: the OpenAI request body;
* ``fold --at``: folding up to the middle of the file.

It also reports the peak Python memory (tracemalloc) of ``fold`` next to the file size and
the surface size, to show that memory follows the surface, not the file.

Run: ``.venv/bin/python benchmarks/bench_fold.py [--events N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import msgspec

from jsonltape import _framing, fold
from jsonltape.events import Event

_enc = msgspec.json.Encoder()


def build(path: Path, events: int, compact_every: int = 2000) -> dict[str, int]:
    """Write a synthetic session of about ``events`` events; return counts."""
    t0 = 1_700_000_000_000
    out = bytearray()
    lines = 0
    seq = 0
    size = 0
    since_flush = 0
    messages = 0
    turn_open: list[int] = []
    live: list[int] = []  # seqs of the messages on the surface

    def emit(
        type_: str,
        data: dict,
        surface: object = None,
        sources: list[int] | None = None,
        ignorable: bool = False,
    ) -> int:
        nonlocal seq, size, lines, since_flush
        line = _framing.frame(
            _enc.encode(Event(seq, type_, t0 + seq, data, surface, sources, None, ignorable))
        )
        out.extend(line)
        s = seq
        seq += 1
        size += len(line)
        lines += 1
        since_flush += 1
        if type_ in ("user/message", "assistant/message", "tool/result"):
            if surface == "append":
                live.append(s)
            elif isinstance(surface, dict):
                i, j = live.index(surface["start"]), live.index(surface["end"])
                live[i : j + 1] = [s]
        return s

    def msg(role: str, text: str, mid: str, extra: list[dict] | None = None) -> dict:
        parts = [{"type": "text", "content": text}] + (extra or [])
        return {"message": {"id": mid, "role": role, "parts": parts}}

    emit(
        "session/start",
        {"format": "jsonltape", "version": 1, "minor": 0, "id": "bench", "created": t0},
    )
    emit(
        "request/header",
        {
            "model": "bench-model",
            "system": "You are a benchmark.",
            "tools": [{"name": "Read", "parameters": {"type": "object"}}],
        },
    )
    turn = 0
    first_message: int | None = None
    while seq < events:
        turn += 1
        start = emit("turn/start", {})
        turn_open.append(start)
        u = emit(
            "user/message",
            msg("user", f"question {turn}: " + "lorem ipsum " * 8, f"u{turn}"),
            "append",
        )
        messages += 1
        if first_message is None:
            first_message = u
        for i in range(25):
            emit("assistant/chunk", {"index": 0, "delta": f"tok{i} "}, ignorable=True)
        if turn % 2:
            cid = f"c{turn}"
            call = {
                "type": "tool_call",
                "id": cid,
                "name": "Read",
                "arguments": {"file_path": f"src/mod{turn % 500}.py"},
            }
            emit("assistant/message", msg("assistant", "reading", f"a{turn}", [call]), "append")
            emit(
                "tool/call",
                {
                    "call_id": cid,
                    "name": "Read",
                    "arguments": {"file_path": f"src/mod{turn % 500}.py"},
                },
            )
            emit(
                "tool/result",
                {
                    "call_id": cid,
                    "message": {
                        "id": f"r{turn}",
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": cid, "response": "x = 1\n" * 40}
                        ],
                    },
                },
                "append",
            )
            messages += 2
        a = emit(
            "assistant/message",
            msg("assistant", f"answer {turn} " + "dolor " * 20, f"b{turn}"),
            "append",
        )
        messages += 1
        if turn % 100 == 0:
            a = emit(
                "assistant/message",
                msg("assistant", f"revised answer {turn}", f"b{turn}"),
                {"op": "replace", "start": a, "end": a},
                [a],
            )
            messages += 1
        emit("turn/end", {"turn": start, "reason": "completed"})
        if compact_every and turn % compact_every == 0 and first_message is not None:
            # compact everything so far (a replace of the whole surface so far)
            cs = emit("compaction/start", {"start": first_message, "end": a})
            sm = emit(
                "compaction/summary",
                {
                    "compaction": cs,
                    "summary": f"summary {turn}",
                    "start": first_message,
                    "end": a,
                    "count": 1,
                    "chars": 10,
                    "shadowed_chars": 1,
                },
            )
            shadowed = list(live)  # every message on the surface so far
            m = emit(
                "user/message",
                msg("user", f"summary {turn}", f"s{turn}"),
                {"op": "replace", "start": first_message, "end": a},
                shadowed + [sm],
            )
            emit("compaction/end", {"compaction": cs, "message": m})
            messages += 1
            first_message = m
        if since_flush >= 64:
            off = size
            emit("session/flush", {"offset": off, "seq": seq - 1}, ignorable=True)
            since_flush = 0
        if len(out) > 1 << 22:
            with open(path, "ab") as f:
                f.write(out)
            out.clear()
    with open(path, "ab") as f:
        f.write(out)
    os.chmod(path, 0o600)
    return {"events": seq, "messages": messages, "bytes": size}


def timed(fn: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def measure(path: Path, counts: dict[str, int], repeat: int) -> dict[str, float]:
    raw_lines = path.read_bytes().splitlines(keepends=True)
    decode_any = msgspec.json.Decoder().decode
    decode_event = msgspec.json.Decoder(Event).decode

    def read() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in _framing.iter_lines(fd, 0):
                pass
        finally:
            os.close(fd)

    results = {
        "read": timed(read, repeat),
        "decode": timed(lambda: [decode_any(x) for x in raw_lines], repeat),
        "decode-event": timed(lambda: [decode_event(x) for x in raw_lines], repeat),
        "fold": timed(lambda: fold.fold_file(path), repeat),
        "messages": timed(lambda: fold.messages(path), repeat),
        "openai": timed(lambda: fold.messages(path, format="openai"), repeat),
        "fold --at middle": timed(lambda: fold.fold_file(path, counts["events"] // 2), repeat),
    }
    raw_lines.clear()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()} {platform.processor() or ''} "
        f"{os.cpu_count()} cpus, Python {sys.version.split()[0]}, "
        f"msgspec {msgspec.__version__}, {platform.system()} {platform.release()}"
    )
    shapes = {"compacted every 2,000 turns": 2000, "never compacted": 0}
    for shape, every in shapes.items():
        with tempfile.TemporaryDirectory() as d:
            os.chmod(d, 0o700)
            path = Path(d) / "bench.jsonl"
            counts = build(path, args.events, every)
            results = measure(path, counts, args.repeat)
            surface = len(fold.fold_file(path).surface)
            tracemalloc.start()
            fold.fold_file(path)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        base = results["decode"]
        print(
            f"\n{shape}: {counts['events']:,} events, {counts['messages']:,} message events, "
            f"{counts['bytes'] / 1e6:.0f} MB; surface at the end: {surface:,} messages"
        )
        print(f"{'step':<18} {'seconds':>8} {'vs decode':>10}")
        for name, secs in results.items():
            print(f"{name:<18} {secs:8.2f} {secs / base:9.2f}x")
        print(
            f"fold peak Python memory: {peak / 1e6:.1f} MB "
            f"({peak / counts['bytes'] * 100:.1f}% of the file)"
        )


if __name__ == "__main__":
    main()
