"""Core benchmarks (issue 2), each side by side with its baseline in the same run.

    python benchmarks/bench_core.py [--events N] [--durable-events N] [--read-events N]
                                    [--big-mb MB] [--rounds R]

(a) an agent turn through the agent API (``tape.user``, ``tape.assistant`` with a tool call,
    ``tape.tool_call``, ``tape.tool_result``, ``append(..., surface="append")``), default group
    commit, vs a naive stdlib writer of the same events (json.dumps + write, no fsync); and
    (a plain) ``append("user/message", data)`` alone vs the same writer
(b) append, durability="always", vs a bare os.write + os.fdatasync loop
(c) full read of a 1M-event file vs bare msgspec decoding of each line
(d) open + repair of a torn 1 MB session vs a torn 1 GB session

(a)-(c) alternate jsonltape and baseline ``--rounds`` times (each round: jsonltape, then the
baseline) and report medians, plus the lowest and highest per-round ratio: on a shared VM one
run says little. Prints a markdown table with absolute numbers and ratios (higher ratio =
jsonltape better).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

import jsonltape
from jsonltape import _framing

TEXT = ("The migration adds a NOT NULL column without a default; existing rows fail. " * 5)[:330]


def message(i: int) -> dict[str, object]:
    """A ~400-byte user message as the data of a user/message event."""
    return {
        "message": {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "content": TEXT}]}
    }


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call; CPU counts every thread of the process (the flusher
    too) and leaves out time the VM's other tenants took (steal), which wall time does not."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


class Pair:
    """Per-round wall and CPU times of jsonltape and its baseline, alternated."""

    def __init__(self, ours: Callable[[], None], base: Callable[[], None], rounds: int) -> None:
        self.ours: list[tuple[float, float]] = []
        self.base: list[tuple[float, float]] = []
        for _ in range(rounds):
            self.ours.append(timed(ours))
            self.base.append(timed(base))

    @property
    def o(self) -> float:
        return statistics.median(w for w, _c in self.ours)

    @property
    def b(self) -> float:
        return statistics.median(w for w, _c in self.base)

    def ratio(self) -> str:
        """Wall-time ratio of the medians, and the lowest and highest per-round ratio."""
        per_round = [b[0] / o[0] for o, b in zip(self.ours, self.base, strict=True)]
        return f"{self.b / self.o:.2f}x ({min(per_round):.2f}-{max(per_round):.2f})"

    def cpu_ratio(self) -> str:
        o = statistics.median(c for _w, c in self.ours)
        b = statistics.median(c for _w, c in self.base)
        return f"{b / o:.2f}x"


def steal_percent() -> Callable[[], str]:
    """Start counting the CPU time the hypervisor gave to others (Linux /proc/stat)."""

    def read() -> tuple[int, int] | None:
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        except OSError:
            return None
        ticks = [int(x) for x in fields]
        return (ticks[7] if len(ticks) > 7 else 0), sum(ticks)

    start = read()

    def done() -> str:
        end = read()
        if start is None or end is None or end[1] == start[1]:
            return "n/a"
        return f"{100 * (end[0] - start[0]) / (end[1] - start[1]):.1f}%"

    return done


def bench_append_group(root: Path, n: int) -> tuple[Callable[[], None], Callable[[], None]]:
    def ours() -> None:
        p = root / f"g{time.perf_counter_ns()}.jsonl"
        with jsonltape.open(p, create=True) as tape:
            for i in range(n):
                tape.append("user/message", message(i))

    def naive() -> None:
        p = root / f"n{time.perf_counter_ns()}.jsonl"
        with open(p, "w") as f:
            for i in range(n):
                f.write(
                    json.dumps({"seq": i, "type": "user/message", "time": 0, "data": message(i)})
                    + "\n"
                )
                f.flush()  # a plain append-only logger hands every line to the OS

    return ours, naive


RESULT = ("src/app.py: 41 lines; the migration in line 12 adds the column. " * 5)[:330]


def turn(tape: jsonltape.Tape, i: int) -> None:
    """One agent turn of five events through the API an agent uses."""
    call = f"call-{i}"
    tape.user(TEXT)
    tape.assistant(
        "Let me read the migration first.",
        tool_calls=[{"id": call, "name": "Read", "arguments": {"path": "src/app.py"}}],
        model="model-x",
        usage={"input_tokens": 1200, "output_tokens": 40},
    )
    tape.tool_call("Read", {"path": "src/app.py"}, call_id=call)
    tape.tool_result(call, RESULT)
    tape.append(
        "assistant/message",
        {
            "message": {
                "id": f"a{i}",
                "role": "assistant",
                "parts": [{"type": "text", "content": TEXT}],
            }
        },
        surface="append",
    )


def turn_events(i: int) -> list[tuple[str, dict[str, object]]]:
    """The same five events as (type, data), built the way a naive logger would."""
    call = f"call-{i}"
    return [
        ("user/message", message(i)),
        (
            "assistant/message",
            {
                "message": {
                    "id": f"b{i}",
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": "Let me read the migration first."},
                        {
                            "type": "tool_call",
                            "id": call,
                            "name": "Read",
                            "arguments": {"path": "src/app.py"},
                        },
                    ],
                },
                "model": "model-x",
                "usage": {"input_tokens": 1200, "output_tokens": 40},
            },
        ),
        ("tool/call", {"call_id": call, "name": "Read", "arguments": {"path": "src/app.py"}}),
        (
            "tool/result",
            {
                "call_id": call,
                "message": {
                    "id": f"r{i}",
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": call, "response": RESULT}],
                },
            },
        ),
        (
            "assistant/message",
            {
                "message": {
                    "id": f"a{i}",
                    "role": "assistant",
                    "parts": [{"type": "text", "content": TEXT}],
                }
            },
        ),
    ]


def bench_append_turn(root: Path, turns: int) -> tuple[Callable[[], None], Callable[[], None]]:
    def ours() -> None:
        p = root / f"t{time.perf_counter_ns()}.jsonl"
        with jsonltape.open(p, create=True) as tape:
            for i in range(turns):
                turn(tape, i)

    def naive() -> None:
        p = root / f"m{time.perf_counter_ns()}.jsonl"
        seq = 1
        with open(p, "w") as f:
            for i in range(turns):
                for type_, data in turn_events(i):
                    ev = {"seq": seq, "type": type_, "time": time.time_ns() // 1_000_000}
                    ev["data"] = data
                    f.write(json.dumps(ev) + "\n")
                    f.flush()  # a plain append-only logger hands every line to the OS
                    seq += 1

    return ours, naive


def bench_append_durable(root: Path, n: int) -> tuple[Callable[[], None], Callable[[], None]]:
    def ours() -> None:
        p = root / f"a{time.perf_counter_ns()}.jsonl"
        with jsonltape.open(p, create=True, durability="always") as tape:
            for i in range(n):
                tape.append("user/message", message(i))

    line = json.dumps({"seq": 1, "type": "user/message", "time": 0, "data": message(1)}).encode()

    def bare() -> None:
        p = root / f"b{time.perf_counter_ns()}.jsonl"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for _ in range(n):
                os.write(fd, line + b"\n")
                os.fdatasync(fd)
        finally:
            os.close(fd)

    return ours, bare


def write_fast(path: Path, n: int, pad: int = 0, spans: bool = True) -> None:
    """Build a valid session quickly (framing directly), with a checkpoint every 1000 lines;
    ``spans``: the checkpoints carry a span (format 1.1, what the writer writes), else the
    file is a 1.0 file."""
    enc = msgspec.json.Encoder()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    buf: list[bytes] = []
    size = 0
    header = {"format": "jsonltape", "version": 1, "id": "bench", "created": 0}
    if spans:
        header["minor"] = 1
    line = _framing.frame(
        enc.encode({"seq": 0, "type": "session/start", "time": 0, "data": header})
    )
    buf.append(line)
    size += len(line)
    span_from, span_crc = size, 0
    data = message(0)
    if pad:
        data = {**data, "pad": "p" * pad}
    for seq in range(1, n):
        if seq % 1000 == 0:
            flush: dict[str, Any] = {"offset": size, "seq": seq - 1}
            if spans:
                flush["span"] = {"from": span_from, "crc": f"{span_crc:08x}"}
            ev = {
                "seq": seq,
                "type": "session/flush",
                "time": seq,
                "data": flush,
                "ignorable": True,
            }
        else:
            ev = {
                "seq": seq,
                "type": "user/message",
                "time": seq,
                "data": data,
                "surface": "append",
            }
        line = _framing.frame(enc.encode(ev))
        buf.append(line)
        size += len(line)
        if ev["type"] == "session/flush":
            span_from, span_crc = size, 0
        else:
            span_crc = zlib.crc32(line, span_crc)
        if len(buf) >= 4096:
            os.write(fd, b"".join(buf))
            buf.clear()
    os.write(fd, b"".join(buf))
    os.close(fd)


def bench_read(
    root: Path, n: int, spans: bool = True
) -> tuple[Callable[[], None], Callable[[], None]]:
    p = root / ("read.jsonl" if spans else "read-1.0.jsonl")
    if not p.exists():
        write_fast(p, n, spans=spans)

    def ours() -> None:
        count = 0
        for _ in jsonltape.read(p):
            count += 1
        assert count == n

    dec = msgspec.json.Decoder()

    def bare() -> None:
        count = 0
        with open(p, "rb") as f:
            for raw in f:
                dec.decode(raw)
                count += 1
        assert count == n

    return ours, bare


def bench_verify(
    root: Path, n: int, spans: bool = True
) -> tuple[Callable[[], None], Callable[[], None]]:
    """(verify) ``jsonltape.verify`` of the read benchmark's file vs the same bare decode."""
    p = root / ("read.jsonl" if spans else "read-1.0.jsonl")
    if not p.exists():
        write_fast(p, n, spans=spans)

    def ours() -> None:
        assert jsonltape.verify(p).events == n

    dec = msgspec.json.Decoder()

    def bare() -> None:
        with open(p, "rb") as f:
            for raw in f:
                dec.decode(raw)

    return ours, bare


