"""Append → searchable in a PostgreSQL team index, through the daemon (issue 14: p95 < 2 s).

Starts a throwaway PostgreSQL cluster (``tests/_pg.py``), runs ``jsonltape daemon run`` with
that database as its ``--index`` (it pushes beside its local index) over an empty root, then,
in another process's role, an agent appends one message at a time with group commit and
``flush()``; the time until a search of the team index (``pg_search.search``, as
``jsonltape search --index URL`` runs it) finds the message is the lag. The same appends are
timed against the daemon's local index, the baseline: the push adds what it adds.

    .venv/bin/python benchmarks/bench_pg_lag.py [--appends 200] [--sessions 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/_pg.py

import psycopg  # noqa: E402
from jsonltape_daemon.engines.postgres import search as pg_search  # noqa: E402
from jsonltape_daemon.engines.sqlite.search import search  # noqa: E402

import jsonltape  # noqa: E402
from tests._pg import PgServer, find_bindir  # noqa: E402


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def wait_for(found: Callable[[], bool], timeout: float = 30.0) -> float:
    """Seconds until ``found()`` is true (polled every 5 ms)."""
    t = time.perf_counter()
    while time.perf_counter() - t < timeout:
        try:
            if found():
                return time.perf_counter() - t
        except (psycopg.Error, sqlite3.Error):
            pass  # not created yet
        time.sleep(0.005)
    raise SystemExit(f"not searchable after {timeout} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--sessions", type=int, default=4)
    args = ap.parse_args()
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL server binaries not found (install the 'postgresql' package)")
        return 2
    server = PgServer(bindir)
    work = Path(tempfile.mkdtemp(prefix="bench_pg_lag-"))
    root, local = work / "sessions", work / "local.db"
    root.mkdir()
    try:
        server.start()
        url = server.create_database("lag")
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jsonltape",
                "daemon",
                "run",
                str(root),
                "--local-index",
                str(local),
                "--origin",
                "bench",
                "--debounce",
                "0.05",
            ],
            env={**os.environ, "JSONLTAPE_INDEX": url, "JSONLTAPE_HOME": str(work / "home")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            lags, local_lags = run(root, local, url, args.appends, args.sessions)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
        with psycopg.connect(url) as con:
            version = con.execute("SHOW server_version").fetchone()
    finally:
        server.destroy()
    print(
        f"# bench_pg_lag: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"PostgreSQL {version[0] if version else '?'}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
        f"# {args.appends} appends (one message each, flushed) over {args.sessions} sessions\n\n"
        "| searchable in | p50 ms | p95 ms | max ms |\n|---|---:|---:|---:|\n"
        f"| the team index (PostgreSQL, through the daemon) | {pct(lags, 50) * 1000:.0f} | "
        f"{pct(lags, 95) * 1000:.0f} | {max(lags) * 1000:.0f} |\n"
        f"| the daemon's local index (baseline) | {pct(local_lags, 50) * 1000:.0f} | "
        f"{pct(local_lags, 95) * 1000:.0f} | {max(local_lags) * 1000:.0f} |\n\n"
        f"p95 PostgreSQL / local: {pct(lags, 95) / pct(local_lags, 95):.2f}x"
    )
    return 0


def run(
    root: Path, local: Path, url: str, appends: int, sessions: int
) -> tuple[list[float], list[float]]:
    tapes = [jsonltape.open(root / f"s{i}.jsonl", create=True) for i in range(sessions)]
    lags: list[float] = []
    local_lags: list[float] = []
    con = psycopg.connect(url, autocommit=True)
    try:
        for n in range(-3, appends):  # three warm-up appends while the daemon starts
            if n == 0:
                lags.clear()
                local_lags.clear()
            word = f"marker{n + 3:05d}x"
            tape = tapes[n % sessions]
            tape.user(f"a prompt that mentions {word} once")
            tape.flush()
            t0 = time.perf_counter()

            def in_local(word: str = word) -> bool:
                lc = sqlite3.connect(f"file:{local}?mode=ro", uri=True)
                try:
                    return bool(search(lc, word, limit=1))
                finally:
                    lc.close()

            local_lags.append(wait_for(in_local))

            def in_team(word: str = word) -> bool:
                return bool(pg_search.search(con, word, limit=1))

            wait_for(in_team)
            lags.append(time.perf_counter() - t0)
    finally:
        con.close()
        for tape in tapes:
            tape.close()
    return lags, local_lags


if __name__ == "__main__":
    sys.exit(main())
