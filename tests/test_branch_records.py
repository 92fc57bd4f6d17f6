"""The branch records of a merge (spec §8.7.14) as every reader sees them, and what a
collaborator can do with them.

* A malformed ``branch/start`` or ``branch/event`` is a bad line for every reader alike: verify
  (library and command), read, the fold, an index's ingest, textconv, the merge driver and the
  JavaScript reader all name that line; the merge driver refuses with one line, never a
  traceback (a hypothesis fuzz over malformed records, in process and through the command).
* A forged record — a well-formed ``branch/event`` whose line has a collaborator's line's seq
  and CRC-32 but other bytes — no longer makes a merge drop that line, and the version a
  receipt names is rebuilt from its lines' bytes (SHA-256), not from their names.
* Records of 1.1 (receipts without ``sha256``) still read and rebuild.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import _framing
from jsonltape._lines import problem_of
from jsonltape._records import recorded
from jsonltape.fold._branches import fold_their
from jsonltape.git._merge import Conflict, Merged, merge_files, merge_versions

from ._records import (
    dumps,
    forge_record,
    forged_line,
    held_lines,
    record_line,
    with_checkpoint,
)
from .helpers import one_turn
from .test_git_merge_props import extend, new_session

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
READER = ROOT / "spec" / "reference" / "jsonltape.mjs"


# -- a merged session, written by the library ----------------------------------------------


def merged_session(tmp_path: Path) -> tuple[Path, bytes]:
    """A session continued in two places and merged by the driver's merge: ours, a receipt,
    theirs recorded (a turn with a tool round trip), a checkpoint. Returns its path and the
    bytes of ours before the merge."""
    base = tmp_path / "base.jsonl"
    with jsonltape.open(base, create=True, session_id="shared") as tape:
        one_turn(tape, "the start")
    ours, theirs = tmp_path / "ours.jsonl", tmp_path / "theirs.jsonl"
    shutil.copyfile(base, ours)
    shutil.copyfile(base, theirs)
    with jsonltape.open(theirs) as tape:
        one_turn(tape, "their turn", with_tool=True)
    with jsonltape.open(ours) as tape:
        one_turn(tape, "our turn")
    got = merge_files(base, ours, theirs, source="main")
    assert isinstance(got, Merged) and got.outcome == "branch", got
    out = tmp_path / "merged.jsonl"
    out.write_bytes(got.result)
    os.chmod(out, 0o600)
    return out, ours.read_bytes()


def line_of(data: bytes, type_: str, nth: int = 0) -> int:
    """The index of the ``nth`` line of type ``type_``."""
    found = [i for i, x in enumerate(data.splitlines()) if json.loads(x)["type"] == type_]
    return found[nth]


def replace_line(data: bytes, index: int, new: bytes) -> tuple[bytes, int]:
    """``data`` with line ``index`` replaced by ``new`` (framed, without ``\\n``): the bytes
    and the offset of the new line."""
    lines = data.splitlines(keepends=True)
    offset = sum(len(x) for x in lines[:index])
    lines[index] = new + b"\n"
    return b"".join(lines), offset


def _event(line: bytes, change: Callable[[dict[str, Any]], None], inner: bytes | None) -> bytes:
    """The branch/event ``line`` re-framed after ``change`` edited its object; its recorded
    line is written back verbatim (``inner``, when given, instead of it)."""
    rec = recorded(line)
    obj = json.loads(line)
    del obj["crc"]
    obj["data"]["line"] = "\x00LINE\x00"
    change(obj)
    text = dumps(obj).replace(b'"\\u0000LINE\\u0000"', rec.line if inner is None else inner)
    return _framing.frame(text)[:-1]


def _receipt(line: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    obj = json.loads(line)
    del obj["crc"]
    change(obj)
    return _framing.frame(dumps(obj))[:-1]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for p in parents:
            obj = obj[p]
        if value is _DELETE:
            del obj[last]
        else:
            obj[last] = value

    return change


_DELETE = object()
_FLUSH_LINE = _framing.frame(
    b'{"seq":3,"type":"session/flush","time":1,"data":{"offset":0,"seq":2},"ignorable":true}'
)[:-1]


def _ev(change: Callable[[dict[str, Any]], None], inner: Any = None) -> Callable[[bytes], bytes]:
    """Break a branch/event by ``change`` (and record ``inner``, or ``inner(line)``, instead
    of its line)."""
    return lambda x: _event(x, change, inner(recorded(x).line) if callable(inner) else inner)


def _rc(change: Callable[[dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    return lambda x: _receipt(x, change)


def _keep(obj: dict[str, Any]) -> None:
    """(no change to the object)"""


def _upper_origin(obj: dict[str, Any]) -> None:
    obj["data"]["origin"]["crc"] = obj["data"]["origin"]["crc"].upper()


def _shift_origin(obj: dict[str, Any]) -> None:
    obj["data"]["origin"]["seq"] += 1


def _branch_self(obj: dict[str, Any]) -> None:
    obj["data"]["branch"] = obj["seq"]


def _flip(line: bytes) -> bytes:
    at = line.index(b'"time":') + 8
    return line[:at] + (b"1" if line[at : at + 1] != b"1" else b"2") + line[at + 1 :]


def _origin_of(obj: dict[str, Any]) -> None:
    """The origin of the checkpoint line the record is made to hold."""
    line = _FLUSH_LINE
    obj["data"]["origin"] = {"seq": json.loads(line)["seq"], "crc": line[-10:-2].decode()}


def _drop_first_line(obj: dict[str, Any]) -> None:
    d = obj["data"]
    d["lines"], d["sha256"] = d["lines"][1:], d["sha256"][1:]


def _crc_first(obj: dict[str, Any]) -> None:
    obj["data"]["crc"] = obj["data"]["lines"][0]


def _at_head(obj: dict[str, Any]) -> None:
    obj["data"]["at"] = obj["data"]["head"]


def _crc_newline(obj: dict[str, Any]) -> None:
    """The right crc and a newline, in ``crc`` and the last item of ``lines`` alike (Python's
    ``$`` matches before a final newline)."""
    d = obj["data"]
    d["crc"] += "\n"
    d["lines"][-1] += "\n"


def _short_sha(obj: dict[str, Any]) -> None:
    obj["data"]["sha256"][0] = obj["data"]["sha256"][0][:-1]


def _sha_missing(obj: dict[str, Any]) -> None:
    obj["data"]["sha256"].pop()


#: (name, type of the line broken, how): each breaks one rule of the shape of §8.7.14.
MALFORMED: list[tuple[str, str, Callable[[bytes], bytes]]] = [
    ("event without origin", "branch/event", _ev(_set("data.origin", _DELETE))),
    ("origin.seq a string", "branch/event", _ev(_set("data.origin.seq", "7"))),
    ("origin.crc upper case", "branch/event", _ev(_upper_origin)),
    ("origin not its line's", "branch/event", _ev(_set("data.origin.crc", "0badc0de"))),
    ("origin.seq another seq", "branch/event", _ev(_shift_origin)),
    ("branch a string", "branch/event", _ev(_set("data.branch", "1"))),
    ("branch its own seq", "branch/event", _ev(_branch_self)),
    ("no line", "branch/event", _ev(_set("data.line", _DELETE))),
    ("line a string", "branch/event", _ev(_keep, b'"text"')),
    ("line fails its crc", "branch/event", _ev(_keep, _flip)),
    ("line records a checkpoint", "branch/event", _ev(_origin_of, _FLUSH_LINE)),
    ("not ignorable", "branch/event", _ev(_set("ignorable", _DELETE))),
    ("on the surface", "branch/event", _ev(_set("surface", "append"))),
    ("receipt without lines", "branch/start", _rc(_set("data.lines", _DELETE))),
    ("receipt lines short", "branch/start", _rc(_drop_first_line)),
    ("receipt crc not its head's", "branch/start", _rc(_crc_first)),
    ("receipt at after head", "branch/start", _rc(_at_head)),
    ("receipt sha256 short", "branch/start", _rc(_short_sha)),
    ("receipt sha256 one missing", "branch/start", _rc(_sha_missing)),
    ("receipt crc with a final newline", "branch/start", _rc(_crc_newline)),
    ("receipt count a float", "branch/start", _rc(_set("data.count", 2.0))),
    ("receipt not ignorable", "branch/start", _rc(_set("ignorable", _DELETE))),
]


def malformed(
    data: bytes, how: tuple[str, str, Callable[[bytes], bytes]]
) -> tuple[bytes, int, int]:
    """``data`` with its first line of the type ``how`` names broken that way: the bytes, the
    broken line's 1-based number and its offset."""
    _name, type_, change = how
    index = line_of(data, type_)
    new = change(data.splitlines()[index])
    out, offset = replace_line(data, index, new)
    return out, index + 1, offset


