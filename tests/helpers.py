"""Small helpers shared by tests (not fixtures): build sessions, read raw lines."""

from __future__ import annotations

import importlib.util
import os
import select
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import jsonltape


def one_turn(tape: jsonltape.Tape, text: str = "hello", *, with_tool: bool = False) -> None:
    """Append one complete turn (user, assistant, optionally a tool round trip)."""
    with tape.turn():
        tape.user(text)
        if with_tool:
            call = tape.assistant(
                tool_calls=[
                    {"id": f"c{tape.next_seq}", "name": "Read", "arguments": {"path": "a.py"}}
                ]
            )
            call_id = call.data["message"]["parts"][0]["id"]
            tape.tool_call("Read", {"path": "a.py"}, call_id=call_id)
            tape.tool_result(call_id, "print('hi')")
        tape.assistant(f"reply to {text}")


def golden(path: Path, turns: int = 6, **open_kw: Any) -> list[tuple[int, int]]:
    """Write a session with a checkpoint after every turn; return [(end_offset, seq)] of them."""
    checkpoints = []
    with jsonltape.open(
        path, create=True, durability="manual", session_id="golden", **open_kw
    ) as tape:
        for i in range(turns):
            one_turn(tape, f"message {i} " + "x" * (i * 37 % 200), with_tool=i % 2 == 1)
            seq = tape.flush()
            checkpoints.append((path.stat().st_size, seq))
    return checkpoints


def raw_lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def load_script(path: Path, name: str) -> ModuleType:
    """Import a script that is not part of a package (spec/tools/*.py, fixture generators)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    spec.loader.exec_module(module)
    return module


def openai_surface(path: Path) -> list[tuple[str, Any]]:
    """(role, content) of each message the model sees in the session at ``path``, as an
    OpenAI request body."""
    from jsonltape import fold

    return [(m["role"], m.get("content")) for m in fold.messages(path, format="openai")["messages"]]


def import_finished(source: str, src: Path, text: str, root: Path) -> Any:
    """Write ``text`` as the file ``src`` of a finished session (modified two hours ago: not
    live) and import it into ``root``; the import must succeed. Returns its report."""
    import os
    import time

    from jsonltape.interop import import_file

    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    past = time.time() - 7200
    os.utime(src, (past, past))
    report = import_file(source, src, root)
    assert report.status == "imported", report.error
    return report


def import_line_by_line(source: str, src: Path, lines: list[str], root: Path) -> Path:
    """Import ``src`` as it grows by one line per import (still live: nothing is closed), then
    once more finished; returns the session. Every import must succeed without a problem."""
    import os
    import time

    from jsonltape.interop import import_file

    src.parent.mkdir(parents=True, exist_ok=True)
    path = None
    for i in range(1, len(lines) + 1):
        src.write_text("".join(lines[:i]))
        report = import_file(source, src, root, settle=None)
        assert report.status in ("imported", "unchanged"), report.error
        path = Path(report.sessions[0])
    past = time.time() - 7200
    os.utime(src, (past, past))
    assert import_file(source, src, root).problems == []
    assert path is not None
    return path


def drop_session_bounds(con: Any) -> None:
    """Remove what index schema steps 7 to 9 added (``sessions.key_lo``/``key_hi``, the word
    list, the key runs), for a test that takes an index back to an older schema (``DROP
    COLUMN``: SQLite 3.35 or later)."""
    if sqlite3.sqlite_version_info < (3, 35):
        pytest.skip("taking an index back to schema 6 needs ALTER TABLE DROP COLUMN (3.35)")
    con.execute("ALTER TABLE sessions DROP COLUMN key_lo")
    con.execute("ALTER TABLE sessions DROP COLUMN key_hi")
    con.execute("DROP TABLE words")
    con.execute("DROP TABLE IF EXISTS key_runs")


def read_terminal(
    master: int, until: Callable[[bytes], bool] | None = None, timeout: float = 120
) -> bytes:
    """What a command wrote to the pseudo-terminal whose master end is ``master``: until
    ``until(output)`` holds, else until the command exits and closes its end."""
    out = b""
    end = time.monotonic() + timeout
    while until is None or not until(out):
        assert time.monotonic() < end, out
        if not select.select([master], [], [], 0.5)[0]:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command exited and closed its end
            break
        if not chunk:
            break
        out += chunk
    return out
