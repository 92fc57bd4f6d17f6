"""Format 1.1's span checksum (spec §10.1 rule 7, §10.2): the writer puts on every checkpoint
the CRC-32 of the bytes since the previous one, in every durability mode and after repair; the
readers check a span with one CRC and fall back to the line checksums, so a verdict never
depends on whether a span was used."""

from __future__ import annotations

import json
import os
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import jsonltape
from jsonltape import _framing, _lines
from jsonltape._scan import scan_full

from .conftest import LONG
from .helpers import golden, one_turn


def spans(raw: bytes) -> list[tuple[int, dict[str, Any] | None]]:
    """(offset, span) of every checkpoint line of ``raw``, and where each span should start."""
    out = []
    off = 0
    for line in raw.splitlines(keepends=True):
        event = json.loads(line)
        if event["type"] == "session/flush":
            out.append((off, event["data"].get("span")))
        off += len(line)
    return out


def assert_spans_right(raw: bytes) -> int:
    """Every checkpoint has a span from the end of the previous checkpoint line (or the
    header) whose CRC is that of the bytes up to the checkpoint; returns how many."""
    lines = raw.splitlines(keepends=True)
    expect_from = len(lines[0])
    off = 0
    count = 0
    for line in lines:
        event = json.loads(line)
        if event["type"] == "session/flush":
            span = event["data"]["span"]
            assert span["from"] == expect_from, (off, span)
            assert span["crc"] == f"{zlib.crc32(raw[expect_from:off]):08x}", (off, span)
            expect_from = off + len(line)
            count += 1
        off += len(line)
    return count


@contextmanager
def spans_ignored() -> Iterator[None]:
    """The readers as a 1.0 reader: no checkpoint is looked at for a span."""
    with mock.patch.object(_lines, "_FLUSH", b"\x00no checkpoint is spelled like this\x00"):
        yield


