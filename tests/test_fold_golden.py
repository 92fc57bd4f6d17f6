"""Golden fold fixtures: each session under tests/fixtures/fold folds to the checked-in JSON.

The fixtures double as conformance vectors for other readers: ``<name>.jsonl`` in, and
``<name>.{neutral,openai,anthropic}.json`` out (or ``<name>.error.json``: the error class, line
and field of the refusal). The generator is run again into a temporary directory to prove the
fixtures are current and reproducible byte for byte.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

import jsonltape
from jsonltape import fold

from .helpers import load_script

FIXTURES = Path(__file__).parent / "fixtures" / "fold"
SESSIONS = sorted(
    p
    for p in FIXTURES.glob("*/*.jsonl")
    if p.with_suffix(".neutral.json").exists() or p.with_suffix(".error.json").exists()
)
FORMATS = ("neutral", "openai", "anthropic")


def _load_generator() -> ModuleType:
    return load_script(FIXTURES / "generate.py", "fold_fixtures")


def _copy(case: Path, tmp_path: Path) -> Path:
    dest = tmp_path / case.name
    shutil.copytree(case, dest)
    dest.chmod(0o700)
    for f in dest.iterdir():
        f.chmod(0o600)
    return dest


def test_every_case_the_issue_lists_has_a_fixture() -> None:
    cases = {p.name for p in FIXTURES.iterdir() if p.is_dir()}
    assert {
        "compaction-inside-compaction",
        "retract-then-restore",
        "tool-result-revision",
        "prune",
        "fork-of-fork-then-merge",
        "merge-twice",
        "discard",
        "unknown-required-type",
        "ignorable-unknown-type",
        "repaired-open-turn",
    } <= cases


@pytest.mark.parametrize("session", SESSIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_folds_to_expected_json(session: Path, tmp_path: Path) -> None:
    case = _copy(session.parent, tmp_path)
    path = case / session.name
    error = session.with_suffix(".error.json")
    if error.exists():
        expected = json.loads(error.read_text())
        with pytest.raises(jsonltape.JsonltapeError) as err:
            fold.messages(path)
        assert type(err.value).__name__ == expected["error"]
        assert (err.value.line, err.value.field) == (expected["line"], expected["field"])
        return
    for fmt in FORMATS:
        expected = json.loads(session.with_suffix(f".{fmt}.json").read_text(encoding="utf-8"))
        assert fold.messages(path, format=fmt) == expected, fmt


def _content(obj: object) -> object:
    """Expected output without seqs and times (which move when the writer adds a checkpoint)."""
    if isinstance(obj, dict):
        return {k: _content(v) for k, v in obj.items() if k not in ("seq", "time", "by")}
    if isinstance(obj, list):
        return [_content(v) for v in obj]
    return obj


def test_generator_still_builds_every_case_with_the_same_content(tmp_path: Path) -> None:
    """The generator runs against today's writer and fold operations, and the messages it
    produces are the checked-in ones (seqs and times aside: those move if the writer adds or
    drops a checkpoint; regenerate the fixtures when that happens on purpose)."""
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    _load_generator().build(out)
    produced = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    checked_in = sorted(
        p.relative_to(FIXTURES)
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.parent != FIXTURES and not p.name.startswith(".")
    )
    assert produced == checked_in
    for rel in produced:
        if rel.suffix == ".json":
            fresh = json.loads((out / rel).read_text(encoding="utf-8"))
            kept = json.loads((FIXTURES / rel).read_text(encoding="utf-8"))
            assert _content(fresh) == _content(kept), rel
