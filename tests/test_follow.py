"""Following a live session: ``read(path, follow=True)``, ``cat --follow``, ``messages --follow``.

Writers are real processes (group commit, SIGKILL, ``jsonltape repair``); the follow is the
library's own, with its poll and its verdicts on torn and damaged lines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import jsonltape
from jsonltape._follow import MAX_DELAY, follow_lines
from jsonltape.fold._follow import follow_messages

from .conftest import LONG

CLI = [sys.executable, "-m", "jsonltape"]

# Appends messages "m 0" … "m N-1" through group commit, pausing now and then so that the
# follower really reads while the file grows, then closes (a
# final checkpoint).
GROUP_WRITER = r"""
import sys, time, jsonltape
path, n = sys.argv[1], int(sys.argv[2])
with jsonltape.open(path, durability="group", group_events=64, group_ms=5) as tape:
    for i in range(n):
        tape.user(f"m {i}")
        if i % 250 == 0:
            time.sleep(0.002)
"""

# Appends turns for ever, flushing each, printing "durable <n>" once message n is durable.
ENDLESS_WRITER = r"""
import sys, time, jsonltape
tape = jsonltape.open(sys.argv[1], durability="manual")
n = 0
while True:
    with tape.turn():
        tape.user(f"a {n}")
        tape.flush()
        print("durable", n, flush=True)
        tape.assistant(f"reply {n}")
    n += 1
    time.sleep(0.001)
"""

# Appends messages "b 0" … "b N-1" and closes.
SECOND_WRITER = r"""
import sys, jsonltape
with jsonltape.open(sys.argv[1], durability="group", group_events=16, group_ms=5) as tape:
    for i in range(int(sys.argv[2])):
        tape.user(f"b {i}")
"""


def _text(event: jsonltape.Event) -> str:
    return str(event.data["message"]["parts"][0]["content"])


def _new(path: Path) -> None:
    with jsonltape.open(path, create=True, session_id="followed", durability="manual"):
        pass


def _checkpoint(event: jsonltape.Event) -> bool:
    return event.type == "session/flush"


def _seqs(path: Path) -> list[int]:
    return [e.seq for e in jsonltape.read(path)]


def test_follower_sees_every_group_committed_event_once_in_order(tape_path: Path) -> None:
    n = 100_000 if LONG else 10_000
    _new(tape_path)
    writer = subprocess.Popen([sys.executable, "-c", GROUP_WRITER, str(tape_path), str(n)])
    seen: list[jsonltape.Event] = []
    last = f"m {n - 1}"
    done = False
    try:
        for event in jsonltape.read(tape_path, follow=True, idle_timeout=20):
            seen.append(event)
            if event.type == "user/message" and _text(event) == last:
                done = True
            elif done and _checkpoint(event):
                break
    finally:
        assert writer.wait(timeout=60) == 0
    assert done, "the follow went idle before the writer's last message"
    assert [e.seq for e in seen] == list(range(len(seen))) == _seqs(tape_path)
    texts = [_text(e) for e in seen if e.type == "user/message"]
    assert texts == [f"m {i}" for i in range(n)]
    # it really followed: the writer checkpointed many times while the follow was reading
    assert sum(e.type == "session/flush" for e in seen) > 10


class _Follower(threading.Thread):
    """``read(path, follow=True)`` in a thread, until the checkpoint after the message
    ``until`` (None: until the follow ends), or ``idle`` seconds without an event."""

    def __init__(self, path: Path, until: str | None, idle: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.path, self.until, self.idle = path, until, idle
        self.seen: list[jsonltape.Event] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        done = False
        try:
            for event in jsonltape.read(self.path, follow=True, idle_timeout=self.idle):
                self.seen.append(event)
                if event.type == "user/message" and _text(event) == self.until:
                    done = True
                elif done and _checkpoint(event):
                    return
        except BaseException as exc:  # the test thread reports it
            self.error = exc

    def caught_up(self, timeout: float = 10.0) -> int:
        """Wait until the follow has served every committed event; return how many."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            want = len(_seqs(self.path))
            if len(self.seen) == want:
                return want
            time.sleep(0.02)
        raise AssertionError(f"the follow served {len(self.seen)} events, not {want}")


