"""A slow, obviously correct classifier of jsonltape files, written from the spec text alone.

This is the oracle of the differential fuzz test (tests/test_fuzz_differential.py) and of the
JavaScript cross-check: it reads spec/jsonltape-v1.md §4-§7 and §10.2 literally, with nothing
but ``zlib.crc32``, strict ``bytes.decode("utf-8")`` and the ``json`` module with strict hooks.
It shares no code with the library: speed does not matter, clarity does.

The rules it applies, each from the spec:

- §4: a line is the bytes up to and including a ``\\n``; a final fragment without one is not
  committed. A line that is not valid UTF-8 anywhere, whose JSON holds an escaped lone surrogate
  anywhere (member names included), or a number a double cannot hold (``1e400``) anywhere, is
  bad. NaN and Infinity are not JSON. "Integer" is a number without fraction or exponent.
- §5: a line starts with ``{`` and ends in ``,"crc":"xxxxxxxx"}\\n`` (8 lowercase hex digits),
  the CRC-32 of every byte before the suffix.
- §6: the envelope's member types; ``surface``, ``sources`` and ``key`` may be ``null``; the
  ranges: ``seq`` 0 … 2^53−1, ``time`` 0 … 253402300799999, ``sources`` items and a surface
  object's ``start``/``end`` 0 … 2^53−1. Unknown members are allowed (and checked by §4).
- §7: the header and the type of every member of its table (``null`` is a wrong type).
- §8.7.14 (1.2): a ``branch/start`` or ``branch/event`` line has the shape given there: its
  members and their types, ``ignorable: true`` and no surface, the receipt's counts, and a
  record's ``line`` (the bytes of that member's value as stored) a good line on its own whose
  seq and crc are its ``origin`` and whose type a merge records.
- §10.2: good lines, B, witnesses, valid checkpoints, and the five verdicts.

Two things the spec leaves to implementations are reported rather than decided:
``duplicate`` (a repeated member name in a line that passes its checksum: §4 lets a reader
treat the line as bad or keep the last value) and ``deep`` (lines nesting deeper than 128
levels: §6 lets a reader refuse the file with an error naming the line, never treat it as
damage). For ``deep`` lines the verdict is the one a parser that can follow them gives.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

MAX_SAFE = 2**53 - 1
MAX_TIME = 253402300799999  # 9999-12-31T23:59:59.999Z
MAX_DEPTH = 128
HEX = frozenset(b"0123456789abcdef")
SUFFIX_HEAD = b',"crc":"'

#: The header members of the §7 table with their types (``format``, ``version``, ``id`` and
#: ``created`` are checked on their own).
HEADER_STRINGS = ("title", "cwd", "agent")


class _Bad(Exception):
    """A rule of §4 broken while decoding (the line is bad)."""


@dataclass(frozen=True)
class Parsed:
    """What the good-line test found on one line (position not yet compared)."""

    event: dict[str, Any] | None  # the decoded envelope, when it is one (§6, §10.2)
    reason: str  # why not, when it is not
    depth: int = 0  # nesting depth, the envelope counting as one
    duplicate: bool = False  # a member name repeated somewhere in the line


@dataclass(frozen=True)
class Committed:
    """A committed line: where it starts, its bytes (with the ``\\n``), its decoded envelope."""

    offset: int
    raw: bytes
    event: dict[str, Any]


@dataclass
class Verdict:
    """The per-file verdict of §10.2 (or §7 when the file is not a session)."""

    state: str  # clean | open-turn | torn-tail | corrupt | not-a-session
    error: str | None = None  # not-jsonltape | unsupported-version, for not-a-session
    committed: list[Committed] = field(default_factory=list)
    line: int | None = None  # 1-based line number of B
    offset: int | None = None  # byte offset of B
    open_turn: int | None = None  # seq of the open turn/start at the end of the committed lines
    closed: bool = False  # the last committed line is a valid checkpoint with closed: true
    deep: list[tuple[int, int]] = field(default_factory=list)  # (line, offset) deeper than 128
    duplicate: bool = False  # some line that passes its checksum repeats a member name

    @property
    def committed_bytes(self) -> int:
        return self.offset if self.offset is not None else sum(len(c.raw) for c in self.committed)


# ----------------------------------------------------------------------------------------------
# §4: strict JSON


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Bad(f"number {text[:20]} is beyond a double")
    return value


def _int(text: str) -> int:
    # float() of a decimal string never raises: it is inf when no double holds the number.
    if math.isinf(float(text)):
        raise _Bad("integer beyond a double")
    return int(text)


def _constant(name: str) -> Any:
    raise _Bad(f"{name} is not JSON")


def _strings_and_depth(value: Any) -> int:
    """Check every string (member names included) for surrogates; return the nesting depth."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            _no_surrogate(v)
        elif isinstance(v, dict):
            deepest = max(deepest, depth)
            for k, item in v.items():
                _no_surrogate(k)
                stack.append((item, depth + 1))
        elif isinstance(v, list):
            deepest = max(deepest, depth)
            stack.extend((item, depth + 1) for item in v)
    return deepest


