"""The independent JavaScript reader (spec/reference) against the vectors and against jsonltape.

A spec is only real when a second implementation written from its text agrees with ours: every
conformance vector passes through the JavaScript reader via the runner, its own node tests
pass, sessions written by jsonltape at random (hypothesis) read, verify and fold the same
in both, and mutated files from the differential fuzz corpus get the verdict of the classifier
written from the spec (tests/fuzz_classifier.py) from the JavaScript reader too.
"""

from __future__ import annotations

import base64
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
from .fuzz_classifier import Verdict, _deep_recursion
from .helpers import load_script
from .strategies import Refused, SurfaceModel, operation
from .test_fuzz_differential import build_corpus

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


#: A node program that runs read, verify and repair (the protocol's answers) over many inputs,
#: one JSON line ``{"b64": ...}`` each, in one process.
_BATCH = """
import { commandParts } from %s;
let text = '';
for await (const chunk of process.stdin) text += chunk;
for (const line of text.split('\\n')) {
  if (!line) continue;
  const data = Buffer.from(JSON.parse(line).b64, 'base64');
  const out = [];
  for (const cmd of ['read', 'verify', 'repair']) {
    out.push(JSON.stringify(cmd) + ':' + (await commandParts(cmd, data)).join(''));
  }
  process.stdout.write('{' + out.join(',') + '}\\n');
}
"""


def _expected(v: Verdict) -> dict[str, Any]:
    """The protocol's read, verify and repair answers (spec/conformance.md) for a verdict;
    repair's closers are left out (the classifier does not plan them)."""
    if v.state == "not-a-session":
        err = {"error": v.error}
        return {
            "read": {"ok": False, "line": None, "offset": None, **err},
            "verify": err,
            "repair": err,
        }
    verify = {"state": v.state, "events": len(v.committed), "line": v.line, "offset": v.offset}
    if v.state == "corrupt":
        where = {"line": v.line, "offset": v.offset}
        return {
            "read": {"ok": False, "error": "corrupt", **where},
            "verify": verify,
            "repair": {"error": "corrupt", **where},
        }
    return {
        "read": {"ok": True, "events": [c.event for c in v.committed]},
        "verify": verify,
        "repair": {"state": v.state, "cut": v.offset, "kept": len(v.committed)},
    }


def test_mutated_files_get_the_classifier_verdict_from_javascript(tmp_path: Path) -> None:
    """The first inputs of the differential fuzz corpus (bad bytes and numbers in unknown
    members, ranges, null header members, cuts, flips, edits, deep lines) through the
    JavaScript reader's read, verify and repair: the same verdict and committed events as the
    classifier written from the spec."""
    assert NODE is not None
    runner = load_script(ROOT / "spec" / "tools" / "conformance.py", "spec_tools_conformance")
    inputs = [i for i in build_corpus(tmp_path, n=3000 if LONG else 300) if not i.verdict.duplicate]
    stdin = "".join(json.dumps({"b64": base64.b64encode(i.data).decode()}) + "\n" for i in inputs)
    script = _BATCH % json.dumps(READER.as_uri())
    proc = subprocess.run(
        [NODE, "--input-type=module", "-e", script],
        input=stdin.encode(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    answers = proc.stdout.split(b"\n")[:-1]  # (not splitlines: texts may hold U+2028)
    assert len(answers) == len(inputs)
    problems = []
    with _deep_recursion():  # deep lines come back as deep JSON
        for inp, answer in zip(inputs, answers, strict=True):
            got = json.loads(answer)
            for cmd, want in _expected(inp.verdict).items():
                if cmd == "repair" and "closers" in got[cmd]:
                    got[cmd].pop("closers")
                if diff := runner.diff(want, got[cmd], limit=3):
                    problems.append(f"{cmd}: {diff}\n    {inp.describe()[:1500]}")
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:10])
