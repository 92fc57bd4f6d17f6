"""Start-up of the ``jsonltape`` command (issues 11 and 29), side by side with its baselines.

    python benchmarks/bench_startup.py [--rounds N] [--dir DIR] [--compare REV] [--wheel]

Each round runs, one after the other: ``python -c pass``, ``python -c "import msgspec, click"``
and every command measured (``--help``; ``append PATH --type … --data …``, one durable event;
``cat`` and ``info`` of a 10-line file; ``search``, ``sessions`` and ``show`` on a small
index), each as its own process, in an order rotated every round so no command always follows
the same one. ``--compare REV`` runs every command a second time in each round from the tree
of git revision REV (unpacked into the work directory and put first on ``PYTHONPATH``, started
through the same console script), so before and after are measured in one run. ``--wheel``
measures this checkout built as a wheel into a fresh venv, baselines on that venv's Python:
no editable-install finder at every start (~10 ms of `python -c pass` here), so every ratio is
larger than in the development checkout.

Reported: the median and the lowest wall time, the median CPU time (user + system of that
process alone, from ``wait4``: what the VM's other tenants take does not count) of each, and
the ratios of the medians to both baselines (lower = better), with the lowest and highest
per-round wall ratio. The targets: ``append`` at most 4x ``python -c pass`` (it loads the lock
library, filelock), every other command at most 3x. The last column is what each command
imports beyond ``import msgspec, click`` (modules, and their own import time from one ``-X
importtime`` run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: At most this many times `python -c pass`: append loads filelock (issue 29), the rest 3x.
TARGETS = {"jsonltape append": 4.0}
TARGET = 3.0
PY = sys.executable
# Installed packages have their bytecode cached; so must ours, or every run would compile the
# modules edited since the last cache write (PYTHONDONTWRITEBYTECODE is set in some shells).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TEXT = "The migration adds a NOT NULL column without a default; existing rows fail."


def command_prefix(py: str) -> list[str]:
    """How a user starts jsonltape: the console script beside Python ``py``, else ``-m``."""
    script = Path(py).with_name("jsonltape")
    return [str(script)] if script.exists() else [py, "-m", "jsonltape"]


def message_data(i: int, role: str = "user") -> str:
    """The data of a user/message or assistant/message event, as JSON text."""
    parts = [{"type": "text", "content": TEXT}]
    return json.dumps({"message": {"id": f"m{i}", "role": role, "parts": parts}})


def target(name: str) -> float:
    """The start-up target of a case, as a multiple of ``python -c pass``."""
    return next((t for prefix, t in TARGETS.items() if name.startswith(prefix)), TARGET)


def prepare(root: Path, py: str) -> dict[str, list[str]]:
    """The files the commands run on, and the commands (name -> argv) of Python ``py``."""
    jt = command_prefix(py)
    sessions = root / "sessions"
    sessions.mkdir()
    ten = sessions / "ten.jsonl"  # header + 8 messages + a checkpoint: 10 lines
    roles = ("user", "assistant")
    events = "".join(
        f'{{"type":"{roles[i % 2]}/message","data":{message_data(i, roles[i % 2])}}}\n'
        for i in range(8)
    )
    run([*jt, "append", str(ten), "--create", "-"], stdin=events)
    lines = ten.read_bytes().count(b"\n")
    assert lines == 10, f"{ten} has {lines} lines, not 10"
    index = root / "index.db"
    run([*jt, "sync", str(sessions), "--index", str(index)])
    target = root / "appended.jsonl"
    run([*jt, "new", str(target)])
    return {
        "python -c pass": [py, "-c", "pass"],
        'python -c "import msgspec, click"': [py, "-c", "import msgspec, click"],
        "jsonltape --help": [*jt, "--help"],
        "jsonltape append (1 event, durable)": [
            *jt,
            "append",
            str(target),
            "--type",
            "user/message",
            "--data",
            message_data(0),
        ],
        "jsonltape cat (10 lines)": [*jt, "cat", str(ten)],
        "jsonltape info (10 lines)": [*jt, "info", str(ten)],
        "jsonltape search (small index)": [*jt, "search", "migration", "--index", str(index)],
        "jsonltape sessions (small index)": [*jt, "sessions", "--index", str(index)],
        "jsonltape show (small index)": [*jt, "show", str(ten), "--index", str(index)],
    }


def unpack(rev: str, root: Path) -> dict[str, str]:
    """The tree of git revision ``rev`` of this checkout under ``root``; the environment that
    runs it (its packages first on ``PYTHONPATH``, ahead of the editable install's finder)."""
    tree = root / f"tree-{rev}"
    tree.mkdir()
    checkout = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "-C", str(checkout), "archive", rev, "jsonltape", "daemon"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "daemon")])}


