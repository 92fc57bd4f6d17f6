"""The index orders sessions by activity: the last time something happened in a session, not
when a writer checkpointed it or an importer synced it (issue 13, defect 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonltape

from .conftest import SAMPLES


def jt(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jsonltape", *args], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_imported_session_sorts_by_its_last_source_event_not_the_import(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")}
    root, index = tmp_path / "sessions", tmp_path / "index.db"
    source = SAMPLES / "codex-0.104-rollout-complete.jsonl"
    jt("import", "--from", "codex", str(source), "-o", str(root), env=env)
    (imported,) = root.rglob("*.jsonl")
    # What happened in the session: every event but the bookkeeping of writer and importer.
    times = [
        e.time
        for e in jsonltape.read(imported)
        if e.seq > 0 and e.type not in ("session/flush", "import/sync")
    ]
    marker = max(e.time for e in jsonltape.read(imported) if e.type == "import/sync")
    assert marker > max(times)  # the import ran after the session's last event
    jt("sync", str(root), "--index", str(index), env=env)
    (row,) = [
        json.loads(x) for x in jt("sessions", "--index", str(index), "--json", env=env).splitlines()
    ]
    assert row["updated"] == max(times), row
