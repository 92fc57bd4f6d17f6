"""Property tests: the fold of a file agrees with a slow reference model, at every seq.

Random operation sequences (appends, revisions, compactions, prunes, retractions, restores,
request headers and todo lists, plus operations a rule must refuse) are written through the
writer. Then:

* the writer refused exactly the operations the model refuses, and wrote nothing for them;
* folding the file gives the model's surface, statuses, header and todos;
* folding at seq N gives exactly what folding the file cut after line N gives.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import fold

from .conftest import LONG
from .strategies import Refused, SurfaceModel, operation

_DIR = tempfile.mkdtemp(prefix="jsonltape-props-")
os.chmod(_DIR, 0o700)
_count = iter(range(10**9))


def _fresh() -> Path:
    return Path(_DIR) / f"s{next(_count)}.jsonl"


def _run(data: st.DataObject, steps: int) -> tuple[Path, SurfaceModel, list[int]]:
    """Write a random session; return its path, the model and the seq after each batch."""
    path = _fresh()
    model = SurfaceModel()
    marks: list[int] = []
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for _ in range(steps):
            seq = tape.next_seq
            op = data.draw(operation(model, seq), label="op")
            trial = _clone(model)
            try:
                for k, item in enumerate(op.items):
                    trial.apply(seq + k, item)
                refused = False
            except Refused:
                refused = True
            if refused:
                try:
                    tape.append_batch(op.items)
                except jsonltape.InvalidEventError:
                    pass
                else:
                    raise AssertionError(f"the writer accepted {op.name}: {op.items}")
                assert tape.next_seq == seq  # nothing appended (the file is compared at the end)
            else:
                tape.append_batch(op.items)
                model = trial
            assert op.refused == refused, op.name
            marks.append(tape.next_seq - 1)
    return path, model, marks


def _clone(model: SurfaceModel) -> SurfaceModel:
    out = SurfaceModel(list(model.nodes), dict(model.status), dict(model.types))
    out.compaction = set(model.compaction)
    out.header, out.todos = model.header, model.todos
    return out


def _statuses(path: Path, at: int | None = None) -> dict[int, str]:
    out = fold.messages(path, at=at, all_versions=True)["messages"]
    return {m["seq"]: m["status"] for m in out}


@settings(max_examples=2000 if LONG else 60)
@given(st.data())
def test_folding_the_file_equals_applying_the_operations_to_a_list(data: Any) -> None:
    path, model, _ = _run(data, data.draw(st.integers(1, 30), label="steps"))
    f = fold.fold_file(path)
    assert f.surface.nodes == [n.seq for n in model.nodes]
    assert _statuses(path) == model.status
    assert f.request_header() == model.header
    assert f.todo_list() == model.todos
    current = fold.messages(path)["messages"]
    assert [(m["seq"], m["type"]) for m in current] == [(n.seq, n.type) for n in model.nodes]
    # a fresh SurfaceFold fed event by event agrees with the writer's own validation
    assert fold.messages(path, format="openai")["messages"] is not None


def _truncated(path: Path, seq: int) -> Path:
    lines = path.read_bytes().splitlines(keepends=True)
    out = _fresh()
    out.write_bytes(b"".join(lines[: seq + 1]))
    os.chmod(out, 0o600)
    return out


@settings(max_examples=1000 if LONG else 30)
@given(st.data())
def test_fold_at_seq_n_equals_folding_the_file_cut_after_n(data: Any) -> None:
    path, _, marks = _run(data, data.draw(st.integers(1, 20), label="steps"))
    last = marks[-1] if marks else 0
    seqs = sorted({0, last, *data.draw(st.lists(st.integers(0, last), max_size=6), label="at")})
    for n in seqs:
        cut = _truncated(path, n)
        for fmt in ("neutral", "openai", "anthropic"):
            assert fold.messages(path, at=n, format=fmt) == fold.messages(cut, format=fmt)
        assert fold.messages(path, at=n, all_versions=True) == fold.messages(cut, all_versions=True)
        assert fold.todo(path, n) == fold.todo(cut)