def run(argv: list[str], stdin: str | None = None, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env or ENV)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``; CPU is that child's own user + system."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env or ENV)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.decode()}")
    return wall, usage.ru_utime + usage.ru_stime


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \| \s*(\S+)")


def imports(argv: list[str], env: dict[str, str] | None = None) -> dict[str, int]:
    """Module -> its own import time (µs) in one run with ``-X importtime``."""
    env = {**(env or ENV), "PYTHONPROFILEIMPORTTIME": "1"}  # reaches the console script too
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    return {m[2]: int(m[1]) for m in map(_IMPORT_LINE.match, done.stderr.splitlines()) if m}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21, help="rounds (each runs every command)")
    ap.add_argument("--dir", help="where to write (default: a temp dir)")
    ap.add_argument(
        "--compare", metavar="REV", help="also run every command from git revision REV's tree"
    )
    ap.add_argument(
        "--wheel",
        action="store_true",
        help="run this checkout built as a wheel into a fresh venv (as users install it), "
        "not the development checkout's editable install",
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-startup-", dir=args.dir))
    try:
        py = PY
        if args.wheel:  # the baselines run on the same Python as the commands
            sys.path.insert(0, str(Path(__file__).parent))
            from _installed import installed_command

            py = str(Path(installed_command(root)).with_name("python"))
        cases = prepare(root, py)
        envs = {name: ENV for name in cases}
        if args.compare:
            env = unpack(args.compare, root)
            for name, argv in list(cases.items())[2:]:
                cases[f"{name} @{args.compare}"] = argv
                envs[f"{name} @{args.compare}"] = env
        names = list(cases)
        for name in names:  # warm the page cache, write the bytecode caches
            timed(cases[name], envs[name])
        times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for r in range(args.rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                times[name].append(timed(cases[name], envs[name]))
        base_imports = imports(cases[names[1]])
        found = {n: imports(cases[n], envs[n]) for n in names[2:]}
        report(names, times, found, base_imports, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def report(
    names: list[str],
    times: dict[str, list[tuple[float, float]]],
    mods: dict[str, dict[str, int]],
    base_mods: dict[str, int],
    args: argparse.Namespace,
) -> None:
    def med(name: str, i: int) -> float:
        return statistics.median(t[i] for t in times[name])

    p, mc = names[0], names[1]
    print(
        f"start-up, {args.rounds} rounds, medians; {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{'a wheel in a fresh venv' if args.wheel else 'the editable install'}"
        f"{f', compared with {args.compare}' if args.compare else ''}\n"
    )
    print(
        "| command | wall ms (min) | CPU ms | wall vs `-c pass` (per round) | CPU vs `-c pass` "
        "| wall vs msgspec+click | CPU vs msgspec+click | target | imports beyond "
        "msgspec+click |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        per_round = [o[0] / b[0] for o, b in zip(times[name], times[p], strict=True)]
        wall_p = med(name, 0) / med(p, 0)
        extra = {m: us for m, us in mods.get(name, {}).items() if m not in base_mods}
        beyond = f"{len(extra)} modules, {sum(extra.values()) / 1000:.1f} ms" if extra else "-"
        goal = target(name)
        verdict = "-" if name in (p, mc) else f"≤ {goal:g}x {'met' if wall_p <= goal else 'missed'}"
        lowest = min(t[0] for t in times[name])
        print(
            f"| {name} | {med(name, 0) * 1000:.1f} ({lowest * 1000:.1f}) "
            f"| {med(name, 1) * 1000:.1f} "
            f"| {wall_p:.2f}x ({min(per_round):.2f}-{max(per_round):.2f}) "
            f"| {med(name, 1) / med(p, 1):.2f}x | {med(name, 0) / med(mc, 0):.2f}x "
            f"| {med(name, 1) / med(mc, 1):.2f}x | {verdict} | {beyond} |"
        )
    print()
    for name, found in mods.items():  # where the extra time goes, biggest first
        biggest = sorted(((us, m) for m, us in found.items() if m not in base_mods), reverse=True)
        top = ", ".join(f"{m} {us / 1000:.1f}" for us, m in biggest[:6])
        print(f"- {name}: {top or 'nothing beyond msgspec+click'} (ms, own import time)")


if __name__ == "__main__":
    sys.exit(main())