def jt(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def node_verify(data: bytes) -> dict[str, Any]:
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(READER), "verify"], input=data, capture_output=True, timeout=120, check=True
    )
    return dict(json.loads(done.stdout))


# -- one verdict per line --------------------------------------------------------------------


def test_every_well_formed_record_the_merge_writes_is_a_good_line(tmp_path: Path) -> None:
    path, _ours = merged_session(tmp_path)
    data = path.read_bytes()
    types = [json.loads(x)["type"] for x in data.splitlines()]
    assert types.count("branch/start") == 1 and types.count("branch/event") >= 4
    for raw in data.splitlines(keepends=True):
        assert problem_of(raw, None)[1] is None
    assert jsonltape.verify(path).state == "clean"


@pytest.mark.parametrize("how", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_record_is_bad_at_its_line_for_every_reader(
    tmp_path: Path, how: tuple[str, str, Callable[[bytes], bytes]]
) -> None:
    good, _ours = merged_session(tmp_path)
    data, line, offset = malformed(good.read_bytes(), how)
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    os.chmod(path, 0o600)
    bad = data.splitlines(keepends=True)[line - 1]
    assert problem_of(bad, None)[1] is not None  # the line on its own
    report = jsonltape.verify(path)
    assert (report.state, report.line, report.offset) == ("corrupt", line, offset)
    done = jt(tmp_path, "verify", "s.jsonl")
    assert done.returncode == 3 and f"line {line}" in done.stdout + done.stderr
    with pytest.raises(jsonltape.CorruptError) as err:
        list(jsonltape.read(path))
    assert (err.value.line, err.value.offset) == (line, offset)
    with pytest.raises(jsonltape.CorruptError) as err:
        jsonltape.messages(path)
    assert (err.value.line, err.value.offset) == (line, offset)
    for args in (["cat", "s.jsonl"], ["messages", "s.jsonl"], ["git", "textconv", "s.jsonl"]):
        done = jt(tmp_path, *args)
        assert "Traceback" not in done.stderr, args
    shown = jt(tmp_path, "git", "textconv", "s.jsonl").stdout.splitlines()
    assert shown[-1].startswith(f"! corrupt at line {line}, byte {offset}:")
    assert len(shown) == line  # the good lines before it, then the `!` line
    # The merge driver: either side holding it is refused, naming the side and the line.
    base = tmp_path / "base.jsonl"
    for side, args in (("ours", (base, path, good)), ("theirs", (base, good, path))):
        got = merge_files(*args)
        assert isinstance(got, Conflict), side
        assert got.line.startswith(f"{side} is corrupt at line {line} (byte {offset}):"), got
    if NODE is not None:
        js = node_verify(data)
        assert (js["state"], js["line"], js["offset"]) == ("corrupt", line, offset)


def test_an_index_ingests_a_malformed_record_as_damage_at_its_line(tmp_path: Path) -> None:
    from jsonltape_daemon.engines.sqlite.store import SqliteStore
    from jsonltape_daemon.ingest.ingestor import Ingestor

    good, _ours = merged_session(tmp_path)
    root = tmp_path / "root"
    root.mkdir(mode=0o700)
    shutil.copyfile(good, root / "good.jsonl")
    data, line, _offset = malformed(good.read_bytes(), MALFORMED[0])
    (root / "bad.jsonl").write_bytes(data)
    for p in root.iterdir():
        os.chmod(p, 0o600)
    store = SqliteStore(tmp_path / "index.db")
    try:
        Ingestor(store, root).rescan()
        rows = {
            Path(p).name: (state, events)
            for p, state, events in store.con.execute("SELECT path, state, events FROM sessions")
        }
    finally:
        store.close()
    assert rows["bad.jsonl"] == ("corrupt", line - 1)  # the lines before it, not one more
    assert rows["good.jsonl"][0] == "clean"


def test_a_malformed_record_as_the_last_line_is_a_torn_tail_repair_keeps(tmp_path: Path) -> None:
    good, _ours = merged_session(tmp_path)
    data = good.read_bytes()
    data = data[: data.rstrip(b"\n").rfind(b"\n") + 1]  # the merge's checkpoint cut off
    index = len(data.splitlines()) - 1  # the last record
    broken, offset = replace_line(data, index, MALFORMED[0][2](data.splitlines()[index]))
    path = tmp_path / "s.jsonl"
    path.write_bytes(broken)
    os.chmod(path, 0o600)
    report = jsonltape.verify(path)
    assert (report.state, report.line, report.offset) == ("torn-tail", index + 1, offset)
    jsonltape.repair(path)
    assert path.read_bytes()[:offset] == broken[:offset]
    sidecars = list(tmp_path.glob("s.jsonl.*.torn"))
    assert len(sidecars) == 1 and sidecars[0].read_bytes() == broken[offset:]  # nothing lost


# -- the merge driver never raises -------------------------------------------------------------

#: Values a fuzzed member takes: every JSON type, ranges, crcs and digests of the wrong shape.
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**53 + 2),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["0badc0de", "0BADC0DE", "a" * 64, "a" * 63, ""]),
    st.lists(st.sampled_from(["0badc0de", "a" * 64, 3]), max_size=3),
    st.dictionaries(st.sampled_from(["seq", "crc", "x"]), st.integers(0, 9), max_size=3),
)
_PATHS = st.sampled_from(
    [
        "data.branch",
        "data.origin",
        "data.origin.seq",
        "data.origin.crc",
        "data.line",
        "data.at",
        "data.head",
        "data.crc",
        "data.lines",
        "data.count",
        "data.source",
        "data.sha256",
        "ignorable",
        "surface",
    ]
)


