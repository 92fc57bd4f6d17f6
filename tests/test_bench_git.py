"""benchmarks/bench_git.py still runs, at a tiny size (nothing is timed here; the numbers live
in benchmarks/README.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_git.py"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
def test_bench_git_runs_and_prints_its_tables(tmp_path: Path) -> None:
    args = ["--sessions", "3", "--kb", "5", "--append-kb", "1", "--textconv-mb", "0.05"]
    done = subprocess.run(
        [sys.executable, str(BENCH), *args, "--rounds", "1", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "(a) new: 3 sessions of 5 KB staged" in done.stdout
    assert "(a) appended: one turn" in done.stdout
    assert "| jsonltape git pre-commit |" in done.stdout
    assert "| cat in one process |" in done.stdout
    assert "(b) textconv of a" in done.stdout
    assert "session/start: session big" in done.stdout  # the output sample
    assert "Traceback" not in done.stderr
