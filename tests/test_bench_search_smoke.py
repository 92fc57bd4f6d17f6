"""The search benchmark (benchmarks/bench_search.py, issue 16) runs in its quick mode and its
table covers every query class, each finding messages in the generated corpus; its ingest
baseline builds the tables our index holds. No timing is asserted: the numbers live in
benchmarks/README.md."""

from __future__ import annotations

import sqlite3
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


def test_ingest_baseline_keyed_as_ours_builds_our_full_text_tables(tmp_path: Path) -> None:
    """The same-tables baseline of the ingest comparison holds what our index holds: the same
    rowids in each full-text table for the same query, and the same word list."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        import _ingest_bench as ingest
        import _search_corpus as corpus
    finally:
        sys.path.remove(str(BENCH.parent))
    root, index, theirs = tmp_path / "tree", tmp_path / "index.db", tmp_path / "baseline.db"
    corpus.build(root, 4000)
    sync = [sys.executable, "-m", "jsonltape", "sync", str(root), "--index", str(index)]
    subprocess.run(sync, check=True, capture_output=True, timeout=120)
    nd, ev = tmp_path / "messages.ndjson", tmp_path / "events.ndjson"
    assert ingest.export_messages(index, nd) > 0 and ingest.export_events(index, ev) > 0
    baseline = [sys.executable, "-c", ingest._BASELINE, str(nd), str(theirs)]
    baseline += [ingest.WORD_TOKENIZER, "tkey", str(ev)]
    subprocess.run(baseline, check=True, capture_output=True, timeout=120)

    def rowids(db: Path, table: str, query: str) -> list[int]:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid"
            return [r[0] for r in con.execute(sql, (query,))]
        finally:
            con.close()

    for table, query in (
        ("messages_fts", "the"),
        ("messages_fts", '"most recent call last"'),
        ("messages_trigram", '"Fou"'),  # one trigram: detail='none' has no phrases
        ("messages_cjk", '"京"'),
    ):
        ours = rowids(index, table, query)
        assert ours, f"{table} MATCH {query} finds nothing: the check would be empty"
        assert rowids(theirs, table, query) == ours, (table, query)

    def word_list(db: Path) -> list[tuple[str, int]]:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return con.execute("SELECT term, docs FROM words ORDER BY term").fetchall()
        finally:
            con.close()

    assert word_list(theirs) == word_list(index)


def test_the_burst_and_live_trees_hold_the_spread_trees_messages_at_other_times(
    tmp_path: Path,
) -> None:
    """``--times`` compares the ingest of the same messages timed three ways: the burst tree has
    every event in one second, the live one the writer's own times, and both the spread tree's
    events otherwise (the same sessions, types and data, in order; the header and checkpoints
    aside, which hold times and crcs)."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        import _search_corpus as corpus
    finally:
        sys.path.remove(str(BENCH.parent))
    import jsonltape

    trees = {}
    for times in corpus.TIMES:
        root = tmp_path / times
        corpus.build(root, 3000, times=times)
        trees[times] = {
            p.relative_to(root): [
                (e.type, e.data, e.time)
                for e in jsonltape.read(p)
                if not e.type.startswith("session/")  # the header, checkpoints: times, crcs
            ]
            for p in sorted(root.rglob("*.jsonl"))
        }
    spread, burst, live = (trees[t] for t in ("spread", "burst", "live"))
    assert len(spread) == 3 and spread.keys() == burst.keys() == live.keys()
    for other in (burst, live):
        for path, events in spread.items():
            assert [(t, d) for t, d, _ in other[path]] == [(t, d) for t, d, _ in events]
    burst_seconds = {t // 1000 for events in burst.values() for _, _, t in events}
    assert len(burst_seconds) == 1
    spread_seconds = {t // 1000 for events in spread.values() for _, _, t in events}
    live_seconds = {t // 1000 for events in live.values() for _, _, t in events}
    assert len(spread_seconds) > 500 and not live_seconds & spread_seconds