@st.composite
def broken_records(draw: st.DrawFn) -> tuple[bytes, bytes, bytes, str]:
    """Three versions of a session and a merge among them, with one record of one of them
    (a merged version) changed at random: ``(ancestor, ours, theirs, which side changed)``."""
    base = extend(new_session(), ["shared"])
    a = extend(base, ["ours 1"])
    b = extend(base, ["theirs 1", "theirs 2"])
    got = merge_versions(base, a, b)
    assert isinstance(got, Merged)
    side = draw(st.sampled_from(["ours", "theirs"]))
    merged = got.result
    lines = merged.splitlines()
    index = draw(st.sampled_from([i for i, x in enumerate(lines) if b'"branch/' in x]))
    obj = json.loads(lines[index])
    del obj["crc"]
    inner = recorded(lines[index]).line if obj["type"] == "branch/event" else None
    for _ in range(draw(st.integers(1, 3))):
        path = draw(_PATHS).split(".")
        target = obj
        for p in path[:-1]:
            if not isinstance(target.get(p), dict):
                target[p] = {}
            target = target[p]
        if draw(st.booleans()):
            target.pop(path[-1], None)
        else:
            target[path[-1]] = draw(_VALUES)
    text = dumps(obj)
    data = obj["data"]
    if inner is not None and isinstance(data, dict) and data.get("line") == json.loads(inner):
        text = text.replace(dumps(data["line"]), inner)  # untouched: keep its bytes verbatim
    new, _ = replace_line(merged, index, _framing.frame(text)[:-1])
    more = extend(new, ["after it"])  # a checkpoint after it: damage, not a torn tail
    return (b, more, extend(b, ["theirs 3"]), side) if side == "ours" else (a, a, more, side)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=broken_records())
