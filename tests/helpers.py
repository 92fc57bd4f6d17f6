"""Small helpers shared by tests (not fixtures): build sessions, read raw lines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

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
