"""Property test of the three-way merge (the pure function, no git): random appends on two or
three branches and random merges between them, git-like (each merge's ancestor is a common
ancestor of its sides, sometimes a virtual one merged from two, as git's ``recursive``
does). Every result verifies clean, holds every line of both sides (by its bytes) exactly
once, is the same bytes when merged again, merging it again adds nothing, and the version a
receipt names rebuilds to what that side folds to.

A collaborator on a branch also commits what he likes: forged records (a well-formed
``branch/event`` whose line has another branch's line's seq and CRC-32 but his own text) and
malformed records. A forgery never makes a line of the other side disappear nor a rebuilt
version show it; a malformed record makes every merge with that branch a conflict naming it.
"""

from __future__ import annotations

import json
import tempfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import _framing
from jsonltape._scan import scan_full
from jsonltape.fold._branches import fold_their
from jsonltape.git._merge import Conflict, Merged, _memfd, merge_versions

from ._records import forge_record, held_lines, malformed_record
from .test_spec_schema import errors, validators

_enc = msgspec.json.Encoder()
_HEADER = {"format": "jsonltape", "version": 1, "minor": 1, "id": "prop", "created": 1}
BOOKKEEPING = {"session/flush", "branch/start"}
__all__ = ["validators"]  # the fixture, imported for the schema test


def _line(obj: dict[str, Any]) -> bytes:
    return _framing.frame(_enc.encode(obj))


def new_session() -> bytes:
    return _line({"seq": 0, "type": "session/start", "time": 1, "data": _HEADER})


def extend(data: bytes, texts: list[str]) -> bytes:
    """``data`` plus one user message per text and a checkpoint with its span, as a writer
    appends them."""
    last = json.loads(data.splitlines()[-1])
    seq, time = last["seq"], last["time"]
    flush = data.rfind(b'"type":"session/flush"')
    span_from = data.find(b"\n", flush) + 1 if flush >= 0 else data.find(b"\n") + 1
    out = [data]
    for text in texts:
        seq += 1
        time += 1
        msg = {"id": f"m{seq}", "role": "user", "parts": [{"type": "text", "content": text}]}
        out.append(
            _line(
                {
                    "seq": seq,
                    "type": "user/message",
                    "time": time,
                    "data": {"message": msg},
                    "surface": "append",
                }
            )
        )
    body = b"".join(out)
    crc = zlib.crc32(body[span_from:])
    span = {"from": span_from, "crc": f"{crc:08x}"}
    ck = {"offset": len(body), "seq": seq, "span": span}
    flush_line = {"seq": seq + 1, "type": "session/flush", "time": time, "data": ck}
    return body + _line({**flush_line, "ignorable": True})


def identities(data: bytes) -> Counter[tuple[int, str]]:
    """Every line's name (seq, crc) as first written — a branch/event's origin — with how
    often the file holds it; bookkeeping left out."""
    out: Counter[tuple[int, str]] = Counter()
    for raw in data.splitlines():
        line = json.loads(raw)
        if line["type"] in BOOKKEEPING:
            continue
        if line["type"] == "branch/event":
            out[(line["data"]["origin"]["seq"], line["data"]["origin"]["crc"])] += 1
        else:
            out[(line["seq"], line["crc"])] += 1
    return out


def texts(path: Path, receipt: int | None = None) -> list[str]:
    """The texts of the model-visible history of ``path`` (of the version ``receipt`` names)."""
    if receipt is None:
        items = jsonltape.messages(path)["messages"]
    else:
        items = [json.loads(n.data) for n in fold_their(path, receipt)[1].current()]
    return [p["content"] for m in items for p in m["message"]["parts"] if "content" in p]


def state(data: bytes) -> str:
    import os

    fd = _memfd(data)
    try:
        return scan_full(fd, "merged").state
    finally:
        os.close(fd)


class World:
    """Versions as a DAG: each has an id, its bytes and the set of its ancestors (itself
    included); a branch points at one version. A version holding a malformed record is
    ``poisoned``: every merge with it is a conflict."""

    def __init__(self, branches: int) -> None:
        root = extend(new_session(), ["root"])
        self.data: list[bytes] = [root]
        self.ancestors: list[set[int]] = [{0}]
        self.heads = [0] * branches
        self.poisoned: set[int] = set()

    def add(self, data: bytes, parents: list[int]) -> int:
        self.data.append(data)
        vid = len(self.data) - 1
        self.ancestors.append({vid}.union(*(self.ancestors[p] for p in parents)))
        return vid

    def common(self, a: int, b: int) -> list[int]:
        shared = self.ancestors[a] & self.ancestors[b]
        # the best common ancestors: those no other common ancestor descends from
        return sorted(c for c in shared if not any(c in self.ancestors[d] - {d} for d in shared))


def _ancestor(world: World, a: int, b: int, virtual: bool) -> bytes:
    bases = world.common(a, b)
    if not virtual or len(bases) < 2:
        return world.data[bases[-1]]
    c1, c2 = bases[-2], bases[-1]
    c0 = world.common(c1, c2)[-1]
    got = merge_versions(world.data[c0], world.data[c1], world.data[c2])
    assert isinstance(got, Merged), got
    return got.result