def test_the_merge_refuses_a_malformed_record_with_one_line_and_never_raises(
    case: tuple[bytes, bytes, bytes, str],
) -> None:
    o, a, b, side = case
    changed = a if side == "ours" else b
    bad = [
        i + 1
        for i, raw in enumerate(changed.splitlines(keepends=True))
        if problem_of(raw, i)[1] is not None
    ]
    got = merge_versions(o, a, b)
    if not bad:  # the change kept the shape (an unknown member, a value of the right type)
        assert isinstance(got, Merged)
        return
    assert isinstance(got, Conflict), got
    assert "\n" not in got.line
    assert got.line.startswith(f"{side} is corrupt at line {bad[0]} (byte "), got.line


@pytest.mark.skipif(shutil.which("git") is None, reason="the conflict is git's: needs git")
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=broken_records())
def test_the_driver_command_exits_1_with_one_line_and_leaves_ours(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[bytes, bytes, bytes, str]
) -> None:
    o, a, b, _side = case
    d = tmp_path_factory.mktemp("driver")
    for name, data in (("o", o), ("a", a), ("b", b)):
        (d / name).write_bytes(data)
    done = jt(d, "git", "merge-driver", "o", "a", "b", "s.jsonl")
    assert "Traceback" not in done.stderr
    if isinstance(merge_versions(o, a, b), Conflict):
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith("jsonltape: error: merge s.jsonl: conflict: ")
        assert (d / "a").read_bytes() == a  # %A as git gave it: git takes it as the conflict
    else:
        assert done.returncode == 0, done.stderr


