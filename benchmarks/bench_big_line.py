"""One huge line (issue 10): ``messages`` and ``export`` of a session whose one message is N MB.

    python benchmarks/bench_big_line.py [--mb 20] [--redact]

Times ``jsonltape.messages`` and ``interop.export`` in every format for a message of N MB and
of 2N MB, and prints the time ratio: about 2 when the work is linear in the line's length,
about 4 when some step is quadratic (a chunked reader re-copying the part of the line it has
seen, a regex rescanning from every position). Not a timed test: the ratio is the signal, and
it is read by a person.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jsonltape
from jsonltape import interop
from jsonltape.interop.export import FORMATS

WORDS = "the migration adds a NOT NULL column; see https://example.com/docs and `code`\n"


def session(path: Path, mb: int) -> Path:
    text = (WORDS * (mb * 1_000_000 // len(WORDS) + 1))[: mb * 1_000_000]
    with jsonltape.open(path, create=True) as tape, tape.turn():
        tape.user(text)
    return path


def timed(fn: Callable[[Path], object], path: Path) -> float:
    start = time.perf_counter()
    fn(path)
    return time.perf_counter() - start


def _exporter(fmt: str, redact: bool) -> Callable[[Path], object]:
    return lambda p: interop.export(p, fmt, redact_secrets=redact)  # type: ignore[arg-type]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--redact", action="store_true", help="export with --redact secrets")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = session(Path(tmp) / "small.jsonl", args.mb)
        big = session(Path(tmp) / "big.jsonl", 2 * args.mb)
        redact = args.redact
        jobs: list[tuple[str, Callable[[Path], object]]] = [("messages", jsonltape.messages)]
        for fmt in FORMATS:
            jobs.append((f"export {fmt}", _exporter(fmt, redact)))
        print(f"| step | {args.mb} MB line (s) | {2 * args.mb} MB line (s) | ratio |")
        print("| --- | --- | --- | --- |")
        for name, job in jobs:
            a = timed(job, small)
            b = timed(job, big)
            print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.1f} |")


if __name__ == "__main__":
    main()
