"""Index benchmarks, side by side in one run (issue 4):

(a) first ingest of an N-event archive (``jsonltape sync`` on an empty index: a bulk load, by
    phase) vs ``sqlite-utils insert --nl`` + ``enable-fts`` of the same messages with the same
    word tokenizer (the export to NDJSON is not counted against it); then the substring
    (trigram) index, which ours builds after the index is searchable, vs the same trigram table
    built the same way on the baseline's database. Sides alternate, ``--rounds`` times each;
    medians are printed.
(b) incremental: append one event and sync, with the N-event archive indexed vs a 1k one;
(c) append-to-searchable lag with the daemon running (p50/p95);
(d) search latency over the archive vs ``grep -r`` and ``rg`` over the same files, and for the
    short CJK queries the ``LIKE`` scan they used to need.

    .venv/bin/pip install sqlite-utils   # dev-only baseline
    .venv/bin/python benchmarks/bench_index.py [--events 1000000] [--dir benchmarks/_data]
"""

from __future__ import annotations

import argparse
import functools
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
from collections.abc import Callable
from pathlib import Path

import msgspec
from jsonltape_daemon.engines.sqlite.search import Filters, search
from jsonltape_daemon.engines.sqlite.store import SqliteStore, remove_db
from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.ingest.ingestor import Ingestor, SyncStats
from jsonltape_daemon.service.daemon import Config, Daemon
from jsonltape_daemon.text.idents import idents

import jsonltape
from jsonltape import _framing

EVENTS_PER_SESSION = 1000
WORD_TOKENIZER = "unicode61 remove_diacritics 2"
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


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def load_avg() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on this platform
        return "?"


# -- (a) first ingest ----------------------------------------------------------------------


def ours_ingest(root: Path, index: Path) -> tuple[float, float, SyncStats]:
    """A first sync: (seconds until searchable, seconds of the substring index, stats)."""
    remove_db(index)
    t0 = time.perf_counter()
    store = SqliteStore(index)
    engine = Ingestor(store, root)
    stats = engine.rescan()
    searchable = time.perf_counter() - t0
    sub = engine.build_substrings(tx_seconds=1.0)
    store.close()
    return searchable, sub.seconds, stats


def export_messages(index: Path, nd: Path) -> int:
    """The baseline's input: the very messages our index holds, as NDJSON."""
    con = sqlite3.connect(index)
    n = 0
    # The index keeps no copy of the texts: read them back from the files, as a search does.
    with open(nd, "wb") as f, Texts(con) as texts:
        for r in con.execute(
            "SELECT m.id, s.id, m.seq, m.role, m.tkey FROM messages m JOIN sessions s USING (sid)"
        ):
            text = texts.get([r[4]])[r[4]] or ""
            texts.forget([r[4]])
            row = {"id": r[0], "session": r[1], "seq": r[2], "role": r[3], "text": text}
            row["idents"] = idents(text)  # what ours puts in its substring table
            f.write(_enc.encode(row) + b"\n")
            n += 1
    con.close()
    return n


def baseline_ingest(nd: Path, db: Path) -> tuple[float, float]:
    """sqlite-utils insert + enable-fts (same word tokenizer); then the same trigram table."""
    remove_db(db)
    su = str(Path(sys.executable).with_name("sqlite-utils"))
    t0 = time.perf_counter()
    subprocess.run([su, "insert", str(db), "messages", str(nd), "--nl", "--pk", "id"], check=True)
    subprocess.run(
        [su, "enable-fts", str(db), "messages", "text", "--fts5", "--tokenize", WORD_TOKENIZER],
        check=True,
    )
    words = time.perf_counter() - t0
    con = sqlite3.connect(db, isolation_level=None)
    t1 = time.perf_counter()
    con.execute(
        "CREATE VIRTUAL TABLE messages_trigram USING fts5(idents, content='messages', "
        "content_rowid='id', tokenize='trigram', detail='none')"
    )
    con.execute("INSERT INTO messages_trigram (messages_trigram) VALUES ('rebuild')")
    trigram = time.perf_counter() - t1
    con.close()
    return words, trigram


