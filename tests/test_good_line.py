"""The one good-line rule (spec §4, §6, §10.2) gives every reader the same verdict.

Each bad envelope below carries a valid CRC, so only the JSON and envelope rules can catch
it: bad bytes or numbers in unknown members (which a typed decoder skips without looking),
values outside the envelope's ranges, and header members present as null. verify, read,
lines, the fold and the index's ingest must all stop at the same line, and the index must go
on serving the healthy session beside the bad one.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor

import jsonltape
from jsonltape import _framing
from jsonltape._lines import decode, scan
from jsonltape.events import MAX_INT, MAX_TIME
from jsonltape.fold import _stream

from .helpers import golden

#: Envelope members (after seq) of a line that is bad although its checksum is right.
BAD_MEMBERS = {
    "bad-utf8-in-unknown-member-name": b'"type":"x.t/n","time":1,"data":{},"x\xffy":1',
    "bad-utf8-in-unknown-member-value": b'"type":"x.t/n","time":1,"data":{},"x":"\xc3("',
    "lone-surrogate-in-unknown-member": b'"type":"x.t/n","time":1,"data":{},"x":"\\ud800"',
    "1e400-in-unknown-member": b'"type":"x.t/n","time":1,"data":{},"x":1e400',
    "-1e400-deep-in-unknown-member": b'"type":"x.t/n","time":1,"data":{},"x":{"y":[-1e400]}',
    "bad-utf8-in-surface-unknown-member": (
        b'"type":"user/message","time":1,"data":{},'
        b'"surface":{"op":"replace","start":1,"end":1,"z":"\xff"}'
    ),
    "time-2**64": b'"type":"x.t/n","time":18446744073709551616,"data":{}',
    "time-past-9999": b'"type":"x.t/n","time":%d,"data":{}' % (MAX_TIME + 1),
    "time-negative": b'"type":"x.t/n","time":-1,"data":{}',
    "surface-end-2**64": (
        b'"type":"user/message","time":1,"data":{},'
        b'"surface":{"op":"replace","start":1,"end":18446744073709551616}'
    ),
    "sources-item-2**53": b'"type":"x.t/n","time":1,"data":{},"sources":[%d]' % (MAX_INT + 1),
    "1e400-in-data": b'"type":"x.t/n","time":1,"data":{"x":1e400}',
    # Integers are kept exactly by msgspec however long; no double holds these (spec §4).
    "integer-no-double-holds-in-data": b'"type":"x.t/n","time":1,"data":{"n":-1%b}' % (b"0" * 400),
    "integer-no-double-holds-in-unknown-member": (
        b'"type":"x.t/n","time":1,"data":{},"x":[2%b]' % (b"9" * 320)
    ),
}


def _append_bad(path: Path, members: bytes, *, witness: bool) -> int:
    """Append one bad line (and a checkpoint after it if ``witness``); return its offset."""
    bad_at = path.stat().st_size
    seq = path.read_bytes().count(b"\n")
    bad = _framing.frame(b'{"seq":%d,%b}' % (seq, members))
    out = bad
    if witness:
        ck = b'{"seq":%d,"type":"session/flush","time":1,"data":{"offset":%d,"seq":%d},%b}' % (
            seq + 1,
            bad_at + len(bad),
            seq,
            b'"ignorable":true',
        )
        out += _framing.frame(ck)
    with open(path, "ab") as f:
        f.write(out)
    return bad_at


def _fold_rows(path: Path) -> tuple[int, bool]:
    fd = os.open(path, os.O_RDONLY)
    n = 0
    try:
        for _row in _stream.rows(fd, str(path)):
            n += 1
    except jsonltape.CorruptError:
        return n, True
    finally:
        os.close(fd)
    return n, False


@pytest.mark.parametrize("witness", [True, False], ids=["corrupt", "torn"])
@pytest.mark.parametrize("name", sorted(BAD_MEMBERS))
def test_a_bad_line_with_a_valid_crc_is_bad_for_every_reader(
    tmp_path: Path, name: str, witness: bool
) -> None:
    path = tmp_path / "r" / "bad.jsonl"
    golden(path, turns=2)
    good_events = sum(1 for _ in jsonltape.read(path))
    bad_at = _append_bad(path, BAD_MEMBERS[name], witness=witness)
    healthy = tmp_path / "r" / "healthy.jsonl"
    golden(healthy, turns=1)

    report = jsonltape.verify(path)
    assert report.state == ("corrupt" if witness else "torn-tail")
    assert (report.offset, report.events) == (bad_at, good_events)

    read: list[int] = []
    if witness:
        with pytest.raises(jsonltape.CorruptError) as err:
            read.extend(e.seq for e in jsonltape.read(path))
        assert err.value.offset == bad_at
    else:
        read.extend(e.seq for e in jsonltape.read(path))
    assert read == list(range(good_events))
    assert [ln.offset for ln in _lines_upto(path)][-1] < bad_at
    assert _fold_rows(path) == (good_events, witness)

    store = SqliteStore(tmp_path / "index.db")
    try:
        Ingestor(store, tmp_path / "r").rescan()
        states = dict(store.con.execute("SELECT path, state FROM sessions").fetchall())
        assert states[str(healthy)] == "clean"  # the bad file stops nothing else
        assert states[str(path)] == report.state
        (events,) = store.con.execute(
            "SELECT count(*) FROM events e JOIN sessions s USING (sid) WHERE s.path = ?",
            (str(path),),
        ).fetchone()
        assert events == good_events
    finally:
        store.close()


def _lines_upto(path: Path) -> list[jsonltape.Line]:
    out: list[jsonltape.Line] = []
    try:
        out.extend(jsonltape.lines(path))
    except jsonltape.CorruptError:
        pass
    return out


@pytest.mark.parametrize("name", sorted(BAD_MEMBERS))
def test_the_one_decode_refuses_what_the_scan_refuses(tmp_path: Path, name: str) -> None:
    body = b'{"seq":1,%b' % BAD_MEMBERS[name] + b"}"
    with pytest.raises(msgspec.DecodeError):  # ValidationError is one too
        decode(body)
    path = tmp_path / "one.jsonl"
    golden(path, turns=1)
    size = path.stat().st_size
    _append_bad(path, BAD_MEMBERS[name], witness=False)
    fd = os.open(path, os.O_RDONLY)
    try:
        items = list(scan(fd, 0, 0))
    finally:
        os.close(fd)
    assert isinstance(items[-1], tuple) and items[-1][0] == size
    assert type(items[-1]).__name__ == "Bad"


def test_unknown_members_with_good_bytes_stay_good_and_keep_their_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    golden(path, turns=1)
    members = (
        b'"type":"x.t/n","time":1,"data":{"k":1},"x.ext":{"a":[1.5,"\xc3\xa9",null]},'
        b'"ignorable":true'
    )
    at = path.stat().st_size
    _append_bad(path, members, witness=False)
    assert jsonltape.verify(path).state == "clean"
    last = list(jsonltape.lines(path))[-1]
    assert last.offset == at and b'"x.ext":{"a":[1.5,"\xc3\xa9",null]}' in last.raw
    assert last.event.data == {"k": 1} and last.event.ignorable


def test_the_envelope_bounds_themselves_are_good(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        edge = tape.append("x.t/edge", {}, time=MAX_TIME, ignorable=True)
        zero = tape.append("x.t/zero", {}, time=0, ignorable=True)
    assert (edge.time, zero.time) == (MAX_TIME, 0)
    assert jsonltape.verify(path).state == "clean"
    assert [e.time for e in jsonltape.read(path) if e.type.startswith("x.t/")] == [MAX_TIME, 0]
    jsonltape.messages(path)  # folds without a calendar overflow


@pytest.mark.parametrize("bad", [MAX_TIME + 1, -1, 2**64, 1.5, True])
def test_the_writer_refuses_a_time_outside_the_format_range(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        with pytest.raises(jsonltape.InvalidEventError) as err:
            tape.append("x.t/n", {}, time=bad, ignorable=True)
        assert err.value.field == "$.time"
    assert jsonltape.verify(path).state == "clean"
    assert not [e for e in jsonltape.read(path) if e.type == "x.t/n"]  # nothing was written


def test_the_writer_refuses_an_unknown_type_that_is_not_ignorable(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        with pytest.raises(jsonltape.InvalidEventError) as err:
            tape.append("x-foo/bar", {"n": 1})
        assert err.value.field == "$.type" and "ignorable" in err.value.message
        with pytest.raises(jsonltape.InvalidEventError):
            tape.append_batch([{"type": "turn/start"}, {"type": "x-foo/bar"}])
        tape.append("x-foo/bar", {"n": 1}, ignorable=True)
        with pytest.raises(jsonltape.InvalidEventError):  # the ignorable call cached nothing
            tape.append("x-foo/bar", {"n": 2})
    # Only the ignorable one was written, and the session still folds.
    assert [e.data for e in jsonltape.read(path) if e.type == "x-foo/bar"] == [{"n": 1}]
    jsonltape.messages(path)


@pytest.mark.parametrize("member", ["minor", "title", "cwd", "agent", "parent", "meta"])
def test_a_header_member_present_as_null_is_not_a_session(tmp_path: Path, member: str) -> None:
    path = tmp_path / "s.jsonl"
    header = (
        b'{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,'
        b'"id":"s1","created":1,"%b":null}}' % member.encode()
    )
    path.write_bytes(_framing.frame(header))
    path.chmod(0o600)
    for reader in (jsonltape.verify, jsonltape.header, jsonltape.messages):
        with pytest.raises(jsonltape.FormatError) as err:
            reader(path)
        assert err.value.field == f"$.data.{member}"
    with pytest.raises(jsonltape.FormatError):
        list(jsonltape.read(path))


@pytest.mark.parametrize("created", [MAX_TIME + 1, -1, 2**64])
def test_a_header_created_outside_the_time_range_is_not_a_session(
    tmp_path: Path, created: int
) -> None:
    path = tmp_path / "s.jsonl"
    header = (
        b'{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,'
        b'"id":"s1","created":%d}}' % created
    )
    path.write_bytes(_framing.frame(header))
    path.chmod(0o600)
    with pytest.raises(jsonltape.FormatError):
        jsonltape.verify(path)


def test_a_fork_whose_parent_path_hint_holds_nul_says_where_the_parent_is(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "p.jsonl"
    golden(parent, turns=1)
    fork = tmp_path / "f.jsonl"
    pid = jsonltape.header(parent).id
    header = (
        b'{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,'
        b'"id":"f1","created":1,"parent":{"session":"%b","seq":1,"path":"p\\u0000.jsonl"}}}'
        % pid.encode()
    )
    fork.write_bytes(_framing.frame(header))
    fork.chmod(0o600)
    with pytest.raises(jsonltape.SessionNotFoundError) as err:
        jsonltape.messages(fork)
    assert err.value.field == "$.data.parent.path"
    assert jsonltape.messages(fork, parents={pid: parent})["messages"] is not None


@pytest.mark.parametrize("chunk", [1, 7, 77, 300, 1 << 20])
def test_long_digit_runs_are_judged_by_value_at_any_chunk_size(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Digits in a string and an integer a double still holds (308 digits) are good; 309+
    # digits that overflow a double are bad, wherever the reads split the line.
    monkeypatch.setattr(_framing, "CHUNK", chunk)
    path = tmp_path / "s.jsonl"
    golden(path, turns=1)
    fits = b"1" + b"7" * 307  # 1.77e307
    good = b'"type":"x.t/n","time":1,"data":{"s":"%b","n":%b},"ignorable":true' % (
        b"5" * 1000,
        fits,
    )
    _append_bad(path, good, witness=False)
    over = b"2" + b"0" * 308  # 2e308
    at = _append_bad(path, b'"type":"x.t/n","time":1,"data":{"n":%b}' % over, witness=True)
    with pytest.raises(jsonltape.CorruptError) as err:
        list(jsonltape.read(path))
    assert err.value.offset == at
    assert jsonltape.verify(path).offset == at


def test_repair_and_open_close_a_turn_whose_events_carry_unknown_members(tmp_path: Path) -> None:
    # Found by the differential fuzz test: the closers were computed with a decoder that
    # refused unknown envelope members, so repair and open raised msgspec's error.
    path = tmp_path / "s.jsonl"
    header = (
        b'{"seq":0,"type":"session/start","time":1,"data":{"format":"jsonltape","version":1,'
        b'"id":"s","created":1}}'
    )
    lines = [
        header,
        b'{"seq":1,"type":"turn/start","time":1,"data":{},"x-ext":[1,"a"]}',
        b'{"seq":2,"type":"x/y","time":1,"data":{},"ignorable":true,"x-ext":1}',
    ]
    path.write_bytes(b"".join(_framing.frame(b) for b in lines))
    path.chmod(0o600)
    assert jsonltape.verify(path).state == "open-turn"
    jsonltape.repair(path)
    assert jsonltape.verify(path).state == "clean"
    with jsonltape.open(path) as tape:
        tape.user("after", id="u1")
    assert [e.type for e in jsonltape.read(path)][-2:] == ["user/message", "session/flush"]
