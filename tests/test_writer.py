"""The writer: appends, validation, idempotency, checkpoints, turns, locking, permissions."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

import jsonltape
from jsonltape import _framing

from .crashsim import RecordingOps, recording_tape
from .helpers import one_turn, raw_lines


def test_created_file_has_header_then_dense_seqs_and_valid_crcs(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, title="t", cwd="/w", agent="a/1") as tape:
        one_turn(tape, with_tool=True)
    lines = raw_lines(tape_path)
    header = json.loads(lines[0])
    assert header["type"] == "session/start" and header["seq"] == 0
    assert header["data"]["format"] == "jsonltape" and header["data"]["version"] == 1
    assert header["data"]["title"] == "t" and header["data"]["cwd"] == "/w"
    for i, raw in enumerate(lines):
        obj = json.loads(raw)
        assert obj["seq"] == i
        assert list(obj)[-1] == "crc"
        body = raw[: -len(b',"crc":"xxxxxxxx"}\n')]
        assert obj["crc"] == f"{zlib.crc32(body):08x}"


def test_read_returns_what_append_returned(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        written = [
            tape.user("a"),
            tape.assistant("b"),
            tape.append("x.ext/note", {"n": [1, 2.5]}, ignorable=True),
        ]
    read = {e.seq: e for e in jsonltape.read(tape_path)}
    for ev in written:
        assert read[ev.seq] == ev


def test_flush_writes_checkpoint_after_data_and_reports_durable_seq(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("a")
        tape.user("b")
        durable = tape.flush()
        assert durable == 2
        assert tape.durable_seq == 2
        size_before = tape_path.stat().st_size
        assert tape.flush() == 2  # nothing new: no second checkpoint
        assert tape_path.stat().st_size == size_before
    ck = json.loads(raw_lines(tape_path)[3])
    assert ck["type"] == "session/flush" and ck["ignorable"] is True
    assert ck["data"]["seq"] == 2
    assert ck["data"]["offset"] == sum(len(x) for x in raw_lines(tape_path)[:3])


def test_close_flushes_and_reopen_continues_seq(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("a")
    last = json.loads(raw_lines(tape_path)[-1])
    assert last["type"] == "session/flush" and "closed" not in last["data"]
    with jsonltape.open(tape_path) as tape:
        ev = tape.user("b")
        assert ev.seq == last["seq"] + 1
    assert jsonltape.verify(tape_path).state == "clean"


def test_close_with_a_turn_open_marks_the_close_as_deliberate(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.append("turn/start", {})
    last = json.loads(raw_lines(tape_path)[-1])
    assert last["data"]["closed"] is True and last["data"]["turn"]["seq"] == 1
    size = tape_path.stat().st_size
    jsonltape.open(tape_path).close()  # nothing new: no second marker
    assert tape_path.stat().st_size == size


def test_new_session_closed_without_events_is_just_the_header(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    assert len(raw_lines(tape_path)) == 1


def test_unsynced_lines_left_by_a_crash_are_flushed_by_the_next_writer(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("a")
        tape.flush()
        tape.user("never synced")
        tape.drain()  # the line reaches the OS (as a write() would) but is never synced
        crashed = tape_path.read_bytes()
    tape_path.write_bytes(crashed)
    with jsonltape.open(tape_path) as tape:
        assert tape.durable_seq == 1  # seq 3 is whole on disk, but not known durable
    last = json.loads(raw_lines(tape_path)[-1])
    assert last["type"] == "session/flush" and last["data"]["seq"] == 3


def test_group_commit_flushes_by_count(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, group_events=5, group_ms=60_000) as tape:
        for i in range(4):
            tape.user(str(i))
        time.sleep(0.1)
        assert tape.durable_seq == 0  # under the count and long before the deadline
        tape.user("4")
        # The fifth event makes a round due; the flusher thread syncs it while we go on.
        for _ in range(500):
            if tape.durable_seq >= 5:
                break
            time.sleep(0.01)
        assert tape.durable_seq == 5


def test_group_commit_flushes_by_time_without_further_appends(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, group_events=1000, group_ms=20) as tape:
        tape.user("a")
        deadline = threading.Event()
        for _ in range(200):
            if tape.durable_seq >= 1:
                break
            deadline.wait(0.01)
        assert tape.durable_seq == 1


def test_always_mode_makes_every_append_durable(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, durability="always") as tape:
        ev = tape.user("a")
        assert tape.durable_seq == ev.seq


def test_idempotent_key_returns_existing_event_and_writes_nothing(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        first = tape.append("x.ext/op", {"v": 1}, key="k1", ignorable=True)
        tape.flush()  # queued lines reach the file; a refused append adds none
        size = tape_path.stat().st_size
        again = tape.append("x.ext/op", {"v": 1}, key="k1", ignorable=True)
        assert again == first
        tape.flush()
        assert tape_path.stat().st_size == size
        with pytest.raises(jsonltape.InvalidEventError, match="already used by seq"):
            tape.append("x.ext/op", {"v": 2}, key="k1", ignorable=True)
    # after reopening, the key index is rebuilt from the file
    with jsonltape.open(tape_path) as tape:
        assert tape.append("x.ext/op", {"v": 1}, key="k1", ignorable=True) == first


def test_batch_is_all_or_nothing(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.flush()  # queued lines reach the file; a refused append adds none
        size = tape_path.stat().st_size
        with pytest.raises(jsonltape.InvalidEventError) as err:
            tape.append_batch(
                [
                    {"type": "x.a/b", "data": {}, "ignorable": True},
                    {"type": "x.a/b", "data": {"f": {1}}, "ignorable": True},
                ]
            )
        assert err.value.batch_item == 1
        tape.flush()
        assert tape_path.stat().st_size == size
        evs = tape.append_batch(
            [
                {"type": "x.a/b", "ignorable": True},
                {"type": "x.a/c", "data": {"z": None}, "ignorable": True},
            ]
        )
        assert [e.seq for e in evs] == [1, 2]


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        ({"x": float("nan")}, "$.data.x", "not valid JSON"),
        ({"x": float("inf")}, "$.data.x", "not valid JSON"),
        ({"x": {1: 2}}, "$.data.x", "not a string"),
        ({"x": {1, 2}}, "$.data.x", "set is not a JSON value"),
        ({"x": b"raw"}, "$.data.x", "bytes is not a JSON value"),
        ({"x": (1, 2)}, "$.data.x", "tuple is not a JSON value"),
        ({"x": [1, 2**53]}, "$.data.x[1]", "interoperable range"),
        ({"x": -(2**60)}, "$.data.x", "interoperable range"),
        ({"x": -0.0}, "$.data.x", "negative zero"),
        ({"x": "\ud800"}, "$.data.x", "lone surrogate"),
        ({"x": object()}, "$.data.x", "object is not a JSON value"),
        ({"a b": {"c": [0, {"d": float("nan")}]}}, '$.data["a b"].c[1].d', "not valid JSON"),
    ],
)
def test_lossless_gate_names_the_field(
    tape_path: Path, data: dict, field: str, fragment: str
) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.flush()  # queued lines reach the file; a refused append adds none
        size = tape_path.stat().st_size
        with pytest.raises(jsonltape.NotLosslessError) as err:
            tape.append("x.ext/thing", data, ignorable=True)
        assert err.value.field == field
        assert fragment in str(err.value)
        tape.flush()
        assert tape_path.stat().st_size == size


def test_lossless_gate_rejects_cycles(tape_path: Path) -> None:
    cyc: dict = {}
    cyc["self"] = cyc
    shared = {"a": 1}
    with jsonltape.open(tape_path, create=True) as tape:
        with pytest.raises(jsonltape.NotLosslessError, match="cycle"):
            tape.append("x.ext/thing", {"c": cyc}, ignorable=True)
        # the same object twice is not a cycle
        tape.append("x.ext/thing", {"one": shared, "two": shared}, ignorable=True)


def test_digits_inside_strings_are_not_mistaken_for_big_ints(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        ev = tape.append("x.ext/thing", {"s": "12345678901234567890 -0.0"}, ignorable=True)
    assert ev.data["s"] == "12345678901234567890 -0.0"


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"type": "Bad Type"}, "namespaced"),
        ({"type": ["user/message"]}, "namespaced"),  # unhashable: no TypeError
        ({"type": {"a": 1}}, "namespaced"),
        ({"type": "session/flush"}, "written by the writer"),
        (
            {
                "type": "user/message",
                "data": {"message": {"id": "m", "role": "assistant", "parts": []}},
            },
            "role",
        ),
        ({"type": "turn/end", "data": {"turn": 1, "reason": "finished"}}, "reason"),
        ({"type": "x.a/b", "surface": "append"}, "takes no surface"),
        ({"type": "x.a/b", "sources": [5]}, "earlier events"),
        (
            {
                "type": "tool/result",
                "data": {
                    "call_id": "a",
                    "message": {
                        "id": "m",
                        "role": "tool",
                        "parts": [{"type": "tool_call_response", "id": "b"}],
                    },
                },
            },
            "equals data.call_id",
        ),
        (
            {
                "type": "user/message",
                "data": {"message": {"id": "m", "role": "user", "parts": [{"type": "text"}]}},
            },
            "parts[0]",
        ),
    ],
)
def test_invalid_events_are_refused_with_a_reason(
    tape_path: Path, kwargs: dict, fragment: str
) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.flush()  # queued lines reach the file; a refused append adds none
        size = tape_path.stat().st_size
        type_ = kwargs.pop("type")
        with pytest.raises(jsonltape.InvalidEventError) as err:
            tape.append(type_, **kwargs)
        assert fragment in str(err.value)
        tape.flush()
        assert tape_path.stat().st_size == size


def test_unknown_part_types_are_kept(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        ev = tape.user([{"type": "com.example.audio", "ref": "x"}])
    assert ev.data["message"]["parts"][0]["ref"] == "x"


def test_turn_context_manager_records_error_reason(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        with pytest.raises(RuntimeError), tape.turn():
            tape.user("a")
            raise RuntimeError("model exploded")
        with tape.turn() as t:
            t.reason = "max-tokens"
    ends = [e for e in jsonltape.read(tape_path) if e.type == "turn/end"]
    assert ends[0].data["reason"] == "error"
    assert ends[0].data["error"] == {"code": "RuntimeError", "message": "model exploded"}
    assert ends[1].data["reason"] == "max-tokens"


def test_second_writer_is_refused_at_once_naming_the_lock(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True):
        with pytest.raises(jsonltape.LockedError) as err:
            jsonltape.open(tape_path)
        assert f".{tape_path.name}.lock" in str(err.value)
        errors: list[BaseException] = []

        def other_thread() -> None:
            try:
                jsonltape.open(tape_path)
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert isinstance(errors[0], jsonltape.LockedError)
    jsonltape.open(tape_path).close()  # released on close


def test_writer_waits_for_lock_when_asked(tape_path: Path) -> None:
    first = jsonltape.open(tape_path, create=True)
    timer = threading.Timer(0.2, first.close)
    timer.start()
    with jsonltape.open(tape_path, lock_timeout=10) as tape:
        assert tape.user("after").seq >= 1
    timer.join()


def test_file_truncated_under_writer_is_detected(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.user("a")
        tape.flush()
        with open(tape_path, "r+b") as f:
            f.truncate(100)
        tape.user("b")  # queued; the size is checked before the queue is written
        with pytest.raises(jsonltape.ConcurrentModificationError, match="changed size"):
            tape.flush()
        with pytest.raises(jsonltape.WriterFailedError):
            tape.user("c")
    assert tape_path.stat().st_size == 100  # nothing was appended after the truncation


def test_file_replaced_under_writer_is_detected_before_anything_is_reported_durable(
    tape_path: Path, tmp_path: Path
) -> None:
    with jsonltape.open(tape_path, create=True, durability="manual") as tape:
        tape.user("a")
        tape.flush()
        replacement = tmp_path / "other.jsonl"
        replacement.write_bytes(tape_path.read_bytes())
        os.replace(replacement, tape_path)  # what a git checkout does
        replaced = tape_path.read_bytes()
        # Identity is checked before every sync (a stat per append would double its cost):
        # the next flush refuses, so nothing written after the swap is reported durable.
        tape.user("b")
        with pytest.raises(jsonltape.ConcurrentModificationError, match="replaced"):
            tape.flush()
        with pytest.raises(jsonltape.WriterFailedError):
            tape.user("c")
    assert tape_path.read_bytes() == replaced  # the new file was never appended to


@pytest.mark.parametrize("mode", ["manual", "group", "always"])
@pytest.mark.parametrize("change", ["append", "replace"])
def test_a_change_racing_the_data_write_is_never_reported_durable(
    tape_path: Path, tmp_path: Path, mode: str, change: str
) -> None:
    # The size is checked before each write, but another program can still get in between
    # that check and the write itself; the check after the write, before the sync, catches it.
    ops = RecordingOps()
    tape = recording_tape(tape_path, ops, durability=mode, group_events=1000, group_ms=5.0)
    tape.user("a")
    tape.flush()
    durable = tape.durable_seq

    def foreign() -> None:
        if change == "append":
            with open(tape_path, "ab") as f:
                f.write(b'{"from":"someone else"}\n')
        else:
            replacement = tmp_path / "other.jsonl"
            replacement.write_bytes(tape_path.read_bytes())
            os.replace(replacement, tape_path)  # what a git checkout does

    ops.before_write = foreign
    with pytest.raises(
        (jsonltape.ConcurrentModificationError, jsonltape.WriterFailedError),
        match="behind this writer's back",
    ):
        tape.user("b")  # "always" syncs here
        tape.flush()  # "manual" here; "group" here or in its flusher thread just before
    assert ops.before_write is None  # the race really ran
    assert tape.durable_seq == durable
    tape.close()
    off = 0  # every checkpoint in the file lands where it says, none follows the change
    for raw in tape_path.read_bytes().splitlines(keepends=True):
        if b'"type":"session/flush"' in raw:
            assert json.loads(raw)["data"]["offset"] == off
            assert json.loads(raw)["data"]["seq"] <= durable
        off += len(raw)


def test_modes_are_owner_only_under_permissive_umask(
    tmp_path: Path, permissive_umask: None
) -> None:
    path = tmp_path / "new" / "deeper" / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user("a")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700
    lock = path.with_name(f".{path.name}.lock")
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_symlink_is_refused(tape_path: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    jsonltape.open(real, create=True).close()
    tape_path.symlink_to(real)
    with pytest.raises(jsonltape.UnsafeFileError, match="symlink"):
        jsonltape.open(tape_path)
    with pytest.raises(jsonltape.UnsafeFileError, match="symlink"):
        list(jsonltape.read(tape_path))
    with pytest.raises(jsonltape.JsonltapeError):
        jsonltape.open(tape_path, create=True)


def test_group_writable_file_is_refused(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    os.chmod(tape_path, 0o660)
    with pytest.raises(jsonltape.UnsafeFileError, match="writable by group"):
        jsonltape.open(tape_path)


def test_group_writable_directory_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o770)
    with pytest.raises(jsonltape.UnsafeFileError, match="directory is writable"):
        jsonltape.open(d / "s.jsonl", create=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
def test_foreign_owned_file_is_refused(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    os.chown(tape_path, 12345, 12345)
    with pytest.raises(jsonltape.UnsafeFileError, match="owned by uid 12345"):
        jsonltape.open(tape_path)


def test_create_refuses_existing_file(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    with pytest.raises(jsonltape.JsonltapeError, match="already exists"):
        jsonltape.open(tape_path, create=True)
    assert not [p for p in tape_path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "-x", "x" * 129, "a b", "é"])
def test_session_ids_are_validated(tape_path: Path, bad: str) -> None:
    with pytest.raises(jsonltape.InvalidSessionIdError):
        jsonltape.open(tape_path, create=True, session_id=bad)
    assert not tape_path.exists()


def test_generated_ids_sort_by_creation_time() -> None:
    ids = [jsonltape.new_session_id(now_ms=t) for t in (1, 2, 10**12, 10**12 + 1, 2**47)]
    assert ids == sorted(ids)
    assert all(len(i) == 26 for i in ids)


def test_newer_major_version_is_refused(tape_path: Path) -> None:
    jsonltape.open(tape_path, create=True).close()
    lines = raw_lines(tape_path)
    obj = json.loads(lines[0])
    obj["data"]["version"] = 2
    del obj["crc"]
    body = json.dumps(obj, separators=(",", ":")).encode()
    tape_path.write_bytes(_framing.frame(body) + b"".join(lines[1:]))
    with pytest.raises(jsonltape.UnsupportedVersionError, match="upgrade"):
        jsonltape.open(tape_path)
    with pytest.raises(jsonltape.UnsupportedVersionError):
        jsonltape.verify(tape_path)


def test_not_a_session_is_a_format_error(tape_path: Path) -> None:
    tape_path.write_text('{"hello": "world"}\n')
    os.chmod(tape_path, 0o600)
    with pytest.raises(jsonltape.FormatError, match="not a jsonltape session"):
        jsonltape.open(tape_path)
    tape_path.write_text("")
    with pytest.raises(jsonltape.FormatError, match="empty"):
        jsonltape.verify(tape_path)


def test_events_queued_at_exit_are_flushed_when_close_was_forgotten(tape_path: Path) -> None:
    code = (
        "import jsonltape, sys\n"
        "tape = jsonltape.open(sys.argv[1], create=True, group_ms=60000)\n"
        "for i in range(10):\n"
        "    tape.user(f'm{i}')\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tape_path)], check=True, timeout=60)
    texts = [
        e.data["message"]["parts"][0]["content"]
        for e in jsonltape.read(tape_path)
        if e.type == "user/message"
    ]
    assert texts == [f"m{i}" for i in range(10)]
    assert jsonltape.verify(tape_path).state == "clean"


def test_imported_events_keep_their_source_time(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, created=1_600_000_000_000) as tape:
        ev = tape.append("x.test/old", {}, time=1_600_000_000_123, ignorable=True)
        now = tape.append("x.test/new", {}, ignorable=True)
        with pytest.raises(jsonltape.InvalidEventError, match="epoch milliseconds"):
            tape.append("x.test/bad", {}, time=-5, ignorable=True)
        with pytest.raises(jsonltape.InvalidEventError, match="epoch milliseconds"):
            tape.append_batch([{"type": "x.test/bad", "time": 1.5, "ignorable": True}])
    assert jsonltape.header(tape_path).created == 1_600_000_000_000
    assert ev.time == 1_600_000_000_123
    assert now.time > 1_700_000_000_000


def test_a_forked_child_never_flushes_its_parents_tape(tape_path: Path) -> None:
    code = (
        "import os, sys, jsonltape\n"
        "tape = jsonltape.open(sys.argv[1], create=True, group_ms=60000)\n"
        "tape.user('queued in the parent')\n"
        "if os.fork() == 0:\n"
        "    sys.exit(0)  # a normal exit: atexit runs in the child\n"
        "os.wait()\n"
        "print(os.path.getsize(sys.argv[1]))\n"
        "tape.close()\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tape_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    header_only = len(raw_lines(tape_path)[0])
    assert int(out.stdout) == header_only  # the child wrote nothing
    types = [e.type for e in jsonltape.read(tape_path)]
    assert types == ["session/start", "user/message", "session/flush"]