def test_follow_goes_on_across_sigkill_torn_tail_repair_and_a_new_writer(
    tape_path: Path,
) -> None:
    _new(tape_path)
    follower = _Follower(tape_path, until="b 199")
    follower.start()
    a = subprocess.Popen(
        [sys.executable, "-c", ENDLESS_WRITER, str(tape_path)], stdout=subprocess.PIPE, text=True
    )
    assert a.stdout is not None
    for line in a.stdout:
        if int(line.split()[1]) >= 60:
            break
    a.send_signal(signal.SIGKILL)
    a.wait(timeout=10)
    a.stdout.close()
    before = follower.caught_up()
    # What a crash in the middle of a write leaves: a line without its end.
    with open(tape_path, "ab") as f:
        f.write(
            b'{"seq":' + str(before).encode() + b',"type":"user/message","time":1,"data":{"torn'
        )
    time.sleep(0.4)  # the follow wakes a few times: the fragment is waited on, never served
    assert len(follower.seen) == before
    assert follower.is_alive() and follower.error is None
    repaired = subprocess.run(
        [*CLI, "repair", str(tape_path)], capture_output=True, text=True, timeout=30
    )
    assert repaired.returncode == 0, repaired.stderr
    subprocess.run(
        [sys.executable, "-c", SECOND_WRITER, str(tape_path), "200"], check=True, timeout=60
    )
    follower.join(timeout=30)
    assert follower.error is None, follower.error
    assert not follower.is_alive()
    seen = follower.seen
    assert [e.seq for e in seen] == list(range(len(seen))) == _seqs(tape_path)
    texts = [_text(e) for e in seen if e.type == "user/message"]
    a_texts = [t for t in texts if t.startswith("a ")]
    assert a_texts == [f"a {i}" for i in range(len(a_texts))] and len(a_texts) >= 61
    assert texts[len(a_texts) :] == [f"b {i}" for i in range(200)]
    assert any(e.type == "turn/end" and e.data.get("synthetic") for e in seen[before:])
    assert list(tape_path.parent.glob("*.torn")), "repair kept the torn tail in a sidecar"


def _finish_later(path: Path) -> bytes:
    """Append one event and return the bytes it added, then cut them off again: what a
    writer is about to write."""
    size = path.stat().st_size
    with jsonltape.open(path, durability="manual") as tape:
        tape.user("late")
    added = path.read_bytes()[size:]
    os.truncate(path, size)
    return added


def test_a_line_is_served_once_its_writer_finishes_it(tape_path: Path) -> None:
    _new(tape_path)
    added = _finish_later(tape_path)
    follow = follow_lines(tape_path, idle_timeout=5)
    assert next(follow).event.type == "session/start"
    cut = added.index(b"\n") // 2
    with open(tape_path, "ab") as f:
        f.write(added[:cut])
        f.flush()
        got: list[jsonltape.Event] = []
        thread = threading.Thread(target=lambda: got.append(next(follow).event))
        thread.start()
        thread.join(timeout=0.3)
        assert thread.is_alive() and not got  # half a line: waited on, not served or reported
        f.write(added[cut:])
    thread.join(timeout=5)
    assert [(e.type, _text(e)) for e in got] == [("user/message", "late")]
    follow.close()


def test_idle_follow_does_not_spin(tape_path: Path) -> None:
    _new(tape_path)
    wakeups = 0

    def count() -> None:
        nonlocal wakeups
        wakeups += 1

    cpu = time.thread_time()
    start = time.monotonic()
    lines = list(follow_lines(tape_path, idle_timeout=1.0, on_wait=count))
    elapsed = time.monotonic() - start
    cpu = time.thread_time() - cpu
    assert len(lines) == 1 and 1.0 <= elapsed < 2.0
    # 10, 20, 40, 80, 160 ms, then 250 ms: 9 sleeps fill a second; a spin would make thousands
    assert wakeups <= 10, wakeups
    assert cpu < 0.1, f"an idle second of follow used {cpu:.3f} s of CPU"


