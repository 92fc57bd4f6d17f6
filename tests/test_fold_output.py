"""The streamed history (``jsonltape messages``) is byte for byte what the library returns,
and a fold holds where each message is, not its body."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from unittest import mock

import msgspec
import pytest

import jsonltape
from jsonltape import _framing, _lines
from jsonltape.fold import _output, fold_file

FIXTURES = Path(__file__).parent / "fixtures" / "fold"
SESSIONS = sorted(p for p in FIXTURES.glob("*/*.jsonl") if p.parent.name != "unknown-required-type")


def _streamed(path: Path, fmt: str, all_versions: bool = False) -> bytes:
    buf = io.BytesIO()
    parents = {jsonltape.header(p).id: p for p in path.parent.glob("*.jsonl")}
    body = _output.message_body(
        path,
        format=fmt,
        all_versions=all_versions,
        parents=parents,  # type: ignore[arg-type]
    )
    _output.write_json(buf.write, body)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["neutral", "openai", "anthropic", "versions"])
@pytest.mark.parametrize("path", SESSIONS, ids=[f"{p.parent.name}/{p.stem}" for p in SESSIONS])
def test_the_streamed_body_is_the_library_body_formatted(path: Path, fmt: str) -> None:
    versions = fmt == "versions"
    fmt = "neutral" if versions else fmt
    parents = {jsonltape.header(p).id: p for p in path.parent.glob("*.jsonl")}
    whole = jsonltape.messages(path, format=fmt, all_versions=versions, parents=parents)  # type: ignore[arg-type]
    want = msgspec.json.format(msgspec.json.encode(whole), indent=2) + b"\n"
    assert _streamed(path, fmt, versions) == want


def test_an_empty_history_streams_an_empty_list(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, session_id="s1"):
        pass
    assert b'"messages": []' in _streamed(path, "neutral")
    assert msgspec.json.decode(_streamed(path, "anthropic")) == {"messages": []}


def test_messages_cli_streams_what_the_library_returns(tmp_path: Path) -> None:
    path = FIXTURES / "basic" / "session.jsonl"
    for fmt in ("neutral", "openai", "anthropic"):
        out = subprocess.run(
            [sys.executable, "-m", "jsonltape", "messages", str(path), "--format", fmt],
            capture_output=True,
            check=True,
        ).stdout
        assert msgspec.json.decode(out) == jsonltape.messages(path, format=fmt)  # type: ignore[arg-type]


def test_the_fold_holds_offsets_not_message_bodies(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    body = "y" * 20_000
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for i in range(300):
            tape.user(f"{i} {body}")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        # One span covers the file (no checkpoint before the close): the scan's hold for it
        # is kept to one chunk, so what is measured is the fold (tests/test_span.py bounds
        # the hold).
        with mock.patch.object(_lines, "HOLD_MAX", _framing.CHUNK):
            f = fold_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(f.current()) == 300 and size > 6_000_000
    # Held after the fold: a few hundred bytes a message; in flight: the scan's chunk.
    assert peak < 5 * _framing.CHUNK + 300 * 1_000, peak
    assert msgspec.json.decode(f.current()[-1].data)["message"]["parts"][0]["content"].startswith(
        "299 "
    )


def test_a_line_changed_after_the_fold_is_refused_not_shown(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, durability="manual") as tape:
        tape.user("original text")
    f = fold_file(path)
    node = f.current()[0]
    raw = path.read_bytes()
    os.chmod(path, 0o600)
    path.write_bytes(raw.replace(b"original text", b"replaced text"))
    with pytest.raises(jsonltape.ConcurrentModificationError):
        node.data  # noqa: B018 - the property reads the file