def _no_surrogate(s: str) -> None:
    # Raw UTF-8 cannot hold a surrogate (strict decoding refuses it) and json joins escaped
    # pairs, so any surrogate left in a decoded string came from an escaped lone one.
    if any("\ud800" <= ch <= "\udfff" for ch in s):
        raise _Bad("lone surrogate escape")


@contextmanager
def _deep_recursion() -> Iterator[None]:
    """The json module recurses per level; let it follow the deep lines the fuzz writes."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 50_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def decode(text: str) -> tuple[Any, bool]:
    """Decode one JSON text by the rules of §4; return the value and whether a name repeated."""
    duplicate = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal duplicate
        out = dict(items)  # the last value wins, like the implementations that keep one
        duplicate = duplicate or len(out) != len(items)
        return out

    value = json.loads(
        text,
        object_pairs_hook=pairs,
        parse_float=_float,
        parse_int=_int,
        parse_constant=_constant,
    )
    return value, duplicate


# ----------------------------------------------------------------------------------------------
# §5 + §6: the good-line test, without the position


def _integer(v: Any, low: int, high: int) -> bool:
    return type(v) is int and low <= v <= high


def _envelope_problem(ev: dict[str, Any]) -> str | None:
    if not _integer(ev.get("seq"), 0, MAX_SAFE):
        return "seq is not an integer in 0 ... 2^53-1"
    if type(ev.get("type")) is not str:
        return "type is not a string"
    if not _integer(ev.get("time"), 0, MAX_TIME):
        return "time is not an integer in 0 ... 253402300799999"
    if type(ev.get("data")) is not dict:
        return "data is not an object"
    surface = ev.get("surface")
    if (
        surface is not None
        and surface != "append"
        and not (
            type(surface) is dict
            and surface.get("op") in ("replace", "retract")
            and _integer(surface.get("start"), 0, MAX_SAFE)
            and _integer(surface.get("end"), 0, MAX_SAFE)
        )
    ):
        return "surface is not append, replace or retract with start/end in range"
    sources = ev.get("sources")
    if sources is not None and not (
        type(sources) is list and all(_integer(s, 0, MAX_SAFE) for s in sources)
    ):
        return "sources is not an array of integers in range"
    if ev.get("key") is not None and type(ev["key"]) is not str:
        return "key is not a string"
    if "ignorable" in ev and type(ev["ignorable"]) is not bool:
        return "ignorable is not a boolean"
    return None


@functools.lru_cache(maxsize=1 << 16)  # fuzzed files share most of their lines
def parse_line(raw: bytes) -> Parsed:
    """The good-line test of §10.2 on one line (with its ``\\n``), except the seq position."""
    if not raw.endswith(b"\n"):
        return Parsed(None, "no newline: not committed")
    if len(raw) < 20 or raw[:1] != b"{":
        return Parsed(None, "does not start with {")
    if raw[-19:-11] != SUFFIX_HEAD or raw[-3:] != b'"}\n' or not set(raw[-11:-3]) <= HEX:
        return Parsed(None, "no crc suffix")
    if zlib.crc32(raw[:-19]) != int(raw[-11:-3], 16):
        return Parsed(None, "crc mismatch")
    try:
        text = raw[:-1].decode("utf-8")
    except UnicodeDecodeError:
        return Parsed(None, "not UTF-8")
    duplicate = False
    try:
        with _deep_recursion():
            value, duplicate = decode(text)
        depth = _strings_and_depth(value)
    except _Bad as exc:
        return Parsed(None, str(exc), duplicate=duplicate)
    except ValueError as exc:  # json.JSONDecodeError
        return Parsed(None, f"not JSON: {exc}", duplicate=duplicate)
    if type(value) is not dict:
        return Parsed(None, "not an object", depth, duplicate)
    problem = _envelope_problem(value)
    if problem is None and value["type"] in ("branch/start", "branch/event"):
        with _deep_recursion():
            problem = _branch_problem(value, text)
    if problem is not None:
        return Parsed(None, problem, depth, duplicate)
    return Parsed(value, "", depth, duplicate)


# ----------------------------------------------------------------------------------------------
# §8.7.14 (1.2): the shape of a merge's branch records, part of the good-line test

_CRC = re.compile("[0-9a-f]{8}")
_SHA256 = re.compile("[0-9a-f]{64}")
_NEVER_RECORDED = ("session/flush", "branch/start", "branch/event")
_WS = re.compile(r"[ \t\n\r]*")
_VALUE = json.JSONDecoder()


def _hex(v: Any, pattern: re.Pattern[str]) -> bool:
    return type(v) is str and pattern.fullmatch(v) is not None


def _member_spans(text: str, at: int) -> dict[str, tuple[int, int]]:
    """Where the value of each member of the object at ``text[at]`` (valid JSON) starts and
    ends in ``text``; a repeated name keeps its last value, as ``decode`` does."""
    out: dict[str, tuple[int, int]] = {}
    i = _WS.match(text, at + 1).end()
    while text[i] != "}":
        name, i = json.decoder.scanstring(text, i + 1)
        i = _WS.match(text, _WS.match(text, i).end() + 1).end()
        _value, end = _VALUE.raw_decode(text, i)
        out[name] = (i, end)
        i = _WS.match(text, end).end()
        if text[i] == ",":
            i = _WS.match(text, i + 1).end()
    return out


def _branch_problem(ev: dict[str, Any], text: str) -> str | None:
    d = ev["data"]
    if ev.get("ignorable") is not True or ev.get("surface") is not None:
        return "a branch record is ignorable: true and has no surface"
    if ev["type"] == "branch/start":
        lines, sha = d.get("lines"), d.get("sha256")
        if not all(_integer(d.get(k), 0, MAX_SAFE) for k in ("at", "head", "count")):
            return "branch/start: at, head, count are seqs"
        if not _hex(d.get("crc"), _CRC) or type(lines) is not list:
            return "branch/start: crc, lines"
        if not all(_hex(c, _CRC) for c in lines):
            return "branch/start: lines are crcs"
        if d.get("source") is not None and type(d["source"]) is not str:
            return "branch/start: source is a string"
        if sha is not None and not (type(sha) is list and all(_hex(h, _SHA256) for h in sha)):
            return "branch/start: sha256 holds SHA-256 digests"
        if not d["at"] < d["head"] or d["at"] >= ev["seq"]:
            return "branch/start: at < head, at < its seq"
        if len(lines) != d["head"] - d["at"] or lines[-1] != d["crc"]:
            return "branch/start: head - at lines, the last one crc"
        if sha is not None and len(sha) != len(lines):
            return "branch/start: one sha256 per line"
        return None
    origin = d.get("origin")
    if not _integer(d.get("branch"), 0, MAX_SAFE) or type(origin) is not dict:
        return "branch/event: branch, origin"
    if not _integer(origin.get("seq"), 0, MAX_SAFE) or not _hex(origin.get("crc"), _CRC):
        return "branch/event: origin {seq, crc}"
    if type(d.get("line")) is not dict:
        return "branch/event: line is an object"
    if d["branch"] >= ev["seq"]:
        return "branch/event: branch comes before it"
    start, _end = _member_spans(text, 0)["data"]
    first, last = _member_spans(text, start)["line"]
    raw = text[first:last].encode("utf-8") + b"\n"
    inner = parse_line(raw)
    if inner.event is None:
        return f"branch/event: its line is not good: {inner.reason}"
    if inner.event["type"] in _NEVER_RECORDED:
        return "branch/event: a merge never records that type"
    if inner.event["seq"] != origin["seq"] or raw[-11:-3].decode() != origin["crc"]:
        return "branch/event: origin is not its line's seq and crc"
    return None


def valid_checkpoint(ev: dict[str, Any], offset: int) -> bool:
    """§10.2: a good session/flush whose data has the shape of §8.5 (with 1.1's span) and
    its own offset."""
    d = ev["data"]
    if ev["type"] != "session/flush":
        return False
    if type(d.get("offset")) is not int or type(d.get("seq")) is not int:
        return False
    turn = d.get("turn")
    if turn is not None and not (
        type(turn) is dict and type(turn.get("seq")) is int and type(turn.get("offset")) is int
    ):
        return False
    if "closed" in d and type(d["closed"]) is not bool:
        return False
    span = d.get("span")  # format 1.1: absent or null, or {from: 0..offset, crc: 8 hex}
    if span is not None and not (
        type(span) is dict
        and type(span.get("from")) is int
        and 0 <= span["from"] <= d["offset"]
        and type(span.get("crc")) is str
        and len(span["crc"]) == 8
        and all(c in "0123456789abcdef" for c in span["crc"])
    ):
        return False
    return bool(d["offset"] == offset)


# ----------------------------------------------------------------------------------------------
# §7: the header


def header_error(ev: dict[str, Any] | None) -> str | None:
    """Why line 1 does not start a session (``not-jsonltape`` / ``unsupported-version``)."""
    if ev is None or ev["seq"] != 0 or ev["type"] != "session/start":
        return "not-jsonltape"
    d = ev["data"]
    if d.get("format") != "jsonltape" or type(d.get("format")) is not str:
        return "not-jsonltape"
    # "format and version before anything else": a wrong version wins over other members.
    if type(d.get("version")) is not int or d["version"] != 1:
        return "unsupported-version"
    if type(d.get("id")) is not str:
        return "not-jsonltape"
    if not _integer(d.get("created"), 0, MAX_TIME):
        return "not-jsonltape"
    if "minor" in d and type(d["minor"]) is not int:
        return "not-jsonltape"
    for name in HEADER_STRINGS:
        if name in d and type(d[name]) is not str:
            return "not-jsonltape"
    if "meta" in d and type(d["meta"]) is not dict:
        return "not-jsonltape"
    if "parent" in d:
        p = d["parent"]
        if type(p) is not dict or type(p.get("session")) is not str:
            return "not-jsonltape"
        if not _integer(p.get("seq"), 0, MAX_SAFE):  # a seq (§6), of the parent
            return "not-jsonltape"
        for name in ("path", "crc"):
            if name in p and type(p[name]) is not str:
                return "not-jsonltape"
    return None


# ----------------------------------------------------------------------------------------------
# §10.2: the file


def split_lines(data: bytes) -> list[tuple[int, bytes]]:
    """``(offset, bytes)`` of every line, the last one possibly without its ``\\n``."""
    out: list[tuple[int, bytes]] = []
    start = 0
    while start < len(data):
        nl = data.find(b"\n", start)
        end = len(data) if nl < 0 else nl + 1
        out.append((start, data[start:end]))
        start = end
    return out


def classify(data: bytes) -> Verdict:
    """The verdict of §10.2 for a whole file's bytes."""
    lines = split_lines(data)
    parsed = [parse_line(raw) for _, raw in lines]
    verdict = Verdict(state="clean")
    verdict.duplicate = any(p.duplicate for p in parsed)
    verdict.deep = [
        (i + 1, off)
        for i, ((off, _), p) in enumerate(zip(lines, parsed, strict=True))
        if p.depth > MAX_DEPTH
    ]
    if not lines:
        verdict.state, verdict.error = "not-a-session", "not-jsonltape"
        return verdict
    error = header_error(parsed[0].event)
    if error is not None:
        verdict.state, verdict.error = "not-a-session", error
        return verdict
    bad: int | None = None
    for i, ((off, raw), p) in enumerate(zip(lines, parsed, strict=True)):
        if p.event is None or p.event["seq"] != i:
            bad = i
            break
        verdict.committed.append(Committed(off, raw, p.event))
    turn: int | None = None
    for c in verdict.committed:
        if c.event["type"] == "turn/start":
            turn = c.event["seq"]
        elif c.event["type"] == "turn/end":
            turn = None
    last = verdict.committed[-1]
    verdict.open_turn = turn
    verdict.closed = (
        valid_checkpoint(last.event, last.offset) and last.event["data"].get("closed") is True
    )
    if bad is None:
        verdict.state = "clean" if turn is None or verdict.closed else "open-turn"
        return verdict
    verdict.line, verdict.offset = bad + 1, lines[bad][0]
    witness = any(
        p.event is not None and p.event["type"] == "session/flush" for p in parsed[bad + 1 :]
    )
    verdict.state = "corrupt" if witness else "torn-tail"
    return verdict
