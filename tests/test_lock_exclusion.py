"""One writer per session, even when the lock file is deleted or replaced under a live writer.

The writer holds ``.<name>.lock`` *and* an ``flock`` on the session file itself; these tests
race real processes against each other with the lock file removed (as ``git clean -X`` does)
or swapped for another file, and check the session afterwards line by line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import filelock
import pytest

import jsonltape

from .conftest import LONG

# Writer A: on "open PATH create|open" it opens the session and appends from a thread (with
# flushes) until "close"; it answers "held" once it holds the session, "closed <error>" after.
HOLDER = r"""
import sys, threading, time, jsonltape
tape = stop = thread = None
errors = []
def run():
    n = 0
    try:
        while not stop.is_set():
            tape.user(f"a {n}")
            n += 1
            if n % 7 == 0:
                tape.flush()
            time.sleep(0.0002)
    except Exception as exc:
        errors.append(repr(exc))
for line in sys.stdin:
    cmd, *args = line.split()
    if cmd == "open":
        tape = jsonltape.open(args[0], create=args[1] == "create", group_events=5, group_ms=2)
        tape.user("a first")  # on the file before anyone else tries
        tape.flush()
        stop = threading.Event()
        thread = threading.Thread(target=run)
        thread.start()
        print("held", flush=True)
    elif cmd == "close":
        stop.set()
        thread.join()
        tape.close()
        print("closed", errors.pop() if errors else "ok", flush=True)
"""

# Writer B: on "PATH TIMEOUT" it tries to open the session; "locked <cause>" if refused, or
# it appends three events and answers "opened".
INTRUDER = r"""
import sys, jsonltape
for line in sys.stdin:
    path, timeout = line.split()
    try:
        tape = jsonltape.open(path, lock_timeout=float(timeout))
    except jsonltape.LockedError as exc:
        print("locked", type(exc.__cause__).__name__, flush=True)
        continue
    try:
        with tape:
            for i in range(3):
                tape.user(f"b {i}")
        print("opened", flush=True)
    except jsonltape.JsonltapeError as exc:  # the old bug: in, and then the file changed
        print("opened and failed:", exc, flush=True)
