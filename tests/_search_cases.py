"""What the search tests share: a message event as a writer appends it, a tree indexed with
its substring index complete, and the CLI run in a subprocess from the checkout's venv."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor

REPO = Path(__file__).resolve().parent.parent
PY = str(REPO / ".venv" / "bin" / "python")
#: A time inside the corpora's range (2026-05-28).
T0 = 1_780_000_000_000


def event(role: str, text: str, n: int, time: int) -> dict[str, Any]:
    """A ``role/message`` event with one text part, id ``m{n}``, appended at ``time``."""
    return {
        "type": f"{role}/message",
        "surface": "append",
        "time": time,
        "data": {
            "message": {
                "id": f"m{n}",
                "role": role,
                "parts": [{"type": "text", "content": text}],
            }
        },
    }


def index_tree(root: Path, index: Path, *, helper_from: int | None = None) -> None:
    """Sync ``root`` into ``index`` and build its substring index to the end (as the daemon
    does in the background after a first sync)."""
    store = SqliteStore(index, helper_from=helper_from)
    try:
        Ingestor(store, root).rescan()
        while store.substrings_pending():
            store.begin()
            store.build_substrings(1000)
            store.commit()
    finally:
        store.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``jsonltape ARGS`` run as the user runs it, output captured."""
    return subprocess.run(
        [PY, "-m", "jsonltape", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def cli_search(index: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("search", "--index", str(index), *args)
