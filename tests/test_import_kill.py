"""An import SIGKILLed anywhere: every session file it left is whole (its staged sessions get
their names only complete and synced), nothing it left is locked, and importing again ends
exactly where an uninterrupted import ends."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape._staged import STALE_SECONDS
from jsonltape.interop import import_paths
from jsonltape.writer import remove_stale_temps

from ._importers import FIXTURES
from .conftest import LONG

HISTORY = FIXTURES / "aider" / "aider-repo-head.chat.history.md"
RUNS = 400


def _repo(tmp_path: Path) -> Path:
    """An Aider history of :data:`RUNS` runs (the fixture's runs, restamped): as many sessions."""
    head, *runs = HISTORY.read_text(encoding="utf-8").split("\n# aider chat started at ")
    out = [head]
    for k in range(RUNS):
        run = runs[k % len(runs)]
        out.append(f"2024-{1 + k // 28 % 12:02d}-{1 + k % 28:02d} 10:{k % 60:02d}:00\n"
                   + run.partition("\n")[2])  # fmt: skip
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".aider.chat.history.md").write_text("\n# aider chat started at ".join(out))
    return repo


def _content(path: Path) -> list[tuple[str, Any]]:
    """A session's events apart from checkpoints (their times are the writer's clock)."""
    return [(e.type, e.data) for e in jsonltape.read(path) if e.type != "session/flush"]


def _sessions(root: Path) -> dict[str, Path]:
    d = root / "aider"
    return {p.name: p for p in d.iterdir() if p.suffix == ".jsonl"} if d.exists() else {}


def _wait_for(d: Path, n: int, child: subprocess.Popen[bytes]) -> None:
    """Until ``d`` holds ``n`` session files (or the import ended)."""
    while child.poll() is None:
        try:
            if sum(name.endswith(".jsonl") for name in os.listdir(d)) >= n:
                return
        except FileNotFoundError:
            pass
        time.sleep(0.0005)


@pytest.mark.timeout(1800 if LONG else 300)
def test_a_sigkilled_import_leaves_only_whole_sessions_and_importing_again_converges(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    start = time.monotonic()
    (fresh,) = import_paths("aider", [repo], tmp_path / "fresh", settle=0)
    took = time.monotonic() - start
    assert fresh.status == "imported" and len(fresh.sessions) > RUNS
    want = {name: _content(p) for name, p in _sessions(tmp_path / "fresh").items()}
    rng = random.Random(20261207)
    kills = 12 if LONG else 4
    partial = 0
    for k in range(kills):
        root = tmp_path / f"root{k}"
        child = subprocess.Popen(
            [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "aider",
             "--settle", "0", "-o", str(root), str(repo)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        if k % 2:  # while it maps the history: nothing has a name yet
            time.sleep(0.3 + rng.uniform(0.1, 0.8) * took)
        else:  # while it names the sessions: once the first few appear
            _wait_for(root / "aider", rng.randint(1, RUNS // 2), child)
        child.send_signal(signal.SIGKILL)
        child.wait()
        left = _sessions(root)
        partial += 0 < len(left) < len(want)
        for name, path in left.items():
            report = jsonltape.verify(path)
            assert (report.state, report.committed_bytes) == ("clean", report.size), name
            got = _content(path)
            # whole, never a prefix; the file's own session may lack only its import/sync
            # marker, which waits for every other session to be saved
            assert got == want[name] or (
                got == want[name][:-1] and want[name][-1][0] == "import/sync"
            ), name
        # what the dead import left besides sessions is only its temp files, none held
        d = root / "aider"
        rest = [p.name for p in d.iterdir() if p.suffix != ".jsonl"] if d.exists() else []
        assert all(n.startswith(".") and n.endswith(".tmp") for n in rest), rest
        assert remove_stale_temps(d, now=time.time() + 2 * STALE_SECONDS) == len(rest)
        (again,) = import_paths("aider", [repo], root, settle=0)
        assert again.status in ("imported", "unchanged")
        named = _sessions(root)
        assert sorted(named) == sorted(want)
        for name, path in named.items():
            assert _content(path) == want[name], name
            assert jsonltape.verify(path).state == "clean"
        # besides the sessions, only the lock files of those opened again (as any writer does)
        assert sorted(n for n in os.listdir(d) if not n.endswith(".lock")) == sorted(named)
    assert partial >= kills // 2 - 1  # the kills while naming mostly landed there