"""


def _ask(proc: subprocess.Popen[str], line: str) -> None:
    stdin: IO[str] | None = proc.stdin
    assert stdin is not None
    stdin.write(line + "\n")
    stdin.flush()


def _answer(proc: subprocess.Popen[str]) -> str:
    stdout: IO[str] | None = proc.stdout
    assert stdout is not None
    out = stdout.readline().strip()
    assert out, f"worker died (exit {proc.poll()})"
    return out


def _spawn(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _check_single_writer_history(path: Path) -> list[str]:
    """Verify the file; return its user texts. Seqs must be dense and never repeat."""
    assert jsonltape.verify(path).state == "clean"
    seqs = [json.loads(raw)["seq"] for raw in path.read_bytes().splitlines()]
    assert seqs == list(range(len(seqs))), "a seq was written twice or skipped"
    return [
        e.data["message"]["parts"][0]["content"]
        for e in jsonltape.read(path)
        if e.type == "user/message"
    ]


def _tamper(lock: Path, how: str, scratch: Path) -> None:
    """What a cleanup script or a checkout does to a lock file while its writer runs."""
    os.unlink(lock)
    if how == "recreated":  # another tool touches the name again: a new, unlocked inode
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
    elif how == "renamed-over":  # a checkout puts a different file there by rename
        scratch.write_bytes(b"")
        os.chmod(scratch, 0o600)
        os.replace(scratch, lock)


@pytest.mark.timeout(1800 if LONG else 300)
def test_deleted_or_replaced_lock_file_never_lets_a_second_writer_in(tmp_path: Path) -> None:
    d = tmp_path / "race"
    d.mkdir(mode=0o700)
    rounds = 500 if LONG else 60
    holder, intruder = _spawn(HOLDER), _spawn(INTRUDER)
    path = d / "s0.jsonl"
    try:
        for r in range(rounds):
            fresh = r % 4 == 0
            if fresh:
                path = d / f"s{r}.jsonl"
            lock = d / f".{path.name}.lock"
            _ask(holder, f"open {path} {'create' if fresh else 'open'}")
            assert _answer(holder) == "held"
            how = ("deleted", "recreated", "renamed-over")[r % 3]
            _tamper(lock, how, d / "scratch")
            waits = r % 5 == 4
            if waits:
                # B waits for the session; A closes while B waits: B gets in after A is done.
                _ask(intruder, f"{path} 30")
                time.sleep(0.05)
                _ask(holder, "close")
                assert _answer(holder) == "closed ok"
                assert _answer(intruder) == "opened", (r, how)
            else:
                _ask(intruder, f"{path} {0.05 if r % 2 else 0}")
                verdict = _answer(intruder)
                assert verdict.startswith("locked"), (r, how, verdict)
                # B gave up: a lock file it created is gone again, one it found is left alone.
                assert lock.exists() == (how != "deleted"), (r, how)
                _ask(holder, "close")
                assert _answer(holder) == "closed ok", r
            texts = _check_single_writer_history(path)
            theirs = [i for i, t in enumerate(texts) if t.startswith("b ")]
            if waits:
                assert theirs[-3:] == list(range(len(texts) - 3, len(texts)))  # after all of A's
    finally:
        for proc in (holder, intruder):
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # a failed round left A appending
                proc.kill()
                proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def test_a_second_writer_waits_for_the_session_itself_until_its_timeout(
    tape_path: Path,
) -> None:
    lock = tape_path.with_name(f".{tape_path.name}.lock")
    with jsonltape.open(tape_path, create=True) as tape:
        tape.user("held")
        os.unlink(lock)
        t0 = time.monotonic()
        with pytest.raises(jsonltape.LockedError, match="session file itself") as err:
            jsonltape.open(tape_path, lock_timeout=0.3)
        assert time.monotonic() - t0 >= 0.3
        assert isinstance(err.value, TimeoutError)
        assert isinstance(err.value.__cause__, BlockingIOError)
        tape.user("still the only writer")
    with jsonltape.open(tape_path) as tape:  # released on close
        tape.user("next")
    assert jsonltape.verify(tape_path).state == "clean"


def test_locked_error_is_a_timeout_chained_from_filelocks_timeout(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True), pytest.raises(jsonltape.LockedError) as err:
        jsonltape.open(tape_path, lock_timeout=0.05)
    assert isinstance(err.value, TimeoutError)
    assert isinstance(err.value.__cause__, filelock.Timeout)
    assert err.value.code == "locked"
    assert err.value.path == str(tape_path)


def test_a_lock_released_before_its_waiter_timed_out_is_taken(tape_path: Path) -> None:
    first = jsonltape.open(tape_path, create=True)
    os.unlink(tape_path.with_name(f".{tape_path.name}.lock"))
    timer = threading.Timer(0.2, first.close)
    timer.start()
    with jsonltape.open(tape_path, lock_timeout=10) as tape:
        assert first.closed
        tape.user("after")
    timer.join()
    assert jsonltape.verify(tape_path).state == "clean"


# The parent holds a tape, forks; the child tries to use the inherited tape and then lingers
# while the parent closes: the child must not write, and must not keep the session locked.
FORK = r"""
import os, sys, time, jsonltape
path = sys.argv[1]
tape = jsonltape.open(path, create=True, durability="manual")
tape.user("parent")
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    try:
        tape.user("child")
        tape.flush()
        verdict = "child wrote"
    except jsonltape.JsonltapeError as exc:
        verdict = "refused: " + str(exc)
    tape.close()  # must neither raise nor release the parent's lock
    os.write(w, (verdict + "\n").encode())
    time.sleep(3)  # still alive (with whatever it inherited) when the parent closes
    os._exit(0)
os.close(w)
print(os.read(r, 4096).decode().strip(), flush=True)
try:
    jsonltape.open(path)
    print("second writer got in while the parent held it", flush=True)
except jsonltape.LockedError:
    print("still locked", flush=True)
tape.user("parent again")
tape.close()
t0 = time.monotonic()
with jsonltape.open(path) as again:  # the lingering child holds nothing
    again.user("next writer")
print("reopened", round(time.monotonic() - t0, 1), flush=True)
os.kill(pid, 9)
os.waitpid(pid, 0)
"""


def test_a_forked_child_can_neither_write_nor_keep_the_session_locked(tape_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", FORK, str(tape_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused: ") and "forked" in lines[0], lines
    assert lines[1] == "still locked"
    assert lines[2].startswith("reopened")
    texts = _check_single_writer_history(tape_path)
    assert texts == ["parent", "parent again", "next writer"]
