"""Creating many small sessions (an import's sessions: one per Aider run, per sub-agent, per
file of a tree): the usual creation against the staged one, and both against the floor.

    python benchmarks/bench_create.py [--sessions 1000] [--events 12] [--rounds 5]

Each round writes ``--sessions`` sessions of ``--events`` ~400-byte events into a fresh
directory three ways, alternated (usual, staged, floor):

* usual: ``open(create=True, durability="manual")`` eight at a time, the events appended,
  ``writer.close_all`` (spec §10.1: the header synced, linked, the directory synced, the events
  synced, the closing checkpoint synced; a lock file per session);
* staged: the same with ``staged=True`` (the whole session synced once, then linked; one
  directory sync for all);
* floor: raw ``os`` calls doing what staged creation must (an exclusive temp file, the same
  bytes written, ``fdatasync``, ``link``, ``unlink``; one directory sync), eight at a time.

Prints medians (lowest-highest) and the ratios per round: staged/usual speed-up, and
staged/floor (how far the writer is from the file system's own cost).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jsonltape
from jsonltape import writer
from jsonltape._together import at_once

TEXT = ("The migration adds a NOT NULL column without a default; existing rows fail. " * 5)[:330]


def _events(k: int) -> list[dict[str, object]]:
    return [
        {
            "type": "user/message",
            "data": {
                "message": {
                    "id": f"m{i}",
                    "role": "user",
                    "parts": [{"type": "text", "content": TEXT}],
                }
            },
        }
        for i in range(k)
    ]


def with_writer(d: Path, n: int, k: int, staged: bool) -> None:
    items = _events(k)
    opens = [
        (
            lambda i=i: jsonltape.open(
                d / f"s{i}.jsonl", create=True, durability="manual", staged=staged
            )
        )
        for i in range(n)
    ]
    tapes = [t for t in at_once(opens) if isinstance(t, jsonltape.Tape)]
    assert len(tapes) == n
    for tape in tapes:
        tape.append_batch(items)
    writer.close_all(tapes)


def floor(d: Path, n: int, k: int, size: int) -> None:
    data = b"x" * size

    def one(i: int) -> None:
        tmp = d / f".s{i}.jsonl.{os.urandom(6).hex()}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        try:
            os.write(fd, data)
            os.fdatasync(fd)
            os.link(tmp, d / f"s{i}.jsonl")
            os.unlink(tmp)
        finally:
            os.close(fd)

    at_once([lambda i=i: one(i) for i in range(n)])
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", help="where to write (default: a temp dir on the same disk)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="jsonltape-bench-create-", dir=args.dir))
    n, k = args.sessions, args.events
    times: dict[str, list[float]] = {"usual": [], "staged": [], "floor": []}
    probe = base / "probe"
    probe.mkdir(mode=0o700)
    with_writer(probe, 1, k, True)
    size = (probe / "s0.jsonl").stat().st_size  # the floor writes as many bytes a session
    try:
        for r in range(args.rounds):
            runs: list[tuple[str, Callable[[Path], None]]] = [
                ("usual", lambda d: with_writer(d, n, k, False)),
                ("staged", lambda d: with_writer(d, n, k, True)),
                ("floor", lambda d: floor(d, n, k, size)),
            ]
            for name, run in runs:
                d = base / f"{name}{r}"
                d.mkdir(mode=0o700)
                t0 = time.perf_counter()
                run(d)
                times[name].append(time.perf_counter() - t0)
                shutil.rmtree(d)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"{platform.machine()}, {os.cpu_count()} cpus, Python {sys.version.split()[0]}, load "
        f"{os.getloadavg()[0]:.1f}; {n} sessions x {k} events ({size} bytes each)"
    )
    print("| way | median | lowest-highest | per session |")
    print("| --- | --- | --- | --- |")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.3f} s | {min(ts):.3f}-{max(ts):.3f} s | {med / n * 1e3:.2f} ms |")
    speed = [u / s for u, s in zip(times["usual"], times["staged"], strict=True)]
    gap = [s / f for s, f in zip(times["staged"], times["floor"], strict=True)]
    med, lo, hi = statistics.median(speed), min(speed), max(speed)
    print(f"staged vs usual: {med:.2f}x faster ({lo:.2f}-{hi:.2f})")
    med, lo, hi = statistics.median(gap), min(gap), max(gap)
    print(f"staged vs floor: {med:.2f}x the floor's time ({lo:.2f}-{hi:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
