"""Usage reports (issue 31): ``jsonltape usage`` against ccusage on the same Claude Code tree, in
one run.

A Claude Code tree is generated (seeded; kept under ``--work`` and reused): ``--sessions``
sessions in ``projects/<project>/<uuid>.jsonl`` as Claude Code writes them -- a prompt, then
``--responses`` responses, each streamed as two assistant lines repeating its usage (a text
block, then a tool call, the output growing) and answered by a tool result line -- over six
months, four projects and three models. The index is that tree synced in place (``jsonltape
sync --source claude-code:…``); its event count is printed (the issue's 1M events at 20,000
sessions).

* **daily report from the shell**: ``jsonltape usage daily --json`` (this checkout built as a
  wheel into a fresh venv, as users install it: ``_installed.py``) against ``ccusage claude
  daily --offline --json`` (the pinned npm package of tests/test_usage_ccusage.py, its native
  binary) on the same tree, rounds alternated, medians and their ratio; both totals printed
  (they must agree);
* **one more session**: a session added to the tree and synced; the report's time before and
  after (shell and in-process medians): what a new session adds to the next report;
* **team** (``--pg``): the tree pushed by four origins (a project each) into a throwaway
  PostgreSQL cluster (the test harness, ``tests/_pg.py``), ``usage daily --by origin``.

    .venv/bin/python benchmarks/bench_usage.py --pg                 # 20,000 sessions
    .venv/bin/python benchmarks/bench_usage.py --sessions 300       # smoke, < 1 min
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _installed import installed_command  # noqa: E402

from tests.test_usage_ccusage import CCUSAGE  # noqa: E402

T0 = 1_767_225_600_000 - 182 * 86_400_000  # six months before 2026-01-01
MODELS = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5-20251001")
PROJECTS = 4


def _iso(ms: int) -> str:
    when = time.gmtime(ms / 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", when) + f".{ms % 1000:03d}Z"


def _session_lines(n: int, responses: int, rng: random.Random) -> tuple[str, list[str]]:
    sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    project = f"-home-ada-p{n % PROJECTS}"
    t = T0 + rng.randrange(182 * 86_400_000)
    base = {"isSidechain": False, "userType": "external", "cwd": f"/home/ada/p{n % PROJECTS}",
            "sessionId": sid, "version": "2.1.258", "gitBranch": "main"}  # fmt: skip
    out: list[dict[str, Any]] = []
    parent = None

    def add(kind: str, when: int, **rest: Any) -> None:
        nonlocal parent
        u = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        out.append({"parentUuid": parent, **base, "type": kind, "uuid": u,
                    "timestamp": _iso(when), **rest})  # fmt: skip
        parent = u

    add("user", t, message={"role": "user", "content": f"task {n}: fix the migration"})
    model = MODELS[n % len(MODELS)]
    context = 12_000
    for r in range(responses):
        t += rng.randrange(2_000, 60_000)
        mid, req, call = f"msg_{n:06d}_{r:03d}", f"req_{n:06d}_{r:03d}", f"toolu_{n:06d}_{r:03d}"
        usage = {"input_tokens": rng.randrange(1, 12), "cache_creation_input_tokens":
                 rng.randrange(100, 3000), "cache_read_input_tokens": context,
                 "service_tier": "standard"}  # fmt: skip
        context += usage["cache_creation_input_tokens"]
        out_tokens = rng.randrange(20, 900)
        for block, out_n in (
            ({"type": "text", "text": "Let me look at the schema first."}, 2),
            ({"type": "tool_use", "id": call, "name": "Read", "input": {"path": "a.py"}},
             out_tokens),
        ):  # fmt: skip
            add("assistant", t, requestId=req, message={
                "id": mid, "type": "message", "role": "assistant", "model": model,
                "content": [block], "stop_reason": None,
                "usage": {**usage, "output_tokens": out_n}})  # fmt: skip
            t += 300
        result = {"type": "tool_result", "tool_use_id": call, "content": "def migrate(): ..."}
        add("user", t + 500, message={"role": "user", "content": [result]})
    lines = [json.dumps(v, separators=(",", ":")) + "\n" for v in out]
    return f"{project}/{sid}.jsonl", lines


def build_tree(tree: Path, sessions: int, responses: int, first: int = 0) -> int:
    """Write sessions ``first`` … ``sessions - 1`` (seeded per session); return bytes."""
    size = 0
    past = time.time() - 7200  # settled: finished sessions
    for n in range(first, sessions):
        rel, lines = _session_lines(n, responses, random.Random(n))
        path = tree / "projects" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(lines)
        path.write_text(text)
        os.utime(path, (past, past))
        size += len(text)
    return size


def load_avg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "?"


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])}...: exit {r.returncode}: {r.stderr[-500:]}")
    return took, r.stdout


def _ccusage(work: Path) -> list[str]:
    prefix = Path(os.environ.get("JSONLTAPE_CCUSAGE") or work / f"ccusage-{CCUSAGE}")
    cli = prefix / "node_modules" / "ccusage" / "src" / "cli.js"
    if not cli.exists():
        subprocess.run(
            ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
             f"ccusage@{CCUSAGE}"], check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    return ["node", str(cli)]


def _sync(jl: str, index: Path, tree: Path, empty: Path, env: dict[str, str]) -> float:
    took, _ = _run(
        [jl, "sync", str(empty), "--index", str(index), "--source",
         f"claude-code:{tree / 'projects'}"], env,
    )  # fmt: skip
    return took


def _in_process(index: Path, rounds: int) -> float:
    """The median in-process time of the daily report (the reader opened each time)."""
    from jsonltape_daemon.search.reader import open_reader
    from jsonltape_daemon.target import SqliteTarget

    from jsonltape.usage import load_prices, report

    prices = load_prices()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        reader = open_reader(SqliteTarget(index))
        try:
            report(reader, "daily", timezone="UTC", prices=prices)
        finally:
            reader.close()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--responses", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--work", type=Path, default=HERE / "_data" / "usage")
    ap.add_argument("--pg", action="store_true", help="also the team report on PostgreSQL")
    ap.add_argument(
        "--pg-url", help="a team index already holding the tree's four origins (no push)"
    )
    ap.add_argument("--dev", action="store_true", help="time the checkout's own jsonltape")
    ap.add_argument("--fresh", action="store_true", help="sync into a new index (else reuse)")
    args = ap.parse_args()
    work = args.work.absolute()
    work.mkdir(parents=True, exist_ok=True)
    tree = work / f"claude-{args.sessions}x{args.responses}"
    t = time.perf_counter()
    if not (tree / "done").exists():
        shutil.rmtree(tree, ignore_errors=True)
        build_tree(tree, args.sessions, args.responses)
        (tree / "done").write_text("")
    gen = time.perf_counter() - t
    files = sorted((tree / "projects").rglob("*.jsonl"))
    size = sum(p.stat().st_size for p in files)
    jl = str(HERE.parent / ".venv" / "bin" / "jsonltape") if args.dev else installed_command(work)
    cc = _ccusage(work)
    env = {**os.environ, "JSONLTAPE_HOME": str(work / "home"), "JSONLTAPE_ORIGIN": "bench@box"}
    cc_env = {"PATH": os.environ.get("PATH", ""), "HOME": str(work / "home"),
              "CLAUDE_CONFIG_DIR": str(tree), "NO_COLOR": "1"}  # fmt: skip
    index = work / f"index-{args.sessions}x{args.responses}.db"
    empty = work / "empty-root"
    empty.mkdir(exist_ok=True, mode=0o700)
    if args.fresh:
        for p in (index, Path(f"{index}-wal"), Path(f"{index}-shm")):
            p.unlink(missing_ok=True)
    synced = _sync(jl, index, tree, empty, env)  # a first sync, or one that finds nothing new
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    events, sessions, responses = (
        con.execute(sql).fetchone()[0]
        for sql in (
            "SELECT count(*) FROM events",
            "SELECT count(*) FROM sessions",
            "SELECT count(*) FROM usage WHERE counted",
        )
    )
    slots = con.execute("SELECT count(*) FROM usage_slots").fetchone()[0]
    con.close()
    print(
        f"# bench_usage: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"ccusage {CCUSAGE} (native), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"load {load_avg()}\n# tree: {len(files):,} Claude Code sessions, {size / 1e6:.0f} MB "
        f"(generated or reused in {gen:.1f} s); synced in place in {synced:.1f} s: "
        f"{events:,} events, {sessions:,} sessions, {responses:,} responses, {slots:,} slot rows",
        flush=True,
    )
    ours_cmd = [jl, "usage", "daily", "--json", "-z", "UTC", "--index", str(index)]
    theirs_cmd = [*cc, "claude", "daily", "--offline", "--json", "-z", "UTC"]
    ours, theirs = [], []
    out_ours = out_theirs = ""
    for r in range(args.rounds):
        for which in (0, 1) if r % 2 == 0 else (1, 0):
            if which == 0:
                took, out_ours = _run(ours_cmd, env)
                ours.append(took)
            else:
                took, out_theirs = _run(theirs_cmd, cc_env)
                theirs.append(took)
    a, b = statistics.median(ours), statistics.median(theirs)
    mine, their = json.loads(out_ours)["total"]["tokens"], json.loads(out_theirs)["totals"]
    written = mine["cache_write_5m"] + mine["cache_write_1h"]
    same = (mine["input"], mine["output"], written, mine["cache_read"]) == (
        their["inputTokens"], their["outputTokens"], their["cacheCreationTokens"],
        their["cacheReadTokens"],
    )  # fmt: skip
    print(
        f"\ndaily report from the shell ({args.rounds} rounds alternated, medians): "
        f"jsonltape {a * 1000:.0f} ms (min {min(ours) * 1000:.0f}), ccusage {b * 1000:.0f} ms "
        f"(min {min(theirs) * 1000:.0f}): {b / a:.1f}x as fast (target >= 20x; < 300 ms); "
        f"totals {'agree' if same else 'DIFFER'} ({mine['total']:,} tokens); "
        f"in-process {_in_process(index, args.rounds) * 1000:.1f} ms; load {load_avg()}",
        flush=True,
    )
    # one more session: what it adds to the next report, measured against a copy of the
    # index from before it, rounds alternated (the machine's load drifts between rounds)
    before = work / "index-before.db"
    before.unlink(missing_ok=True)
    with closing(sqlite3.connect(index)) as src, closing(sqlite3.connect(before)) as dst:
        src.backup(dst)
    build_tree(tree, args.sessions + 1, args.responses, first=args.sessions)
    added = _sync(jl, index, tree, empty, env)
    times: dict[Path, list[float]] = {before: [], index: []}
    for r in range(args.rounds):
        for which in (before, index) if r % 2 == 0 else (index, before):
            times[which].append(_in_process(which, 1))
    rows = []
    for p in (before, index):
        with closing(sqlite3.connect(f"file:{p}?mode=ro", uri=True)) as con:
            rows.append(con.execute("SELECT count(*) FROM usage_slots").fetchone()[0])
    b0, b1 = statistics.median(times[before]), statistics.median(times[index])
    shell = [_run(ours_cmd, env)[0] for _ in range(args.rounds)]
    print(
        f"one more session: synced in {added * 1000:.0f} ms; it adds {rows[1] - rows[0]} of "
        f"{rows[1]:,} slot rows the report reads; the next daily report in-process "
        f"{b0 * 1000:.1f} -> {b1 * 1000:.1f} ms ({(b1 - b0) * 1000:+.1f} ms; target < 5 ms; "
        f"{args.rounds} rounds alternated with a copy of the index from before), from the "
        f"shell {statistics.median(shell) * 1000:.0f} ms; load {load_avg()}",
        flush=True,
    )
    before.unlink()
    # back to the tree and index the next run starts from
    rel, _lines = _session_lines(args.sessions, args.responses, random.Random(args.sessions))
    (tree / "projects" / rel).unlink()
    _sync(jl, index, tree, empty, env)
    if args.pg or args.pg_url:
        # the checkout's own command: the built wheel has no PostgreSQL driver (an extra)
        team(args, tree, str(HERE.parent / ".venv" / "bin" / "jsonltape"), env)
    return 0


def team(args: argparse.Namespace, tree: Path, jl: str, env: dict[str, str]) -> None:
    if args.pg_url:
        team_report(args, args.pg_url, jl, env, pushed=None)
        return
    from tests._pg import PgServer, find_bindir

    bindir = find_bindir()
    if bindir is None:
        print("team: PostgreSQL server binaries not found (install 'postgresql')")
        return
    server = PgServer(bindir)
    try:
        server.start()
        url = server.create_database("usage")
        empty = args.work.absolute() / "empty-root"
        t = time.perf_counter()
        for k in range(PROJECTS):
            _run(
                [jl, "sync", str(empty), "--index", url, "--source",
                 f"claude-code:{tree / 'projects' / f'-home-ada-p{k}'}"],
                {**env, "JSONLTAPE_ORIGIN": f"machine-{k}"},
            )  # fmt: skip
        team_report(args, url, jl, env, pushed=time.perf_counter() - t)
    finally:
        server.destroy()


def team_report(
    args: argparse.Namespace, url: str, jl: str, env: dict[str, str], pushed: float | None
) -> None:
    cmd = [jl, "usage", "daily", "--by", "origin", "--json", "-z", "UTC", "--index", url]
    times = [_run(cmd, env)[0] for _ in range(args.rounds)]
    print(
        f"\nteam: {PROJECTS} origins"
        + (f" pushed in {pushed:.0f} s" if pushed is not None else "")
        + f"; daily --by origin from the shell: median {statistics.median(times) * 1000:.0f} "
        f"ms, min {min(times) * 1000:.0f} ms (target < 500 ms); load {load_avg()}",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
