"""Differential fuzz: every reader of jsonltape against one classifier written from the spec.

Mutated session files (bit flips, cuts, garbage, zero tails, duplicated, swapped, deleted and
merged lines, and above all lines with a *valid* CRC whose envelope, data, surface object or
header holds bad bytes, lone surrogates, numbers no double holds, values at and beyond the
ranges of §6, ``null`` header members, unknown types, broken data shapes and deep nesting) go
through ``verify``, ``read``, ``lines``, ``messages`` (neutral, openai, anthropic, ``at=``,
``all_versions``), ``interop.export`` (every format), ``repair`` on a copy and index ingest.
Each must give the verdict of :mod:`tests.fuzz_classifier` (spec §4-§7, §10.2), raise only
``jsonltape.errors`` exceptions, and fold only the committed events.

Counts, default / ``JSONLTAPE_LONG=1``: all 10,000 / 100,000 inputs go through verify, read,
lines and six fold calls each (three formats, ``all_versions``, ``at`` a committed seq, ``at``
the first uncommitted one); seeded samples of the same corpus go through export in all five
formats (1,500 / 20,000), repair (800 / 10,000) and index ingest (600 / 5,000, fifty files and
a healthy neighbour per index). About a minute in all. ``JSONLTAPE_FUZZ_SEED`` picks another
corpus and ``JSONLTAPE_FUZZ_N`` another size; every failure message names the seed and the
input's index (``build_corpus(dir, seed)[index]`` rebuilds it), and ``JSONLTAPE_FUZZ_REPORT=
file`` appends every finding to ``file`` as JSON lines for triage.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import shutil
import sqlite3
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor

import jsonltape
import jsonltape.interop
from jsonltape.errors import (
    CorruptError,
    FoldError,
    FormatError,
    InvalidEventError,
    JsonltapeError,
    SessionNotFoundError,
    UnknownEventTypeError,
    UnsafeFileError,
    UnsupportedVersionError,
)
from jsonltape.git._merge import Merged, merge_files
from jsonltape.interop import ExportFormat

from .conftest import LONG
from .fuzz_classifier import (
    MAX_SAFE,
    MAX_TIME,
    Verdict,
    _member_spans,
    classify,
    decode,
    split_lines,
)

#: Checks that fail today because the library does not implement a rule yet. Each key is
#: ``(reader, pattern)``: a failure of that reader is expected when the pattern occurs in its
#: input's base name, mutation kinds or the problem found. While only these fail the test
#: xfails (and passes once they are fixed: then remove the entry). The lead empties this.
KNOWN_GAPS: dict[tuple[str, str], str] = {}

SEED = int(os.environ.get("JSONLTAPE_FUZZ_SEED", "20261130"))
pytestmark = pytest.mark.timeout(3600 if LONG else 300)
N_INPUTS = int(os.environ.get("JSONLTAPE_FUZZ_N", 100_000 if LONG else 10_000))
N_EXPORT = 20_000 if LONG else 1_500
N_REPAIR = 10_000 if LONG else 800
N_INDEX = 5_000 if LONG else 600
INDEX_BATCH = 50

VECTORS = Path(__file__).resolve().parents[1] / "spec" / "vectors"
FOLD_FORMATS = ("neutral", "openai", "anthropic")
EXPORT_FORMATS: tuple[ExportFormat, ...] = (
    "markdown",
    "html",
    "json",
    "openai",
    "anthropic",
    "atif",
    "otel",
)

# ----------------------------------------------------------------------------------------------
# Base sessions: written by the library, plus every session file among the vectors


def _write_bases(d: Path) -> list[tuple[str, bytes]]:
    """Write real sessions into ``d`` (forks name their parents by path there)."""
    out: list[tuple[str, bytes]] = []
    closed = d / "closed.jsonl"
    with jsonltape.open(closed, create=True, title="closed", cwd="/w", agent="fuzz/1") as tape:
        tape.append("request/header", {"model": "m1", "system": "be brief", "tools": []})
        for i in range(3):
            with tape.turn():
                tape.user(f"question {i} ✓ ünïcode 雨")
                call = tape.assistant(
                    tool_calls=[{"id": f"c{i}", "name": "Read", "arguments": {"p": i}}]
                )
                call_id = call.data["message"]["parts"][0]["id"]
                tape.tool_call("Read", {"p": i}, call_id=call_id)
                tape.tool_result(call_id, f"result {i}")
                tape.assistant(f"answer {i}", model="m1", usage={"input_tokens": 3})
            tape.flush()
    out.append(("closed", closed.read_bytes()))

    folded = d / "folded.jsonl"
    with jsonltape.open(folded, create=True, title="folded") as tape:
        for i in range(4):
            with tape.turn():
                tape.user(f"step {i}")
                tape.assistant(tool_calls=[{"id": f"t{i}", "name": "Grep", "arguments": {}}])
                result = tape.tool_result(f"t{i}", "x" * 300)
                tape.assistant(f"did {i}")
        tape.append("todo/write", {"todos": [{"content": "x", "status": "pending"}]})
        tape.append("com.example/note", {"n": 1}, ignorable=True)
    jsonltape.compact(folded, "summary of the first two turns", through=10)

    def current(role: str) -> list[int]:
        items = jsonltape.messages(folded)["messages"]
        return [m["seq"] for m in items if m["message"]["role"] == role]

    jsonltape.revise(folded, current("user")[-1], "revised step 3")
    gone = current("assistant")[-1]
    jsonltape.retract(folded, gone)
    jsonltape.restore(folded, gone)
    jsonltape.prune(folded, result.seq)
    jsonltape.handoff(folded, "hand over", state={"k": [1, 2]})
    out.append(("folded", folded.read_bytes()))

    crashed = d / "crashed.jsonl"
    with jsonltape.open(crashed, create=True, durability="manual") as tape:
        with tape.turn():
            tape.user("first")
            tape.assistant("ok")
        turn = tape.append("turn/start", {})
        tape.user("run it")
        tape.append("step/start", {"turn": turn.seq})
        tape.assistant(tool_calls=[{"id": "k1", "name": "Bash", "arguments": {"c": "ls"}}])
        tape.tool_call("Bash", {"c": "ls"}, call_id="k1")
        tape.flush()
        out.append(("crashed", crashed.read_bytes()))  # a crash image: the turn is open

    fork = d / "fork.jsonl"
    jsonltape.fork(closed, at=8, out=fork)
    with jsonltape.open(fork) as tape, tape.turn():
        tape.user("in the fork")
        tape.assistant("fork reply")
    out.append(("fork", fork.read_bytes()))
    merged = d / "merged.jsonl"
    shutil.copyfile(closed, merged)
    os.chmod(merged, 0o600)
    fork2 = d / "fork2.jsonl"
    jsonltape.fork(merged, at=8, out=fork2)
    with jsonltape.open(fork2) as tape, tape.turn():
        tape.user("to merge")
        tape.assistant("merged reply")
    jsonltape.merge(merged, fork2)
    out.append(("merged", merged.read_bytes()))

    # A session continued in two places and merged by the git merge driver (spec §8.7.14).
    ours, theirs = d / "ours.jsonl", d / "theirs.jsonl"
    for path, text in ((ours, "ours"), (theirs, "theirs")):
        shutil.copyfile(closed, path)
        os.chmod(path, 0o600)
        with jsonltape.open(path) as tape, tape.turn():
            tape.user(f"{text} went on")
            tape.assistant(f"{text} reply")
    got = merge_files(closed, ours, theirs, source="main")
    assert isinstance(got, Merged) and got.outcome == "branch"
    out.append(("branched", got.result))

    for path in sorted(VECTORS.rglob("*.jsonl")):
        out.append((f"vector:{path.relative_to(VECTORS)}", path.read_bytes()))
    return out


# ----------------------------------------------------------------------------------------------
# Building lines with a valid CRC around arbitrary bytes


class Raw:
    """JSON text inserted as is (bad bytes, 1e400, ...) where a value or a member name goes."""

    def __init__(self, text: bytes, label: str) -> None:
        self.text, self.label = text, label


def _frame(prefix: bytes) -> bytes:
    return prefix + b',"crc":"' + f"{zlib.crc32(prefix):08x}".encode() + b'"}\n'


def _encode(obj: dict[str, Any]) -> bytes:
    """Compact JSON of ``obj`` (no crc member) framed with its CRC; Raw values and Raw keys
    (given as ``("__raw__", n)`` placeholders) are spliced in as bytes."""
    raws: list[bytes] = []

    def sub(v: Any) -> Any:
        if isinstance(v, Raw):
            raws.append(v.text)
            return f"\x00R{len(raws) - 1}\x00"
        if isinstance(v, dict):
            out = {}
            for k, item in v.items():
                key = sub(k) if isinstance(k, Raw) else k
                out[key] = sub(item)
            return out
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    text = json.dumps(sub(obj), ensure_ascii=False, separators=(",", ":")).encode()
    for n, raw in enumerate(raws):
        text = text.replace(b'"\\u0000R%d\\u0000"' % n, raw)
    return _frame(text[:-1])


class _RawKey(str):
    """A dict key standing for a Raw member name (str subclass so dicts accept it)."""

    raw: Raw

    def __new__(cls, raw: Raw) -> _RawKey:
        self = super().__new__(cls, f"\x01K{id(raw)}\x01")
        self.raw = raw
        return self


def _encode_with_keys(obj: dict[str, Any]) -> bytes:
    def swap(v: Any) -> Any:
        if isinstance(v, dict):
            return {(k.raw if isinstance(k, _RawKey) else k): swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return v

    return _encode(swap(obj))


#: Values a good line may hold anywhere (§4: valid, and a double holds every number).
GOOD_VALUES = [
    Raw(b'"ok"', "string"),
    Raw(b'"\\ud83d\\ude00 \\u00e9"', "surrogate-pair"),
    Raw('"雨 ✓ 😀"'.encode(), "utf8"),
    Raw(b'"\\u0000\\n\\/"', "escapes"),
    Raw(b"9007199254740993", "int-2^53+1"),
    Raw(b"-9007199254740993", "int-neg-2^53+1"),
    Raw(b"1" + b"0" * 300, "int-1e300"),
    Raw(b"18446744073709551616", "int-2^64"),
    Raw(b"1.7976931348623157e308", "max-double"),
    Raw(b"-0", "minus-zero"),
    Raw(b"-0.0", "minus-zero-float"),
    Raw(b"1e-400", "underflow"),
    Raw(b"[]", "empty-array"),
    Raw(b"{}", "empty-object"),
    Raw(b"null", "null"),
    Raw(b"true", "true"),
]
#: Values that make any line bad (§4).
BAD_VALUES = [
    Raw(b'"x\xffy"', "utf8-ff"),
    Raw(b'"\xed\xa0\x80"', "utf8-surrogate"),
    Raw(b'"\xc0\xaf"', "utf8-overlong"),
    Raw(b'"\xe9t\xe9"', "latin1"),
    Raw(b'"\\ud800"', "lone-high"),
    Raw(b'"a\\udc00b"', "lone-low"),
    Raw(b'"\\ud800\\u0041"', "high-then-bmp"),
    Raw(b"1e400", "1e400"),
    Raw(b"-1e400", "-1e400"),
    Raw(b"2e308", "2e308"),
    Raw(b"1" + b"0" * 400, "int-1e400"),
    Raw(b"-1" + b"0" * 400, "int--1e400"),
    Raw(b"NaN", "NaN"),
    Raw(b"Infinity", "Infinity"),
    Raw(b"-Infinity", "-Infinity"),
]
GOOD_NAMES = [
    Raw(b'"x-ext"', "plain"),
    Raw(b'"com.example.cost"', "namespaced"),
    Raw(b'"\\u00e9t\xc3\xa9"', "escaped"),
    Raw(b'""', "empty"),
]
BAD_NAMES = [
    Raw(b'"x\xffy"', "utf8-ff"),
    Raw(b'"\xed\xb0\x80"', "utf8-surrogate"),
    Raw(b'"\\ud800"', "lone-high"),
    Raw(b'"k\\udfff"', "lone-low"),
]

INT_EDGES: list[Any] = [
    0,
    1,
    MAX_SAFE,
    MAX_SAFE + 1,
    -1,
    2**63,
    2**64,
    10**30,
    Raw(b"1.0", "1.0"),
    Raw(b"1e2", "1e2"),
    Raw(b"-0", "-0"),
]
TIME_EDGES: list[Any] = [
    0,
    MAX_TIME,
    MAX_TIME + 1,
    -1,
    MAX_SAFE,
    2**63,
    2**64,
    Raw(b"1.5", "1.5"),
    Raw(b"1e12", "1e12"),
    "1764460800000",
]

HEADER_VALUES: dict[str, list[Any]] = {
    "title": [None, 5, "", "t\u0000", ["t"], Raw(b'"\\ud800"', "lone")],
    "cwd": [None, 5, "/a\u0000b", {}],
    "agent": [None, True, "a/1"],
    "meta": [None, [], "m", {}, {"k": Raw(b"1e400", "1e400")}, {"k": {"deep": [1]}}],
    "parent": [
        None,
        "p",
        {},
        {"session": "s"},
        {"session": "s", "seq": "1"},
        {"session": 5, "seq": 0},
        {"session": "s", "seq": 0, "path": None},
        {"session": "s", "seq": 0, "crc": 5},
        {"session": "s", "seq": 0, "path": "a\u0000b"},
        {"session": "s", "seq": 2**64},
        {"session": "nope", "seq": 1},
    ],
    "minor": [None, "1", Raw(b"1.0", "1.0"), -1, 10**30, 7],
    "created": [None, -1, 0, MAX_TIME, MAX_TIME + 1, 2**64, Raw(b"1.5", "1.5"), "x"],
    "version": [None, 2, 0, Raw(b"1.0", "1.0"), "1", True],
    "id": [None, "", 5, "a/b", "x\u0000", "../../etc"],
    "format": [None, "JSONLTAPE", 5],
}

#: Data that breaks the shape of a type the fold checks (§8.7.1 step 4).
BAD_SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("user/message", {"message": 5}),
    ("user/message", {"message": {}}),
    ("user/message", {"message": {"id": "x", "role": "user", "parts": 5}}),
    ("user/message", {"message": {"id": 5, "role": "user", "parts": []}}),
    ("user/message", {"message": {"id": "x", "role": "tool", "parts": []}}),
    ("user/message", {"message": {"id": "x", "role": "user", "parts": [5]}}),
    ("user/message", {"message": {"id": "x", "role": "user", "parts": [{"type": 5}]}}),
    ("user/message", {"message": {"id": "x", "role": "user", "parts": [], "name": 5}}),
    ("assistant/message", {"message": {"id": "x", "role": "assistant", "parts": [{}]}}),
    ("assistant/message", {"message": {"id": "a", "role": "assistant", "parts": []}, "usage": 5}),
    (
        "assistant/message",
        {
            "message": {
                "id": "a",
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": 5, "name": None, "arguments": 1}],
            }
        },
    ),
    ("tool/result", {"call_id": 5, "message": {"id": "r", "role": "tool", "parts": []}}),
    ("tool/result", {"call_id": "zz"}),
    ("todo/write", {"todos": 5}),
    ("todo/write", {"todos": [{"content": 5, "status": "nope"}]}),
    ("request/header", {"model": 5, "tools": "x", "params": []}),
    ("surface/retract", {"reason": 5}),
    ("compaction/start", {"through": "x"}),
    ("compaction/end", {"compaction": None}),
    ("handoff/anchor", {}),
    ("fork/merge", {"fork": 5}),
    ("session/flush", {"offset": "x"}),
    ("turn/end", {"turn": "x", "reason": 5}),
    ("step/end", {}),
    ("tool/call", {"call_id": None, "name": 5}),
]


# ----------------------------------------------------------------------------------------------
# Mutations: each returns (kind, new bytes) or None when it does not apply


Mutation = Callable[[random.Random, bytes], "tuple[str, bytes] | None"]


def _lines(data: bytes) -> list[bytes]:
    return [raw for _, raw in split_lines(data)]


def _decodable(raw: bytes) -> dict[str, Any] | None:
    """The line as an object (crc removed), when it is complete strict JSON."""
    if not raw.endswith(b"\n"):
        return None
    try:
        value, _ = decode(raw[:-1].decode("utf-8"))
        json.dumps(value, ensure_ascii=False).encode()  # no lone surrogate in it
    except Exception:  # anything the strict decoder refuses is not a line to re-frame
        return None
    if type(value) is not dict or "crc" not in value or raw.count(b"[") > 100:
        return None  # (deep lines are not re-encoded: json.dumps recurses per level)
    value.pop("crc")
    return value


def _pick(
    rng: random.Random, data: bytes, *, header: bool | None = None
) -> tuple[list[bytes], int, dict[str, Any]] | None:
    """A random decodable line (the header when ``header``, never it when ``False``)."""
    lines = _lines(data)
    idx = list(range(len(lines)))
    if header is True:
        idx = idx[:1]
    elif header is False:
        idx = idx[1:]
    rng.shuffle(idx)
    for i in idx[:8]:
        obj = _decodable(lines[i])
        if obj is not None and isinstance(obj.get("data"), dict):
            return lines, i, obj
    return None


def _replace(lines: list[bytes], i: int, new: bytes) -> bytes:
    return b"".join([*lines[:i], new, *lines[i + 1 :]])


def m_bitflip(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    if not data:
        return None
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 3))):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return "bitflip", bytes(b)


def m_cut(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    return "cut", data[: rng.randrange(len(data) + 1)]


GARBAGE = [b"\n", b"\x00", b"{", b"}", b"\xff", b'"}\n', b",", b"\r\n", b" ", b"\\"]


def m_garbage(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    at = rng.randrange(len(data) + 1)
    if rng.random() < 0.5:
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    else:
        junk = b"".join(rng.choice(GARBAGE) for _ in range(rng.randrange(1, 6)))
    return "garbage", data[:at] + junk + data[at:]


def m_zeros(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    n = rng.choice((1, 17, 512, 4096))
    if rng.random() < 0.5 or len(data) < 2:
        return "zeros:tail", data + b"\0" * n
    at = rng.randrange(len(data))
    return "zeros:over", data[:at] + b"\0" * min(n, len(data) - at)


def m_lines(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    lines = _lines(data)
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines))
    op = rng.choice(("dup", "swap", "delete", "move", "merge", "crlf", "blank"))
    if op == "dup":
        lines.insert(i, lines[i])
    elif op == "swap" and i + 1 < len(lines):
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif op == "delete":
        del lines[i]
    elif op == "move":
        lines.insert(j, lines.pop(i))
    elif op == "merge" and lines[i].endswith(b"\n"):
        lines[i] = lines[i][:-1]
    elif op == "crlf" and lines[i].endswith(b"\n"):
        lines[i] = lines[i][:-1] + b"\r\n"
    elif op == "blank":
        lines.insert(i, b"\n")
    else:
        return None
    return f"lines:{op}", b"".join(lines)


def m_reseq(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """Delete a line and renumber the rest with valid CRCs: a thorough bad edit (the file is
    good line by line; only the checkpoints' offsets are off)."""
    lines = _lines(data)
    if len(lines) < 3:
        return None
    i = rng.randrange(1, len(lines))
    out = lines[:i]
    for raw in lines[i + 1 :]:
        obj = _decodable(raw)
        if obj is None or type(obj.get("seq")) is not int:
            return None
        obj["seq"] -= 1
        out.append(_encode(obj))
    return "reseq", b"".join(out)


def m_witness(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """Append a session/flush with a valid CRC and an arbitrary seq (a witness if in range)."""
    seq = rng.choice([len(_lines(data)), 0, -1, MAX_SAFE, MAX_SAFE + 1, 2**64, Raw(b"2.0", "2.0")])
    obj = {"seq": seq, "type": "session/flush", "time": 1, "data": {"offset": len(data), "seq": 0}}
    obj["ignorable"] = True
    label = seq.label if isinstance(seq, Raw) else str(seq)
    return f"witness:seq={label}", data + _encode(obj)


def _containers(obj: Any) -> list[Any]:
    """Every object and array inside ``obj`` (itself included), iteratively."""
    out, stack = [], [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, (dict, list)):
            out.append(v)
            stack.extend(v.values() if isinstance(v, dict) else v)
    return out


def m_inject(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """An unknown member (or array item) somewhere in a line, with a valid CRC."""
    picked = _pick(rng, data, header=True if rng.random() < 0.15 else None)
    if picked is None:
        return None
    lines, i, obj = picked
    where = rng.choice(("envelope", "envelope-first", "data", "nested", "surface", "part"))
    if where == "nested":
        target: Any = rng.choice(_containers(obj["data"]) or [obj["data"]])
    elif where == "surface" and isinstance(obj.get("surface"), dict):
        target = obj["surface"]
    elif where == "part" and isinstance(obj["data"].get("message"), dict):
        parts = obj["data"]["message"].get("parts")
        target = rng.choice(parts) if isinstance(parts, list) and parts else obj["data"]
    elif where in ("envelope", "envelope-first"):
        target = obj
    else:
        where, target = "data", obj["data"]
    bad_name = rng.random() < 0.35
    bad_value = not bad_name and rng.random() < 0.6
    name = rng.choice(BAD_NAMES if bad_name else GOOD_NAMES)
    value = rng.choice(BAD_VALUES if bad_value else GOOD_VALUES)
    if isinstance(target, list):
        if bad_name:
            return None
        target.insert(rng.randrange(len(target) + 1), value)
    elif where == "envelope-first":
        items = list(target.items())
        target.clear()
        target[_RawKey(name)] = value
        target.update(items)
    else:
        target[_RawKey(name)] = value
    verdict = "bad" if bad_name or bad_value else "good"
    what = f"name={name.label}" if bad_name else f"value={value.label}"
    return f"inject-{verdict}:{where}:{what}", _replace(lines, i, _encode_with_keys(obj))


def m_range(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """An envelope member at or beyond its range (§6), with a valid CRC."""
    picked = _pick(rng, data, header=None)
    if picked is None:
        return None
    lines, i, obj = picked
    member = rng.choice(("seq", "time", "time", "sources", "surface.start", "surface.end"))
    value = rng.choice(TIME_EDGES if member == "time" else INT_EDGES)
    label = value.label if isinstance(value, Raw) else repr(value)
    if member == "seq":
        obj["seq"] = value
    elif member == "time":
        obj["time"] = value
    elif member == "sources":
        obj["sources"] = [value] if rng.random() < 0.7 else [0, value]
    else:
        surface = obj.get("surface")
        if not isinstance(surface, dict):
            surface = {"op": "replace", "start": max(0, i - 1), "end": max(0, i - 1)}
            obj["sources"] = [max(0, i - 1)]
        surface[member.split(".")[1]] = value
        obj["surface"] = surface
    return f"range:{member}={label}", _replace(lines, i, _encode(obj))


def m_header(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """A header member of §7 null, of the wrong type, or at its range, with a valid CRC."""
    picked = _pick(rng, data, header=True)
    if picked is None or not isinstance(picked[2].get("data"), dict):
        return None
    lines, i, obj = picked
    member = rng.choice(sorted(HEADER_VALUES))
    value = rng.choice(HEADER_VALUES[member])
    label = value.label if isinstance(value, Raw) else json.dumps(value, default=str)[:40]
    obj["data"][member] = value
    return f"header:{member}={label}", _replace(lines, i, _encode(obj))


def m_optional(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """Optional envelope members written as null, false or a wrong type (§6)."""
    picked = _pick(rng, data)
    if picked is None:
        return None
    lines, i, obj = picked
    member, value = rng.choice(
        [
            ("surface", None),
            ("sources", None),
            ("key", None),
            ("ignorable", None),
            ("ignorable", False),
            ("ignorable", "yes"),
            ("ignorable", 1),
            ("surface", "prepend"),
            ("surface", {"op": "replace", "start": 1}),
            ("surface", {"op": "retract", "start": 1, "end": 1, "x": [1]}),
            ("sources", [1, "2"]),
            ("key", ""),
            ("key", 5),
            ("data", None),
            ("data", []),
            ("type", 5),
            ("type", None),
        ]
    )
    obj[member] = value
    return f"optional:{member}={json.dumps(value)}", _replace(lines, i, _encode(obj))


def m_type(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """Change a line's type: unknown (ignorable or not), a header at seq > 0, escaped, odd."""
    picked = _pick(rng, data, header=False)
    if picked is None:
        return None
    lines, i, obj = picked
    label, new = rng.choice(
        [
            ("unknown", "x-foo/bar"),
            ("unknown-ignorable", "x-foo/bar"),
            ("reserved-unknown", "turn/pause"),
            ("header-again", "session/start"),
            ("not-namespaced", "hello"),
            ("empty", ""),
            ("escaped", Raw(b'"user\\/message"', "escaped")),
        ]
    )
    obj["type"] = new
    if label == "unknown-ignorable":
        obj["ignorable"] = True
    return f"type:{label}", _replace(lines, i, _encode(obj))


def m_shape(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """Data of a type the fold checks, in a shape it must refuse (§8.7.1 step 4)."""
    picked = _pick(rng, data, header=False)
    if picked is None:
        return None
    lines, i, obj = picked
    n = rng.randrange(len(BAD_SHAPES))
    type_, shape = BAD_SHAPES[n]
    obj["type"], obj["data"] = type_, json.loads(json.dumps(shape))
    if type_ in ("user/message", "assistant/message", "tool/result"):
        obj.setdefault("surface", "append")
    elif type_ != "surface/retract":
        obj.pop("surface", None)
    return f"shape:{type_}#{n}", _replace(lines, i, _encode(obj))


def m_surface(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """A surface operation the fold must refuse or apply (well framed, types right)."""
    picked = _pick(rng, data, header=False)
    if picked is None:
        return None
    lines, i, obj = picked
    seq: int = obj["seq"] if type(obj.get("seq")) is int and 0 <= obj["seq"] < 10**6 else i
    start, end = rng.randrange(seq + 1), rng.randrange(seq + 1)
    label, surface = rng.choice(
        [
            ("replace", {"op": "replace", "start": start, "end": end}),
            ("retract", {"op": "retract", "start": start, "end": end}),
            ("append", "append"),
            ("replace-future", {"op": "replace", "start": seq, "end": seq + 5}),
        ]
    )
    obj["surface"] = surface
    if rng.random() < 0.5:
        obj["sources"] = sorted({start, end})
    return f"surface:{label}", _replace(lines, i, _encode(obj))


def m_deep(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """Data nested to (or past) the 128 levels of §6 on an ignorable extension event."""
    picked = _pick(rng, data, header=False)
    if picked is None:
        return None
    lines, i, obj = picked
    levels = rng.choice((127, 128, 129, 200, 3000))  # total depth: envelope, data, then these
    obj["type"], obj["ignorable"] = "x.fuzz/deep", True
    obj.pop("surface", None)
    inner = b"[" * (levels - 2) + b"]" * (levels - 2)
    obj["data"] = Raw(b'{"v":' + inner + b"}", "deep")  # built as text: json recurses per level
    return f"deep:{levels}", _replace(lines, i, _encode(obj))


def _recorded_line(raw: bytes) -> bytes | None:
    """The bytes of a branch/event's ``data.line`` as stored, when the line has one."""
    try:
        text = raw[:-1].decode("utf-8")
        start, _end = _member_spans(text, 0)["data"]
        first, last = _member_spans(text, start)["line"]
    except (KeyError, ValueError, IndexError):
        return None
    return text[first:last].encode("utf-8")


def _branch_break(rng: random.Random, obj: dict[str, Any], lines: list[bytes]) -> str:
    """Change one thing the shape of §8.7.14 is about, in place; return what."""
    d = obj["data"]
    others = [x[:-1] for x in lines[1:] if x.endswith(b"\n") and b'"type":"branch/' not in x]
    kind = rng.choice(
        ("drop", "type", "origin-crc", "origin-seq", "other-line", "other-line-fixed", "flip")
        if obj["type"] == "branch/event"
        else ("drop", "type", "short-lines", "short-sha", "sha-digit", "at-head")
    )
    keys = list(d) or ["x"]
    if kind in ("drop", "type"):
        key = rng.choice([*keys, "ignorable", "surface"])
        where = obj if key in ("ignorable", "surface") else d
        if kind == "drop":
            where.pop(key, None)
        else:
            where[key] = rng.choice(["1", 1.5, None, [], {}, True, "append", -1, MAX_SAFE + 1])
        return f"{kind}:{key}"
    if kind in ("origin-crc", "origin-seq") and isinstance(d.get("origin"), dict):
        o = d["origin"]
        if kind == "origin-crc" and others:
            o["crc"] = rng.choice(others)[-10:-2].decode()
        elif isinstance(o.get("seq"), int):
            o["seq"] += rng.choice((-1, 1))
    elif kind.startswith("other-line") and others:
        line = rng.choice(others)
        d["line"] = Raw(line, "other-line")
        if kind == "other-line-fixed":  # a well-formed record of another line of the file
            d["origin"] = {"seq": json.loads(line)["seq"], "crc": line[-10:-2].decode()}
    elif kind == "flip" and isinstance(d.get("line"), Raw):
        b = bytearray(d["line"].text)
        b[rng.randrange(1, len(b) - 20)] ^= 1 << rng.randrange(7)
        d["line"] = Raw(bytes(b), "flipped")
    elif kind == "short-lines" and isinstance(d.get("lines"), list):
        d["lines"] = d["lines"][1:]
    elif kind == "short-sha" and isinstance(d.get("sha256"), list):
        d["sha256"] = d["sha256"][:-1]
    elif kind == "sha-digit" and isinstance(d.get("sha256"), list) and d["sha256"]:
        d["sha256"][0] = str(d["sha256"][0])[:-1]
    elif kind == "at-head" and isinstance(d.get("head"), int):
        d["at"] = d["head"]
    return kind


def m_branch(rng: random.Random, data: bytes) -> tuple[str, bytes] | None:
    """A merge's branch record (§8.7.14) changed, with a valid CRC: a member missing or of
    the wrong type, an origin that is not its line's, another line recorded (with its origin
    or not), its line's bytes changed, a receipt whose counts disagree (1.2: bad lines)."""
    lines = _lines(data)
    idx = [i for i, raw in enumerate(lines) if b'"type":"branch/' in raw]
    if not idx:
        return None
    i = rng.choice(idx)
    obj = _decodable(lines[i])
    if obj is None or not isinstance(obj.get("data"), dict):
        return None
    inner = _recorded_line(lines[i])
    if inner is not None:
        obj["data"]["line"] = Raw(inner, "line")  # kept verbatim through the re-encode
    what = _branch_break(rng, obj, lines)
    return f"branch:{obj['type']}:{what}", _replace(lines, i, _encode(obj))


MUTATIONS: list[tuple[Mutation, int]] = [
    (m_bitflip, 8),
    (m_cut, 8),
    (m_garbage, 5),
    (m_zeros, 2),
    (m_lines, 8),
    (m_reseq, 2),
    (m_witness, 3),
    (m_inject, 22),
    (m_range, 12),
    (m_header, 10),
    (m_optional, 6),
    (m_type, 5),
    (m_shape, 6),
    (m_surface, 4),
    (m_deep, 2),
    (m_branch, 10),
]


@dataclass
class Input:
    index: int
    base: str
    kinds: tuple[str, ...]
    data: bytes
    verdict: Verdict = field(repr=False)

    def describe(self) -> str:
        shown = repr(self.data) if len(self.data) <= 1500 else f"<{len(self.data)} bytes>"
        return (
            f"input #{self.index} (seed {SEED}) from {self.base}, mutations {self.kinds}: {shown}"
        )


def build_corpus(d: Path, seed: int = SEED, n: int = N_INPUTS) -> list[Input]:
    """``n`` mutated files from the base sessions written into ``d``, each with its verdict."""
    bases = _write_bases(d)
    written = [b for b in bases if not b[0].startswith("vector:")]
    vectors = [b for b in bases if b[0].startswith("vector:")]
    rng = random.Random(seed)
    funcs = [f for f, _ in MUTATIONS]
    weights = [w for _, w in MUTATIONS]
    out: list[Input] = []
    while len(out) < n:
        base, data = rng.choice(written if rng.random() < 0.6 else vectors)
        kinds: list[str] = []
        for _ in range(rng.choice((1, 1, 1, 1, 1, 1, 1, 2, 2, 3))):
            done = rng.choices(funcs, weights)[0](rng, data)
            if done is not None:
                kinds.append(done[0])
                data = done[1]
        if kinds:
            out.append(Input(len(out), base, tuple(kinds), data, classify(data)))
    return out


# ----------------------------------------------------------------------------------------------
# Findings


@dataclass
class Finding:
    reader: str
    input: Input
    problem: str


class Findings:
    """Collects every disagreement, then fails (or xfails, for KNOWN_GAPS only) at the end."""

    def __init__(self, readers: tuple[str, ...]) -> None:
        self.readers = readers
        self.items: list[Finding] = []
        self.inputs = 0

    def see(self, inp: Input) -> None:
        self.inputs += 1

    def add(self, reader: str, inp: Input, problem: str) -> None:
        self.items.append(Finding(reader, inp, problem))

    def known(self, f: Finding) -> tuple[str, str] | None:
        text = " ".join((f.input.base, *f.input.kinds, f.problem))
        for reader, pattern in KNOWN_GAPS:
            if reader == f.reader and pattern in text:
                return (reader, pattern)
        return None

    def finish(self) -> None:
        if report := os.environ.get("JSONLTAPE_FUZZ_REPORT"):  # every finding, for triage
            with open(report, "a", encoding="utf-8") as out:
                for f in self.items:
                    row: dict[str, Any] = {"reader": f.reader, "problem": f.problem}
                    row["kinds"] = f.input.kinds
                    row |= {"index": f.input.index, "base": f.input.base}
                    row["data"] = f.input.data.decode("latin-1")
                    out.write(json.dumps(row) + "\n")
        unknown = [f for f in self.items if self.known(f) is None]
        hit = {k for f in self.items if (k := self.known(f)) is not None}
        if unknown:
            groups: dict[tuple[str, str], list[Finding]] = defaultdict(list)
            for f in unknown:
                groups[(f.reader, f.input.kinds[-1].split(":")[0])].append(f)
            lines = [f"{len(unknown)} disagreements in {self.inputs} inputs (seed {SEED}):"]
            for (reader, kind), fs in sorted(groups.items()):
                lines.append(f"- {reader} / {kind}: {len(fs)}, e.g.")
                for f in fs[:3]:
                    lines.append(f"    {f.problem}\n      {f.input.describe()}")
            pytest.fail("\n".join(lines), pytrace=False)
        if self.items:
            pytest.xfail(f"{len(self.items)} known gaps: {sorted(hit)}")


# ----------------------------------------------------------------------------------------------
# Comparing values


def same_json(a: Any, b: Any) -> bool:
    """Equal JSON values, types included (1 is not 1.0 nor True); iterative for deep values."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        both_arrays = isinstance(x, (list, tuple)) and isinstance(y, (list, tuple))
        if type(x) is not type(y) and not both_arrays:
            return False
        if isinstance(x, dict):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, (list, tuple)):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, float):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return False
        elif x != y:
            return False
    return True


def event_problem(got: jsonltape.Event, want: dict[str, Any], raw: bytes) -> str | None:
    """Why a decoded Event differs from the classifier's envelope, if it does."""
    surface: Any = got.surface
    if surface is not None and not isinstance(surface, str):
        op = "replace" if isinstance(surface, jsonltape.Replace) else "retract"
        surface = {"op": op, "start": surface.start, "end": surface.end}
    expect_surface = want.get("surface")
    if isinstance(expect_surface, dict):
        expect_surface = {k: expect_surface[k] for k in ("op", "start", "end")}
    pairs = [
        ("seq", got.seq, want["seq"]),
        ("type", got.type, want["type"]),
        ("time", got.time, want["time"]),
        ("surface", surface, expect_surface),
        ("sources", got.sources, want.get("sources")),
        ("key", got.key, want.get("key")),
        ("ignorable", got.ignorable, want.get("ignorable") is True),
        ("crc", got.crc, raw[-11:-3].decode()),
    ]
    for name, g, w in pairs:
        if not same_json(g, w):
            return f"{name}: got {g!r:.200}, want {w!r:.200}"
    if not same_json(got.data, want["data"]):
        return f"data differs: got {got.data!r:.300}"
    return None


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    yielded: list[Any] = field(default_factory=list)

    def key(self, path: Path) -> Any:
        """What must be equal between a file and its committed prefix."""
        if self.error is None:
            return ("ok", self.value)
        e = self.error
        if isinstance(e, JsonltapeError):
            own = e.path is not None and Path(e.path).name == path.name
            return (
                type(e).__name__,
                own,
                e.line,
                e.offset,
                e.field,
                e.message.replace(path.name, "*"),
            )
        return (type(e).__name__, str(e))


def attempt(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as exc:  # every exception is data here: the checks judge it
        return Outcome(error=exc)


def drain(it: Callable[[], Iterator[Any]]) -> Outcome:
    out = Outcome(value=None)
    try:
        for item in it():
            out.yielded.append(item)
    except Exception as exc:  # judged by the caller
        out.error = exc
    return out


def foreign(out: Outcome) -> str | None:
    """A non-library exception (TypeError, UnicodeDecodeError, OverflowError, ...)."""
    if out.error is not None and not isinstance(out.error, JsonltapeError):
        e = out.error
        return f"non-library exception {type(e).__name__}: {e!s:.300}"
    return None


def too_deep(out: Outcome, v: Verdict) -> bool:
    """§6: refusing a line too deep for the parser, naming it, is allowed (never damage)."""
    e = out.error
    return isinstance(e, FormatError) and (e.line, e.offset) in set(v.deep)


def refusal_problem(out: Outcome, v: Verdict) -> str | None:
    """For a file that is not a session: the §7 refusal, and nothing served."""
    want = UnsupportedVersionError if v.error == "unsupported-version" else FormatError
    e = out.error
    if e is None:
        return f"accepted a file that is not a session ({v.error}); want {want.__name__}"
    if not isinstance(e, want) or (want is FormatError and isinstance(e, UnsupportedVersionError)):
        return f"raised {type(e).__name__}: {e}; want {want.__name__} ({v.error})"
    if out.yielded:
        return f"served {len(out.yielded)} items before refusing"
    return None


def corrupt_problem(e: BaseException | None, v: Verdict) -> str | None:
    if not isinstance(e, CorruptError):
        got = type(e).__name__ if e else "no error"
        return f"got {got}: {e}; want CorruptError at line {v.line}, byte {v.offset}"
    if (e.line, e.offset) != (v.line, v.offset):
        return (
            f"CorruptError at line {e.line}, byte {e.offset}; want line {v.line}, byte {v.offset}"
        )
    return None


# ----------------------------------------------------------------------------------------------
# The corpus (built once per module)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Input]]:
    d = tmp_path_factory.mktemp("fuzz")
    os.chmod(d, 0o700)
    return d, build_corpus(d)


def _usable(inp: Input) -> bool:
    """Inputs the spec decides: a repeated member name in a line is implementation-defined."""
    return not inp.verdict.duplicate


def _sample(inputs: list[Input], n: int, salt: int) -> list[Input]:
    usable = [i for i in inputs if _usable(i)]
    return random.Random(SEED + salt).sample(usable, min(n, len(usable)))


def test_corpus_covers_every_verdict_and_mutation(corpus: tuple[Path, list[Input]]) -> None:
    """The fuzz is only as good as its inputs: every verdict and every mutation occurs often."""
    _, inputs = corpus
    assert len(inputs) >= N_INPUTS
    states: defaultdict[str, int] = defaultdict(int)
    for inp in inputs:
        states[inp.verdict.state] += 1
    assert all(
        states[s] >= N_INPUTS // 100
        for s in ("clean", "open-turn", "torn-tail", "corrupt", "not-a-session")
    ), states
    counts: defaultdict[str, int] = defaultdict(int)
    for inp in inputs:
        for k in inp.kinds:
            counts[k.split(":")[0].split("-")[0]] += 1
    names = {f.__name__[2:] for f, _ in MUTATIONS}
    assert all(counts[name] >= N_INPUTS // 500 for name in names), dict(counts)
    assert sum(1 for i in inputs if i.verdict.deep) >= N_INPUTS // 500
    # A bad byte or number injected into a line always leaves a bad line (or a bad header).
    bad = [i for i in inputs if len(i.kinds) == 1 and i.kinds[0].startswith("inject-bad")]
    assert len(bad) >= N_INPUTS // 20
    assert all(i.verdict.state in ("torn-tail", "corrupt", "not-a-session") for i in bad)


def test_the_classifier_gives_every_conformance_vector_its_expected_answer() -> None:
    """The oracle checked against the vectors (a second reading of the spec, built without the
    library): the same state, B and committed events for every session file among them."""
    checked = 0
    for path in sorted(VECTORS.rglob("*.jsonl")):
        expected = path.with_name(path.stem + ".verify.json")
        if not expected.exists():
            continue
        want = json.loads(expected.read_text(encoding="utf-8"))
        v = classify(path.read_bytes())
        if v.state == "not-a-session":
            got: dict[str, Any] = {"error": v.error}
        else:
            got = {"state": v.state, "events": len(v.committed), "line": v.line}
            got["offset"] = v.offset
        assert got == want, path.name
        read = json.loads(path.with_name(path.stem + ".read.json").read_text(encoding="utf-8"))
        if read.get("ok"):
            assert same_json([c.event for c in v.committed], read["events"]), path.name
        checked += 1
    assert checked > 100


# ----------------------------------------------------------------------------------------------
# verify, read, lines: every input


def _check_verify(inp: Input, path: Path, findings: Findings) -> None:
    v = inp.verdict
    out = attempt(lambda: jsonltape.verify(path))
    if (p := foreign(out)) is not None:
        return findings.add("verify", inp, p)
    if too_deep(out, v):
        return None
    if v.state == "not-a-session":
        if (p := refusal_problem(out, v)) is not None:
            findings.add("verify", inp, p)
        return None
    if out.error is not None:
        return findings.add(
            "verify", inp, f"raised {type(out.error).__name__}: {out.error}; want state {v.state}"
        )
    r = out.value
    got = (r.state, r.events, r.line, r.offset, r.committed_bytes)
    want = (v.state, len(v.committed), v.line, v.offset, v.committed_bytes)
    if got != want:
        findings.add(
            "verify", inp, f"(state, events, line, offset, committed_bytes) = {got}; want {want}"
        )
    elif (r.open_turn, r.closed) != (v.open_turn, v.closed):
        findings.add(
            "verify",
            inp,
            f"(open_turn, closed) = {(r.open_turn, r.closed)}; want {(v.open_turn, v.closed)}",
        )
    return None


def _check_stream(reader: str, inp: Input, path: Path, findings: Findings) -> None:
    v = inp.verdict
    if reader == "read":
        out = drain(lambda: jsonltape.read(path))
    else:
        out = drain(lambda: jsonltape.lines(path))
    if (p := foreign(out)) is not None:
        return findings.add(reader, inp, p)
    if too_deep(out, v):
        return None
    if v.state == "not-a-session":
        if (p := refusal_problem(out, v)) is not None:
            findings.add(reader, inp, p)
        return None
    served = out.yielded
    if len(served) > len(v.committed):
        return findings.add(
            reader,
            inp,
            f"served {len(served)} events; only {len(v.committed)} are committed "
            f"({v.state}, B at line {v.line})",
        )
    for item, c in zip(served, v.committed, strict=False):  # (served is not longer)
        event = item if reader == "read" else item.event
        if reader == "lines" and (item.offset, item.raw) != (c.offset, c.raw):
            return findings.add(
                reader, inp, f"line at {item.offset} differs from the committed line at {c.offset}"
            )
        if (p := event_problem(event, c.event, c.raw)) is not None:
            return findings.add(reader, inp, f"seq {c.event['seq']}: {p}")
    if v.state == "corrupt":
        if (p := corrupt_problem(out.error, v)) is not None:
            findings.add(reader, inp, p)
    elif out.error is not None:
        findings.add(
            reader,
            inp,
            f"raised {type(out.error).__name__}: {out.error}; "
            f"want {v.state}, {len(v.committed)} events",
        )
    elif len(served) != len(v.committed):
        findings.add(reader, inp, f"served {len(served)} of {len(v.committed)} committed events")
    return None


def test_verify_read_and_lines_give_the_classifier_verdict(
    corpus: tuple[Path, list[Input]],
) -> None:
    d, inputs = corpus
    work = d / "readers"
    work.mkdir(mode=0o700)
    path = work / "m.jsonl"
    findings = Findings(("verify", "read", "lines"))
    for inp in inputs:
        if not _usable(inp):
            continue
        path.write_bytes(inp.data)
        findings.see(inp)
        _check_verify(inp, path, findings)
        _check_stream("read", inp, path, findings)
        _check_stream("lines", inp, path, findings)
    assert findings.inputs >= N_INPUTS * 0.99
    findings.finish()


# ----------------------------------------------------------------------------------------------
# fold: every input, six calls each, against the fold of the committed prefix alone


def _fold_error_problem(e: BaseException, inp: Input, path: Path) -> str | None:
    """Is ``e`` an error the spec documents for folding this (session) file?"""
    v = inp.verdict
    header = v.committed[0].event["data"] if v.committed else {}
    own = (
        e.path is None or Path(e.path).name == path.name if isinstance(e, JsonltapeError) else True
    )
    if (
        not own
        and "parent" in header
        and isinstance(
            e, (SessionNotFoundError, UnsafeFileError, CorruptError, FormatError, FoldError)
        )
    ):
        return None  # about an ancestor of a fork
    if isinstance(e, CorruptError):
        return None if v.state == "corrupt" else f"CorruptError on a {v.state} file: {e}"
    if isinstance(e, (UnknownEventTypeError, InvalidEventError, FoldError)):
        if (
            isinstance(e, JsonltapeError)
            and e.line is not None
            and own
            and e.line > len(v.committed)
        ):
            n = len(v.committed)
            return f"{type(e).__name__} names line {e.line}, past the {n} committed lines: {e}"
        return None
    if isinstance(e, SessionNotFoundError) and "parent" in header:
        return None
    if isinstance(e, FormatError) and "parent" in header and e.field == "$.data.parent":
        return None  # §8.7.8: the parent the fork names is not there as it was at the fork
    if isinstance(e, FormatError) and any(
        c.event["type"] == "session/start" for c in v.committed[1:]
    ):
        return None  # §8.7.1 step 1: "a session/start at any other seq is an error"
    return f"{type(e).__name__} is not a fold error for a {v.state} file: {e}"


def _fold_calls(inp: Input, rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    n = len(inp.verdict.committed)
    calls: list[tuple[str, dict[str, Any]]] = [(f, {"format": f}) for f in FOLD_FORMATS]
    calls.append(("all_versions", {"all_versions": True}))
    calls.append(("at", {"at": rng.randrange(n) if n else 0}))
    calls.append(("at-uncommitted", {"at": n}))
    return calls


def test_fold_serves_the_committed_prefix_or_a_documented_error(
    corpus: tuple[Path, list[Input]],
) -> None:
    d, inputs = corpus
    path, prefix_path = d / "m.jsonl", d / "p.jsonl"  # beside the bases: forks find parents
    findings = Findings(("messages",))
    rng = random.Random(SEED + 1)
    cache: dict[tuple[bytes, str, str], Any] = {}
    for inp in inputs:
        if not _usable(inp):
            continue
        v = inp.verdict
        findings.see(inp)
        path.write_bytes(inp.data)
        prefix = inp.data[: v.committed_bytes]
        for label, kw in _fold_calls(inp, rng):
            out = attempt(functools.partial(jsonltape.messages, path, **kw))
            what = f"messages({label}={kw})"
            if (p := foreign(out)) is not None:
                findings.add("messages", inp, f"{what}: {p}")
                continue
            if too_deep(out, v):
                continue
            if v.state == "not-a-session":
                if (p := refusal_problem(out, v)) is not None:
                    findings.add("messages", inp, f"{what}: {p}")
                continue
            if out.error is not None and (p := _fold_error_problem(out.error, inp, path)):
                findings.add("messages", inp, f"{what}: {p}")
                continue
            if label == "at-uncommitted" and out.error is None:
                findings.add(
                    "messages",
                    inp,
                    f"{what}: folded as of seq {kw['at']}, which is not committed ({v.state})",
                )
                continue
            if v.state in ("clean", "open-turn"):
                continue  # the committed prefix is the whole file
            ck = (prefix, label, json.dumps(kw))
            if ck not in cache:
                prefix_path.write_bytes(prefix)
                cache[ck] = attempt(functools.partial(jsonltape.messages, prefix_path, **kw)).key(
                    prefix_path
                )
            want = cache[ck]
            got = out.key(path)
            if v.state == "corrupt" and corrupt_problem(out.error, v) is None:
                continue  # corrupt refused at B
            if v.state == "corrupt" and out.error is None and label != "at":
                findings.add(
                    "messages",
                    inp,
                    f"{what}: folded a corrupt file (B at line {v.line}) without an error",
                )
            elif not (got == want or same_json(got, want)):
                findings.add(
                    "messages",
                    inp,
                    f"{what}: {str(got)[:300]}\n"
                    f"      but the committed prefix alone gives {str(want)[:300]}",
                )
    assert findings.inputs >= N_INPUTS * 0.99
    findings.finish()


# ----------------------------------------------------------------------------------------------
# export: a sample, every format


def test_export_in_every_format_follows_the_verdict(corpus: tuple[Path, list[Input]]) -> None:
    d, inputs = corpus
    path, prefix_path = d / "e.jsonl", d / "ep.jsonl"
    findings = Findings(("export",))
    for inp in _sample(inputs, N_EXPORT, 2):
        v = inp.verdict
        findings.see(inp)
        path.write_bytes(inp.data)
        prefix_path.write_bytes(inp.data[: v.committed_bytes])
        for fmt in EXPORT_FORMATS:
            out = attempt(functools.partial(jsonltape.interop.export, path, fmt))
            what = f"export({fmt})"
            if (p := foreign(out)) is not None:
                findings.add("export", inp, f"{what}: {p}")
                continue
            if too_deep(out, v):
                continue
            if v.state == "not-a-session":
                if (p := refusal_problem(out, v)) is not None:
                    findings.add("export", inp, f"{what}: {p}")
                continue
            if out.error is not None:
                if v.state == "corrupt" and corrupt_problem(out.error, v) is None:
                    continue
                if (p := _fold_error_problem(out.error, inp, path)) is not None:
                    findings.add("export", inp, f"{what}: {p}")
                    continue
            if v.state == "corrupt" and out.error is None:
                findings.add(
                    "export",
                    inp,
                    f"{what}: exported a corrupt file (B at line {v.line}) without an error",
                )
                continue
            if v.state == "torn-tail":
                want = attempt(functools.partial(jsonltape.interop.export, prefix_path, fmt))
                # The data formats must equal the prefix's; the transcripts differ in their notes.
                same_text = fmt in ("markdown", "html") or out.error or want.error
                same_text = same_text or out.value.text == want.value.text
                if (out.error is None) != (want.error is None) or not same_text:
                    findings.add(
                        "export",
                        inp,
                        f"{what} of a torn-tail file differs from the export of its committed "
                        f"prefix ({out.error or 'ok'} vs {want.error or 'ok'})",
                    )
                elif out.error is None and not any("torn" in n for n in out.value.notes):
                    findings.add("export", inp, f"{what}: a torn tail was cut without a note")
    findings.finish()


# ----------------------------------------------------------------------------------------------
# repair: a sample, on copies


def _check_repaired(inp: Input, path: Path, before: bytes, keep: int, findings: Findings) -> None:
    after = path.read_bytes()
    if after[:keep] != before[:keep]:
        return findings.add("repair", inp, f"changed committed bytes before offset {keep}")
    v2 = classify(after)
    if v2.state != "clean":
        return findings.add(
            "repair", inp, f"the repaired file is {v2.state} (line {v2.line}), not clean"
        )
    added = [c.event["type"] for c in v2.committed if c.offset >= keep]
    allowed = {"tool/result", "step/end", "turn/end", "session/flush"}
    if not set(added) <= allowed:
        return findings.add("repair", inp, f"appended {added}")
    again = attempt(lambda: jsonltape.repair(path))
    if (p := foreign(again)) is not None or again.error is not None:
        return findings.add("repair", inp, f"a second repair failed: {p or again.error}")
    if path.read_bytes() != after:
        findings.add("repair", inp, "a second repair changed the file (repair is idempotent)")
    return None


def test_repair_never_cuts_committed_bytes_and_keeps_the_cut(
    corpus: tuple[Path, list[Input]],
) -> None:
    d, inputs = corpus
    findings = Findings(("repair",))
    for k, inp in enumerate(_sample(inputs, N_REPAIR, 3)):
        v = inp.verdict
        findings.see(inp)
        work = d / f"repair-{k}"
        work.mkdir(mode=0o700)
        path = work / "s.jsonl"
        path.write_bytes(inp.data)
        os.chmod(path, 0o600)
        out = attempt(functools.partial(jsonltape.repair, path))
        if (p := foreign(out)) is not None:
            findings.add("repair", inp, p)
        elif too_deep(out, v) or v.state == "not-a-session":
            if not too_deep(out, v) and (p := refusal_problem(out, v)) is not None:
                findings.add("repair", inp, p)
            elif path.read_bytes() != inp.data:
                findings.add("repair", inp, "changed a file it refused")
        elif v.state == "corrupt":
            if (p := corrupt_problem(out.error, v)) is not None:
                findings.add("repair", inp, f"unforced: {p}")
            elif path.read_bytes() != inp.data:
                findings.add("repair", inp, "changed a corrupt file without force")
            else:
                forced = attempt(functools.partial(jsonltape.repair, path, force=True))
                _check_cut(inp, path, forced, findings)
        elif v.state == "torn-tail":
            _check_cut(inp, path, out, findings)
        elif out.error is not None:
            findings.add(
                "repair", inp, f"raised {type(out.error).__name__} on a {v.state} file: {out.error}"
            )
        else:
            _check_repaired(inp, path, inp.data, len(inp.data), findings)
        shutil.rmtree(work)
    findings.finish()


def _check_cut(inp: Input, path: Path, out: Outcome, findings: Findings) -> None:
    v = inp.verdict
    assert v.offset is not None
    if (p := foreign(out)) is not None or out.error is not None:
        return findings.add("repair", inp, p or f"raised {type(out.error).__name__}: {out.error}")
    result = out.value
    if result.cut_offset != v.offset:
        return findings.add("repair", inp, f"cut at {result.cut_offset}; B is at {v.offset}")
    if result.sidecar is None or Path(result.sidecar).read_bytes() != inp.data[v.offset :]:
        return findings.add("repair", inp, "the sidecar does not hold exactly the cut bytes")
    if Path(result.sidecar).name.endswith(".jsonl"):
        return findings.add("repair", inp, f"sidecar {result.sidecar} ends in .jsonl (§3)")
    return _check_repaired(inp, path, inp.data, v.offset, findings)


# ----------------------------------------------------------------------------------------------
# index ingest: a sample, in batches beside a healthy session


def test_index_ingest_lists_every_file_and_indexes_the_committed_events(
    corpus: tuple[Path, list[Input]],
) -> None:
    d, inputs = corpus
    findings = Findings(("index",))
    sample = _sample(inputs, N_INDEX, 4)
    healthy_src = d / "closed.jsonl"
    for b in range(0, len(sample), INDEX_BATCH):
        batch = sample[b : b + INDEX_BATCH]
        root = d / f"index-{b}"
        root.mkdir(mode=0o700)
        for k, inp in enumerate(batch):
            findings.see(inp)
            (root / f"f{k}.jsonl").write_bytes(inp.data)
            os.chmod(root / f"f{k}.jsonl", 0o600)
        shutil.copyfile(healthy_src, root / "healthy.jsonl")
        os.chmod(root / "healthy.jsonl", 0o600)
        store = SqliteStore(d / f"index-{b}.db")
        try:
            out = attempt(functools.partial(_rescan, store, root))
            if out.error is not None:
                for inp in batch:
                    findings.add(
                        "index",
                        inp,
                        f"rescan raised {type(out.error).__name__}: {out.error!s:.300}",
                    )
                continue
            _check_index(store.con, root, batch, findings)
        finally:
            store.close()
    findings.finish()


def _rescan(store: SqliteStore, root: Path) -> Any:
    return Ingestor(store, root).rescan()


def _check_index(
    con: sqlite3.Connection, root: Path, batch: list[Input], findings: Findings
) -> None:
    files = {
        Path(p).name: (sid, status, error)
        for p, sid, status, error in con.execute("SELECT path, sid, status, error FROM files")
    }
    healthy = classify((root / "healthy.jsonl").read_bytes())
    hsid = files.get("healthy.jsonl", (None,))[0]
    n = con.execute("SELECT count(*) FROM events WHERE sid = ?", (hsid,)).fetchone()[0]
    if n != len(healthy.committed):
        for inp in batch:
            findings.add(
                "index",
                inp,
                f"the healthy neighbour has {n} of {len(healthy.committed)} events indexed",
            )
    for k, inp in enumerate(batch):
        v = inp.verdict
        name = f"f{k}.jsonl"
        if name not in files:
            findings.add("index", inp, "the file is not listed in files")
            continue
        sid, status, error = files[name]
        if v.state == "not-a-session":
            pending = status == "pending" and b"\n" not in inp.data
            if not pending and (status not in ("foreign", "error") or not error or sid is not None):
                findings.add(
                    "index",
                    inp,
                    f"not a session ({v.error}) listed as {status!r} with error {error!r}, "
                    f"sid {sid}",
                )
            continue
        if status != "indexed" or sid is None:
            findings.add("index", inp, f"a {v.state} session listed as {status!r} ({error!r})")
            continue
        state, events, error = con.execute(
            "SELECT state, events, error FROM sessions WHERE sid = ?", (sid,)
        ).fetchone()
        rows = con.execute(
            "SELECT seq, offset, size, crc FROM events WHERE sid = ? ORDER BY seq", (sid,)
        ).fetchall()
        deep_at = min((off for _, off in v.deep), default=None)
        # the crc member is the last 8 characters before `"}\n`
        want = [(c.event["seq"], c.offset, len(c.raw), c.raw[-11:-3].decode()) for c in v.committed]
        if deep_at is not None and error and "deep" in error:
            want = [w for w in want if w[1] < deep_at]
        got = [tuple(r) for r in rows]
        if deep_at is not None and error and "deep" in error:
            if got != want:  # §6: indexing stops at a line too deep to decode, never damage
                findings.add(
                    "index",
                    inp,
                    f"{len(got)} event rows; want the {len(want)} lines before the deep one",
                )
        elif state != v.state:
            findings.add("index", inp, f"sessions.state {state!r}; want {v.state!r}")
        elif got != want:
            findings.add(
                "index",
                inp,
                f"{len(got)} event rows (events={events}); want the {len(want)} committed lines",
            )
        elif v.state in ("torn-tail", "corrupt") and not error:
            findings.add("index", inp, f"a {v.state} file listed without an error")