def bench_open_repair(root: Path, small_mb: int, big_mb: int) -> tuple[float, float]:
    results = []
    for mb in (small_mb, big_mb):
        p = root / f"open{mb}.jsonl"
        n = mb * 1024 * 1024 // 430
        write_fast(p, max(n, 10))
        samples = []
        for _ in range(5):
            with open(p, "ab") as f:
                f.write(b'{"seq":1,"type":"user/message","ti')  # a torn tail to cut
            t0 = time.perf_counter()
            with jsonltape.open(p) as tape:
                tape.user("after the crash")
            samples.append(time.perf_counter() - t0)
        results.append(statistics.median(samples))
        for side in root.glob(f"open{mb}.jsonl.*.torn"):
            side.unlink()
        p.unlink()
    return results[0], results[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100_000, help="events of (a) and (a plain)")
    ap.add_argument("--durable-events", type=int, default=2_000)
    ap.add_argument("--read-events", type=int, default=1_000_000)
    ap.add_argument("--small-mb", type=int, default=1)
    ap.add_argument("--big-mb", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds for (a)-(c)")
    ap.add_argument("--dir", help="where to write (default: a temp dir on the same disk)")
    ap.add_argument(
        "--only",
        default="a,plain,b,c,c1.0,verify,verify1.0,d",
        help="comma-separated benchmarks to run (a,plain,b,c,c1.0,verify,verify1.0,d; "
        "c and verify read a 1.1 file with spans, c1.0 and verify1.0 the same as a 1.0 file)",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    root = Path(tempfile.mkdtemp(prefix="jsonltape-bench-", dir=args.dir))
    os.chmod(root, 0o700)
    steal = steal_percent()
    rows: list[str] = []
    try:
        if "a" in only:
            turns = max(args.events // 5, 1)
            a = Pair(*bench_append_turn(root, turns), args.rounds)
            n = turns * 5
            rows.append(
                f"| (a) agent turns, {n:,} events (user, assistant + tool call, tool/call, "
                f'tool/result, append surface="append"), group commit vs json.dumps+write | '
                f"{a.o / n * 1e6:.2f} µs/event | {a.b / n * 1e6:.2f} µs/event | {a.ratio()} | "
                f"{a.cpu_ratio()} | >= 1.0x (stretch 1.5x) |"
            )
        if "plain" in only:
            n = args.events
            p = Pair(*bench_append_group(root, n), args.rounds)
            rows.append(
                f"| (a plain) append {n:,} user/message, group commit vs json.dumps+write | "
                f"{p.o / n * 1e6:.2f} µs/event | {p.b / n * 1e6:.2f} µs/event | {p.ratio()} | "
                f"{p.cpu_ratio()} | |"
            )
        if "b" in only:
            n = args.durable_events
            b = Pair(*bench_append_durable(root, n), args.rounds)
            rows.append(
                f"| (b) append {n:,} msgs, fsync each vs write+fdatasync | "
                f"{b.o / n * 1e6:.0f} µs/event | {b.b / n * 1e6:.0f} µs/event | {b.ratio()} | "
                f"{b.cpu_ratio()} (waits on the disk) | >= 0.8x |"
            )
        reads = (
            ("c", "read", bench_read, True),
            ("c1.0", "read", bench_read, False),
            ("verify", "verify", bench_verify, True),
            ("verify1.0", "verify", bench_verify, False),
        )
        for key, what, bench, spans in reads:
            if key in only:
                n = args.read_events
                r = Pair(*bench(root, n, spans), args.rounds)
                fmt = "1.1" if spans else "1.0"
                rows.append(
                    f"| ({key}) {what} {n:,} events ({fmt} file) vs msgspec.decode per line | "
                    f"{r.o:.2f} s | {r.b:.2f} s | {r.ratio()} | {r.cpu_ratio()} | >= 0.7x |"
                )
        if "d" in only:
            d = bench_open_repair(root, args.small_mb, args.big_mb)
            rows.append(
                f"| (d) open+repair torn {args.small_mb} MB vs {args.big_mb} MB session | "
                f"{d[0] * 1e3:.2f} ms | {d[1] * 1e3:.2f} ms | {d[0] / d[1]:.2f}x | | "
                "no growth (~1x) |"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        f"{time.strftime('%Y-%m-%d')}; medians of {args.rounds} alternated rounds; "
        f"CPU steal during the run: {steal()}"
    )
    print()
    print(
        "| benchmark | jsonltape | baseline | ratio (baseline/jsonltape wall time; "
        "per-round range) | CPU-time ratio | target |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
