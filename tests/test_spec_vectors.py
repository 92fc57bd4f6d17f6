"""Every conformance vector in spec/vectors/ through jsonltape, and the runner itself.

Each vector runs in-process through the adapter's ``run`` and the runner's own comparison (fast,
one test per case). The runner is also run for real, as a subprocess starting
``python -m jsonltape.conformance`` per case, on a slice of the vectors (the whole suite takes
about ten seconds that way; ``JSONLTAPE_LONG=1`` runs all of it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jsonltape import conformance

from .conftest import LONG
from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "spec" / "tools"


def load_tool(name: str) -> ModuleType:
    """Import a script from spec/tools/ (they are not a package)."""
    return load_script(TOOLS / f"{name}.py", f"spec_tools_{name}")


runner = load_tool("conformance")
CASES = runner.discover()

#: Cases where jsonltape disagrees with the spec text (or with itself). Each one is a bug in the
#: library or the spec, reported with the vectors; strict xfail turns green into a failure so
#: the entry is removed when the bug is fixed.
KNOWN_DISAGREEMENTS: dict[str, str] = {}


def test_vectors_exist() -> None:
    names = {c.name.split("/")[0] for c in CASES}
    assert {"checksum", "read", "repair", "compat"} <= names
    assert len(CASES) > 150
    assert set(KNOWN_DISAGREEMENTS) <= {c.name for c in CASES}, "stale KNOWN_DISAGREEMENTS"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_vector(case: Any, request: pytest.FixtureRequest) -> None:
    if case.name in KNOWN_DISAGREEMENTS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_DISAGREEMENTS[case.name], strict=True))
    expected = json.loads(case.expected.read_text(encoding="utf-8"))
    actual = conformance.run(case.cmd, case.input.read_bytes())
    # What the program would print must survive the trip through JSON unchanged.
    printed = json.loads(json.dumps(actual, ensure_ascii=True, allow_nan=False))
    assert runner.diff(expected, printed) == []


def _run_runner(*args: str) -> subprocess.CompletedProcess[str]:
    program = f"{sys.executable} -m jsonltape.conformance"
    return subprocess.run(
        [sys.executable, str(TOOLS / "conformance.py"), "--program", program, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=ROOT,
    )


#: A slice that touches every command and directory (repair and fold the most, as they do the
#: most with files), about 20 cases.
SLICE = [
    "repair/open_turn_",
    "repair/torn_",
    "repair/corrupt_refused",
    "compat/*.fold",
    "fold/tool_round_trip",
    "checksum/check_value",
    "read/y_spec_example.read",
    "read/n_bom.verify",
    "read/n_seq_gap.read",
    "read/i_integer_beyond_safe_range.read",
]


def test_runner_with_the_real_adapter() -> None:
    """The runner starts ``python -m jsonltape.conformance`` per case; known bugs aside, all
    pass, and the output has one line per case and the summary."""
    proc = _run_runner(*([] if LONG else SLICE))
    lines = proc.stdout.splitlines()
    statuses = {
        line.split()[1]: line.split()[0]
        for line in lines
        if line.startswith(("PASS ", "FAIL ", "DIFF "))
    }
    selected = [c.name for c in runner.discover(patterns=None if LONG else SLICE)]
    assert sorted(statuses) == sorted(selected)
    bad = {name for name, status in statuses.items() if status != "PASS"}
    assert bad == {n for n in KNOWN_DISAGREEMENTS if n in statuses}, proc.stdout
    failed = sum(1 for n in bad if statuses[n] == "FAIL")
    assert lines[-1].startswith(f"conformance: {len(selected) - len(bad)} passed, {failed} failed")
    assert proc.returncode == (1 if failed else 0), proc.stderr


def test_runner_reports_a_wrong_program(tmp_path: Path) -> None:
    """A program that answers wrongly, crashes or prints junk fails, with a diff; exit 1."""
    fake = tmp_path / "fake.py"
    fake.write_text(
        "import sys, json\n"
        "cmd = sys.argv[1]\n"
        "data = sys.stdin.buffer.read()\n"
        "if data == b'123456789': print(json.dumps({'crc': 'CBF43926'}))\n"
        "elif cmd == 'checksum' and not data: print('not json')\n"
        "elif cmd == 'checksum': sys.exit(3)\n"
        "else: print(json.dumps({'state': 'clean', 'events': True}))\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "conformance.py"),
            "--program",
            f"{sys.executable} {fake}",
            "checksum/check_value",
            "checksum/empty",
            "checksum/one_zero_byte",
            "read/y_header_only.verify",
            "read/i_header_missing_id.verify",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 1
    assert "FAIL checksum/check_value.checksum" in out
    assert '$.crc: expected "cbf43926", got "CBF43926"' in out
    assert "FAIL checksum/empty.checksum" in out and "not one JSON value" in out
    assert "FAIL checksum/one_zero_byte.checksum" in out and "exit status 3" in out
    assert "$.events: expected 1, got true" in out  # booleans are not numbers
    assert "DIFF read/i_header_missing_id.verify  (implementation-defined)" in out
    assert out.splitlines()[-1].startswith("conformance: 0 passed, 4 failed (1 implementation")


def test_runner_strict_and_filters() -> None:
    names = [c.name for c in runner.discover(patterns=["read/i_*.verify"])]
    assert names and all(n.startswith("read/i_") and n.endswith(".verify") for n in names)
    assert [c.name for c in runner.discover(patterns=["check_value"])] == [
        "checksum/check_value.checksum"
    ]
    proc = _run_runner("--list", "repair/")
    assert proc.returncode == 0
    assert proc.stdout.split() == [c.name for c in runner.discover(patterns=["repair/"])]
    assert _run_runner("no-such-case").returncode == 2


def test_runner_diff_compares_json_values() -> None:
    assert runner.diff({"a": 1, "b": [1, 2]}, {"b": [1, 2.0], "a": 1.0}) == []
    assert runner.diff({"a": True}, {"a": 1}) == ["$.a: expected true, got 1"]
    assert runner.diff({"a": None}, {}) == ["$.a: missing (expected null)"]
    assert runner.diff({}, {"x": 1}) == ["$: unexpected member 'x' = 1"]
    assert runner.diff([1, 2], [1]) == ["$: expected 2 items, got 1"]
    assert runner.diff({"n": 9007199254740993}, {"n": 9007199254740992}) != []


def test_adapter_exit_status() -> None:
    """Usage errors exit 2, internal failures non-zero; a rejected input still exits 0."""
    mod = [sys.executable, "-m", "jsonltape.conformance"]
    assert subprocess.run([*mod, "nope"], input=b"", capture_output=True).returncode == 2
    assert subprocess.run(mod, input=b"", capture_output=True).returncode == 2
    done = subprocess.run([*mod, "read"], input=b"not a session\n", capture_output=True)
    assert done.returncode == 0
    assert json.loads(done.stdout) == {
        "ok": False,
        "error": "not-jsonltape",
        "line": None,
        "offset": None,
    }
    done = subprocess.run([*mod, "checksum"], input=b"123456789", capture_output=True)
    assert done.returncode == 0 and done.stdout == b'{"crc": "cbf43926"}\n'


def test_adapter_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Repair writes a sidecar and a lock file: all of it stays inside the adapter's temp dir."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data = (ROOT / "spec/vectors/repair/torn_tail_and_pending_call.jsonl").read_bytes()
    out = conformance.run("repair", data)
    assert out["state"] == "torn-tail" and len(out["closers"]) == 2
    assert list(tmp_path.iterdir()) == []