@contextmanager
def _spawn_follow(args: list[str], path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``jsonltape ARGS PATH --follow`` once it has printed its first line (it runs, and
    Python's SIGINT handler is in place); killed on the way out if still running."""
    proc = subprocess.Popen(
        [*CLI, *args, str(path), "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: readline takes one line, and communicate() gets the rest
        # As from a terminal: a test run started in the background (`cmd &` in a script) has
        # SIGINT ignored, which its children inherit, and Python then installs no handler.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("command", ["cat", "messages"])
def test_follow_command_ended_by_sigint_exits_0_without_traceback(
    tape_path: Path, command: str
) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("one")
        tape.user("two")
    with _spawn_follow([command], tape_path) as proc:
        with jsonltape.open(tape_path, durability="manual") as tape:
            tape.user("three")
        assert proc.stdout is not None
        out = b""
        while b'"three"' not in out:  # the follow printed what was appended after it started
            line = proc.stdout.readline()
            assert line, "the follow ended before printing the new message"
            out += line
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=10)
        out += rest
    assert proc.returncode == 0
    assert err == b""  # no traceback, no "Aborted!"
    if command == "cat":
        after_first = b"".join(tape_path.read_bytes().splitlines(keepends=True)[1:])
        assert after_first.startswith(out)  # whole lines as stored, none twice or skipped
    else:
        texts = [json.loads(line)["message"]["parts"][0]["content"] for line in out.splitlines()]
        assert texts == ["two", "three"]  # "one" was the first line, read before


def test_replaced_file_ends_cat_follow_with_one_clear_line(tape_path: Path) -> None:
    _new(tape_path)
    with _spawn_follow(["cat"], tape_path) as proc:
        other = tape_path.with_name("other.jsonl")
        _new(other)
        os.replace(other, tape_path)
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 4
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jsonltape: error: ")
    assert str(tape_path) in lines[0] and "replaced by another file" in lines[0]


def test_file_shrinking_below_what_was_served_ends_the_follow(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("one")
    follow = jsonltape.read(tape_path, follow=True, idle_timeout=5)
    for _ in _seqs(tape_path):
        next(follow)  # everything there is, up to the end of the file
    os.truncate(tape_path, tape_path.stat().st_size - 10)
    with pytest.raises(jsonltape.ConcurrentModificationError, match="shrank"):
        next(follow)


def test_file_rewritten_in_place_between_wakeups_ends_the_follow(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("one")
    other = tape_path.with_name("other.jsonl")
    with jsonltape.open(other, create=True, durability="manual") as tape:
        tape.user("another session, longer than the first one " * 10)
    follow = jsonltape.read(tape_path, follow=True, idle_timeout=5)
    for _ in _seqs(tape_path):
        next(follow)
    with open(tape_path, "r+b") as f:  # same inode, cut and grown past what was read
        f.truncate(0)
        f.write(other.read_bytes())
    with pytest.raises(jsonltape.ConcurrentModificationError, match="rewritten"):
        next(follow)


def test_damage_before_a_checkpoint_raises_instead_of_waiting(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("one")
        tape.flush()
        tape.user("two")
    raw = bytearray(tape_path.read_bytes())
    raw[raw.index(b'"one"') + 1] = ord("X")  # the message line, before two checkpoints
    tape_path.write_bytes(bytes(raw))
    start = time.monotonic()
    with pytest.raises(jsonltape.CorruptError) as caught:
        list(jsonltape.read(tape_path, follow=True, idle_timeout=5))
    assert time.monotonic() - start < 2
    with pytest.raises(jsonltape.CorruptError) as plain:
        list(jsonltape.read(tape_path))
    assert caught.value.line == plain.value.line == 2  # the line of seq 1, as `read` says


def test_messages_follow_marks_a_later_retraction(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("keep")
        gone = tape.user("take back").seq
    jsonltape.retract(tape_path, gone)
    items = list(follow_messages(tape_path, idle_timeout=0.1))
    assert [i.get("message", {}).get("parts", [{}])[0].get("content") for i in items[:2]] == [
        "keep",
        "take back",
    ]
    assert items[2] == {"removed": [gone], "status": "retracted", "by": items[2]["by"]}
    assert items[2]["by"] > gone and len(items) == 3


def test_messages_follow_ends_with_the_history_messages_folds(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        seqs = [tape.user(f"u{i}").seq for i in range(6)]
    jsonltape.revise(tape_path, seqs[5], "u5, revised")
    jsonltape.compact(tape_path, "what u0..u2 said", through=seqs[2])
    jsonltape.retract(tape_path, seqs[3])
    items = list(follow_messages(tape_path, idle_timeout=0.1))
    statuses = {i["status"] for i in items if "removed" in i}
    assert statuses == {"superseded", "compacted", "retracted"}
    removed = {s for i in items if "removed" in i for s in i["removed"]}
    shown = [i for i in items if "removed" not in i]
    assert len({i["seq"] for i in shown}) == len(shown)  # nothing shown twice
    still = sorted((i for i in shown if i["seq"] not in removed), key=lambda i: i["seq"])
    folded = sorted(jsonltape.messages(tape_path)["messages"], key=lambda i: i["seq"])
    assert still == folded


def test_idle_timeout_needs_follow(tape_path: Path) -> None:
    _new(tape_path)
    with pytest.raises(jsonltape.InvalidArgumentError, match="follow"):
        jsonltape.read(tape_path, idle_timeout=1)
    with pytest.raises(jsonltape.InvalidArgumentError, match="idle_timeout"):
        jsonltape.read(tape_path, follow=True, idle_timeout=float("nan"))


def _rewrite_in_place(path: Path, which: str, how: str) -> None:
    """Rewrite one line of ``path`` in place, the file keeping its size: the first letter of
    its type upper-cased, with its CRC left as it was (``flip``) or made right again (a valid
    line: ``forge``), and with the file's times set back after it (``forge-utime``)."""
    st = path.stat()
    lines = path.read_bytes().split(b"\n")[:-1]
    n = {"header": 0, "middle": len(lines) // 2, "last": len(lines) - 1}[which]
    at = lines[n].index(b'"type":"') + 8
    body = lines[n][:-18]
    body = body[:at] + body[at : at + 1].upper() + body[at + 1 :]
    crc = lines[n][-18:] if how == "flip" else b',"crc":"%08x"}' % zlib.crc32(body)
    offset = sum(len(line) + 1 for line in lines[:n])
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(body + crc)
    if how == "forge-utime":
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.read_bytes() != b"\n".join(lines) + b"\n"


@pytest.mark.parametrize("how", ["flip", "forge", "forge-utime"])
@pytest.mark.parametrize("which", ["header", "middle", "last"])
def test_a_same_size_rewrite_of_served_lines_ends_the_follow(
    tape_path: Path, which: str, how: str
) -> None:
    _new(tape_path)
    follower = _Follower(tape_path, until=None, idle=30)
    follower.start()
    writer = subprocess.Popen([sys.executable, "-c", GROUP_WRITER, str(tape_path), "400"])
    assert writer.wait(timeout=60) == 0
    served = follower.caught_up()
    # Past the clock tick of the writer's last write: a rewrite within that tick leaves the
    # file's times as they were on a kernel with coarse timestamps (the blind spot the module
    # documents), and a person or an editor rewriting a file never writes that fast.
    time.sleep(0.05)
    _rewrite_in_place(tape_path, which, how)
    follower.join(timeout=10)
    assert not follower.is_alive(), "the follow went on after its lines were rewritten"
    assert isinstance(follower.error, jsonltape.ConcurrentModificationError), follower.error
    assert "rewritten in place" in str(follower.error) and str(tape_path) in str(follower.error)
    assert len(follower.seen) == served  # nothing served after the rewrite


def test_touch_and_chmod_do_not_end_the_follow(tape_path: Path) -> None:
    _new(tape_path)
    follower = _Follower(tape_path, until="b 9")
    follower.start()
    follower.caught_up()
    os.utime(tape_path)  # new mtime and ctime, same bytes
    os.chmod(tape_path, 0o600)  # new ctime
    time.sleep(4 * MAX_DELAY)  # idle wake-ups see the new stamp and check the bytes
    subprocess.run([sys.executable, "-c", SECOND_WRITER, str(tape_path), "10"], check=True)
    follower.join(timeout=20)
    assert follower.error is None
    assert [e.seq for e in follower.seen] == _seqs(tape_path)


@pytest.mark.parametrize("command", ["cat", "messages"])
def test_a_same_size_rewrite_ends_a_follow_command_with_exit_4(
    tape_path: Path, command: str
) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        for i in range(20):
            tape.user(f"m {i}")
    with _spawn_follow([command], tape_path) as proc:
        _rewrite_in_place(tape_path, "middle", "forge")
        _out, err = proc.communicate(timeout=10)
    assert proc.returncode == 4
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jsonltape: error: ")
    assert "rewritten in place" in lines[0]
