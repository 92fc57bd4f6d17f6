"""The independent JavaScript reader (spec/reference) against the vectors and against jsonltape.

A spec is only real when a second implementation written from its text agrees with ours: every
conformance vector passes through the JavaScript reader via the runner, its own node tests
pass, and sessions written by jsonltape at random (hypothesis) read, verify and fold the same
in both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import conformance

from .conftest import LONG
from .strategies import Refused, SurfaceModel, operation

ROOT = Path(__file__).resolve().parents[1]
READER = ROOT / "spec" / "reference" / "jsonltape.mjs"
NODE = shutil.which("node")

# CI installs Node.js (.ci/run); elsewhere the JavaScript side is skipped if node is missing.
pytestmark = pytest.mark.skipif(
    NODE is None and not os.environ.get("CI"), reason="node (Node.js 20+) is not installed"
)


def _clone(model: SurfaceModel) -> SurfaceModel:
    out = SurfaceModel(list(model.nodes), dict(model.status), dict(model.types))
    out.compaction = set(model.compaction)
    out.header, out.todos = model.header, model.todos
    return out


def _node(cmd: str, data: bytes) -> dict[str, Any]:
    assert NODE is not None, "Node.js is required in CI (see .ci/run)"
    proc = subprocess.run(
        [NODE, str(READER), cmd], input=data, capture_output=True, timeout=60, check=True
    )
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _python(cmd: str, data: bytes) -> dict[str, Any]:
    """The Python adapter in-process (the runner tests run it as a subprocess)."""
    return json.loads(json.dumps(conformance.run(cmd, data)))  # type: ignore[no-any-return]


def test_javascript_reader_passes_every_vector() -> None:
    assert NODE is not None
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "spec" / "tools" / "conformance.py"),
            "--program",
            f"{NODE} {READER}",
            "--strict",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " 0 failed" in proc.stdout


def test_javascript_reader_own_tests_pass() -> None:
    assert NODE is not None
    proc = subprocess.run(
        [NODE, "--test", str(ROOT / "spec" / "reference" / "test")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@settings(
    max_examples=200 if LONG else 12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_sessions_written_by_jsonltape_read_and_fold_the_same_in_javascript(
    tmp_path: Path, data: st.DataObject
) -> None:
    """Random valid operation sequences (messages, revisions, compactions, prunes, retractions,
    restores, headers, todos) written by jsonltape, cut at a random seq: both readers return
    the same events, the same classification and the same fold."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path))  # one per example: tmp_path is shared
    path = directory / "s.jsonl"
    model = SurfaceModel()
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for _ in range(data.draw(st.integers(1, 12), label="steps")):
            seq = tape.next_seq
            op = data.draw(operation(model, seq), label="op")
            trial = _clone(model)
            try:
                for k, item in enumerate(op.items):
                    trial.apply(seq + k, item)
            except Refused:
                continue  # the writer refuses these too (test_fold_props); keep the file valid
            model = trial
            tape.append_batch(op.items)
            if data.draw(st.booleans(), label="flush"):
                tape.flush()
    raw = path.read_bytes()
    cut = data.draw(st.integers(0, len(raw)), label="cut")
    for blob in (raw, raw[:cut] if cut > raw.index(b"\n") else raw):
        for cmd in ("read", "verify", "fold"):
            assert _node(cmd, blob) == _python(cmd, blob), (cmd, len(blob))


def test_retracting_a_lone_orphan_tool_result_folds_the_same(tmp_path: Path) -> None:
    """Regression (found by the property test above): rule 4 of §8.7.2 binds replaces only, so
    a retract may remove a single tool result whose call was never declared."""
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user("hi")
        orphan = tape.tool_result("orphan", "stray output")
        tape.user("again")
        tape.append(
            "surface/retract", {}, surface={"op": "retract", "start": orphan.seq, "end": orphan.seq}
        )
    blob = path.read_bytes()
    py = _python("fold", blob)
    assert [m["seq"] for m in py["messages"]] == [1, 3]
    assert _node("fold", blob) == py
