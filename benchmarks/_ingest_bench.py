"""The ingest half of the search benchmark: ``jsonltape sync`` against sqlite-utils loading the
same rows, measured as processes (wall, CPU of every process, peak RSS over the process tree),
alternated over rounds so that a ratio does not rest on one run of a shared VM.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.paths import remove_db

__all__ = ["Run", "bench_baseline", "run_measured", "same_tables"]

WORD_TOKENIZER = "unicode61 remove_diacritics 2"


# -- processes: wall, CPU, peak RSS over the tree -------------------------------------------


def _tree_rss(root: int) -> int:
    """RSS in bytes of ``root`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(d), int(parts[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(parts[21]) * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


class Run:
    """A finished command: wall and CPU seconds, peak summed RSS, largest single RSS, and
    what it printed."""

    def __init__(self, wall: float, cpu: float, peak_sum: int, peak_one: int, out: str) -> None:
        self.wall, self.cpu, self.peak_sum, self.peak_one = wall, cpu, peak_sum, peak_one
        self.out = out


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out)
        peak = 0
        done = threading.Event()

        def poll() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, _tree_rss(proc.pid))
                done.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        rc = proc.wait()
        wall = time.perf_counter() - t
        done.set()
        poller.join()
        out.seek(0)
        printed = out.read().decode()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {rc}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of children is the largest one process reached (KiB), not a sum, over every
    # child so far: this run's own only for the first command measured (the first sync).
    return Run(wall, cpu, peak, after.ru_maxrss * 1024, printed)


# -- ingest: ours and the baseline ----------------------------------------------------------

_BASELINE = r"""
import json, os, sqlite3, sys
import sqlite_utils
from jsonltape_daemon.text.idents import idents
from jsonltape_daemon.text.cjk import grams
from jsonltape_daemon.engines.sqlite import words
nd, db, tokenizer, key, events = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
con = sqlite3.connect(db, isolation_level=None)
for p in ("page_size = 8192", "locking_mode = EXCLUSIVE", "journal_mode = OFF",
          "synchronous = OFF", "cache_size = -262144", "temp_store = MEMORY"):
    con.execute("PRAGMA " + p)
d = sqlite_utils.Database(con)
with open(nd, "rb") as f:
    # the substring table indexes the code-like tokens, ours and the baseline's alike: the
    # baseline finds them too (the same function), as part of its load
    rows = (dict(r, idents=idents(r["text"])) for r in map(json.loads, f))
    # key "tkey": the messages are keyed by our time-ordered keys, so the full-text tables
    # (external content, keyed by the table's rowid) hold the same rowids as ours; key "id":
    # by insertion order, which makes smaller doclists than time order
    d["messages"].insert_all(rows, pk=key, batch_size=2000)
d["messages"].enable_fts(["text"], fts_version="FTS5", tokenize=tokenizer)
con.execute("CREATE VIRTUAL TABLE messages_trigram USING fts5(idents, content='messages', "
            f"content_rowid='{key}', tokenize='trigram', detail='none', columnsize=0)")
con.execute("INSERT INTO messages_trigram (messages_trigram) VALUES ('rebuild')")
if events:  # the same tables as ours: every event's row, and the CJK grams of each message
    with open(events[0], "rb") as f:
        d["events"].insert_all(map(json.loads, f), pk=("sid", "seq"), batch_size=2000)
    con.execute("CREATE VIRTUAL TABLE messages_cjk USING fts5(grams, content='', "
                "tokenize='ascii', detail='none', columnsize=0)")
    con.execute("BEGIN")
    con.executemany("INSERT INTO messages_cjk (rowid, grams) VALUES (?, ?)",
                    ((i, g) for i, t in con.execute(f"SELECT {key}, text FROM messages")
                     if (g := grams(t)) is not None))
    con.execute("COMMIT")
    # ours leaves each full-text table in one segment (what its searches read fastest) and
    # lists the word index's words (its prefix search, schema 8): the same here
    d["messages"].optimize()
    for t in ("messages_trigram", "messages_cjk"):
        con.execute(f"INSERT INTO {t} ({t}) VALUES ('optimize')")
    con.execute(words.WORDS_TABLE)  # taken whole from the word index, as our first sync does
    con.execute("BEGIN")
    words.refresh(con)
    con.execute("COMMIT")
con.close()
fd = os.open(db, os.O_RDONLY); os.fsync(fd); os.close(fd)
"""


def export_events(index: Path, nd: Path) -> int:
    """The same-tables baseline's second input: our index's event rows, as NDJSON (not
    timed)."""
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    cols = ("sid", "seq", "type", "time", "offset", "size", "crc")
    n = 0
    with open(nd, "w") as f:
        for r in con.execute(f"SELECT {', '.join(cols)} FROM events"):
            f.write(json.dumps(dict(zip(cols, r, strict=True))) + "\n")
            n += 1
    con.close()
    return n


def export_messages(index: Path, nd: Path) -> int:
    """The baseline's input: the messages our index holds, as NDJSON (not timed)."""
    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    n = 0
    texts = Texts(con)
    with open(nd, "w") as f:
        for r0 in con.execute(
            "SELECT m.id, s.id, m.seq, m.role, m.time, m.tkey FROM messages m "
            "JOIN sessions s USING (sid)"
        ):
            r = (*r0, texts.get([r0[5]])[r0[5]] or "")
            texts.forget([r0[5]])
            f.write(
                json.dumps(
                    {
                        "id": r[0],
                        "session": r[1],
                        "seq": r[2],
                        "role": r[3],
                        "time": r[4],
                        "tkey": r[5],
                        "text": r[6],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
            n += 1
    con.close()
    return n


def _load(nd: Path, db: Path, key: str, *extra: str) -> tuple[Run, int]:
    """One sqlite-utils load of the NDJSON ``nd`` (``extra``: the events' too, for the same
    tables as ours) into ``db``, keyed by ``key``: the run and the database's size."""
    remove_db(db)
    cmd = [sys.executable, "-c", _BASELINE, str(nd), str(db), WORD_TOKENIZER, key, *extra]
    run = run_measured(cmd)
    size = db.stat().st_size
    remove_db(db)
    return run, size


def same_tables(index: Path, work: Path) -> Run:
    """sqlite-utils loading the same tables as ``index`` holds, keyed as ours (its messages
    and event rows exported as NDJSON first, not timed): the baseline of a sync."""
    nd, ev, db = work / "messages.ndjson", work / "events.ndjson", work / "baseline.db"
    export_messages(index, nd)
    export_events(index, ev)
    try:
        return _load(nd, db, "tkey", str(ev))[0]
    finally:
        nd.unlink()
        ev.unlink()


def bench_baseline(index: Path, work: Path, ours: Run, sync: list[str], rounds: int) -> None:
    """Print sqlite-utils against ``ours`` (the sync that built ``index``): the messages-only
    load once, then, for ``rounds`` rounds in all, ``sync`` (a fresh index each time) and the
    same-tables load with our time-ordered keys and with insertion-order keys, in an order that
    rotates; the ratios are the medians of the rounds'."""
    try:
        import sqlite_utils  # noqa: F401
    except ImportError:
        print("\n(sqlite-utils is not installed: `.venv/bin/pip install sqlite-utils`)")
        return
    nd, ev, db = work / "messages.ndjson", work / "events.ndjson", work / "baseline.db"
    n = export_messages(index, nd)
    ne = export_events(index, ev)

    def baseline(key: str, *extra: str) -> tuple[Run, int]:
        return _load(nd, db, key, *extra)

    base, bsize = baseline("id")
    keyed, ksize = baseline("tkey", str(ev))
    plain, psize = baseline("id", str(ev))
    rows = [(ours, keyed, plain)]
    scratch = work / "index-round.db"

    def again() -> Run:
        remove_db(scratch)
        run = run_measured([*sync, "--index", str(scratch), "--json"])
        remove_db(scratch)
        return run

    for r in range(1, rounds):
        runs: dict[str, Run] = {}
        order = ("ours", "tkey", "id")
        for name in order[r % 3 :] + order[: r % 3]:  # who goes first rotates
            runs[name] = again() if name == "ours" else baseline(name, str(ev))[0]
        rows.append((runs["ours"], runs["tkey"], runs["id"]))
    nd.unlink()
    ev.unlink()
    print(
        f"\n## ingest vs sqlite-utils\n\nsqlite-utils (Python API) insert_all of the same {n:,} "
        f"messages + enable_fts (FTS5, `{WORD_TOKENIZER}`) + the same trigram table (over the "
        f"code-like tokens, found by the same function as part of the load), our bulk "
        f"durability (journal_mode=OFF, synchronous=OFF, one fsync at the end; the NDJSON "
        f"export is not counted): wall {base.wall:.1f} s, CPU {base.cpu:.1f} s, peak RSS "
        f"{base.peak_sum / 1e6:.0f} MB, db {bsize / 1e6:.0f} MB (no CJK table, no events, no "
        f"word list, keyed by insertion order, segments as FTS5 leaves them)\n\n"
        f"ours/baseline: wall {ours.wall / base.wall:.2f}, CPU {ours.cpu / base.cpu:.2f} "
        f"(ours also reads and parses the session files)\n\n"
        f"the same tables as ours (also our {ne:,} event rows, from NDJSON, the CJK grams "
        f"table, grams found by the same function as part of the load, and the word list; "
        f"each full-text table merged into one segment at the end, as ours; sqlite-utils "
        f"reads NDJSON, ours reads, checks and folds the session files):\n\n"
        f"- keyed as ours (messages and the full-text rowids are our time-ordered keys): wall "
        f"{keyed.wall:.1f} s, CPU {keyed.cpu:.1f} s, peak RSS {keyed.peak_sum / 1e6:.0f} MB, "
        f"db {ksize / 1e6:.0f} MB\n"
        f"- keyed by insertion order (smaller doclists, but a search cannot read the newest "
        f"matches first): wall {plain.wall:.1f} s, CPU {plain.cpu:.1f} s, peak RSS "
        f"{plain.peak_sum / 1e6:.0f} MB, db {psize / 1e6:.0f} MB\n",
        flush=True,
    )
    print(
        "| round | ours wall | ours CPU | same keys wall | same keys CPU | insertion-order "
        "wall | insertion-order CPU | wall ratio | CPU ratio | CPU ratio, insertion order |"
        "\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    for r, (o, k, p) in enumerate(rows, 1):
        print(
            f"| {r} | {o.wall:.1f} | {o.cpu:.1f} | {k.wall:.1f} | {k.cpu:.1f} | {p.wall:.1f} | "
            f"{p.cpu:.1f} | {o.wall / k.wall:.2f} | {o.cpu / k.cpu:.2f} | {o.cpu / p.cpu:.2f} |"
        )

    def median(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

    print(
        f"\nours/same tables over {len(rows)} round(s), median (range): same keys: wall "
        f"{median([o.wall / k.wall for o, k, _ in rows])}, CPU "
        f"{median([o.cpu / k.cpu for o, k, _ in rows])}; insertion-order keys: wall "
        f"{median([o.wall / p.wall for o, _, p in rows])}, CPU "
        f"{median([o.cpu / p.cpu for o, _, p in rows])}",
        flush=True,
    )