# -- a collaborator's forged record ----------------------------------------------------------


def _texts(path: Path, *args: Any) -> list[str]:
    if args:
        f = fold_their(path, *args)[1]
        items = [json.loads(n.data) for n in f.current()]
        return [p["content"] for i in items for p in i["message"]["parts"] if "content" in p]
    out = jsonltape.messages(path)["messages"]
    return [p["content"] for m in out for p in m["message"]["parts"] if "content" in p]


def test_a_forged_record_does_not_make_the_merge_drop_the_line_it_names(tmp_path: Path) -> None:
    """Mallory saw Alice's line (pushed to a branch of hers) and committed, on the shared
    branch, a well-formed record of a line with its seq and CRC-32 but his text. Merging
    Alice's branch in used to drop her line as recorded already: her text was nowhere in the
    file, which verified clean."""
    base = extend(new_session(), ["shared"])
    alice = extend(base, ["alice: the real plan"])
    victim = next(x for x in alice.splitlines() if b"the real plan" in x)
    mallory = forge_record(base, victim, "mallory: a forged plan")
    for ours, theirs in ((mallory, alice), (alice, mallory)):
        got = merge_versions(base, ours, theirs)
        assert isinstance(got, Merged) and got.outcome == "branch", got
        path = tmp_path / "m.jsonl"
        path.write_bytes(got.result)
        assert jsonltape.verify(path).state == "clean"
        held = held_lines(got.result)
        assert held[victim] == 1  # her line, byte for byte, once
        assert held == held_lines(ours) | held_lines(theirs)  # both kept, nothing twice
        assert b"alice: the real plan" in got.result
        assert _texts(path, got.receipt) == _texts_of(theirs, tmp_path)


def _texts_of(data: bytes, tmp_path: Path) -> list[str]:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    return _texts(path)


def test_a_version_is_rebuilt_from_its_lines_bytes_not_from_a_name_a_record_forged(
    tmp_path: Path,
) -> None:
    """Ours holds a forged record of Alice's line before her version's receipt: rebuilding her
    version must take her line (its SHA-256 in the receipt), not the first line with its name."""
    base = extend(new_session(), ["shared"])
    alice = extend(base, ["alice 1", "alice 2"])
    victim = next(x for x in alice.splitlines() if b"alice 2" in x)
    ours = extend(forge_record(base, victim, "forged 2"), ["ours 1"])
    got = merge_versions(base, ours, alice)
    assert isinstance(got, Merged) and got.receipt is not None
    path = tmp_path / "m.jsonl"
    path.write_bytes(got.result)
    assert _texts(path, got.receipt) == ["shared", "alice 1", "alice 2"]
    done = jt(tmp_path, "messages", "m.jsonl", "--branch", str(got.receipt))
    assert done.returncode == 0 and "forged 2" not in done.stdout and "alice 2" in done.stdout


def test_adopting_a_version_whose_line_collides_with_an_adopted_one_writes_nothing(
    tmp_path: Path,
) -> None:
    """Adopted copies are keyed by name (crc, seq): after Alice's version is adopted, adopting
    Mallory's, whose native line forges her line's name, is refused whole, not mixed in."""
    base = extend(new_session(), ["shared"])
    alice = extend(base, ["alice real"])
    victim = next(x for x in alice.splitlines() if b"alice real" in x)
    v = json.loads(victim)
    fake = forged_line(v["seq"], v["time"], victim[-10:-2].decode(), "mallory fake")
    first = merge_versions(base, extend(base, ["ours"]), alice)
    assert isinstance(first, Merged) and first.receipt is not None
    second = merge_versions(base, first.result, with_checkpoint(base, [fake]))
    assert isinstance(second, Merged) and second.receipt is not None
    path = tmp_path / "s.jsonl"
    path.write_bytes(second.result)
    os.chmod(path, 0o600)
    assert jt(tmp_path, "git", "adopt", "s.jsonl", "--branch", str(first.receipt)).returncode == 0
    before = path.read_bytes()
    done = jt(tmp_path, "git", "adopt", "s.jsonl", "--branch", str(second.receipt))
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
    assert "is already used by seq" in done.stderr and "Traceback" not in done.stderr
    assert path.read_bytes() == before
    assert _texts(path) == ["shared", "alice real"]


