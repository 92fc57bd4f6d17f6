"""A text source's mapper may take the lines that come next at once (``Mapper.follow``: an
Aider reply's lines): the reader must account for them as read, and the sessions (an import, a
grown source's import after a first one stopped part-way, an in-place scan) must be exactly
what feeding every line one by one makes of them, whatever the block boundaries."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jsonltape.interop import _source, import_paths
from jsonltape.interop._core import MapperCore
from jsonltape.interop._source import SourceLine, SourceReader
from jsonltape.interop.aider import AiderMapper
from jsonltape.interop.foreign import ForeignScan

from ._importers import sessions_of
from .test_interop_text_source import _expected

_PIECES = st.sampled_from(
    [b"\n", b"\r\n", b"a", b"#### hi", b"> tool", b"\xc3\xa9", b"\xff", b" ", b"x" * 40]
)


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_PIECES, max_size=60),
    block=st.integers(1, 64),
    stop=st.one_of(st.none(), st.integers(0, 30)),
    wants=st.lists(st.integers(0, 9), min_size=1, max_size=20),
)
def test_lines_a_mapper_takes_are_read_once_and_not_given_again(
    tmp_path_factory: pytest.TempPathFactory,
    pieces: list[bytes],
    block: int,
    stop: int | None,
    wants: list[int],
) -> None:
    data = b"".join(pieces)
    path = tmp_path_factory.mktemp("text") / "history.md"
    path.write_bytes(data)
    taken: list[tuple[int, str]] = []
    calls = iter(wants * 100)

    def follow(texts: list[str], start: int, end: int, n: int) -> int:
        assert 0 < start < end <= len(texts)
        k = min(next(calls), end - start - 1)  # never a stretch's last line (Mapper.follow)
        taken.extend(zip(range(n, n + k), texts[start : start + k], strict=True))
        return max(k, 0)

    reader = SourceReader(str(path), text=True, stop_lines=stop)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_source, "_TEXT_BLOCK", block)
        given_lines = list(reader.read(follow))
    lines, consumed, torn = _expected(data, stop)
    # every line once: given, or taken (with its number and text) from a valid UTF-8 block
    assert sorted([(x.n, x.raw) for x in given_lines] + taken) == [(x.n, x.raw) for x in lines]
    assert all(line.value is not None for line in lines if (line.n, line.raw) in set(taken))
    assert given_lines == [x for x in lines if (x.n, x.raw) not in set(taken)]
    assert (reader.lines, reader.consumed, reader.torn) == (len(lines), consumed, torn)
    assert reader.sha256 == hashlib.sha256(data[:consumed]).hexdigest()


#: Lines of a reply (each may take any place in one), and what else a history holds.
_REPLY = st.sampled_from(
    ["Here is the fix:", "```python", "def f(): return 1", "## a heading in a reply",
     "#not a prompt", "<think>", "pondering", "</think>", "", "   ", "\u3000", "text\r", "\r",
     "  \r", "x\r\r", "caf\u00e9 \u2028 line", "\x85", "a\tb"]
)  # fmt: skip
_OTHER = st.sampled_from(
    [
        "# aider chat started at 2024-05-01 10:00:00",
        "# aider chat started at 2024-05-01 11:30:00",
        "# aider chat started at soon",
        "#### fix the bug  ",
        "#### /ask why?",
        "####",
        "#### (Y)es/(N)o [Yes]: y",
        "> Aider v0.50.1",
        "> Model: gpt-4o with diff edit format",
        "> Tokens: 1.2k sent, 300 received. Cost: $0.01 message, $0.02 session.",
        "> Tokens: 2k sent, 1k cache hit, 50 received.",
        "Cost: $0.03 message, $0.05 session.",
        ">",
        "> Applied edit to a.py",
        "a continued tool line",
    ]
)
#: Lines of Aider's output, as it prints them in a row.
_OUTPUT = st.sampled_from(
    ["> Applied edit to a.py", "> Tokens: 1.2k sent, 300 received. Cost: $0.01 message.",
     "> Tokens: 2k sent, 1k cache hit, 50 received.", "> Model: gpt-4o with diff edit format",
     "> Main model: claude-3-opus", ">  Aider v0.50.1", ">", ">  ", "> Cost: $0.01 message.",
     "", "a continued line", ">text\r", "> \u3000", "> #### not a prompt", ">> nested"]
)  # fmt: skip
_BLOCK = st.one_of(
    st.lists(_REPLY, min_size=1, max_size=12),
    st.lists(_OUTPUT, min_size=1, max_size=8),
    _OTHER.map(lambda x: [x]),
)
_LINES = st.lists(_BLOCK, max_size=12).map(lambda blocks: [x for b in blocks for x in b])

#: What a history starts with (else it is refused): a run's header, or a run's middle.
_FIRST = st.sampled_from(["# aider chat started at 2024-05-01 09:00:00", "#### hi", "> Aider v1"])


def _write(path: Path, data: bytes, second: int) -> None:
    """Write ``data`` with a fixed change time: the import's marker records it."""
    path.write_bytes(data)
    os.utime(path, ns=(second * 10**9, second * 10**9))


