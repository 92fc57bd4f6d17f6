"""The search benchmark (benchmarks/bench_search.py, issue 16) runs in its quick mode and its
table covers every query class, each finding messages in the generated corpus. No timing is
asserted: the numbers live in benchmarks/README.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_search.py"
CLASSES = [
    "rank 0",
    "rank 10",
    "rank 100",
    "rank 1000",
    "rarest",
    "phrase",
    "substring 3",
    "substring 4",
    "substring 6",
    "CJK 1",
    "CJK 2",
    "CJK 3",
    "CJK 4",
    "prefix 1",
    "prefix 2",
    "prefix 3",
    "prefix 4",
]
FILTERS = {"none", "role", "session", "since"}


def test_quick_search_benchmark_reports_hits_for_every_query_class(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--events", "20000", "--quick", "--work", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows: dict[tuple[str, str], int] = {}
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 11 and cells[2] in FILTERS:
            rows[(cells[0].split(" (")[0], cells[2])] = int(cells[3].replace(",", ""))
    for cls in CLASSES:
        for f in FILTERS:
            assert (cls, f) in rows, f"no row for {cls} with filter {f}:\n{done.stdout}"
        # Unfiltered, every class must find something; a filter may rightly exclude all.
        assert rows[(cls, "none")] > 0, f"{cls} has no hits:\n{done.stdout}"
        assert rows[(cls, "none")] >= max(rows[(cls, f)] for f in FILTERS)
    assert "index " in done.stdout and "session files" in done.stdout
    assert "peak RSS" in done.stdout
