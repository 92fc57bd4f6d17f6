"""Crash simulation: record the writer's writes and syncs, then build ALICE-style crash images.

The model (after ALICE's default file system model and SQLite's crash VFS): at a crash, every
byte written before the last completed sync of the file is intact; bytes written after it may
persist in any prefix, and each 4 KiB-aligned chunk of that unsynced region independently
holds the real data, zeros, or garbage. Sizes may grow before data lands (zeros).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from jsonltape import _fs
from jsonltape._session import create_session
from jsonltape.writer import Tape

BLOCK = 4096


@dataclass
class Point:
    """The state of the file after one operation: bytes written and bytes known durable."""

    written: int
    durable: int
    durable_seq: int


class RecordingOps(_fs.FileOps):
    """Real I/O, plus a trace of (op, size after op) for the session file's descriptor."""

    def __init__(self) -> None:
        self.trace: list[tuple[str, int, bytes]] = []
        self.fail_sync_at: int | None = None
        self.syncs = 0
        #: Run once, right before the next write: another program's move in a race window.
        self.before_write: Callable[[], None] | None = None

    def write(self, fd: int, data: bytes) -> int:
        if self.before_write is not None:
            action, self.before_write = self.before_write, None
            action()
        n = os.write(fd, data)
        self.trace.append(("write", os.fstat(fd).st_size, bytes(data[:n])))
        return n

    def sync(self, fd: int) -> None:
        self.syncs += 1
        if self.fail_sync_at is not None and self.syncs >= self.fail_sync_at:
            raise OSError(5, "Input/output error (injected)")
        super().sync(fd)
        self.trace.append(("sync", os.fstat(fd).st_size, b""))


def recording_tape(
    path: Path,
    ops: RecordingOps,
    *,
    durability: str = "manual",
    group_events: int = 1,
    group_ms: float = 1.0,
    session_id: str = "crash",
    staged: bool = False,
) -> Tape:
    """A real writer on a new session whose I/O goes through ``ops`` (to trace or fail it);
    ``staged``: created staged (named at close)."""
    return Tape(
        create_session(
            path,
            session_id=session_id,
            title=None,
            cwd=None,
            agent=None,
            parent=None,
            meta=None,
            durability=durability,
            group_events=group_events,
            group_ms=group_ms,
            lock_timeout=0,
            ops=ops,
            staged=staged,
        )
    )


@dataclass
class Workload:
    """A golden file plus the crash points its writer went through."""

    data: bytes
    points: list[Point] = field(default_factory=list)


def record(path: Path, script: list[str], durability: str = "manual") -> Workload:
    """Run a small agent script through a recording writer.

    Script words: ``turn`` (open a turn), ``end`` (close it), ``user``, ``assistant``,
    ``call`` (assistant asks for a tool and the call is recorded), ``result``, ``flush``,
    ``big`` (a 9 KB message spanning several blocks), ``chunk`` (an ignorable delta).
    """
    ops = RecordingOps()
    tape = recording_tape(path, ops, durability=durability)
    header_size = path.stat().st_size
    durable_seq = 0
    durable = header_size
    points: list[Point] = [Point(header_size, header_size, 0)]
    turn = None
    call_n = 0
    traced = 0

    def mark() -> None:
        nonlocal traced, durable, durable_seq
        for op, size, _data in ops.trace[traced:]:
            if op == "sync":
                durable = size
            points.append(Point(size, durable, durable_seq))
        traced = len(ops.trace)

    for word in script:
        if word == "turn":
            turn = tape.append("turn/start", {}).seq
        elif word == "end":
            tape.append("turn/end", {"turn": turn, "reason": "completed"})
        elif word == "user":
            tape.user(f"question {tape.next_seq} " + "é漢字" * (tape.next_seq % 7))
        elif word == "assistant":
            tape.assistant(f"answer {tape.next_seq}")
        elif word == "big":
            tape.user("x" * 9000)
        elif word == "chunk":
            tape.append("assistant/chunk", {"delta": "tok"})
        elif word == "call":
            call_n += 1
            cid = f"call-{call_n}"
            tape.assistant(tool_calls=[{"id": cid, "name": "Read", "arguments": {"p": cid}}])
            tape.tool_call("Read", {"p": cid}, call_id=cid)
        elif word == "result":
            tape.tool_result(f"call-{call_n}", "ok")
        elif word == "flush":
            before = tape.next_seq - 1
            tape.flush()
            mark()
            durable_seq = before
            points[-1].durable_seq = durable_seq
            continue
        mark()
    data = path.read_bytes()
    # Abandon the writer without a clean close: a crash leaves no closing checkpoint.
    os.close(tape._s.fd)
    tape._s.closed = True
    tape._s.lock.release()
    return Workload(data, points)


def image(work: Workload, point: Point, rng: random.Random) -> bytes:
    """One crash image at ``point``: the durable prefix, then a possibly damaged tail."""
    d, w = point.durable, point.written
    length = rng.randint(0, w - d)
    out = bytearray(work.data[:d])
    pos = d
    end = d + length
    while pos < end:
        block_end = min((pos // BLOCK + 1) * BLOCK, end)
        kind = rng.random()
        if kind < 0.5:
            out += work.data[pos:block_end]
        elif kind < 0.75:
            out += bytes(block_end - pos)
        else:
            out += rng.randbytes(block_end - pos)
        pos = block_end
    return bytes(out)
