"""``index status`` reports the size of each table of a local index (shadow tables and
indexes folded into their table) and they add up to the file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonltape


def test_index_status_gives_the_size_of_every_table(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with jsonltape.open(root / "s.jsonl", create=True) as tape:
        for i in range(50):
            tape.user(f"prompt {i} about FileNotFoundError and 数据库")
            tape.assistant(f"reply {i}")
    index = tmp_path / "index.db"
    run = [sys.executable, "-m", "jsonltape"]
    done = subprocess.run(
        [*run, "sync", str(root), "--index", str(index)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    out = subprocess.run(
        [*run, "index", "status", "--index", str(index), "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    tables = json.loads(out.stdout)["tables"]
    assert {"messages", "events", "messages_fts"} <= set(tables)
    assert not any(name.endswith(("_data", "_idx", "_docsize")) for name in tables)
    assert sum(tables.values()) <= index.stat().st_size + (
        (tmp_path / "index.db-wal").stat().st_size if (tmp_path / "index.db-wal").exists() else 0
    )
    text = subprocess.run(
        [*run, "index", "status", "--index", str(index)], capture_output=True, text=True
    ).stdout
    assert "tables:    " in text and "messages_fts" in text