#: What a branch does in a round: appends (``count`` messages), forges a record of the last
#: message another branch (``other``) wrote, or commits a malformed record (rarely).
actions = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("forge"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("malform"), st.integers(0, 2), st.just(0)),
)
#: Rounds: some actions on some branches, then one merge (into, from, use a virtual ancestor
#: when there are two best ones, and whether the other branch merges the first at the same
#: time: a criss-cross, after which the two have two best common ancestors).
rounds = st.lists(
    st.tuples(
        st.lists(actions, min_size=0, max_size=3),
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.booleans(), st.booleans()),
    ),
    min_size=1,
    max_size=8,
)


def _act(world: World, branches: int, action: tuple[str, int, int], n: int) -> int:
    """Do ``action`` on its branch; return how many messages were written so far."""
    kind, k, x = action
    k %= branches
    head = world.heads[k]
    if kind == "append":
        data = extend(world.data[head], [f"b{k} e{n + i}" for i in range(x)])
        n += x
    elif kind == "forge":
        victims = [v for v in world.data[world.heads[x % branches]].splitlines() if b'"e' in v]
        if not victims or b'"type":"user/message"' not in victims[-1]:
            return n
        data = forge_record(world.data[head], victims[-1], f"forged by b{k}")
    elif world.data[head].count(b"\n") < 3 or len(world.poisoned) > 1:
        return n  # (a world of only poisoned branches would test nothing more)
    else:
        data = malformed_record(world.data[head])
    vid = world.add(data, [head])
    if kind == "malform" or head in world.poisoned:
        world.poisoned.add(vid)
    world.heads[k] = vid
    return n


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(branches=st.integers(2, 3), steps=rounds)
def test_random_appends_forgeries_and_merges_keep_every_line_once(
    branches: int, steps: list[tuple[list[tuple[str, int, int]], tuple[int, int, bool, bool]]]
) -> None:
    world = World(branches)
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for acts, (i, j, virtual, cross) in steps:
            for action in acts:
                n = _act(world, branches, action, n)
            i, j = i % branches, j % branches
            a, b = world.heads[i], world.heads[j]
            if a == b:
                continue
            world.heads[i] = _check_merge(world, a, b, virtual, f"b{j}", Path(tmp))
            if cross:
                world.heads[j] = _check_merge(world, b, a, virtual, f"b{i}", Path(tmp))


def _check_merge(world: World, a: int, b: int, virtual: bool, source: str, tmp: Path) -> int:
    """Merge version ``b`` into ``a``, check every property, return the result's id."""
    ours, theirs = world.data[a], world.data[b]
    if a in world.poisoned or b in world.poisoned:
        got = merge_versions(world.data[world.common(a, b)[-1]], ours, theirs, source=source)
        side = "ours" if a in world.poisoned else "theirs"
        assert isinstance(got, Conflict) and got.line.startswith(f"{side} is corrupt at line ")
        return a
    o = _ancestor(world, a, b, virtual)
    got = merge_versions(o, ours, theirs, source=source)
    assert isinstance(got, Merged), got
    assert merge_versions(o, ours, theirs, source=source) == got  # deterministic
    result = got.result
    assert state(result) == "clean"
    held, mine = held_lines(result), held_lines(ours)
    # Ours as it was, plus each line of theirs that ours did not hold, once: every line of
    # both sides is there, byte for byte (a forged record does not stand for the line whose
    # name it took), and the merge adds none twice (a side may hold one twice: a forger's).
    if got.outcome != "theirs":  # (theirs extends ours: the result is theirs, checked below)
        assert held == mine + Counter({x: 1 for x in held_lines(theirs) if x not in mine})
    assert result.startswith(ours)  # ours unchanged: theirs only recorded after it
    if got.outcome == "theirs":
        assert result == theirs
    if got.outcome == "branch":
        assert got.receipt is not None
        (tmp / "r.jsonl").write_bytes(result)
        (tmp / "t.jsonl").write_bytes(theirs)
        assert texts(tmp / "r.jsonl", got.receipt) == texts(tmp / "t.jsonl")  # rebuilt exactly
    # Merging again, either way round, adds nothing.
    again = merge_versions(theirs, result, theirs)
    assert isinstance(again, Merged) and again.outcome == "ours"
    back = merge_versions(theirs, theirs, result)
    assert isinstance(back, Merged) and set(held_lines(back.result)) == set(held)
    if b in world.ancestors[a]:
        assert got.outcome == "ours"
    return world.add(result, [a, b])


def test_a_side_that_lost_a_line_of_the_ancestor_is_a_conflict() -> None:
    base = extend(new_session(), ["one", "two"])
    ours = extend(base, ["three"])
    lines = base.splitlines(keepends=True)
    theirs = extend(b"".join(lines[:2]), ["other"])  # "two" and its checkpoint are gone
    got = merge_versions(base, ours, theirs)
    assert isinstance(got, Conflict)
    assert got.line.startswith("theirs lacks seq 2 of the ancestor (byte ")


def test_the_lines_a_merge_writes_validate_against_both_schemas(
    validators: tuple[Any, Any],
) -> None:
    base = extend(new_session(), ["one"])
    got = merge_versions(base, extend(base, ["ours"]), extend(base, ["theirs", "more"]))
    assert isinstance(got, Merged) and got.outcome == "branch"
    reader, writer = validators
    added = [json.loads(x) for x in got.result.splitlines()[len(base.splitlines()) + 2 :]]
    assert [e["type"] for e in added] == ["branch/start", *["branch/event"] * 2, "session/flush"]
    for e in added:
        assert errors(writer, e) == [], e
        assert errors(reader, e) == [], e
