"""Index benchmarks, side by side in one run (issue 4):

(a) first ingest of an N-event archive vs ``sqlite-utils insert --nl`` + ``enable-fts`` of the
    same messages (baseline; the export to NDJSON is not counted against it);
(b) incremental: append one event and sync, with the N-event archive indexed vs a 1k one;
(c) append-to-searchable lag with the daemon running (p50/p95);
(d) search latency over the archive vs ``grep -r`` and ``rg`` over the same files.

    .venv/bin/pip install sqlite-utils   # dev-only baseline
    .venv/bin/python benchmarks/bench_index.py [--events 1000000] [--dir benchmarks/_data]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
from jsonltape_daemon.ingest import Ingestor
from jsonltape_daemon.search import Filters, search
from jsonltape_daemon.service import Config, Daemon
from jsonltape_daemon.store import SqliteStore

import jsonltape
from jsonltape import _framing

EVENTS_PER_SESSION = 1000
_enc = msgspec.json.Encoder()


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
        for _ in range(20_000)
    ]
    words += ["migration", "FileNotFoundError", "parse_user_id", "東京都の天気", "naïve"]
    return words, list(itertools.accumulate(1 / (i + 1) for i in range(len(words))))


def write_archive(root: Path, events: int, seed: int = 1) -> int:
    """Sessions of EVENTS_PER_SESSION events (turns of user, assistant, tool call/result)."""
    rng = random.Random(seed)
    words, cum = vocabulary(rng)
    text = lambda n: " ".join(rng.choices(words, cum_weights=cum, k=n))  # noqa: E731
    root.mkdir(parents=True, exist_ok=True)
    made = 0
    s = 0
    t0 = 1_700_000_000_000
    while made < events:
        n = min(EVENTS_PER_SESSION, events - made)
        out = bytearray()
        sid = f"bench{s:06d}"
        lines = [
            (
                "session/start",
                {"format": "jsonltape", "version": 1, "id": sid, "created": t0, "title": text(4)},
                None,
            )
        ]
        while len(lines) < n:
            c = f"c{len(lines)}"
            lines += [
                ("turn/start", {}, None),
                (
                    "user/message",
                    {
                        "message": {
                            "id": f"u{len(lines)}",
                            "role": "user",
                            "parts": [{"type": "text", "content": text(rng.randint(5, 40))}],
                        }
                    },
                    "append",
                ),
                (
                    "assistant/message",
                    {
                        "message": {
                            "id": f"a{len(lines)}",
                            "role": "assistant",
                            "parts": [
                                {"type": "text", "content": text(rng.randint(10, 60))},
                                {
                                    "type": "tool_call",
                                    "id": c,
                                    "name": "Read",
                                    "arguments": {"path": f"src/{text(1)}.py"},
                                },
                            ],
                        }
                    },
                    "append",
                ),
                (
                    "tool/result",
                    {
                        "call_id": c,
                        "message": {
                            "id": f"t{len(lines)}",
                            "role": "tool",
                            "parts": [
                                {
                                    "type": "tool_call_response",
                                    "id": c,
                                    "response": text(rng.randint(10, 80)),
                                }
                            ],
                        },
                    },
                    "append",
                ),
                ("turn/end", {"turn": len(lines), "reason": "completed"}, None),
            ]
        for seq, (type_, data, surface) in enumerate(lines[:n]):
            obj: dict[str, object] = {
                "seq": seq,
                "type": type_,
                "time": t0 + s * 10_000 + seq,
                "data": data,
            }
            if surface:
                obj["surface"] = surface
            out += _framing.frame(_enc.encode(obj))
        path = root / f"d{s % 50:02d}" / f"{sid}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(bytes(out))
        made += n
        s += 1
    return s


def timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def fresh(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if p.exists():
            p.unlink()


def bench_ingest(root: Path, work: Path) -> tuple[float, float, Path]:
    index = work / "index.db"
    fresh(index)
    store = SqliteStore(index)
    ours = timed(lambda: Ingestor(store, root).rescan())
    # The baseline gets the same messages, already extracted, as NDJSON.
    nd = work / "messages.ndjson"
    with open(nd, "wb") as f:
        for r in store.con.execute(
            "SELECT m.id, s.id, m.seq, m.role, m.text FROM messages m JOIN sessions s USING (sid)"
        ):
            f.write(
                _enc.encode({"id": r[0], "session": r[1], "seq": r[2], "role": r[3], "text": r[4]})
                + b"\n"
            )
    store.close()
    base_db = work / "baseline.db"
    fresh(base_db)
    su = str(Path(sys.executable).with_name("sqlite-utils"))
    base = timed(
        lambda: (
            subprocess.run(
                [su, "insert", str(base_db), "messages", str(nd), "--nl", "--pk", "id"], check=True
            ),
            subprocess.run(
                [su, "enable-fts", str(base_db), "messages", "text", "--fts5"], check=True
            ),
        )
    )
    return ours, base, index


def bench_incremental(index: Path, root: Path, rounds: int = 30) -> tuple[float, float]:
    store = SqliteStore(index)
    engine = Ingestor(store, root)
    path = sorted(root.rglob("*.jsonl"))[len(list(root.rglob("*.jsonl"))) // 2]
    one, full = [], []
    for i in range(rounds):
        with jsonltape.open(path, durability="manual") as tape:
            tape.user(f"incremental {i}")
        one.append(timed(lambda: engine.sync_paths([str(path)])))
        with jsonltape.open(path, durability="manual") as tape:
            tape.user(f"incremental b {i}")
        full.append(timed(lambda: engine.rescan()))
    store.close()
    return statistics.median(one), statistics.median(full)


def bench_lag(index: Path, root: Path, rounds: int = 40) -> list[float]:
    daemon = Daemon(Config(root, index, rescan_interval=3600), log=lambda _m: None)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    while daemon.status.get("state") != "running":
        time.sleep(0.01)
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    path = sorted(root.rglob("*.jsonl"))[0]
    lags = []
    with jsonltape.open(path, durability="always") as tape:
        for i in range(rounds):
            token = f"lagtoken{i:04d}x"
            t = time.perf_counter()
            tape.user(f"the {token} arrives")
            while not search(con, token, Filters(), 1):
                time.sleep(0.002)
            lags.append(time.perf_counter() - t)
            time.sleep(0.05)
    daemon.request_stop()
    thread.join()
    con.close()
    return lags


QUERIES = [
    "migration",
    "FileNotFoundError",
    "parse_user_id",
    "naive",
    '"migration parse_user_id"',
    "NotFound",
    "東京都",
    "天気",
]


def bench_search(index: Path, root: Path, extra: list[str]) -> dict[str, tuple[float, float]]:
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    out = {}
    for q in QUERIES + extra:
        times = [timed(lambda q=q: search(con, q, Filters(), 20)) for _ in range(15)]
        out[q] = (statistics.median(times), pct(times, 95))
    con.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path(__file__).parent / "_data")
    args = ap.parse_args()
    work = args.dir.absolute()
    big, small = work / f"archive-{args.events}", work / "archive-1000"
    for root, n in ((big, args.events), (small, 1000)):
        if not root.exists():
            t = timed(lambda: write_archive(root, n))  # noqa: B023
            print(f"wrote {root} ({n} events) in {t:.1f} s", flush=True)
    size = sum(p.stat().st_size for p in big.rglob("*.jsonl"))
    print(
        f"# {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"{time.strftime('%Y-%m-%d')}; archive {args.events} events, {size / 1e6:.0f} MB"
    )

    ours, base, index = bench_ingest(big, work)
    con = sqlite3.connect(index)
    msgs = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    con.close()
    print(
        f"(a) ingest: jsonltape sync {ours:.1f} s ({args.events / ours:,.0f} events/s, "
        f"{msgs / ours:,.0f} messages/s, words+trigram FTS, raw lines kept) | "
        f"sqlite-utils insert --nl + enable-fts {base:.1f} s ({msgs} messages, words FTS only)"
        f" | ratio ours/baseline {ours / base:.2f}",
        flush=True,
    )

    small_index = work / "small.db"
    fresh(small_index)
    s = SqliteStore(small_index)
    Ingestor(s, small).rescan()
    s.close()
    b1, bf = bench_incremental(index, big)
    s1, sf = bench_incremental(small_index, small)
    print(
        f"(b) append 1 event + sync that file: {b1 * 1000:.2f} ms with {args.events} events "
        f"indexed vs {s1 * 1000:.2f} ms with 1000 (ratio {b1 / s1:.2f}); full rescan "
        f"{bf * 1000:.1f} ms vs {sf * 1000:.2f} ms (stat of every file)",
        flush=True,
    )

    lags = bench_lag(index, big)
    print(
        f"(c) append-to-searchable lag with the daemon: p50 {pct(lags, 50) * 1000:.0f} ms, "
        f"p95 {pct(lags, 95) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
        f"({len(lags)} appends)",
        flush=True,
    )

    res = bench_search(index, big, [])
    p95s = [v[1] for v in res.values()]
    print("(d) search, 20 hits (median / p95 ms):", flush=True)
    for q, (med, p95) in res.items():
        print(f"      {q!r:32} {med * 1000:8.2f} {p95 * 1000:8.2f}")
    for tool in (["grep", "-r", "-l", "-F"], ["rg", "-l", "-F"]):
        if shutil.which(tool[0]):
            t = [
                timed(
                    lambda: subprocess.run(
                        [*tool, "FileNotFoundError", str(big)],  # noqa: B023
                        stdout=subprocess.DEVNULL,
                    )
                )
                for _ in range(3)
            ]
            print(
                f"    {' '.join(tool)} FileNotFoundError over the files: "
                f"{statistics.median(t) * 1000:.0f} ms (median of 3)"
            )
    print(f"    worst p95 over the queries: {max(p95s) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
