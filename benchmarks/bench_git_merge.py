"""The merge driver (issue 12) side by side with ``git merge-file`` on the same three files.

    python benchmarks/bench_git_merge.py [--mb 100] [--events 1000] [--rounds 5] [--dir DIR]

A session of ``--mb`` MB is the ancestor; ours and theirs each append ``--events`` different
events to it (turns of a user message, an assistant message with a tool call, a tool result,
a reply and a checkpoint with a span, as ``bench_git.py`` writes them). Each round runs, in
alternating order, ``jsonltape git merge-driver %O %A %B %P`` (its own process, as git runs
it: start-up, reading and judging the lines, writing the result into a fresh copy of ours)
and ``git merge-file`` on copies of the same three files (the issue's baseline: a textual
three-way merge, which ends in a conflict here and writes its result into its copy of ours).
Reported: the median wall and CPU time (user + system of the process, from ``wait4``) and the
ratios of the medians (jsonltape / git, lower is better), with the per-round wall range.
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_git import ENV, Writer, command_prefix, session_bytes

TARGET = 2.0


def run(argv: list[str], cwd: Path, ok: tuple[int, ...] = (0,)) -> tuple[float, float]:
    """(wall, CPU) seconds of one command, output to /dev/null."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=null, stderr=subprocess.PIPE, env=ENV)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        raise SystemExit(f"{argv} failed ({code}): {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def side(base: Writer, seed: int, events: int) -> bytes:
    """The ancestor plus ``events`` (at least) events of its own."""
    w = copy.copy(base)
    w.lines = list(base.lines)
    w.rng = random.Random(seed)
    w.time += seed * 1000  # every line of each side differs from the other side's
    stop = base.seq + events
    while w.seq < stop:
        w.turn(2000)
    return w.bytes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0, help="size of the ancestor, MB")
    ap.add_argument("--events", type=int, default=1000, help="divergent events per side")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, help="where the files go (default: a temp dir)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-merge-", dir=args.dir))
    try:
        base = session_bytes("big", int(args.mb * 1_000_000), seed=1)
        o = base.bytes()
        a, b = side(base, 2, args.events), side(base, 3, args.events)
        for name, data in (("O", o), ("A", a), ("B", b)):
            (root / name).write_bytes(data)
        n_o = o.count(b"\n")
        added_a, added_b = a.count(b"\n") - n_o, b.count(b"\n") - n_o
        print(
            f"ancestor {len(o) / 1e6:.1f} MB ({n_o} events); ours +{added_a}, "
            f"theirs +{added_b} events ({(len(a) - len(o)) / 1e3:.0f} KB, "
            f"{(len(b) - len(o)) / 1e3:.0f} KB)"
        )
        jt = command_prefix()
        cmds = {
            "jsonltape git merge-driver": (
                [*jt, "git", "merge-driver", "O", "ours", "B", "s.jsonl"],
                (0,),
            ),
            "git merge-file": (["git", "merge-file", "-q", "ours", "O", "B"], (0, 1)),
        }
        walls: dict[str, list[float]] = {n: [] for n in cmds}
        cpus: dict[str, list[float]] = {n: [] for n in cmds}
        for r in range(args.rounds):
            order = list(cmds) if r % 2 == 0 else list(reversed(cmds))
            for name in order:
                shutil.copyfile(root / "A", root / "ours")
                os.chmod(root / "ours", 0o600)
                wall, cpu = run(cmds[name][0], root, cmds[name][1])
                walls[name].append(wall)
                cpus[name].append(cpu)
                if name.startswith("jsonltape") and r == 0:
                    check = subprocess.run(
                        [*jt, "verify", "ours"], cwd=root, capture_output=True, text=True
                    )
                    if check.returncode != 0 or ": clean," not in check.stdout:
                        raise SystemExit(f"the merged file does not verify: {check.stdout}")
        print(
            f"\n{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"{time.strftime('%Y-%m-%d')}; medians of {args.rounds} alternated rounds\n"
        )
        print("| command | wall | CPU |")
        print("| --- | --- | --- |")
        for name in cmds:
            print(
                f"| {name} | {statistics.median(walls[name]):.3f} s | "
                f"{statistics.median(cpus[name]):.3f} s |"
            )
        jw, gw = (statistics.median(walls[n]) for n in cmds)
        jc, gc = (statistics.median(cpus[n]) for n in cmds)
        per_round = [x / y for x, y in zip(*walls.values(), strict=True)]
        met = "met" if jw / gw <= TARGET else "**missed**"
        print(
            f"\nratio, wall: {jw / gw:.2f}x (per round {min(per_round):.2f}-{max(per_round):.2f})"
            f"; CPU: {jc / gc:.2f}x; target <= {TARGET:.0f}x: {met}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
