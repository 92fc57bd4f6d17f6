"""The benchmark scripts still run, at tiny sizes: a benchmark that rots unnoticed is worse
than none. Nothing here times anything; the numbers live in benchmarks/README.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._pg import _require as require_pg
from tests._pg import find_bindir

from .conftest import SAMPLES

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"

CASES = {
    "bench_core.py": (
        ["--events", "300", "--durable-events", "10", "--read-events", "2000"]
        + ["--big-mb", "2", "--rounds", "1"],
        "| (d) open+repair torn 1 MB vs 2 MB session |",
    ),
    "bench_create.py": (["--sessions", "20", "--rounds", "1"], "staged vs usual:"),
    "bench_fsync_gap.py": (["--appends", "10", "--rounds", "1"], "| jsonltape always |"),
    "bench_fold.py": (["--events", "2000", "--repeat", "1"], "fold peak Python memory"),
    "bench_follow.py": (["--events", "2000", "--rounds", "1"], "| (a) follow 2,000 events"),
    "bench_interop.py": (["--projects", "1", "--sessions", "2", "--turns", "3"], "claude-tree"),
    "bench_live_foreign.py": (
        ["--mb", "0.3", "--seconds", "0.5", "--rounds", "1"],
        "| 1 | on vs off |",
    ),
    "bench_index.py": (["--events", "2000", "--rounds", "1"], "worst p95 over the queries"),
    "bench_startup.py": (["--rounds", "1"], "| jsonltape search (small index) |"),
    "bench_pg_lag.py": (["--appends", "5", "--sessions", "2"], "p95 PostgreSQL / local"),
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_benchmark_script_runs_and_prints_its_table(script: str, tmp_path: Path) -> None:
    args, expect = CASES[script]
    if script == "bench_index.py":
        # Its baseline is the sqlite-utils command (the test extra installs it).
        args = [*args, "--dir", str(tmp_path / "data")]
    if script == "bench_live_foreign.py" and not SAMPLES.is_dir():
        pytest.skip(f"the Claude Code sample it grows is not in {SAMPLES}")
    if script == "bench_interop.py":
        pi = SAMPLES / "pi-v1-legacy-large-session.jsonl"
        if not pi.exists():
            pytest.skip(f"the pi sample it imports is not at {pi}")
    if script == "bench_pg_lag.py" and find_bindir() is None:
        if require_pg():
            pytest.fail("no PostgreSQL server, and CI requires one (tests/_pg.py)")
        pytest.skip("no PostgreSQL server binaries (install Debian's postgresql)")
    if script in ("bench_core.py", "bench_create.py", "bench_fsync_gap.py", "bench_startup.py"):
        args = [*args, "--dir", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        env={**os.environ, "JSONLTAPE_SAMPLES": str(SAMPLES)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout
    assert "Traceback" not in done.stderr
