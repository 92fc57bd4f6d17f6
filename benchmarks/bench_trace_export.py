"""The trace exports (issue 32): ``export --format atif`` and ``--format otel`` against
``--format json`` (the baseline, the neutral fold) on one session of N turns and of 2N turns.

    python benchmarks/bench_trace_export.py [--turns 200]

Each turn is a prompt, a response calling a tool, the tool's result and an answer (four
messages, two model calls). Prints, per format, the time and output size at N and 2N turns,
their ratio (about 2 when the work is linear in the session, about 4 when quadratic) and the
ratio to the json export of the same session. ATIF should be linear; the OTLP trace is
quadratic in output by design (every model call's ``gen_ai.input.messages`` holds its whole
history), so its time ratio is read against its size ratio. Not a timed test: read by a person.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import jsonltape
from jsonltape.interop import export_to

FORMATS = ("json", "atif", "otel")


def session(path: Path, turns: int) -> Path:
    with jsonltape.open(path, create=True, session_id="bench", durability="manual") as tape:
        tape.append("request/header", {"model": "m", "system": "You are a coding agent."})
        for i in range(turns):
            with tape.turn():
                tape.user(f"Question {i}: " + "why does the test fail? " * 8, id=f"u{i}")
                args = {"file_path": f"src/module_{i}.py"}
                tape.assistant(
                    "Let me read it.",
                    tool_calls=[{"id": f"c{i}", "name": "Read", "arguments": args}],
                    model="m",
                    usage={"input_tokens": 1000 + i, "output_tokens": 20},
                    id=f"a{i}",
                )
                tape.tool_call("Read", args, call_id=f"c{i}")
                response = "def f():\n    return 1\n" * 20
                part = {"type": "tool_call_response", "id": f"c{i}", "response": response}
                message = {"id": f"r{i}", "role": "tool", "parts": [part]}
                tape.append("tool/result", {"call_id": f"c{i}", "message": message})
                tape.assistant(f"The answer to {i}.", model="m", id=f"b{i}")
    return path


def measure(path: Path, fmt: str) -> tuple[float, int]:
    size = 0

    def write(chunk: str) -> None:
        nonlocal size
        size += len(chunk.encode())

    start = time.perf_counter()
    export_to(write, path, fmt)  # type: ignore[arg-type]
    return time.perf_counter() - start, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3, help="best of this many runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        small = session(Path(d) / "n.jsonl", args.turns)
        big = session(Path(d) / "2n.jsonl", 2 * args.turns)
        rows = {}
        for fmt in FORMATS:
            got = []
            for path in (small, big):
                runs = [measure(path, fmt) for _ in range(args.rounds)]
                got.append((min(t for t, _ in runs), runs[0][1]))
            rows[fmt] = got
    n, n2 = args.turns, 2 * args.turns
    print(
        f"| format | {n} turns (s, MB) | {n2} turns (s, MB) | time ratio | size ratio "
        f"| time vs json at {n2} |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    base = rows["json"][1][0]
    for fmt, ((t1, s1), (t2, s2)) in rows.items():
        print(
            f"| {fmt} | {t1:.3f}, {s1 / 1e6:.2f} | {t2:.3f}, {s2 / 1e6:.2f} | {t2 / t1:.1f} "
            f"| {s2 / s1:.1f} | {t2 / base:.1f}x |"
        )


if __name__ == "__main__":
    main()
