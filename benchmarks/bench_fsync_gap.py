"""Why per-append durability costs more than its syscalls: work between two fdatasyncs.

    python benchmarks/bench_fsync_gap.py [--appends N] [--rounds R]

Benchmark (b) of bench_core.py compares ``durability="always"`` (one write and one fdatasync per
append, like the baseline) with a bare ``os.write`` + ``os.fdatasync`` loop. The two differ only
in the Python work done between the syncs. This script measures what that work costs where it
runs, right after an fdatasync returned, against what it costs in a hot loop:

- ``bare``: the baseline loop, nothing between the syncs;
- ``bare + busy N µs``: a busy wait between the syncs (tiny code, stays in cache);
- ``bare + prepare``: the same loop, plus validating and encoding the next event the way
  ``append`` does (``jsonltape._prepare.prepare_event``) before each write;
- ``jsonltape always``: the real writer.

For each it prints the time per append, the time spent in fdatasync, and the time the work
between the syncs took; and, for ``prepare``, what the same calls take back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_core

from jsonltape import _fs, _prepare
from jsonltape._session import create_session
from jsonltape.writer import Tape

LINE = (
    json.dumps({"seq": 1, "type": "user/message", "time": 0, "data": bench_core.message(1)}) + "\n"
).encode()


def busy(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def loop(root: Path, n: int, work: Callable[[int], bytes] | None) -> tuple[float, float, float]:
    """(µs per append, µs in fdatasync, µs of work between syncs), medians over the appends."""
    p = root / f"b{time.perf_counter_ns()}"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    syncs: list[float] = []
    gaps: list[float] = []
    t_start = time.perf_counter()
    try:
        for i in range(n):
            t0 = time.perf_counter()
            line = work(i) if work is not None else LINE
            t1 = time.perf_counter()
            os.write(fd, line)
            t2 = time.perf_counter()
            os.fdatasync(fd)
            syncs.append(time.perf_counter() - t2)
            gaps.append(t1 - t0)
    finally:
        os.close(fd)
        p.unlink()
    total = (time.perf_counter() - t_start) / n
    return total * 1e6, statistics.median(syncs) * 1e6, statistics.median(gaps) * 1e6


def writer(root: Path, n: int) -> tuple[float, float, float]:
    """The real writer in durability "always", its fdatasyncs timed through FileOps."""
    syncs: list[float] = []

    class TimedOps(_fs.FileOps):
        def sync(self, fd: int) -> None:
            t0 = time.perf_counter()
            super().sync(fd)
            syncs.append(time.perf_counter() - t0)

    p = root / f"a{time.perf_counter_ns()}.jsonl"
    tape = Tape(
        create_session(
            p,
            session_id=None,
            title=None,
            cwd=None,
            agent=None,
            parent=None,
            meta=None,
            durability="always",
            group_events=1000,
            group_ms=50.0,
            lock_timeout=0,
            ops=TimedOps(),
        )
    )
    try:
        msgs = [bench_core.message(i) for i in range(n)]
        t0 = time.perf_counter()
        for m in msgs:
            tape.append("user/message", m)
        total = (time.perf_counter() - t0) / n
    finally:
        tape.close()
    sync = statistics.median(syncs)
    return total * 1e6, sync * 1e6, (total - sync) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", help="where to write (default: a temp dir)")
    args = ap.parse_args()
    n = args.appends
    root = Path(tempfile.mkdtemp(prefix="jsonltape-gap-", dir=args.dir))
    os.chmod(root, 0o700)
    msgs = [bench_core.message(i) for i in range(n)]
    _prepare.prepare_event("user/message", msgs[0], None, None, None, None, 1, 0)

    def prepare(i: int) -> bytes:
        return _prepare.prepare_event(
            "user/message", msgs[i], None, None, None, None, i + 1, _prepare.now_ms()
        )[0]

    variants: dict[str, Callable[[], tuple[float, float, float]]] = {
        "bare": lambda: loop(root, n, None),
        "bare + busy 15 µs": lambda: loop(root, n, lambda i: (busy(15), LINE)[1]),
        "bare + prepare": lambda: loop(root, n, prepare),
        "jsonltape always": lambda: writer(root, n),
    }
    results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in variants}
    hot: list[float] = []
    try:
        for _ in range(args.rounds):
            for name, run in variants.items():
                results[name].append(run())
            t0 = time.perf_counter()
            for i in range(n):
                prepare(i)
            hot.append((time.perf_counter() - t0) / n * 1e6)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"medians of {args.rounds} rounds of {n} appends each")
    print()
    print("| loop | µs per append | µs in fdatasync | µs of work between syncs |")
    print("| --- | --- | --- | --- |")
    for name, rows in results.items():
        per, sync, gap = (statistics.median(r[k] for r in rows) for k in range(3))
        print(f"| {name} | {per:.0f} | {sync:.0f} | {gap:.1f} |")
    print()
    print(f"prepare back to back (hot): {statistics.median(hot):.1f} µs per event")
    print("(for `jsonltape always` the last column is everything outside fdatasync)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
