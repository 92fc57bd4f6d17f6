"""The search benchmark of issue 16: what a user of the index gets, against grep, honestly.

On a tree of jsonltape sessions written with the library (``_search_corpus.py``: a Zipf
vocabulary of English words and code identifiers, code snippets, Japanese and Chinese text,
timestamps over six months), it measures

* ``jsonltape sync`` of the tree into an empty index: wall time, CPU time (every process),
  peak RSS summed over the process tree (polled from /proc) and the largest single process;
* the same messages loaded by sqlite-utils (words FTS5 table with our tokenizer, then the
  same trigram table, over the identifiers only, as ours) with our bulk-load durability: no
  journal, no syncs, one fsync at the end; then the same tables as ours (also the events, the
  CJK table and the word list, each full-text table merged into one segment), keyed by our
  time-ordered keys as ours are and, beside it, by insertion order (``_ingest_bench.py``);
* index size against the session files, per table (SQLite's ``dbstat``);
* queries across word frequency ranks (0, 10, 100, 1000, the rarest word that occurs), a
  phrase that has hits, substrings of 3, 4 and 6 characters inside an identifier, CJK terms of
  1-4 characters and four prefixes, each without a filter and with a role, session, since, until
  and type filter and two path filters: in-process p50/p95/max of the daemon's ``search()``
  (top 20, as ``jsonltape search``), hit counts (every matching message), and for each query
  from the shell ``jsonltape search`` p95 against ``rg -c`` (``grep -rc`` when rg is absent)
  over the same tree;
* the unfiltered queries from the shell with a cold cache, ours and rg's: the page cache is
  dropped before each run (the index, the session files, the interpreter's files), which
  needs root; without it only warm runs are made.

The generated tree is cached under ``--work`` and reused.

    .venv/bin/pip install sqlite-utils   # dev-only baseline
    .venv/bin/python benchmarks/bench_search.py [--events 1000000] [--work DIR]
    .venv/bin/python benchmarks/bench_search.py --events 20000 --quick    # smoke, < 60 s
    .venv/bin/python benchmarks/bench_search.py --events 200000 --ingest  # sync vs baseline
    .venv/bin/python benchmarks/bench_search.py --ingest --ingest-rounds 3  # alternated rounds
    .venv/bin/python benchmarks/bench_search.py --times --events 120000 --ingest-rounds 3

``--times`` measures only the ingest, of three trees of the same messages: timed as above
(spread), all in one second (burst), and stamped by the writer's own clock as the library
writes them at full speed (live); each ``jsonltape sync`` against the same-tables baseline,
the trees alternated in each round, as ratios.
    JSONLTAPE_LONG=1 .venv/bin/python benchmarks/bench_search.py          # 5M events
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import (
    search,
)
from jsonltape_daemon.paths import remove_db

sys.path.insert(0, str(Path(__file__).parent))
import _search_corpus as corpus
from _ingest_bench import Run, bench_baseline, run_measured, same_tables
from _installed import installed_command
from _search_queries import FILTERS, count_hits, filters_for, queries

DAY_MS = 86_400_000
WORD_TOKENIZER = "unicode61 remove_diacritics 2"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def table_sizes(index: Path) -> dict[str, int] | None:
    """Bytes per table (indexes and FTS5 shadow tables folded into their table), or None
    when this SQLite has no ``dbstat``."""
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        owners = dict(con.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
    except sqlite3.OperationalError:
        return None
    finally:
        con.close()
    out: dict[str, int] = {}
    for name, size in rows:
        owner = str(owners.get(name, name))
        for fts in ("messages_fts", "messages_trigram", "messages_cjk"):
            if owner.startswith(fts + "_"):
                owner = fts
        out[owner] = out.get(owner, 0) + int(size)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def timings(fn: Callable[[], object], runs: int, budget: float) -> list[float]:
    """At least 3 runs after a warm-up, up to ``runs`` while within ``budget`` seconds."""
    fn()
    out: list[float] = []
    start = time.perf_counter()
    while len(out) < runs and (len(out) < 3 or time.perf_counter() - start < budget):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def drop_caches() -> bool:
    """Evict the page cache (the index, the session files, the interpreter's own files): needs
    root; False where it is not allowed."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


#: The environment of every timed shell run: with bytecode caches written, as an installed
#: jsonltape has them. PYTHONDONTWRITEBYTECODE (set in some shells) would make each run compile
#: every module edited since its cache was last written, and time that instead of the search.
SHELL_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def quiet(cmd: list[str], cpu: list[float]) -> Callable[[], object]:
    """A run of ``cmd`` from the shell, output discarded, exit status checked; its own CPU time
    (user + system, from ``wait4``) is appended to ``cpu``."""

    def run() -> None:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=SHELL_ENV
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        if proc.returncode != 0:  # a failing command would be timed as a fast success
            raise subprocess.CalledProcessError(proc.returncode, cmd)
        cpu.append(usage.ru_utime + usage.ru_stime)

    return run


def cold(cmd: list[str], runs: int, *, check: bool = True) -> list[float]:
    """Wall time of ``cmd`` right after the page cache was dropped, ``runs`` times (``check``:
    its exit status too; grep's is 1 when nothing matches)."""
    out: list[float] = []
    for _ in range(runs):
        if not drop_caches():
            return []
        t = time.perf_counter()
        subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=SHELL_ENV, check=check
        )
        out.append(time.perf_counter() - t)
    return out