def test_a_record_whose_origin_is_not_its_line_is_refused_before_any_merge() -> None:
    """The forgery of 1.1 needed no collision at all: a record naming Alice's line by its
    origin while carrying any line. Such a record is now a bad line."""
    base = extend(new_session(), ["shared"])
    alice = extend(base, ["alice: the real plan"])
    victim = next(x for x in alice.splitlines() if b"the real plan" in x)
    other = next(x for x in base.splitlines() if b"shared" in x)
    origin = {"seq": json.loads(victim)["seq"], "crc": victim[-10:-2].decode()}
    seq = json.loads(base.splitlines()[-1])["seq"]
    mallory = with_checkpoint(base, [record_line(seq + 1, 1, 1, other, origin)])
    got = merge_versions(base, mallory, alice)
    assert isinstance(got, Conflict) and got.line.startswith("ours is corrupt at line ")


# -- records of 1.1 ----------------------------------------------------------------------------


def test_a_receipt_of_1_1_without_sha256_still_reads_and_rebuilds(tmp_path: Path) -> None:
    base = extend(new_session(), ["shared"])
    theirs = extend(base, ["theirs 1", "theirs 2"])
    got = merge_versions(base, extend(base, ["ours 1"]), theirs)
    assert isinstance(got, Merged) and got.receipt is not None
    # The same merge as 1.1 wrote it: the receipt without sha256 (and its records, checkpoint).
    lines = got.result.splitlines()
    start = line_of(got.result, "branch/start")
    old = json.loads(lines[start])
    del old["crc"]
    old["data"].pop("sha256", None)
    head = b"".join(x + b"\n" for x in lines[:start])
    records = [x for x in lines[start + 1 :] if b'"type":"branch/event"' in x]
    data = with_checkpoint(head, [_framing.frame(dumps(old))[:-1], *records])
    path = tmp_path / "old.jsonl"
    path.write_bytes(data)
    assert jsonltape.verify(path).state == "clean"
    assert _texts(path, got.receipt) == ["shared", "theirs 1", "theirs 2"]
    again = merge_versions(theirs, data, theirs)  # and a merge of it adds nothing
    assert isinstance(again, Merged) and again.outcome == "ours"


# -- the JavaScript reader agrees on random breakage --------------------------------------------


_BATCH = """
import { commandParts } from %s;
let text = '';
for await (const chunk of process.stdin) text += chunk;
for (const line of text.split('\\n')) {
  if (!line) continue;
  const data = Buffer.from(JSON.parse(line), 'base64');
  process.stdout.write((await commandParts('verify', [data], {})).join('') + '\\n');
}
"""


@pytest.mark.skipif(NODE is None, reason="node (Node.js 20+) is not installed")
def test_the_javascript_reader_judges_random_broken_records_as_jsonltape_does() -> None:
    cases: list[bytes] = []

    @settings(max_examples=150, deadline=None, database=None)
    @given(case=broken_records())
    def collect(case: tuple[bytes, bytes, bytes, str]) -> None:
        cases.append(case[1] if case[3] == "ours" else case[2])

    collect()
    assert NODE is not None
    stdin = "".join(json.dumps(base64.b64encode(c).decode()) + "\n" for c in cases)
    done = subprocess.run(
        [NODE, "--input-type=module", "-e", _BATCH % json.dumps(READER.as_uri())],
        input=stdin.encode(),
        capture_output=True,
        timeout=600,
        check=True,
    )
    answers = [json.loads(x) for x in done.stdout.splitlines()]
    for data, js in zip(cases, answers, strict=True):
        fd = os.memfd_create("case")
        try:
            os.write(fd, data)
            from jsonltape._scan import scan_full

            s = scan_full(fd, "case")
        finally:
            os.close(fd)
        assert (js["state"], js["line"], js["offset"]) == (s.state, s.bad_line, s.bad_offset)


def test_a_record_decoder_refuses_what_the_scan_refuses() -> None:
    """``recorded`` is only ever given good lines; on a line without the members it raises
    msgspec's error, which the scan turns into a verdict (never a crash)."""
    with pytest.raises(msgspec.DecodeError):
        recorded(b'{"seq":1,"type":"branch/event","time":1,"data":{"branch":0}}')
