"""A live agent's big session followed in place: the daemon's CPU while the file grows.

    python benchmarks/bench_live_foreign.py [--mb 20] [--seconds 15] [--every 0.25] [--rounds 2]

A Claude Code session of ``--mb`` MB (the shared sample's lines repeated, ids renumbered) is
mirrored in place (``daemon`` with ``--source claude-code:DIR``, in this process, its real
watcher) while a user message is appended every ``--every`` seconds for ``--seconds``, as a
running agent appends. A foreign file is mapped again from its start at each change; the pace
(``daemon/jsonltape_daemon/ingest/pace.py``) maps a costly one again only after 4 times its
last mapping's duration. Two ways, alternated per round: the pace off (``Pace.factor = 0``:
mapped at every change, as before it) and on. Per way: the process's CPU seconds while the
file grew (the appends themselves cost next to nothing), as a share of the wall time, and how
long after the last append its text was in the index.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.foreign import ForeignFiles
from jsonltape_daemon.ingest.pace import Pace
from jsonltape_daemon.service.daemon import Config, Daemon

#: The real sessions: $JSONLTAPE_SAMPLES (as in the tests), else shared/samples beside the repo.
SAMPLE = Path(
    os.environ.get("JSONLTAPE_SAMPLES")
    or Path(__file__).resolve().parents[2] / "shared" / "samples"
)
NAME = "claude-code-v1.0.108-japanese.jsonl"
SID = "11111111-2222-3333-4444-555555555555"


def build(d: Path, mb: float) -> Path:
    """A Claude Code session of about ``mb`` MB: the sample's lines, each copy renumbered."""
    lines = [json.loads(x) for x in (SAMPLE / NAME).read_text(encoding="utf-8").splitlines()]
    path = d / "project" / f"{SID}.jsonl"
    path.parent.mkdir(parents=True)
    prev = None
    with open(path, "w", encoding="utf-8") as f:
        n = 0
        while f.tell() < mb * 1e6:
            for line in lines:
                line = dict(line, sessionId=SID)
                if "uuid" in line:
                    line["uuid"], line["parentUuid"] = f"{n:08d}-0000-4000-8000-{n:012d}", prev
                    prev = line["uuid"]
                if isinstance(line.get("message"), dict) and "id" in line["message"]:
                    line["message"] = dict(line["message"], id=f"msg_{n}")
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                n += 1
    return path


def _append(path: Path, k: int) -> str:
    token = f"livetoken{k:05d}x"
    line = {
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/tmp",
        "sessionId": SID, "version": "1.0.108", "type": "user",
        "message": {"role": "user", "content": f"please look at {token}"},
        "uuid": f"ffffffff-0000-4000-8000-{k:012d}", "timestamp": "2025-09-08T10:00:00.000Z",
    }  # fmt: skip
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
    return token


def _indexed(index: Path, token: str) -> bool:
    try:
        con = connect(index, readonly=True)
    except IndexStateError:
        return False
    try:
        q = "SELECT count(*) FROM message_texts WHERE text LIKE ?"
        return bool(con.execute(q, (f"%{token}%",)).fetchone()[0])
    finally:
        con.close()


_MAPS = [0]


def _count_maps() -> int:
    """How many times a foreign file was mapped so far in this process."""
    return _MAPS[0]


def _counting() -> None:
    real = ForeignFiles._map

    def counted(self: ForeignFiles, *a: Any, **k: Any) -> Any:
        _MAPS[0] += 1
        return real(self, *a, **k)

    ForeignFiles._map = counted  # type: ignore[method-assign]


def one(
    work: Path, path: Path, args: argparse.Namespace, paced: bool, k0: int
) -> tuple[float, float, float, int, int]:
    Pace.factor = 4.0 if paced else 0.0
    index = work / f"index-{k0}.db"
    root = work / "sessions"
    root.mkdir(mode=0o700, exist_ok=True)
    cfg = Config(root, index, rescan_interval=3600, sources=(("claude-code", str(path.parent)),))
    daemon = Daemon(cfg, log=lambda _m: None)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    # the first sync's substring index is built after it, between syncs: not what is measured
    while daemon.status.get("state") != "running" or not daemon.status.get("substrings_ready"):
        time.sleep(0.05)
    maps = _count_maps()
    cpu, wall = time.process_time(), time.monotonic()
    token = ""
    k = k0
    while time.monotonic() - wall < args.seconds:
        token = _append(path, k)
        k += 1
        time.sleep(args.every)
    last = time.monotonic()
    while not _indexed(index, token):
        time.sleep(0.02)
    lag = time.monotonic() - last
    spent, took = time.process_time() - cpu, time.monotonic() - wall
    daemon.request_stop()
    thread.join(timeout=60)
    return spent, spent / took, lag, _count_maps() - maps, k - k0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--every", type=float, default=0.25)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-live-"))
    os.environ["JSONLTAPE_HOME"] = str(work / "home")
    try:
        path = build(work / "claude", args.mb)
        print(
            f"{platform.machine()}, {os.cpu_count()} cpus, Python {sys.version.split()[0]}, "
            f"load {os.getloadavg()[0]:.1f}; a {path.stat().st_size / 1e6:.1f} MB Claude Code "
            f"session, a message appended every {args.every} s for {args.seconds} s"
        )
        _counting()
        print(
            "| round | pace | appends | mappings | CPU seconds | share of a core "
            "| last append indexed after |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        k = 0
        for r in range(1, args.rounds + 1):
            got = {}
            for paced in (False, True):
                got[paced] = one(work, path, args, paced, k)
                k += 1000
                spent, share, lag, maps, appends = got[paced]
                way = "on" if paced else "off"
                print(
                    f"| {r} | {way} | {appends} | {maps} | {spent:.2f} s | {share:.0%} "
                    f"| {lag:.2f} s |"
                )
            ratio = got[False][0] / max(got[True][0], 1e-9)
            print(f"| {r} | on vs off | | | {ratio:.2f}x less CPU | | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