def _import(history: Path, root: Path, *, follow: bool, cut: int | None) -> dict[str, list[object]]:
    data = history.read_bytes()
    with pytest.MonkeyPatch.context() as patch:
        if not follow:  # the reference: every line fed one by one
            patch.setattr(AiderMapper, "follow", MapperCore.follow)
        if cut is not None:  # a first import of the history as it was part-way
            lines = data.split(b"\n")[:-1]
            _write(history, b"".join(x + b"\n" for x in lines[:cut]), 1)
            list(import_paths("aider", [history], root, settle=None))
            _write(history, data, 2)
        (report,) = import_paths("aider", [history], root, settle=0)
    assert report.status in ("imported", "unchanged"), report
    return sessions_of(root)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(
    lines=["# aider chat started at 2024-05-01 10:00:00", "#### q", "a", "", "b", "c", "> Tokens: "
           "1.2k sent, 300 received. Cost: $0.01 message, $0.02 session."], block=3, cut=5,
)  # fmt: skip
@given(
    lines=st.tuples(_FIRST, _LINES).map(lambda x: [x[0], *x[1]]),
    block=st.sampled_from([1, 7, 16, 64, 1 << 20]),
    cut=st.one_of(st.none(), st.integers(1, 60)),
)
def test_an_aider_history_imports_as_feeding_each_line_does(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], block: int, cut: int | None
) -> None:
    base = tmp_path_factory.mktemp("aider")
    repo = base / "repo"
    repo.mkdir()
    history = repo / ".aider.chat.history.md"
    text = "\n".join(lines) + "\n"
    got: list[dict[str, list[object]]] = []
    for follow in (True, False):
        _write(history, text.encode(), 2)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_source, "_TEXT_BLOCK", block)
            got.append(_import(history, base / f"root-{follow}", follow=follow, cut=cut))
    assert got[0] == got[1]


def _scan(history: Path, *, follow: bool) -> list[tuple[str, object]]:
    with pytest.MonkeyPatch.context() as patch:
        if not follow:
            patch.setattr(AiderMapper, "follow", MapperCore.follow)
        scan = ForeignScan("aider", history)
        return [(sid, event) for sid, event in scan.events()]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.tuples(_FIRST, _LINES).map(lambda x: [x[0], *x[1]]),
    block=st.sampled_from([5, 1 << 20]),
)
def test_an_aider_history_scanned_in_place_maps_as_feeding_each_line_does(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], block: int
) -> None:
    repo = tmp_path_factory.mktemp("aider")
    history = repo / ".aider.chat.history.md"
    _write(history, ("\n".join(lines) + "\n").encode(), 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_source, "_TEXT_BLOCK", block)
        assert _scan(history, follow=True) == _scan(history, follow=False)


def test_a_long_reply_is_taken_at_once(tmp_path: Path) -> None:
    """The mapper takes a reply's lines in stretches (it is what makes Aider fast): of a
    thousand-line reply, only a stretch's first and last lines are fed one by one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    history = repo / ".aider.chat.history.md"
    reply = "\n".join(f"line {i}" for i in range(1000))
    history.write_text(f"# aider chat started at 2024-05-01 10:00:00\n#### q\n{reply}\n")
    fed: list[SourceLine] = []
    feed = AiderMapper.feed

    def counting(self: AiderMapper, line: SourceLine) -> None:
        fed.append(line)
        feed(self, line)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AiderMapper, "feed", counting)
        (report,) = import_paths("aider", [history], tmp_path / "root", settle=0)
    assert report.status == "imported" and report.lines == 1002
    assert [x.n for x in fed] == [1, 2, 3, 1002]