def grep_cmd() -> list[str]:
    if shutil.which("rg"):
        return ["rg", "-c", "-F"]
    return ["grep", "-r", "-c", "-F"]


def literal(q: str) -> str:
    """What one would give rg for the query: the text, without quotes or the prefix star."""
    return q.strip('"').rstrip("*")


def main() -> int:
    default_events = 5_000_000 if os.environ.get("JSONLTAPE_LONG") == "1" else 1_000_000
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=default_events)
    ap.add_argument("--work", type=Path, default=Path(__file__).parent / "_data" / "search")
    ap.add_argument("--quick", action="store_true", help="few runs, no baseline: a smoke test")
    ap.add_argument(
        "--ingest", action="store_true", help="only the sync and its baseline, no queries"
    )
    ap.add_argument(
        "--times",
        action="store_true",
        help="only the ingest of the same messages spread, in one second and written at full "
        "speed, each against the baseline",
    )
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="only the in-process queries, on the index a previous run left (brought up to "
        "date by one `jsonltape sync` first: a newer schema migrates it)",
    )
    ap.add_argument(
        "--shell",
        choices=("installed", "editable"),
        default="installed",
        help="the `jsonltape` timed from the shell: this checkout installed from a wheel into "
        "a fresh venv, as users get it (default), or the development venv's editable install",
    )
    # 50: a p95 of 15 runs is their second largest, which one stall of the VM decides
    ap.add_argument("--runs", type=int, default=50, help="in-process runs per query")
    ap.add_argument("--shell-runs", type=int, default=20, help="shell runs per query")
    ap.add_argument(
        "--ingest-rounds",
        type=int,
        default=1,
        help="rounds of the sync and the same-tables baseline, alternated (ratios: medians)",
    )
    ap.add_argument(
        "--cold-runs", type=int, default=3, help="cold-cache shell runs per unfiltered query"
    )
    args = ap.parse_args()
    if args.ingest_rounds < 1:
        ap.error("--ingest-rounds must be at least 1")
    if args.times:
        return bench_times(args.work.absolute(), args.events, args.ingest_rounds)
    runs, shell_runs, budget = (5, 3, 0.5) if args.quick else (args.runs, args.shell_runs, 3.0)
    quiet_cache = args.quick or args.ingest or args.in_process
    cold_runs = 0 if quiet_cache or not drop_caches() else args.cold_runs
    work = args.work.absolute()
    root = work / f"tree-{args.events}"
    t = time.perf_counter()
    m = corpus.build(root, args.events)
    gen = time.perf_counter() - t
    files = sorted(root.rglob("*.jsonl"))
    size = sum(p.stat().st_size for p in files)
    print(
        f"# bench_search: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {load_avg()}\n"
        f"# tree: {args.events:,} events, {len(files)} sessions, {size / 1e6:.0f} MB "
        f"(generated or reused in {gen:.1f} s); "
        + (
            f"warm cache, and cold ({cold_runs} runs after dropping the page cache)"
            if cold_runs
            else "warm cache only"
            + ("" if quiet_cache else " (dropping the page cache needs root)")
        ),
        flush=True,
    )

    # sync into an empty index, as a user's first `jsonltape sync`
    index = work / f"index-{args.events}.db"
    jt = str(Path(sys.executable).with_name("jsonltape"))
    wheel = args.shell == "installed" and not (args.quick or args.ingest or shell_runs == 0)
    jts = installed_command(work) if wheel else jt
    print(f"# shell runs: {jts} ({'installed from a wheel' if wheel else 'editable install'})")
    if args.in_process:
        return in_process_only(jt, root, index, m, runs, budget, jts, shell_runs)
    remove_db(index)
    env = dict(os.environ, JSONLTAPE_INDEX=str(index))
    sync = run_measured([jt, "sync", str(root), "--index", str(index), "--json"], env)
    stats = json.loads(sync.out)
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in stats.get("phases", {}).items())
    isize = index.stat().st_size
    print(
        f"\n## sync\n\n`jsonltape sync` (empty index): wall {sync.wall:.1f} s, CPU "
        f"{sync.cpu:.1f} s (all processes), peak RSS {sync.peak_sum / 1e6:.0f} MB summed over "
        f"the process tree (largest single process {sync.peak_one / 1e6:.0f} MB); "
        f"{stats['events'] / sync.wall:,.0f} events/s ({stats['events']:,} events with the "
        f"library's flush markers, {stats['messages']:,} messages); phases: "
        f"{phases}\n\n"
        f"index {isize / 1e6:.0f} MB for {size / 1e6:.0f} MB of session files "
        f"({isize / size:.2f}x)",
        flush=True,
    )
    sizes = table_sizes(index)
    if sizes is None:
        print("(per-table sizes: this SQLite has no dbstat)")
    else:
        print("\n| table | MB | share |\n|---|---:|---:|")
        for name, b in sizes.items():
            if b >= isize / 1000:
                print(f"| {name} | {b / 1e6:.1f} | {100 * b / isize:.0f}% |")

    if not args.quick:
        bench_baseline(index, work, sync, [jt, "sync", str(root)], args.ingest_rounds)
    if args.ingest:
        print(f"\nload {load_avg()}")
        return 0

    py_cpu: list[float] = []
    none_cpu: list[float] = []
    py = timings(quiet([sys.executable, "-c", "pass"], py_cpu), shell_runs, budget)
    nowhere = [jts, "search", "--index", str(index), "zqxjkvb"]
    none = timings(quiet(nowhere, none_cpu), shell_runs, budget)
    print(
        f"\nfrom the shell, the floor: `python -c pass` p50 {pct(py, 50) * 1000:.0f} ms "
        f"(CPU {pct(py_cpu, 50) * 1000:.0f} ms); `jsonltape search` of a word that is nowhere "
        f"p50 {pct(none, 50) * 1000:.0f} ms, p95 {pct(none, 95) * 1000:.0f} ms (CPU p50 "
        f"{pct(none_cpu, 50) * 1000:.0f} ms: the process's own, which other load does not add to)",
        flush=True,
    )

    con = connect(index, readonly=True)
    grep = grep_cmd()
    Row = tuple[str, str, str, int, list[float], list[float], list[float] | None]
    rows: list[Row] = []
    colds: dict[str, tuple[list[float], list[float]]] = {}
    for q in queries(m):
        for fname in FILTERS:
            f, opts = filters_for(fname, m)
            hits = count_hits(con, q.text, f)
            ts = timings(lambda: search(con, q.text, f, 20), runs, budget)  # noqa: B023
            shell = timings(
                lambda: subprocess.run(
                    [jts, "search", "--index", str(index), *opts, q.text],  # noqa: B023
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,  # "no matches" for filtered-out queries
                    env=SHELL_ENV,
                    check=True,
                ),
                shell_runs,
                budget,
            )
            rg = None
            if fname == "none":
                rg = timings(
                    lambda: subprocess.run(
                        [*grep, literal(q.text), str(root)],  # noqa: B023
                        stdout=subprocess.DEVNULL,
                    ),
                    shell_runs,
                    budget,
                )
            if fname == "none" and cold_runs:
                colds[q.text] = (
                    cold([jts, "search", "--index", str(index), q.text], cold_runs),
                    cold([*grep, literal(q.text), str(root)], cold_runs, check=False),
                )
            rows.append((q.cls, q.text, fname, hits, ts, shell, rg))
        print(f"  measured {q.cls} ({q.text}); load {load_avg()}", file=sys.stderr, flush=True)
    con.close()

    def ms(x: float) -> str:
        return f"{x * 1000:,.1f}"

    print(
        f"\n## queries (top 20; in-process = the daemon's search(); shell = `jsonltape search` "
        f"incl. start-up; `{' '.join(grep)}` over the tree, unfiltered rows only; times in ms)\n"
    )
    print(
        "| query class | query | filter | hits | p50 | p95 | max | shell p50 | shell p95 | "
        f"{grep[0]} -c p95 | shell/{grep[0]} |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cls, text, fname, hits, ts, shell, rg in rows:
        sp = pct(shell, 95)
        gp = pct(rg, 95) if rg else None
        print(
            f"| {cls} | `{text}` | {fname} | {hits:,} | {ms(pct(ts, 50))} | {ms(pct(ts, 95))} | "
            f"{ms(max(ts))} | {ms(pct(shell, 50))} | {ms(sp)} | {ms(gp) if gp else ''} | "
            f"{f'{sp / gp:.1f}x' if gp else ''} |"
        )
    if colds:
        print(
            f"\n## cold cache (page cache dropped before each run; {cold_runs} runs; ms)\n\n"
            f"| query | shell p50 | shell max | {grep[0]} -c p50 | {grep[0]} max | "
            f"shell/{grep[0]} |\n|---|---:|---:|---:|---:|---:|"
        )
        for text, (ours_c, rg_c) in colds.items():
            if ours_c and rg_c:
                print(
                    f"| `{text}` | {ms(pct(ours_c, 50))} | {ms(max(ours_c))} | "
                    f"{ms(pct(rg_c, 50))} | {ms(max(rg_c))} | "
                    f"{pct(ours_c, 50) / pct(rg_c, 50):.2f}x |"
                )
    worst = max(rows, key=lambda r: pct(r[4], 95))
    print(
        f"\nworst in-process p95: {ms(pct(worst[4], 95))} ms ({worst[0]}, filter {worst[2]}); "
        f"load {load_avg()}"
    )
    return 0


def _density(index: Path) -> tuple[int, int, int]:
    """Messages, the seconds they fall in, and the most in one of them."""
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        row = con.execute(
            "SELECT sum(n), count(*), max(n) FROM "
            "(SELECT count(*) AS n FROM messages GROUP BY time / 1000)"
        ).fetchone()
    finally:
        con.close()
    return int(row[0]), int(row[1]), int(row[2])


def bench_times(work: Path, events: int, rounds: int) -> int:
    """The ingest of the same messages timed three ways (``_search_corpus.TIMES``), each
    ``jsonltape sync`` into an empty index against the same-tables baseline, for ``rounds``
    rounds in which the trees take turns going first; ratios are the rounds' medians."""
    work.mkdir(parents=True, exist_ok=True)
    trees: dict[str, Path] = {}
    for times in corpus.TIMES:
        trees[times] = work / (f"tree-{events}" + ("" if times == "spread" else f"-{times}"))
        corpus.build(trees[times], events, times=times)
    print(
        f"# bench_search --times: {platform.node()} {platform.machine()} {os.cpu_count()} "
        f"cores, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {load_avg()}\n"
        f"# {events:,} events a tree, the same messages; {rounds} round(s)",
        flush=True,
    )
    jt = str(Path(sys.executable).with_name("jsonltape"))
    index = work / "index-times.db"
    got: dict[str, list[tuple[Run, Run]]] = {t: [] for t in trees}
    density: dict[str, tuple[int, int, int]] = {}
    for r in range(rounds):
        order = list(corpus.TIMES[r % 3 :] + corpus.TIMES[: r % 3])
        for times in order:
            remove_db(index)
            ours = run_measured([jt, "sync", str(trees[times]), "--index", str(index), "--json"])
            density[times] = _density(index)
            got[times].append((ours, same_tables(index, work)))
            print(
                f"  round {r + 1} {times}: ours {ours.wall:.1f} s, baseline "
                f"{got[times][-1][1].wall:.1f} s; load {load_avg()}",
                file=sys.stderr,
                flush=True,
            )
    remove_db(index)

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f}" + (
            f" ({min(xs):.2f}-{max(xs):.2f})" if len(xs) > 1 else ""
        )

    print(
        "\n| tree | messages | seconds | most in a second | ours wall s | ours CPU s | "
        "baseline wall s | baseline CPU s | ours/baseline wall | ours/baseline CPU |"
        "\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for times, pairs in got.items():
        n, seconds, most = density[times]
        print(
            f"| {times} | {n:,} | {seconds:,} | {most:,} | "
            f"{statistics.median(o.wall for o, _ in pairs):.1f} | "
            f"{statistics.median(o.cpu for o, _ in pairs):.1f} | "
            f"{statistics.median(b.wall for _, b in pairs):.1f} | "
            f"{statistics.median(b.cpu for _, b in pairs):.1f} | "
            f"{med([o.wall / b.wall for o, b in pairs])} | "
            f"{med([o.cpu / b.cpu for o, b in pairs])} |"
        )
    for times in ("burst", "live"):
        pairs = zip(got[times], got["spread"], strict=True)
        walls, cpus = zip(
            *((a.wall / s.wall, a.cpu / s.cpu) for (a, _), (s, _) in pairs), strict=True
        )
        print(
            f"\nours {times}/spread, median (range) of the rounds: wall {med(list(walls))}, "
            f"CPU {med(list(cpus))}"
        )
    print(f"\nload {load_avg()}")
    return 0


def in_process_only(
    jt: str,
    root: Path,
    index: Path,
    m: dict[str, object],
    runs: int,
    budget: float,
    jts: str,
    shell_runs: int,
) -> int:
    """The in-process query table alone, on an index left by an earlier run, with the shell
    p50/p95 of ``jts`` beside it unless ``shell_runs`` is 0."""
    if not index.exists():
        print(f"{index}: no index yet; run without --in-process first", file=sys.stderr)
        return 2
    subprocess.run([jt, "sync", str(root), "--index", str(index)], check=True)
    con = connect(index, readonly=True)
    print(
        "\n| query class | query | filter | hits | p50 | p95 | max | shell p50 | shell p95 |"
        "\n|---|---|---|---:|---:|---:|---:|---:|---:|"
    )
    worst = worst_shell = 0.0
    for q in queries(m):
        for fname in FILTERS:
            f, opts = filters_for(fname, m)
            hits = count_hits(con, q.text, f)
            ts = timings(lambda: search(con, q.text, f, 20), runs, budget)  # noqa: B023
            worst = max(worst, pct(ts, 95))
            sh = ""
            if shell_runs:
                cpu: list[float] = []
                cmd = [jts, "search", "--index", str(index), *opts, q.text]
                st = timings(quiet(cmd, cpu), shell_runs, budget)
                worst_shell = max(worst_shell, pct(st, 95))
                sh = f"{pct(st, 50) * 1000:.0f} | {pct(st, 95) * 1000:.0f}"
            print(
                f"| {q.cls} | `{q.text}` | {fname} | {hits:,} | {pct(ts, 50) * 1000:.1f} | "
                f"{pct(ts, 95) * 1000:.1f} | {max(ts) * 1000:.1f} | {sh} |",
                flush=True,
            )
    con.close()
    print(
        f"\nworst in-process p95: {worst * 1000:.1f} ms; worst shell p95: "
        f"{worst_shell * 1000:.0f} ms; load {load_avg()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
