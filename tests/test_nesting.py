"""Nesting depth (spec §6): writers refuse lines deeper than 128 levels; a line too deep for
the decoder is an error that names it, never damage to cut, and never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jsonltape
import jsonltape.interop
from jsonltape import _framing
from jsonltape._gate import MAX_DEPTH


def nested(levels: int) -> list[Any]:
    """``levels`` arrays, one inside the other."""
    v: list[Any] = []
    for _ in range(levels - 1):
        v = [v]
    return v


def test_data_nested_to_the_limit_is_written_and_one_more_level_is_refused_by_path(
    tape_path: Path,
) -> None:
    # The envelope is level 1 and data level 2, so data.v may hold MAX_DEPTH - 2 arrays.
    with jsonltape.open(tape_path, create=True) as tape:
        ok = tape.append("x.test/deep", {"v": nested(MAX_DEPTH - 2)}, ignorable=True)
        tape.flush()
        size = tape_path.stat().st_size
        for levels in (MAX_DEPTH - 1, 5000):
            with pytest.raises(jsonltape.NotLosslessError) as err:
                tape.append("x.test/deep", {"v": nested(levels)}, ignorable=True)
            assert err.value.field == "$.data.v" + "[0]" * (MAX_DEPTH - 2)
            assert "nest deeper than 128 levels" in err.value.message
        tape.flush()
        assert tape_path.stat().st_size == size
    assert [e.seq for e in jsonltape.read(tape_path)][-2] == ok.seq


def test_the_deepest_line_a_writer_accepts_reads_back_from_a_deep_call_stack(
    tape_path: Path,
) -> None:
    with jsonltape.open(tape_path, create=True) as tape:
        tape.append("x.test/deep", {"v": nested(MAX_DEPTH - 2)}, ignorable=True)

    def at_depth(n: int) -> int:
        if n == 0:
            return sum(1 for _ in jsonltape.read(tape_path))
        return at_depth(n - 1)

    assert at_depth(sys.getrecursionlimit() - 250) == 3  # header, event, closing checkpoint


def _too_deep_file(path: Path) -> tuple[bytes, int]:
    """A session with an intact (CRC-valid) line nested 3,000 deep, then a checkpoint-less
    tail; returns the file's bytes and the offset of the deep line."""
    with jsonltape.open(path, create=True, durability="manual") as tape:
        tape.user("before")
    at = path.stat().st_size
    with open(path, "ab") as f:
        body = b'{"seq":3,"type":"x.test/deep","time":1,"data":{"v":%b%b}}' % (
            b"[" * 3000,
            b"]" * 3000,
        )
        f.write(_framing.frame(body))
        f.write(_framing.frame(b'{"seq":4,"type":"x.test/after","time":1,"data":{}}'))
    return path.read_bytes(), at


def test_a_line_too_deep_to_decode_is_an_error_naming_it_and_never_cut(tape_path: Path) -> None:
    before, at = _too_deep_file(tape_path)
    calls = {
        "read": lambda: list(jsonltape.read(tape_path)),
        "lines": lambda: list(jsonltape.lines(tape_path)),
        "verify": lambda: jsonltape.verify(tape_path),
        "tail_scan": lambda: jsonltape.reader.tail_scan(tape_path),
        "open": lambda: jsonltape.open(tape_path).close(),
        "repair": lambda: jsonltape.repair(tape_path, force=True),
        "fold": lambda: jsonltape.fold.fold_file(tape_path),
    }
    for name, call in calls.items():
        with pytest.raises(jsonltape.FormatError) as err:
            call()
        assert err.value.offset == at, name
        assert err.value.line == 4, name
        assert "nest too deep to decode" in err.value.message, name
    assert tape_path.read_bytes() == before  # nothing cut, nothing appended


def test_the_cli_says_so_in_one_line(tape_path: Path) -> None:
    _too_deep_file(tape_path)
    for cmd in ("verify", "cat", "info", "repair", "messages", "export"):
        r = subprocess.run(
            [sys.executable, "-m", "jsonltape", cmd, str(tape_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, (cmd, r.stderr)
        assert r.stderr.count("\n") == 1 and "nest too deep to decode" in r.stderr, cmd
        assert "Traceback" not in r.stderr
    deep_stdin = b'{"type":"x.test/deep","data":{"v":%b%b}}\n' % (b"[" * 10**5, b"]" * 10**5)
    r = subprocess.run(
        [sys.executable, "-m", "jsonltape", "append", str(tape_path), "-"],
        input=deep_stdin,
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert (
        r.stderr == b"jsonltape: error: <stdin>: line 1: arrays and objects nest too deep to "
        b"decode (the format allows 128 levels)\n"
    )


def test_sync_indexes_what_comes_before_a_line_too_deep_and_goes_on(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir(mode=0o700)
    _too_deep_file(tree / "deep.jsonl")
    with jsonltape.open(tree / "other.jsonl", create=True) as tape:
        tape.user("unrelated neighbour")
    index = str(tmp_path / "index.db")
    r = subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(tree), "--index", index],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    for word, where in (("before", "deep.jsonl"), ("neighbour", "other.jsonl")):
        found = subprocess.run(
            [sys.executable, "-m", "jsonltape", "search", word, "--index", index],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert where in found.stdout, found.stdout + found.stderr
    # Not damage (spec §6): the session is neither torn nor corrupt, and the line is listed.
    listed = subprocess.run(
        [sys.executable, "-m", "jsonltape", "sessions", "--index", index, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    rows = {Path(r["path"]).name: r for r in map(json.loads, listed.stdout.splitlines())}
    assert rows["deep.jsonl"]["state"] == "clean"
    assert "nest too deep to decode" in rows["deep.jsonl"]["error"]
    status = subprocess.run(
        [sys.executable, "-m", "jsonltape", "index", "status", "--index", index],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "unreadable: " in status.stdout and "deep.jsonl: line 4" in status.stdout


def test_an_import_keeps_data_deeper_than_the_limit_as_json_text(tmp_path: Path) -> None:
    # Other agents' files may nest deeper than 128; the mapped event stores the part below
    # the limit as its JSON text (the source line itself is kept verbatim anyway).
    fixture = Path(__file__).parent / "fixtures" / "interop" / "claude-rewind-compact.jsonl"
    src = fixture.read_text().splitlines()
    deep = "[" * 200 + "]" * 200
    assert '{"file_path":"migrations/0042.sql"}' in src[3]
    src[3] = src[3].replace(
        '{"file_path":"migrations/0042.sql"}',
        '{"file_path":"migrations/0042.sql","x":' + deep + "}",
    )
    source = tmp_path / "cc.jsonl"
    source.write_text("\n".join(src) + "\n")
    reports = list(jsonltape.interop.import_paths("claude-code", [source], tmp_path / "out"))
    assert [r.status for r in reports] == ["imported"]
    (session,) = (tmp_path / "out").rglob("*.jsonl")
    assert jsonltape.verify(session).state == "clean"
    calls = [e for e in jsonltape.read(session) if e.type == "tool/call"]
    x = next(c.data["arguments"]["x"] for c in calls if "x" in c.data.get("arguments", {}))
    depth = 0
    while isinstance(x, list):
        x, depth = (x[0] if x else None), depth + 1
    assert isinstance(x, str) and json.loads(x)  # the rest, as JSON text
    assert 100 < depth < 128
