"""The independent JavaScript reader (spec/reference) against the vectors and against jsonltape.

A spec is only real when a second implementation written from its text agrees with ours: every
conformance vector passes through the JavaScript reader via the runner, its own node tests
pass, sessions written by jsonltape at random (hypothesis) read, verify and fold the same
in both, and mutated files from the differential fuzz corpus get the verdict of the classifier
written from the spec (tests/fuzz_classifier.py) from the JavaScript reader too. Format 1.1's
span checksums: jsonltape's spans are the ones the span rule gives (recomputed here with
zlib), and the JavaScript reader answers the same with spans used and with every line checked
by its own CRC (``--no-spans``), on clean and damaged 1.1 files alike.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib
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


def _node(cmd: str, data: bytes, *, spans: bool = True) -> dict[str, Any]:
    assert NODE is not None, "Node.js is required in CI (see .ci/run)"
    flags = [] if spans else ["--no-spans"]
    proc = subprocess.run(
        [NODE, str(READER), *flags, cmd], input=data, capture_output=True, timeout=60, check=True
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
    restores, headers, todos) written by jsonltape (format 1.1, spans on its checkpoints), cut
    at a random byte: both readers return the same events, the same classification and the
    same fold, the JavaScript one with spans used and without."""
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
            want = _python(cmd, blob)
            assert _node(cmd, blob) == want, (cmd, len(blob))
            assert _node(cmd, blob, spans=False) == want, (cmd, len(blob), "--no-spans")


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
#: one JSON line ``{"b64": ...}`` each, in one process, with spans used and without; each
#: input comes as one buffer, or as chunks of CHUNK bytes when CHUNK > 0 (as a file is read).
_BATCH = """
import { commandParts } from %s;
const CHUNK = %d;
const PATHS = [['spans', { spans: true }], ['per_line', { spans: false }]];
let text = '';
for await (const chunk of process.stdin) text += chunk;
for (const line of text.split('\\n')) {
  if (!line) continue;
  const data = Buffer.from(JSON.parse(line).b64, 'base64');
  const size = CHUNK || data.length;
  const source = [];
  for (let i = 0; i < data.length; i += size) source.push(data.subarray(i, i + size));
  const paths = [];
  for (const [name, opts] of PATHS) {
    const out = [];
    for (const cmd of ['read', 'verify', 'repair']) {
      out.push(JSON.stringify(cmd) + ':' + (await commandParts(cmd, source, opts)).join(''));
    }
    paths.push(JSON.stringify(name) + ':{' + out.join(',') + '}');
  }
  process.stdout.write('{' + paths.join(',') + '}\\n');
}
"""


