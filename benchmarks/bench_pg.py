"""Push throughput into the PostgreSQL team index (issue 14), against ``psql \\copy``.

On the search benchmark's corpus (``_search_corpus.py``), in one run on a throwaway cluster
started through the test harness (``tests/_pg.py``: a Unix socket, ``fsync=off``):

* **push**: ``Mirror(PgStore(url, origin), tree).rescan()``, the engine a daemon or ``jsonltape
  sync --index postgresql://…`` runs: read and check every line, fold the surface, COPY into
  staging tables and ``INSERT ... ON CONFLICT DO NOTHING`` into the tables, watermarks in the
  same transactions. A first push fills a partition of the origin's own (keys and b-trees
  kept in step, the generated words tsvector computed per row) and builds its word, trigram
  and CJK GIN indexes at the end: the time is until searchable, builds included. With
  ``--incremental``, the same push first as schema 1 did it (into the shared partition, whose
  GIN indexes every insert updates), in the same run;
* **copy**: the very rows the push stored (events, messages with their search columns, tool
  calls), exported to files, then loaded by ``psql`` with ``\\copy`` into plain tables (no key,
  no index, no generated column): the floor of what any loader could do; and ``\\copy`` of the
  same rows into a fresh copy of the index's own schema (keys, foreign keys, the generated
  ``words`` column, the GIN indexes): the floor for this schema, which shows what the indexes
  cost apart from the engine.

The ratios are copy time / push time (1.0: as fast as ``\\copy``; the issue's target is 0.5
against plain tables). The push also reports its statements (round trips) and batch flushes
per 1,000 events, and the server time of each table's move (COPY into staging plus the
``INSERT``), which is where the time goes.

    .venv/bin/python benchmarks/bench_pg.py                  # 1M events
    .venv/bin/python benchmarks/bench_pg.py --events 20000   # smoke, < 1 min
    .venv/bin/python benchmarks/bench_pg.py --events 100000 --incremental  # before/after
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jsonltape_daemon.engines.postgres.schema import SCHEMA
from jsonltape_daemon.engines.postgres.store import PgStore
from jsonltape_daemon.ingest.mirror import Mirror

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import _search_corpus as corpus  # noqa: E402

from tests._pg import PgServer, find_bindir  # noqa: E402

SESSION_COLS = (
    "id, path, header_crc, title, cwd, agent, created, updated, parent, parent_seq, events, "
    "messages, state, error, open_turn, closed"
)
#: (table, its columns in the shared schema, the plain table's column types)
TABLES = [
    (
        "events",
        'origin, sid, seq, type, time, "offset", size, crc',
        'origin text, sid bigint, seq bigint, type text, time bigint, "offset" bigint, '
        "size bigint, crc text",
    ),
    (
        "messages",
        "origin, sid, seq, type, role, time, status, anchor, call_id, calls, text, truncated, "
        "idents, cjk",
        "origin text, sid bigint, seq bigint, type text, role text, time bigint, status text, "
        "anchor bigint, call_id text, calls text[], text text, truncated boolean, idents text, "
        "cjk text[]",
    ),
    (
        "tool_calls",
        "origin, sid, call_id, seq",
        "origin text, sid bigint, call_id text, seq bigint",
    ),
]


class CountedStore(PgStore):
    """:class:`PgStore` counting its statements and flushes and timing each table's move."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.tally: Counter[str] = Counter()
        self.move_seconds: dict[str, float] = {}
        super().__init__(*args, **kw)

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self.tally["statements"] += 1
        return super()._exec(sql, params)

    def _flush(self) -> None:
        self.tally["flushes"] += bool(self._pending)
        super()._flush()

    def _move(self, cur: Any, table: str, cols: str, rows: Sequence[Sequence[Any]]) -> None:
        t = time.perf_counter()
        super()._move(cur, table, cols, rows)
        if rows:
            self.tally["statements"] += 3  # the COPY, the INSERT and the TRUNCATE
            self.move_seconds[table] = self.move_seconds.get(table, 0.0) + time.perf_counter() - t


class IncrementalStore(CountedStore):
    """The push as before schema 2: a first push goes into the shared partition, whose
    search indexes are kept in step row by row (no partition of its own, nothing deferred)."""

    def start_bulk(self) -> None:
        self._bulk = True


def push(url: str, root: Path, kind: type[CountedStore]) -> tuple[float, Any, CountedStore]:
    """Push ``root`` into ``url`` as origin ``bench``; return the seconds until searchable
    (the search indexes built), the sync's statistics and the store."""
    t = time.perf_counter()
    store = kind(url, "bench")
    with store:
        stats = Mirror(store, str(root)).rescan()
        assert store.fts_live, "the push ended with its search indexes built"
    return time.perf_counter() - t, stats, store


