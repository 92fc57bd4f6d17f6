"""Following a session (``read(follow=True)``, ``cat --follow``): what serving costs against a
plain read, and what the check of a rewrite in place costs.

    python benchmarks/bench_follow.py [--events 200000] [--rounds 5]

(a) serves every line of an N-event session through the follow (``idle_timeout=0``: it ends
at the end of the file) against ``jsonltape.lines`` over the same file, the plain read the
follow is built on; the follow also keeps the CRC-32 of what it served, which the check of a
rewrite compares against. (b) is that check: when the file was written to without growing, the
follow reads the bytes it served again and takes their CRC-32; against reading the same bytes
(``pread`` in 1 MiB pieces, from the page cache). CPU time, medians of alternated rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jsonltape
from jsonltape._follow import _unchanged, follow_lines

WORDS = "the migration adds a NOT NULL column to the users table; rerun the suite after it "


def session(path: Path, events: int) -> Path:
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for i in range(events):
            tape.user(f"message {i}: {WORDS}")
    return path


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def _read_all(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        for at in range(0, size, 1 << 20):
            os.pread(fd, 1 << 20, at)
    finally:
        os.close(fd)


def _check(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        try:
            _unchanged(path, fd, 0, size, -1)  # no CRC is -1: the check reads it all, then raises
        except jsonltape.ConcurrentModificationError:
            pass
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = session(Path(tmp) / "s.jsonl", args.events)
        mb = path.stat().st_size / 1e6
        jobs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
            f"(a) follow {args.events:,} events ({mb:.0f} MB) vs lines": (
                lambda: sum(1 for _ in follow_lines(path, idle_timeout=0)),
                lambda: sum(1 for _ in jsonltape.lines(path)),
            ),
            f"(b) rewrite check of {mb:.0f} MB served vs reading them": (
                lambda: _check(path),
                lambda: _read_all(path),
            ),
        }
        print("| benchmark | jsonltape (CPU s) | baseline (CPU s) | jsonltape / baseline (range) |")
        print("| --- | --- | --- | --- |")
        for name, (ours, base) in jobs.items():
            a: list[float] = []
            b: list[float] = []
            for r in range(args.rounds):
                pair = [(ours, a), (base, b)]
                for fn, acc in pair if r % 2 == 0 else pair[::-1]:
                    acc.append(cpu(fn))
            ratios = [x / y for x, y in zip(a, b, strict=True) if y > 0]
            ma, mb_ = statistics.median(a), statistics.median(b)
            spread = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
            ratio = f"{ma / mb_:.2f}×" if mb_ > 0 else "-"
            print(f"| {name} | {ma:.3f} | {mb_:.3f} | {ratio} ({spread}) |")


if __name__ == "__main__":
    main()