def _node_batch(inputs: list[bytes], chunk: int = 0) -> list[dict[str, dict[str, Any]]]:
    """The JavaScript reader's read, verify and repair answers for each input, as
    ``{"spans": {cmd: answer}, "per_line": {cmd: answer}}``."""
    assert NODE is not None
    stdin = "".join(json.dumps({"b64": base64.b64encode(d).decode()}) + "\n" for d in inputs)
    proc = subprocess.run(
        [NODE, "--input-type=module", "-e", _BATCH % (json.dumps(READER.as_uri()), chunk)],
        input=stdin.encode(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    answers = proc.stdout.split(b"\n")[:-1]  # (not splitlines: texts may hold U+2028)
    assert len(answers) == len(inputs)
    with _deep_recursion():  # deep lines come back as deep JSON
        return [json.loads(a) for a in answers]


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
    JavaScript reader's read, verify and repair, with spans used and without: the same
    verdict and committed events as the classifier written from the spec."""
    runner = load_script(ROOT / "spec" / "tools" / "conformance.py", "spec_tools_conformance")
    inputs = [i for i in build_corpus(tmp_path, n=3000 if LONG else 300) if not i.verdict.duplicate]
    answers = _node_batch([i.data for i in inputs])
    problems = []
    with _deep_recursion():
        for inp, answer in zip(inputs, answers, strict=True):
            for path, got in answer.items():
                for cmd, want in _expected(inp.verdict).items():
                    if cmd == "repair" and "closers" in got[cmd]:
                        got[cmd].pop("closers")
                    if diff := runner.diff(want, got[cmd], limit=3):
                        problems.append(f"{path} {cmd}: {diff}\n    {inp.describe()[:1500]}")
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:10])


# ----------------------------------------------------------------------------------------------
# Format 1.1: span checksums (spec §8.5, §10.2)


def _spans_by_the_rule(raw: bytes) -> list[tuple[Any, dict[str, Any]]]:
    """Each checkpoint's ``span`` next to the span the rule gives: from = just after the
    previous session/flush line (or the header), crc = CRC-32 of the bytes [from, offset)."""
    out: list[tuple[Any, dict[str, Any]]] = []
    offset = raw.index(b"\n") + 1
    start = offset
    for body in raw[offset:].split(b"\n")[:-1]:
        event = json.loads(body)
        if event["type"] == "session/flush":
            want = {"from": start, "crc": f"{zlib.crc32(raw[start:offset]):08x}"}
            out.append((event["data"].get("span"), want))
            start = offset + len(body) + 1
        offset += len(body) + 1
    return out


def _write_11(path: Path, turns: int, text: str = "x") -> bytes:
    """A 1.1 session written by jsonltape: turns with a tool round trip and checkpoints, a
    reopen that appends, and a torn tail that the reopen cuts (so a span starts after the last
    checkpoint line that remains)."""
    with jsonltape.open(path, create=True) as tape:
        for k in range(turns):
            with tape.turn():
                tape.user(f"{text} question {k}")
                call = f"call-{k}"
                tape.assistant(tool_calls=[{"id": call, "name": "Read", "arguments": {"k": k}}])
                tape.tool_call("Read", {"k": k}, call_id=call)
                tape.flush()
                tape.tool_result(call, f"{text} result {k}")
                tape.assistant(f"{text} answer {k}")
            tape.flush()
        tape.user("unflushed")  # the close checkpoints it
    with path.open("ab") as f:
        f.write(b'{"seq":999,"type":"user/mess')  # a torn tail
    with jsonltape.open(path) as tape:
        tape.user("after the repair")
        tape.flush()
    return path.read_bytes()


def test_spans_written_by_jsonltape_follow_the_rule(tmp_path: Path) -> None:
    """Every checkpoint jsonltape writes carries the span the rule gives (recomputed with
    zlib), also after a reopen and after a torn tail was cut; the header says minor 1."""
    raw = _write_11(tmp_path / "s.jsonl", 3)
    assert json.loads(raw[: raw.index(b"\n")])["data"]["minor"] == 1
    spans = _spans_by_the_rule(raw)
    assert len(spans) >= 8
    assert [got for got, _ in spans] == [want for _, want in spans]


def test_damaged_11_files_read_the_same_in_javascript_with_and_without_spans(
    tmp_path: Path,
) -> None:
    """A 1.1 file written by jsonltape with a flipped byte at every position, and cut at every
    line boundary and mid-line: the JavaScript reader gives the same answers with spans used
    and with every line checked by its own CRC, and (clean, cut, and on a sample of the flips:
    every newline and every 8th byte, jsonltape costing ~10 ms an input) those of jsonltape."""
    raw = _write_11(tmp_path / "s.jsonl", 1)
    flips = []
    for i in range(len(raw)):
        flipped = bytearray(raw)
        flipped[i] ^= 0x01
        flips.append(bytes(flipped))
    cuts = [raw[:i] for i in range(1, len(raw)) if raw[i - 1] == 0x0A or i % 97 == 0]
    inputs = [raw, *cuts, *flips]
    answers = _node_batch(inputs)
    differ = [n for n, a in enumerate(answers) if a["spans"] != a["per_line"]]
    assert not differ, f"spans and per-line differ on inputs {differ[:10]}: {answers[differ[0]]}"
    sample = {0, *range(1, 1 + len(cuts))}
    sample |= {1 + len(cuts) + i for i in range(len(raw)) if i % 8 == 0 or raw[i] == 0x0A}
    problems = []
    for n in sorted(sample):
        want = {cmd: _python(cmd, inputs[n]) for cmd in ("read", "verify", "repair")}
        if answers[n]["spans"] != want:
            problems.append(f"input {n}: {str(answers[n]['spans'])[:300]} != {str(want)[:300]}")
    assert not problems, f"{len(problems)} of {len(sample)} differ:\n" + "\n".join(problems[:5])


def test_spans_across_read_chunks_read_the_same_in_javascript(tmp_path: Path) -> None:
    """A 1.1 file with long lines, fed to the JavaScript reader in chunks of 4 KiB (spans and
    lines cross chunk boundaries), clean and damaged at spread positions: the same answers
    as jsonltape, with spans used and without."""
    raw = _write_11(tmp_path / "s.jsonl", 6, text="long " * 3000)
    assert len(raw) > 200_000
    inputs = [raw]
    for i in range(7, len(raw), len(raw) // 40):
        flipped = bytearray(raw)
        flipped[i] ^= 0x20
        inputs.append(bytes(flipped))
    answers = _node_batch(inputs, chunk=4096)
    for n, (data, answer) in enumerate(zip(inputs, answers, strict=True)):
        want = {cmd: _python(cmd, data) for cmd in ("read", "verify", "repair")}
        assert answer == {"spans": want, "per_line": want}, n


def _with_span(raw: bytes, span_json: bytes) -> bytes:
    """``raw`` with the last line's ``span`` value replaced by ``span_json`` and its crc
    member recomputed (§5), so the line stays good."""
    head, last = raw[: raw.rindex(b"\n", 0, -1) + 1], raw[raw.rindex(b"\n", 0, -1) + 1 : -1]
    body = last[:-18]
    i = body.index(b'"span":') + len(b'"span":')
    body = body[:i] + span_json + body[body.index(b"}", i) + 1 :]
    return head + body + b',"crc":"%08x"}\n' % zlib.crc32(body)


def test_malformed_and_null_spans_classify_the_same_in_javascript(tmp_path: Path) -> None:
    """A closing checkpoint after a turn left open on purpose, its span replaced: a span of the
    right shape (right or wrong crc, unknown members) or null keeps the checkpoint valid
    (clean), any other shape makes it no valid checkpoint (open-turn); the JavaScript reader,
    both paths, answers as jsonltape does."""
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.append("turn/start", {})
        tape.user("left open on purpose")
    raw = path.read_bytes()
    assert b'"closed":true,"span":{' in raw.splitlines()[-1]
    start = raw.index(b"\n") + 1
    offset = raw.rindex(b"\n", 0, -1) + 1
    crc = b'"%08x"' % zlib.crc32(raw[start:offset])
    valid = [
        b'{"from":%d,"crc":%s}' % (start, crc),
        b'{"from":%d,"crc":%s,"x-ext":[1]}' % (start, crc),
        b'{"from":0,"crc":"ffffffff"}',
        b"null",
    ]
    malformed = [
        b'"x"',
        b"[]",
        b'{"crc":%s}' % crc,
        b'{"from":%d}' % start,
        b'{"from":%d.0,"crc":%s}' % (start, crc),
        b'{"from":-1,"crc":%s}' % crc,
        b'{"from":%d,"crc":%s}' % (offset + 1, crc),
        b'{"from":"%d","crc":%s}' % (start, crc),
        b'{"from":%d,"crc":%s}' % (start, crc.upper()),
        b'{"from":%d,"crc":%s}' % (start, crc[:-2] + b'"'),
        b'{"from":%d,"crc":%d}' % (start, zlib.crc32(raw[start:offset])),
    ]
    inputs = [_with_span(raw, s) for s in valid + malformed]
    answers = _node_batch(inputs)
    for span, data, answer in zip(valid + malformed, inputs, answers, strict=True):
        want = {cmd: _python(cmd, data) for cmd in ("read", "verify", "repair")}
        assert want["verify"]["state"] == ("clean" if span in valid else "open-turn"), span
        assert answer == {"spans": want, "per_line": want}, span
