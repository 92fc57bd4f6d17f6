"""In-place index benchmark: the sources ``sync --source`` follows as units or dot-files
(databases, task folders, Aider histories), against importing the same tree in the same run.

Per workload (bench_interop.py's generators: ``opencode-db``, ``goose-db``, ``crush-db``,
``cursor-db``, ``cursor-transcripts``, ``cline-tasks``, ``aider-tree``, and ``codex-tree`` as
the baseline of logs; ``cursor-db-300mb`` is ``cursor-db`` with 300 MB of rows no import reads
beside its composers, as a real ``state.vscdb`` holds: the private copy of database and
``-wal`` grows with the file, not with the sessions), alternated ``--rounds`` times:

* **first sync**: a fresh SQLite index of the tree in place (``ForeignIngestor.rescan``), and
  the import of the same tree into a fresh root (``import_paths``): the ratio in-place/import;
* **unchanged**: a rescan of the indexed tree (nothing changed: one listing query per database,
  a stat per task document, per history);
* **one message**: one session grows by one message the way its agent writes it (a row
  updated in the database's WAL by a connection kept open, a task's API history rewritten whole
  with one more message, a run or a prompt and its reply appended to one history or
  transcript) and the watcher's hint for the path the agent wrote (the ``-wal``, the document,
  the history, the transcript) is synced: its time, the units re-mapped
  (``files``: 1 for a database or a task folder, not every session of the database; an Aider
  history is mapped once and each of its runs synced from that mapping), the events written;
  and **the next** message the same way, the first writer still open (a database's file is
  then read through the copy kept from the first: only its ``-wal`` is copied).

Run:

    .venv/bin/python benchmarks/bench_inplace.py [--sessions 50 --turns 100 --rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignIngestor

from jsonltape.interop import import_paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _interop_trees as trees
import _interop_trees_b as trees_b
import _interop_trees_c as trees_c

#: workload -> (source, make(tree, sessions, turns), the path a one-message change writes)
Make = Callable[[Path, int, int], None]


def _aider(d: Path, n: int, t: int) -> None:
    trees_b.aider_tree(d, max(1, n // 20), t)


def _cursor(pad_mb: int) -> Make:
    def make(d: Path, n: int, t: int) -> None:
        db = d / "globalStorage" / "state.vscdb"
        trees_c.cursor_db(db, n, t)
        if pad_mb:  # what else Cursor keeps there (checkpoints, agentKv blobs): never read
            with sqlite3.connect(db) as con:
                blob = os.urandom(1 << 16)
                con.executemany(
                    "INSERT INTO cursorDiskKV VALUES (?, ?)",
                    ((f"agentKv:blob:{k:08}", blob) for k in range(pad_mb * 16)),
                )
            sqlite3.connect(db).close()  # the last connection closed: the -wal checkpointed

    return make


WORKLOADS: dict[str, tuple[str, Make]] = {
    "opencode-db": ("opencode", lambda d, n, t: trees.opencode_db(d / "opencode.db", n, t)),
    "goose-db": ("goose", lambda d, n, t: trees_b.goose_db(d / "sessions.db", n, t)),
    "crush-db": ("crush", lambda d, n, t: trees_b.crush_db(d / ".crush" / "crush.db", n, t)),
    "cursor-db": ("cursor", _cursor(0)),
    "cursor-db-300mb": ("cursor", _cursor(300)),
    "cursor-transcripts": ("cursor", trees_c.cursor_transcripts),
    # a JSONL agent's logs, the baseline of Cursor's transcripts (one more line: its last again)
    "codex-tree": ("codex", trees.codex_tree),
    "cline-tasks": ("cline", trees_b.cline_tree),
    "aider-tree": ("aider", _aider),
}

#: One more message in one session, as each database's agent writes it (its own change marks
#: moved: OpenCode a new part, Goose a message's content and the session's updated_at, Crush a
#: message's parts and updated_at, Cursor a bubble row and its composer's headers and
#: lastUpdatedAt).
_LAST_COMPOSER = (
    "(SELECT max(key) FROM cursorDiskKV WHERE key >= 'composerData:' AND key < 'composerData;')"
)
_GROW_SQL = {
    "opencode-db": [
        "INSERT INTO part SELECT id || 'z', message_id, session_id, time_created,"
        " time_updated + 1, data FROM part WHERE id = (SELECT max(id) FROM part)",
    ],
    "goose-db": [
        "UPDATE messages SET content_json = json_insert(content_json, '$[#]',"
        " json_object('type', 'text', 'text', 'one more'))"
        " WHERE id = (SELECT max(id) FROM messages)",
        "UPDATE sessions SET updated_at = '2031-01-01 00:00:00'"
        " WHERE id = (SELECT session_id FROM messages WHERE id = (SELECT max(id) FROM messages))",
    ],
    "crush-db": [
        "UPDATE messages SET parts = json_insert(parts, '$[#]', json_object('type', 'text',"
        " 'data', json_object('text', 'one more'))), updated_at = updated_at + 1"
        " WHERE rowid = (SELECT max(rowid) FROM messages)",
    ],
    "cursor-db": [
        "INSERT INTO cursorDiskKV SELECT 'bubbleId:' || substr(key, 14) || ':one-more',"
        " json_object('_v', 3, 'type', 2, 'text', 'one more') FROM cursorDiskKV"
        f" WHERE key = {_LAST_COMPOSER}",
        "UPDATE cursorDiskKV SET value = json_set(json_insert(value,"
        " '$.fullConversationHeadersOnly[#]', json_object('bubbleId', 'one-more', 'type', 2)),"
        " '$.lastUpdatedAt', json_extract(value, '$.lastUpdatedAt') + 1)"
        f" WHERE key = {_LAST_COMPOSER}",
    ],
}
_GROW_SQL["cursor-db-300mb"] = _GROW_SQL["cursor-db"]


def _db(tree: Path) -> Path:
    return next(p for p in tree.rglob("*") if p.name.endswith((".db", ".vscdb")))


def grow(name: str, tree: Path, n: int = 1) -> tuple[str, sqlite3.Connection | None]:
    """One more message in one session (the ``n``-th); the path the agent wrote and the writer
    kept open."""
    if name in _GROW_SQL:
        db = _db(tree)
        con = sqlite3.connect(db, isolation_level=None)
        con.execute("PRAGMA wal_autocheckpoint=0")
        for sql in _GROW_SQL[name]:
            con.execute(sql.replace("one-more", f"one-more-{n}"))
        return f"{db}-wal", con
    if name == "cline-tasks":
        doc = sorted(tree.rglob("api_conversation_history.json"))[0]
        api = json.loads(doc.read_bytes())
        api.append({**api[-2], "ts": api[-1].get("ts", 0) + 1000})
        doc.write_text(json.dumps(api))
        return str(doc), None
    if name == "cursor-transcripts":
        transcript = sorted(tree.rglob("*.jsonl"))[0]
        with open(transcript, "a", encoding="utf-8") as f:
            f.write('{"role":"user","message":{"content":"one more question"}}\n')
            f.write('{"role":"assistant","message":{"content":"One more answer."}}\n')
        return str(transcript), None
    if name == "codex-tree":
        rollout = sorted(tree.rglob("*.jsonl"))[0]
        last = rollout.read_bytes().splitlines(keepends=True)[-1]
        with open(rollout, "ab") as f:
            f.write(last)
        return str(rollout), None
    history = sorted(tree.rglob(".aider.chat.history.md"))[0]
    with open(history, "a", encoding="utf-8") as f:
        f.write("\n# aider chat started at 2031-01-01 10:00:00\n\n#### one more question\n\n")
        f.write("One more answer.\n\n")
    return str(history), None


def _import(source: str, tree: Path, root: Path) -> tuple[float, int]:
    t = time.perf_counter()
    events = 0
    # one process, as an in-place sync is: the ratio compares the two mappings, not the cores
    for r in import_paths(source, [tree], root, settle=0, workers=1):
        assert r.status in ("imported", "unchanged"), r.error
        events += r.events
    return time.perf_counter() - t, events


def bench(name: str, sessions: int, turns: int, rounds: int, work: Path) -> None:
    source, make = WORKLOADS[name]
    tree = work / name
    make(tree, sessions, turns)
    firsts, imports, unchanged = [], [], []
    events = 0
    for r in range(rounds):  # alternated, so load from other work falls on both alike
        index = work / f"{name}-{r}.db"
        store = SqliteStore(index)
        try:
            t = time.perf_counter()
            stats = ForeignIngestor(store, tree, source).rescan()
            firsts.append(time.perf_counter() - t)
            assert stats.errors == 0, stats
            events = stats.events
            t = time.perf_counter()
            again = ForeignIngestor(store, tree, source).rescan()
            unchanged.append(time.perf_counter() - t)
            assert again.transactions == 0
        finally:
            store.close()
        seconds, _ = _import(source, tree, work / f"root-{name}-{r}")
        imports.append(seconds)
        shutil.rmtree(work / f"root-{name}-{r}")
    store = SqliteStore(work / f"{name}-0.db")
    try:
        engine = ForeignIngestor(store, tree, source)
        engine.rescan()
        hint, con = grow(name, tree)
        t = time.perf_counter()
        stats = engine.sync_paths([hint])
        one = time.perf_counter() - t
        # The next message while the agent still runs (its -wal not checkpointed): a database
        # is then read through the copy of its file kept from the first (B.18.1).
        hint, con2 = grow(name, tree, 2)
        t = time.perf_counter()
        assert engine.sync_paths([hint]).errors == 0
        two = time.perf_counter() - t
        for c in (con, con2):
            if c is not None:
                c.close()
        # a database's or task's one unit; an Aider history is mapped once, and each of its
        # runs (member sessions) synced from that mapping
        assert stats.errors == 0 and (stats.files == 1 or name == "aider-tree"), stats
    finally:
        store.close()
    first, imp = statistics.median(firsts), statistics.median(imports)
    print(
        f"{name:15} {events:9,} events | first sync {first:6.2f} s, import {imp:6.2f} s: "
        f"{first / imp:4.2f}x | unchanged {statistics.median(unchanged) * 1000:7.1f} ms | "
        f"one message {one * 1000:7.1f} ms ({stats.files} synced, {stats.events:,} events), "
        f"the next {two * 1000:7.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", action="append", default=[], help="run only this workload")
    args = ap.parse_args()
    print(
        f"{platform.machine()}, {os.cpu_count()} cpus, Python {sys.version.split()[0]}, "
        f"msgspec {msgspec.__version__}, {platform.system()} {platform.release()}, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-inplace-"))
    try:
        for name in WORKLOADS:
            if not args.only or name in args.only:
                bench(name, args.sessions, args.turns, args.rounds, work)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
