"""The one chunked good-line scan (behind ``scan_full``/``verify``, ``read``, ``lines``, the
fold and the index) against a line-by-line reference that applies :func:`jsonltape._scan.check`
to each line.

Files are golden sessions damaged at random (bytes flipped, cut, lines dropped, doubled or
joined, garbage appended), read with chunk sizes from a few bytes up, so lines straddle chunk
boundaries in every way. Both sides must classify alike, name the same first bad line, and
serve exactly the same committed lines.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import _framing, _scan
from jsonltape._scan import TailScan, check, read_header, scan_full
from jsonltape.fold import _stream

from .conftest import LONG
from .helpers import golden


def reference_scan(path: Path) -> TailScan:
    """What scan_full must find, line by line with ``check``: the first bad line, and whether
    a witness (a good checkpoint) follows it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        header, hend, htime = read_header(fd, str(path))
        s = TailScan(str(path), header, hend, os.fstat(fd).st_size, hend, 1, htime)
        for off, raw in _framing.iter_lines(fd, hend):
            if s.bad_offset is not None:
                if _scan.is_witness(raw):
                    s.corrupt = True
                    break
                continue
            head, problem = check(raw, s.next_seq)
            if problem is not None or head is None:
                s.bad_offset, s.bad_line, s.bad_reason = off, s.next_seq + 1, problem
                continue
            s.committed = off + len(raw)
            s.last_time = head.time
            s.next_seq += 1
            _scan._track(s, head, off)
        return s
    finally:
        os.close(fd)