def bench_ingest(root: Path, work: Path, rounds: int) -> Path:
    index = work / "index.db"
    nd = work / "messages.ndjson"
    base_db = work / "baseline.db"
    ours: list[tuple[float, float, SyncStats]] = []
    base: list[tuple[float, float]] = []
    msgs = 0
    for i in range(rounds):
        ours.append(ours_ingest(root, index))
        if i == 0:
            msgs = export_messages(index, nd)
        base.append(baseline_ingest(nd, base_db))
        o, b = ours[-1], base[-1]
        print(
            f"    round {i + 1}: ours {o[0]:.1f} s + substrings {o[1]:.1f} s | baseline "
            f"{b[0]:.1f} s + trigram {b[1]:.1f} s | load {load_avg()}",
            flush=True,
        )
    med = statistics.median
    o_words, o_sub = med(o[0] for o in ours), med(o[1] for o in ours)
    b_words, b_tri = med(b[0] for b in base), med(b[1] for b in base)
    phases: dict[str, float] = {}
    for name in ("read", "rows", "insert", "words", "publish"):
        phases[name] = med(o[2].phases.get(name, 0.0) for o in ours)
    other = med(o[2].seconds - sum(o[2].phases.values()) for o in ours)
    events = ours[0][2].events
    print(
        f"(a) first ingest, {events} events, {msgs} messages (medians of {rounds}):\n"
        f"    searchable (words + CJK, raw lines kept): jsonltape {o_words:.1f} s "
        f"({events / o_words:,.0f} events/s) | sqlite-utils insert --nl + enable-fts "
        f"{b_words:.1f} s | ratio ours/baseline {o_words / b_words:.2f}\n"
        f"    phases: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
        + f", files/registry {other:.1f} s\n"
        f"    substring (trigram) index afterwards: jsonltape {o_sub:.1f} s (in 1 s steps, "
        f"searchable meanwhile) | baseline 'rebuild' {b_tri:.1f} s | ratio {o_sub / b_tri:.2f}\n"
        f"    everything: jsonltape {o_words + o_sub:.1f} s | baseline {b_words + b_tri:.1f} s | "
        f"ratio {(o_words + o_sub) / (b_words + b_tri):.2f}",
        flush=True,
    )
    return index


# -- (b) incremental, (c) lag, (d) search --------------------------------------------------


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
    run = f"{time.time_ns() % 10**9:09d}"  # the archive is reused: tokens must be new
    with jsonltape.open(path, durability="always") as tape:
        for i in range(rounds):
            token = f"lag{run}t{i:04d}x"
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
    "東京都の天気",
    "天気",
    "京",
]
#: The 1-2 character CJK queries, as the LIKE scan that served them before the CJK table.
SCANS = ["天気", "京"]


def bench_search(index: Path, base_db: Path, runs: int = 15) -> dict[str, tuple[float, float]]:
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    base = sqlite3.connect(f"file:{base_db}?mode=ro", uri=True)  # holds the texts
    out = {}

    def measure(name: str, fn: Callable[[], object]) -> None:
        times = [timed(fn) for _ in range(runs)]
        out[name] = (statistics.median(times), pct(times, 95))

    for q in QUERIES:
        measure(q, functools.partial(search, con, q, Filters(), 20))
    scan = "SELECT id FROM messages WHERE text LIKE ? ORDER BY id DESC LIMIT 20"

    def like(q: str) -> list[object]:
        return base.execute(scan, (f"%{q}%",)).fetchall()

    for q in SCANS:
        measure(f"{q} (LIKE scan)", functools.partial(like, q))
    con.close()
    base.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path(__file__).parent / "_data")
    ap.add_argument("--rounds", type=int, default=3, help="(a): runs of each side, alternated")
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
        f"{time.strftime('%Y-%m-%d')}; archive {args.events} events, {size / 1e6:.0f} MB; "
        f"load {load_avg()}",
        flush=True,
    )

    index = bench_ingest(big, work, args.rounds)

    small_index = work / "small.db"
    remove_db(small_index)
    s = SqliteStore(small_index)
    engine = Ingestor(s, small)
    engine.rescan()
    engine.build_substrings()  # like the big one: every full-text table complete
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

    res = bench_search(index, work / "baseline.db")
    print(f"(d) search, 20 hits (median / p95 ms); load {load_avg()}:", flush=True)
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
    p95s = [v[1] for q, v in res.items() if q in QUERIES]
    print(f"    worst p95 over the queries: {max(p95s) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
