"""The main job on its embedded defaults: ``python -m jsonltape.demo [DIR]``.

Writes a small agent session into ``./demo-sessions`` (or DIR), simulates a crash in the
middle of a tool call (a torn last line after the last checkpoint), shows what ``verify``
says, repairs it, and reads the history back. Safe to run again: each run writes a new file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import open as open_tape
from . import read, repair, verify


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else "demo-sessions").resolve()
    n = 1
    while (root / f"demo-{n}.jsonl").exists():
        n += 1
    path = root / f"demo-{n}.jsonl"

    with open_tape(
        path,
        create=True,
        title="demo: find the failing test",
        cwd=str(Path.cwd()),
        agent="jsonltape-demo",
    ) as tape:
        with tape.turn():
            tape.user("Why does test_migration fail?")
            call = tape.assistant(
                tool_calls=[
                    {"id": "call-1", "name": "Read", "arguments": {"path": "migrations/0042.sql"}}
                ]
            )
            tape.tool_call("Read", {"path": "migrations/0042.sql"}, call_id="call-1")
            tape.tool_result("call-1", "ALTER TABLE users ADD COLUMN email TEXT NOT NULL;")
            tape.assistant("The new NOT NULL column has no default, so existing rows fail.")
        durable = tape.flush()
        print(f"wrote {path} (session {tape.session_id}); durable through seq {durable}")
        # A second turn that "crashes" while a tool runs: the call is recorded, no result.
        turn = tape.append("turn/start", {})
        tape.user("Fix it.")
        tape.assistant(
            tool_calls=[
                {"id": "call-2", "name": "Edit", "arguments": {"path": "migrations/0042.sql"}}
            ]
        )
        tape.tool_call("Edit", {"path": "migrations/0042.sql"}, call_id="call-2")
        tape.flush()
        # Simulate a kill right here: what is on disk plus half a line, as a crash leaves it.
        crashed = path.read_bytes() + b'{"seq":99,"type":"assistant/chunk","ti'
        # The original session carries on normally.
        tape.tool_result("call-2", "edited")
        tape.append("turn/end", {"turn": turn.seq, "reason": "completed"})
        del call
    crash_path = path.with_name(f"demo-{n}-crashed.jsonl")
    fd = os.open(crash_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(crashed)

    report = verify(crash_path)
    print(
        f"verify {crash_path.name}: {report.state} at line {report.line} "
        f"(byte {report.offset}): {report.reason}"
    )
    result = repair(crash_path)
    print(
        f"repair: cut {result.cut_bytes} bytes into {Path(result.sidecar or '').name}, "
        f"closed the interrupted turn with seqs {result.closers}"
    )
    print(f"verify after repair: {verify(crash_path).state}")
    for event in read(crash_path):
        if event.type in ("user/message", "assistant/message", "tool/result"):
            parts = event.data["message"]["parts"]
            text = " ".join(
                str(p.get("content") or p.get("response") or p.get("name")) for p in parts
            )
            print(f"  {event.seq:>3} {event.type:<18} {text[:70]}")
    _index_and_search(root)
    return 0


def _index_and_search(root: Path) -> None:
    """Mirror the demo sessions into a search index (what the daemon keeps current)."""
    from .cli import cli  # the index lives behind the CLI so `import jsonltape` stays light

    index = root / "index.db"
    print(f"\n$ jsonltape sync {root} --index {index}")
    cli.main(["sync", str(root), "--index", str(index)], standalone_mode=False)
    print('$ jsonltape search "NOT NULL" --limit 3')
    cli.main(["search", "NOT NULL", "--index", str(index), "--limit", "3"], standalone_mode=False)


if __name__ == "__main__":
    sys.exit(main())
