#!/usr/bin/env python3
"""Run the jsonltape conformance vectors against any program that speaks the protocol.

Usage::

    python spec/tools/conformance.py --program "python -m jsonltape.conformance"
    python spec/tools/conformance.py --program "node spec/reference/jsonltape.mjs" read/n_
    python spec/tools/conformance.py --program "..." 'repair/*' --strict -j 4

For every expected-result file ``<dir>/<name>.<cmd>.json`` under spec/vectors/, the runner starts
``PROGRAM <cmd>`` with the input file ``<dir>/<name>.{jsonl,bin,txt}`` on stdin, reads exactly one
JSON object from stdout and compares it with the expected one as JSON values (member order does
not matter; ``true`` is not ``1``; ``1`` equals ``1.0``). It prints one line per case, with the
differences under a failing one, and a summary; it exits 1 if any case failed, 2 on bad usage.

Cases whose name starts with ``i_`` are implementation-defined: the expected file holds the
reference implementation's answer, and a different (well-formed) answer is reported as ``DIFF``
without failing the run, unless ``--strict`` is given. A crash, a non-zero exit, or output that is
not one JSON object fails every case, ``i_`` included.

Only the standard library is used, so any Python 3.10+ can check an implementation in any
language. The protocol is specified in spec/conformance.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parent.parent / "vectors"
COMMANDS = ("checksum", "read", "verify", "repair", "fold")
INPUT_EXTS = (".jsonl", ".bin", ".txt")
_EXPECTED = re.compile(r"^(?P<name>.+)\.(?P<cmd>" + "|".join(COMMANDS) + r")\.json$")


@dataclass
class Case:
    name: str  #: ``<dir>/<name>.<cmd>``, e.g. ``read/y_header_only.verify``
    cmd: str
    input: Path
    expected: Path

    @property
    def implementation_defined(self) -> bool:
        return self.name.split("/")[-1].startswith("i_")


@dataclass
class Result:
    case: Case
    status: str  #: PASS, FAIL or DIFF
    details: list[str]


def discover(root: Path = VECTORS, patterns: list[str] | None = None) -> list[Case]:
    """Every case under ``root`` (sorted), keeping those matching any of ``patterns``.

    A pattern with ``*``, ``?`` or ``[`` is a glob over the case name, anything else a
    substring of it.
    """
    cases: list[Case] = []
    for expected in sorted(root.rglob("*.json")):
        m = _EXPECTED.match(expected.name)
        if m is None:
            continue
        stem = m.group("name")
        inputs = [expected.with_name(stem + ext) for ext in INPUT_EXTS]
        found = [p for p in inputs if p.exists()]
        if len(found) != 1:
            raise SystemExit(f"conformance: {expected}: expected one input file, found {found}")
        rel = expected.parent.relative_to(root).as_posix()
        name = f"{rel}/{stem}.{m.group('cmd')}"
        cases.append(Case(name, m.group("cmd"), found[0], expected))
    if patterns:
        cases = [c for c in cases if any(_matches(c.name, p) for p in patterns)]
    return cases


def _matches(name: str, pattern: str) -> bool:
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def _show(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def diff(expected: Any, actual: Any, path: str = "$", limit: int = 12) -> list[str]:
    """Differences between two JSON values as ``path: expected X, got Y`` lines (at most
    ``limit``). Numbers compare by value, booleans only with booleans."""
    out: list[str] = []
    _diff(expected, actual, path, out, limit)
    return out


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _diff(exp: Any, act: Any, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    ke, ka = _kind(exp), _kind(act)
    if ke != ka:
        out.append(f"{path}: expected {_show(exp)}, got {_show(act)}")
    elif ke == "object":
        for k in exp:
            sub = f"{path}.{k}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) else f"{path}[{k!r}]"
            if k not in act:
                out.append(f"{sub}: missing (expected {_show(exp[k])})")
            else:
                _diff(exp[k], act[k], sub, out, limit)
            if len(out) >= limit:
                return
        for k in act:
            if k not in exp:
                out.append(f"{path}: unexpected member {k!r} = {_show(act[k])}")
                if len(out) >= limit:
                    return
    elif ke == "array":
        for i, (e, a) in enumerate(zip(exp, act, strict=False)):
            _diff(e, a, f"{path}[{i}]", out, limit)
            if len(out) >= limit:
                return
        if len(exp) != len(act):
            out.append(f"{path}: expected {len(exp)} items, got {len(act)}")
    elif exp != act:
        out.append(f"{path}: expected {_show(exp)}, got {_show(act)}")


def _excerpt(lines: list[str]) -> list[str]:
    """The first two and last three lines of stderr (Node puts the message first, Python
    last)."""
    lines = [f"stderr: {line}" for line in lines]
    return lines if len(lines) <= 5 else [*lines[:2], "stderr: ...", *lines[-3:]]


def run_case(program: list[str], case: Case, timeout: float) -> Result:
    data = case.input.read_bytes()
    expected = json.loads(case.expected.read_text(encoding="utf-8"))
    try:
        proc = subprocess.run(
            [*program, case.cmd], input=data, capture_output=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return Result(case, "FAIL", [f"timed out after {timeout:g} s"])
    except OSError as exc:
        return Result(case, "FAIL", [f"could not start {program[0]!r}: {exc}"])
    stderr = _excerpt(proc.stderr.decode("utf-8", "replace").strip().splitlines())
    if proc.returncode != 0:
        return Result(case, "FAIL", [f"exit status {proc.returncode}", *stderr])
    try:
        actual = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        out = proc.stdout[:200].decode("utf-8", "replace")
        return Result(case, "FAIL", [f"stdout is not one JSON value ({exc}): {out!r}", *stderr])
    if not isinstance(actual, dict):
        return Result(case, "FAIL", [f"stdout is not a JSON object: {_show(actual)}"])
    problems = diff(expected, actual)
    if not problems:
        return Result(case, "PASS", [])
    return Result(case, "DIFF" if case.implementation_defined else "FAIL", problems)


def run(
    program: list[str],
    cases: list[Case],
    *,
    jobs: int = 1,
    timeout: float = 60.0,
    strict: bool = False,
    quiet: bool = False,
    out: Any = None,
) -> tuple[int, int, int]:
    """Run ``cases``; print the report; return ``(passed, failed, differ)``."""
    out = out or sys.stdout
    passed = failed = differ = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for result in pool.map(lambda c: run_case(program, c, timeout), cases):
            status = result.status
            if status == "DIFF" and strict:
                status = "FAIL"
            if status == "PASS":
                passed += 1
            elif status == "FAIL":
                failed += 1
            else:
                differ += 1
            if status != "PASS" or not quiet:
                note = "  (implementation-defined)" if status == "DIFF" else ""
                print(f"{status} {result.case.name}{note}", file=out)
                for line in result.details:
                    print(f"    {line}", file=out)
    summary = f"conformance: {passed} passed, {failed} failed"
    if differ:
        summary += f" ({differ} implementation-defined case(s) differ from the reference)"
    print(summary, file=out)
    return passed, failed, differ


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Run the jsonltape conformance vectors against a program.",
        epilog="PROGRAM is started as `PROGRAM CMD` with the input on stdin; see "
        "spec/conformance.md.",
    )
    ap.add_argument(
        "--program",
        required=True,
        help='the command line to test, e.g. "python -m jsonltape.conformance"',
    )
    ap.add_argument(
        "filter",
        nargs="*",
        help="only cases whose name (e.g. read/n_bom.verify) contains this, or matches it as a "
        "glob",
    )
    ap.add_argument("--vectors", type=Path, default=VECTORS, help="default: %(default)s")
    ap.add_argument("--strict", action="store_true", help="a differing i_ case fails too")
    ap.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="cases run in parallel (default: %(default)s)",
    )
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only failures and the sum")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    args = ap.parse_args(argv)
    program = shlex.split(args.program)
    if not program:
        ap.error("--program is empty")
    cases = discover(args.vectors, args.filter)
    if args.list:
        for c in cases:
            print(c.name)
        return 0
    if not cases:
        print("conformance: no case matches", file=sys.stderr)
        return 2
    _passed, failed, _differ = run(
        program, cases, jobs=args.jobs, timeout=args.timeout, strict=args.strict, quiet=args.quiet
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
