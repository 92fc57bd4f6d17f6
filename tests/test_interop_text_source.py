"""A text source (an Aider history) is read a block at a time: every line must come out as the
line-at-a-time reading gives it -- number, byte offset, text, verdict -- whatever the block
boundaries, invalid UTF-8, lines longer than a block, a torn last line or a stop."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jsonltape.interop import _source
from jsonltape.interop._source import SourceLine, SourceReader

Torn = tuple[int, int, int] | None


def _expected(data: bytes, stop: int | None) -> tuple[list[SourceLine], int, Torn]:
    """Line by line, as the spec's reading of a text source says (the reference)."""
    out: list[SourceLine] = []
    offset = 0
    chunks = data.split(b"\n")
    tail = chunks.pop()
    for n, body in enumerate(chunks, 1):
        if stop is not None and n > stop:
            return out, offset, None
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = body.decode("utf-8", "replace")
            out.append(SourceLine(n, offset, bad, None, f"invalid UTF-8 at byte {exc.start}"))
        else:
            out.append(SourceLine(n, offset, text, {"text": text}, None))
        offset += len(body) + 1
    n = len(chunks) + 1
    torn = (n, offset, len(tail)) if tail and (stop is None or n <= stop) else None
    return out, offset, torn


_PIECES = st.sampled_from(
    [b"\n", b"\r\n", b"a", b"#### hi", b"> tool", b"\xc3\xa9", b"\xe2\x82", b"\xff", b" "]
    + [b"x" * 40]
)


@settings(max_examples=300, deadline=None)
@example(pieces=[b"a", b"\n", b"b"], block=64, stop=1)  # a torn line past the stop: not torn
@example(pieces=[b"x" * 40, b"x" * 40, b"\n", b"a"], block=8, stop=None)  # longer than blocks
@given(
    pieces=st.lists(_PIECES, max_size=60),
    block=st.integers(1, 64),
    stop=st.one_of(st.none(), st.integers(0, 30)),
)
def test_block_reading_gives_every_line_as_line_reading_does(
    tmp_path_factory: pytest.TempPathFactory,
    pieces: list[bytes],
    block: int,
    stop: int | None,
) -> None:
    data = b"".join(pieces)
    path = tmp_path_factory.mktemp("text") / "history.md"
    path.write_bytes(data)
    reader = SourceReader(str(path), text=True, stop_lines=stop)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_source, "_TEXT_BLOCK", block)
        got = list(reader.read())
    lines, consumed, torn = _expected(data, stop)
    assert got == lines
    assert (reader.lines, reader.consumed, reader.torn) == (len(lines), consumed, torn)
    assert reader.sha256 == hashlib.sha256(data[:consumed]).hexdigest()


def test_a_reader_stopped_early_has_hashed_exactly_what_it_gave(tmp_path: Path) -> None:
    path = tmp_path / "history.md"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(1000)))
    reader = SourceReader(str(path), text=True)
    lines = reader.read()
    for _ in range(10):
        last = next(lines)
    lines.close()
    assert reader.consumed == last.offset + len(last.raw) + 1
    assert reader.sha256 == hashlib.sha256(path.read_bytes()[: reader.consumed]).hexdigest()