def load_avg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - no getloadavg
        return "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=HERE / "_data" / "search")
    ap.add_argument(
        "--incremental",
        action="store_true",
        help="also push the way schema 1 did (indexes kept in step), in the same run",
    )
    args = ap.parse_args()
    before = 0.0
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL server binaries not found (install the 'postgresql' package)")
        return 2
    root = args.work.absolute() / f"tree-{args.events}"
    t = time.perf_counter()
    corpus.build(root, args.events)
    gen = time.perf_counter() - t
    files = sorted(root.rglob("*.jsonl"))
    size = sum(p.stat().st_size for p in files)
    server = PgServer(bindir)
    try:
        server.start()
        with server.connect() as con:
            version = con.execute("SHOW server_version").fetchone()
        print(
            f"# bench_pg: {platform.node()} {platform.machine()} {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, PostgreSQL {version[0] if version else '?'} "
            f"(throwaway cluster, fsync off), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
            f"; load {load_avg()}\n# tree: {args.events:,} events, {len(files)} sessions, "
            f"{size / 1e6:.0f} MB (generated or reused in {gen:.1f} s)",
            flush=True,
        )
        if args.incremental:
            before, old, _ = push(server.create_database("incremental"), root, IncrementalStore)
            print(
                f"\nincremental push (schema 1's path: indexes kept in step): {before:.1f} s, "
                f"{old.events / before:,.0f} events/s; load {load_avg()}",
                flush=True,
            )
        url = server.create_database("push")
        took, stats, store = push(url, root, CountedStore)
        phases = ", ".join(f"{k} {v:.1f} s" for k, v in stats.phases.items())
        per_k = {k: v * 1000 / max(1, stats.events) for k, v in store.tally.items()}
        moves = ", ".join(f"{k} {v:.1f} s" for k, v in store.move_seconds.items())
        print(
            f"\npush until searchable: {took:.1f} s, {stats.events / took:,.0f} events/s "
            f"({stats.events:,} events, "
            f"{stats.messages:,} messages, {stats.transactions} transactions); phases: {phases}\n"
            f"per 1,000 events: {per_k.get('statements', 0):.1f} statements, "
            f"{per_k.get('flushes', 0):.2f} flushes; server time of the moves: {moves}",
            flush=True,
        )
        if args.incremental:
            print(f"bulk path vs incremental: {before / took:.2f}x as fast", flush=True)
        plain, indexed = copy_same_rows(server, bindir, url)
        print(
            f"psql \\copy of the same rows into plain tables: {plain:.1f} s, "
            f"{stats.events / plain:,.0f} events/s; ratio (copy time / push time): "
            f"{plain / took:.2f}x (target >= 0.5x)\n"
            f"psql \\copy of the same rows into the index's own tables (keys, foreign keys, the "
            f"generated words column, GIN indexes): {indexed:.1f} s, "
            f"{stats.events / indexed:,.0f} events/s; ratio: {indexed / took:.2f}x"
        )
    finally:
        server.destroy()
    return 0


def copy_same_rows(server: PgServer, bindir: Path, url: str) -> tuple[float, float]:
    """Export what the push stored, then time one ``psql`` run that ``\\copy``-loads it into
    plain tables, and one into a fresh copy of the index's schema (sessions first: the
    foreign keys); return both times."""
    import psycopg
    from jsonltape_daemon.engines.postgres import schema as pg_schema

    plain = server.create_database("plain")
    indexed = server.create_database("indexed")
    with psycopg.connect(indexed) as con:
        pg_schema.migrate(con)
    every = [
        ("origins", "origin, created, pushed, roots", ""),
        ("sessions", "origin, sid, " + SESSION_COLS, ""),
        *TABLES,
    ]
    with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
        to_plain, to_indexed = [], []
        with psycopg.connect(url) as src, psycopg.connect(plain, autocommit=True) as dst:
            for table, cols, types in every:
                dump = Path(tmp) / f"{table}.tsv"
                with (
                    dump.open("wb") as f,
                    src.cursor().copy(
                        f"COPY (SELECT {cols} FROM {SCHEMA}.{table}) TO STDOUT"
                    ) as cp,
                ):
                    for block in cp:
                        f.write(block)
                to_indexed.append(f"\\copy {SCHEMA}.{table} ({cols}) FROM '{dump}'")
                if types:
                    dst.execute(f"CREATE TABLE plain_{table} ({types})")
                    to_plain.append(f"\\copy plain_{table} FROM '{dump}'")
        times = []
        for db, script in ((plain, to_plain), (indexed, to_indexed)):
            t = time.perf_counter()
            subprocess.run(
                [str(bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", db],
                input="\n".join(script),
                text=True,
                check=True,
                env={k: v for k, v in os.environ.items() if not k.startswith("PG")},
            )
            times.append(time.perf_counter() - t)
        return times[0], times[1]


if __name__ == "__main__":
    sys.exit(main())
