"""A live writer notices an in-place edit of the header (line 1) that keeps the file's size and
inode, at its next flush, before anything more is reported durable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import jsonltape
from jsonltape import _framing


def _edit_header_in_place(path: Path, *, recrc: bool) -> None:
    """Same length, same inode: what an editor writing in place or a sed -i on a mount does."""
    raw = path.read_bytes()
    end = raw.index(b"\n") + 1
    header = raw[:end]
    edited = header.replace(b'"title":"aaaa"', b'"title":"bbbb"')
    assert edited != header
    if recrc:  # a careful forger: the line still passes its own CRC
        obj = json.loads(edited)
        del obj["crc"]
        edited = _framing.frame(json.dumps(obj, separators=(",", ":")).encode())
    assert len(edited) == len(header)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, edited, 0)
    finally:
        os.close(fd)


@pytest.mark.parametrize("reopened", [False, True], ids=["created", "reopened"])
@pytest.mark.parametrize("recrc", [False, True], ids=["bad-crc", "good-crc"])
@pytest.mark.parametrize("durability", ["manual", "always", "group"])
def test_a_same_size_header_edit_under_a_live_writer_is_detected_at_the_next_flush(
    tape_path: Path, reopened: bool, recrc: bool, durability: str
) -> None:
    if reopened:
        jsonltape.open(tape_path, create=True, title="aaaa").close()
        tape = jsonltape.open(tape_path, durability=durability, group_ms=1)  # type: ignore[arg-type]
    else:
        tape = jsonltape.open(tape_path, create=True, title="aaaa", durability=durability)  # type: ignore[arg-type]
    with tape:
        tape.user("before")
        tape.flush()
        durable = tape.durable_seq
        ino, size = os.stat(tape_path).st_ino, os.stat(tape_path).st_size
        _edit_header_in_place(tape_path, recrc=recrc)
        assert (os.stat(tape_path).st_ino, os.stat(tape_path).st_size) == (ino, size)
        with pytest.raises(
            (jsonltape.ConcurrentModificationError, jsonltape.WriterFailedError),
            match="header",
        ):
            tape.user("after")  # "always" syncs here
            tape.flush()
        assert tape.durable_seq == durable
        with pytest.raises(jsonltape.WriterFailedError):
            tape.user("refused")
    assert b"refused" not in tape_path.read_bytes()
    assert not any(
        b'"type":"session/flush"' in raw and json.loads(raw)["data"]["seq"] > durable
        for raw in tape_path.read_bytes().splitlines()
    )


def test_an_unchanged_header_costs_no_false_alarm_across_many_flushes(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True, title="aaaa", durability="always") as tape:
        for i in range(50):
            tape.user(f"m{i}")
    assert jsonltape.verify(tape_path).state == "clean"
