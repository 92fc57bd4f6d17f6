"""The viewer's benchmark still runs, at tiny sizes (nothing here times anything: the numbers
are in benchmarks/README.md, "Web viewer")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.web.conftest import _need_chromium

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_web.py"


@pytest.mark.timeout(300)
def test_the_web_benchmark_runs_and_prints_its_table(tmp_path: Path) -> None:
    _need_chromium()
    args = ["--sessions", "40", "--events", "600", "--concurrent", "3", "--clients", "3"]
    args += ["--seconds", "1", "--search-events", "1000", "--live-appends", "3"]
    done = subprocess.run(
        [sys.executable, str(BENCH), "--dir", str(tmp_path / "b"), *args],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
        env={**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for row in (
        "session list page",
        "DOMContentLoaded",
        "server RSS",
        "search as you type",
        "live: append to painted",
        "clients browsing",
    ):
        assert row in done.stdout, row