def verdict(path: Path) -> tuple[str, int, int | None, list[int], str]:
    """What verify finds and what read serves (and how it ends) for ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        scan = scan_full(fd, str(path))
    finally:
        os.close(fd)
    served: list[int] = []
    ended = "end"
    try:
        served.extend(e.seq for e in jsonltape.read(path))
    except jsonltape.JsonltapeError as exc:
        ended = exc.code
    return scan.state, scan.committed, scan.bad_offset, served, ended


@pytest.mark.parametrize("durability", ["always", "group", "manual"])
def test_every_checkpoint_carries_the_span_of_the_bytes_since_the_previous_one(
    tmp_path: Path, durability: jsonltape.Durability
) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, durability=durability) as tape:
        for i in range(4):
            one_turn(tape, f"turn {i}", with_tool=i % 2 == 0)
        tape.flush()
        tape.flush()  # nothing pending: no checkpoint, so no empty span either
        tape.user("before the close")
    with jsonltape.open(path, durability=durability) as tape:  # a second writer session
        tape.user("appended later")
    raw = path.read_bytes()
    assert json.loads(raw.splitlines()[0])["data"]["minor"] == 1
    assert assert_spans_right(raw) >= 2
    assert jsonltape.verify(path).state == "clean"


def test_the_closing_checkpoint_after_a_checkpoint_has_an_empty_span(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, durability="manual") as tape:
        tape.append("turn/start", {})  # left open on purpose: the close says `closed`
        tape.user("one")
        tape.flush()
    raw = path.read_bytes()
    (*_, (last_off, last)) = spans(raw)
    assert last is not None and last["from"] == last_off and last["crc"] == "00000000"
    assert_spans_right(raw)


def test_spans_are_right_after_repair_cuts_a_torn_tail_and_closes_the_turn(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, durability="manual") as tape:
        one_turn(tape, "kept")
    seq = jsonltape.verify(path).events  # the close added its checkpoint
    # What a crash in the next turn leaves: whole lines after the last checkpoint, then a torn
    # one (framed here as the writer frames them).
    size = path.stat().st_size
    tail = b"".join(
        _framing.frame(json.dumps(e, separators=(",", ":")).encode())
        for e in (
            {"seq": seq, "type": "turn/start", "time": 1, "data": {}},
            {
                "seq": seq + 1,
                "type": "user/message",
                "time": 1,
                "data": {"message": {"id": "m", "role": "user", "parts": []}},
                "surface": "append",
            },
        )
    )
    with open(path, "ab") as f:
        f.write(tail + b'{"seq":99,"type":"user/mess')
    result = jsonltape.repair(path)
    assert result.sidecar is not None
    raw = path.read_bytes()
    assert raw[size : size + len(tail)] == tail  # the whole lines were kept
    assert assert_spans_right(raw) >= 2
    assert jsonltape.verify(path).state == "clean"


def test_spans_are_right_after_a_crash_at_every_byte(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine.jsonl"
    golden(pristine, turns=3)
    raw = pristine.read_bytes()
    header_end = raw.index(b"\n") + 1
    step = 1 if LONG else 23
    for cut in range(header_end, len(raw), step):
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(raw[:cut])
        os.chmod(path, 0o600)
        with jsonltape.open(path, durability="always") as tape:
            tape.user("after the crash")
        assert_spans_right(path.read_bytes())
        assert jsonltape.verify(path).state == "clean", cut


def test_a_matching_span_is_checked_instead_of_the_line_checksums(tmp_path: Path) -> None:
    """White-box proof that readers use spans: a file forged so that a span matches over a
    line whose own crc member is wrong (spec §10.2: such a file does not conform, readers may
    differ) reads whole with spans and is damaged without them."""
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for i in range(5):
            tape.user(f"message {i}")
    raw = bytearray(path.read_bytes())
    lines = bytes(raw).splitlines(keepends=True)
    third = sum(len(x) for x in lines[:3])
    at = third + len(lines[3]) - 4  # a hex digit of line 4's own crc member
    raw[at] = ord("0") if raw[at] != ord("0") else ord("1")
    # The span of the closing checkpoint is recomputed over the forged bytes.
    ck_off, span = spans(bytes(raw))[-1]
    assert span is not None
    forged_span = f"{zlib.crc32(bytes(raw[span['from'] : ck_off])):08x}"
    ck = bytes(raw[ck_off:]).replace(
        f'"crc":"{span["crc"]}"'.encode(), f'"crc":"{forged_span}"'.encode(), 1
    )
    ck = _framing.frame(ck[: ck.index(b',"crc":"', len(ck) - 30)] + b"}")
    path.write_bytes(bytes(raw[:ck_off]) + ck)
    assert verdict(path)[0] == "clean"
    with spans_ignored():
        state, _, bad, _, ended = verdict(path)
    assert (state, bad, ended) == ("corrupt", third, "corrupt")


def test_damage_inside_a_span_gets_the_verdict_of_the_line_checksums(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine.jsonl"
    golden(pristine, turns=3)
    raw = pristine.read_bytes()
    path = tmp_path / "s.jsonl"
    step = 1 if LONG else 11
    for at in range(raw.index(b"\n") + 1, len(raw), step):
        damaged = bytearray(raw)
        damaged[at] ^= 0x20 if damaged[at] != 0x0A else 0x01
        path.write_bytes(bytes(damaged))
        os.chmod(path, 0o600)
        with_spans = verdict(path)
        with spans_ignored():
            assert verdict(path) == with_spans, at


def test_the_bytes_held_for_a_span_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    body = "z" * 20_000
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for i in range(1500):  # one span over ~30 MB: no checkpoint before the close
            tape.user(f"{i} {body}")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        assert jsonltape.verify(path).state == "clean"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Held: at most HOLD_MAX bytes and the chunk that passed it, joined once, split into lines.
    assert peak < 4 * (_lines.HOLD_MAX + _framing.CHUNK) < size / 2, (peak, size)
