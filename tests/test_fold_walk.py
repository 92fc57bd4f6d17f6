"""``fold.walk``: one pass over a session gives, at every event, the fold ``fold_file(at=seq)``
gives (the OTLP export reads the history each model call saw from it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jsonltape import fold
from jsonltape.errors import FormatError, JsonltapeError
from jsonltape.fold import fold_file, walk

FIXTURES = Path(__file__).parent / "fixtures" / "fold"
CASES = sorted(p for p in FIXTURES.glob("*/*.jsonl"))


def snapshot(f: fold.SessionFold) -> tuple[object, ...]:
    """What a fold says at a point: the current nodes (with their data), the request header,
    the todo list, the last seq and its crc."""
    nodes = [(n.session, n.seq, n.type, n.data) for n in f.current()]
    return (nodes, f.request_header(), f.todo_list(), f.last_seq, f.last_crc)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_walk_gives_the_fold_as_of_every_seq(path: Path) -> None:
    seen = []
    failed: JsonltapeError | None = None
    try:
        for event, f in walk(path):
            assert f.last_seq == event.seq
            seen.append(snapshot(f))
    except JsonltapeError as exc:  # a case the fold refuses: at the same line as fold_file
        failed = exc
    assert len(seen) >= 3
    for seq, got in enumerate(seen):
        assert got == snapshot(fold_file(path, at=seq)), f"seq {seq}"
    if failed is not None:
        with pytest.raises(type(failed)) as caught:
            fold_file(path, at=len(seen))
        assert str(caught.value) == str(failed)


def test_walk_of_a_fork_starts_with_its_inherited_nodes() -> None:
    fork = FIXTURES / "fork-of-fork-then-merge" / "fork2.jsonl"
    first_event, first = next(iter(walk(fork)))
    assert first_event.seq == 0 and first_event.type == "session/start"
    inherited = [n for n in first.current() if n.session is not None]
    assert inherited and snapshot(first) == snapshot(fold_file(fork, at=0))


def test_walk_refuses_what_fold_file_refuses(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(FormatError, match="the file is empty"):
        list(walk(empty))
    with pytest.raises(FormatError, match="the file is empty"):
        fold_file(empty)