def reference_lines(path: Path) -> list[tuple[int, bytes]]:
    """Every line a reader may serve: the good lines before the first bad one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        out = []
        for seq, (off, raw) in enumerate(_framing.iter_lines(fd, 0)):
            head, problem = check(raw, seq)
            if problem is not None or head is None:
                break
            out.append((off, raw))
        return out
    finally:
        os.close(fd)


def fold_rows(path: Path) -> tuple[list[tuple[int, bytes]], bool]:
    """What folding reads: (the committed lines it is given, whether it found corruption)."""
    fd = os.open(path, os.O_RDONLY)
    served: list[tuple[int, bytes]] = []
    try:
        for row in _stream.rows(fd, str(path)):
            if not served:
                _stream.header_of(row, str(path))  # as fold_file checks line 1
            served.append((row.offset, row.raw))
    except jsonltape.CorruptError:
        return served, True
    finally:
        os.close(fd)
    if not served:
        raise jsonltape.FormatError("the file is empty")  # what fold_file raises
    return served, False


VECTORS = sorted((Path(__file__).parents[1] / "spec" / "vectors" / "read").glob("*.jsonl"))


@pytest.mark.parametrize("vector", VECTORS, ids=[v.stem for v in VECTORS])
def test_folding_reads_the_same_committed_lines_as_read(vector: Path, tmp_path: Path) -> None:
    # The fold keeps data as raw JSON; its good-line test must still be read's (valid UTF-8,
    # numbers that fit a double), or it would fold past a line that read calls corrupt.
    path = tmp_path / vector.name
    path.write_bytes(vector.read_bytes())
    path.chmod(0o600)
    try:
        served = [(ln.offset, ln.raw) for ln in jsonltape.lines(path)]
        corrupt = False
    except jsonltape.CorruptError:
        served, corrupt = reference_lines(path), True
    except jsonltape.FormatError:
        with pytest.raises(jsonltape.FormatError):
            fold_rows(path)
        return
    assert fold_rows(path) == (served, corrupt)


mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.integers(0, 10**6)),
    st.tuples(st.just("drop"), st.integers(0, 10**6)),
    st.tuples(st.just("double"), st.integers(0, 10**6)),
    st.tuples(st.just("join"), st.integers(0, 10**6)),
    st.tuples(st.just("garbage"), st.binary(min_size=1, max_size=40)),
)


def damage(raw: bytes, changes: list[tuple[Any, ...]]) -> bytes:
    for change in changes:
        kind = change[0]
        lines = raw.splitlines(keepends=True)
        if kind == "flip" and raw:
            i = change[1] % len(raw)
            raw = raw[:i] + bytes([raw[i] ^ (1 << change[2])]) + raw[i + 1 :]
        elif kind == "cut" and raw:
            raw = raw[: change[1] % len(raw)]
        elif kind in ("drop", "double", "join") and len(lines) > 2:
            i = 1 + change[1] % (len(lines) - 2)  # keep the header line
            if kind == "drop":
                del lines[i]
            elif kind == "double":
                lines.insert(i, lines[i])
            else:
                lines[i] = lines[i].rstrip(b"\n")
            raw = b"".join(lines)
        elif kind == "garbage":
            raw += change[1]
    return raw


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("golden") / "g.jsonl"
    golden(path, turns=5)
    return path.read_bytes()


@settings(max_examples=2000 if LONG else 300, deadline=None)
@given(changes=st.lists(mutation, min_size=0, max_size=3), chunk=st.integers(1, 5000))
def test_fast_loops_agree_with_the_line_by_line_reference(
    pristine: bytes, tmp_path_factory: pytest.TempPathFactory, changes: list[Any], chunk: int
) -> None:
    path = tmp_path_factory.mktemp("dmg") / "s.jsonl"
    path.write_bytes(damage(pristine, changes))
    os.chmod(path, 0o600)
    # One chunk constant serves every scan, forward and backward (the one good-line walk).
    with mock.patch.object(_framing, "CHUNK", chunk):
        try:
            want = reference_scan(path)
        except jsonltape.FormatError:
            with pytest.raises(jsonltape.FormatError):
                jsonltape.verify(path)
            return
        fd = os.open(path, os.O_RDONLY)
        try:
            got = scan_full(fd, str(path))
        finally:
            os.close(fd)
        assert vars(got) == vars(want)

        served: list[tuple[int, bytes]] = []
        corrupt = False
        try:
            served.extend((ln.offset, ln.raw) for ln in jsonltape.lines(path))
        except jsonltape.CorruptError as exc:
            corrupt = True
            assert exc.offset == want.bad_offset
        assert served == reference_lines(path)
        assert corrupt == (want.state == "corrupt")
        assert fold_rows(path) == (served, corrupt)
        events = []
        try:
            events.extend(e.seq for e in jsonltape.read(path))
        except jsonltape.CorruptError as exc:
            assert exc.offset == want.bad_offset
        assert events == list(range(len(served)))  # the header is seq 0


@pytest.mark.parametrize(
    "members",
    [b'"data":[],"data":{}', b'"data":{},"crc":0'],
    ids=["data-twice", "crc-not-a-string"],
)
def test_a_repeated_or_mistyped_member_is_bad_for_every_reader(
    tmp_path: Path, members: bytes
) -> None:
    # msgspec keeps the last of repeated members; skipping data as raw JSON would never look
    # at the first copy, and a struct without a crc field would never type the crc member.
    path = tmp_path / "s.jsonl"
    golden(path, turns=1)
    bad_at = path.stat().st_size
    seq = len(path.read_bytes().splitlines())
    bad = _framing.frame(b'{"seq":%d,"type":"x.test/n","time":1,%b}' % (seq, members))
    witness = b'{"seq":%d,"type":"session/flush","time":1,"data":{"offset":%d,"seq":%d},%b}' % (
        seq + 1,
        bad_at + len(bad),
        seq,
        b'"ignorable":true',
    )
    with open(path, "ab") as f:
        f.write(bad + _framing.frame(witness))  # a checkpoint after it: corruption
    want = reference_scan(path)
    assert (want.state, want.bad_offset) == ("corrupt", bad_at)
    with pytest.raises(jsonltape.CorruptError) as err:
        list(jsonltape.read(path))
    assert err.value.offset == bad_at
    assert fold_rows(path) == (reference_lines(path), True)
