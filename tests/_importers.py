"""Helpers for the tests of the importers of issue 32 (Continue, Copilot CLI, Copilot Chat in VS
Code, Cursor): copies of fixture trees, request bodies and their validity, the raw lines an import
kept, the read-only scan beside the import, a CLI run's verdict, a root's sessions as two imports
of the same sources must both write them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import strategies as st

import jsonltape
from jsonltape import fold
from jsonltape.fold._valid import check_anthropic, check_kept, check_openai
from jsonltape.interop import FileReport, kept_lines
from jsonltape.interop._raw import run_of
from jsonltape.interop.foreign import scan_file

FIXTURES = Path(__file__).parent / "fixtures" / "interop"
#: Any JSON value, small: what a fuzzed field of a source record holds.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


def age(paths: Iterable[Path], seconds: float = 7200) -> None:
    """Set the change time of ``paths`` ``seconds`` ago (a finished source: settled)."""
    t = time.time() - seconds
    for p in paths:
        os.utime(p, (t, t), follow_symlinks=False)


def copy_tree(src: Path, dst: Path, *, seconds: float = 7200) -> Path:
    """A copy of a fixture tree (or file) at ``dst``, every file changed ``seconds`` ago (0: a
    source being written now; a checkout's own mtimes would make the test depend on its age)."""
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
        files = [p for p in dst.rglob("*") if p.is_file()]
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        files = [dst]
    age(files, seconds)
    return dst


def bodies(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The session's OpenAI and Anthropic request bodies."""
    return fold.messages(path, format="openai"), fold.messages(path, format="anthropic")


def problems(path: str | Path) -> list[str]:
    """What the providers' rules refuse in the session's request bodies (empty: valid), as
    ``messages --check`` checks them."""
    items = fold.messages(path)["messages"]
    openai, anthropic = bodies(path)
    return [f"openai: {p}" for p in check_openai(openai) + check_kept(items, openai)] + [
        f"anthropic: {p}" for p in check_anthropic(anthropic) + check_kept(items, anthropic)
    ]


def surface(path: str | Path) -> list[tuple[str, Any]]:
    """(role, content) of each message of the session's OpenAI body."""
    return [(m["role"], m.get("content")) for m in bodies(path)[0]["messages"]]


def kept_whole(raw: Any) -> list[tuple[int, str]]:
    """The lines an imported event's ``data.import.raw`` keeps (``kept_lines``), checking that
    it is as spec B.1 says an import writes it: every key read whole (``kept_lines`` drops none
    of them) and the event's consecutive lines one run, however the importer read them."""
    lines = list(kept_lines(raw))
    if not raw:
        return lines
    assert all(list(kept_lines({k: v})) for k, v in raw.items()), f"a key is dropped: {raw}"
    runs: list[list[tuple[int, str]]] = []
    for n, text in sorted(lines):
        if runs and runs[-1][-1][0] == n - 1:
            runs[-1].append((n, text))
        else:
            runs.append([(n, text)])
    want = sorted(run_of(r[0][0], [t for _, t in r]) for r in runs)
    assert sorted(raw.items()) == want, f"consecutive lines are not one run: {list(raw)}"
    return lines


def raws(paths: Iterable[str | Path]) -> dict[int, str]:
    """Every source line the sessions keep verbatim (line number -> text), checking that no
    line is carried twice and that each event keeps its lines as an import writes them."""
    kept: dict[int, str] = {}
    for path in paths:
        for line in jsonltape.reader.lines(path):
            info = line.event.data.get("import") if isinstance(line.event.data, dict) else None
            for n, text in kept_whole((info or {}).get("raw")):
                assert n not in kept, f"line {n} is carried twice"
                kept[n] = text
    return kept


def imported(report: FileReport) -> Path:
    assert report.status == "imported", report.error
    return Path(report.sessions[0])


def scan_matches_import(source: str, src: Path | Any, report: FileReport) -> None:
    """The read-only scan (``sync --source``) gives the events the import wrote, header first;
    only the import closes turns of a settled source and writes its markers."""
    written = [line.event for line in jsonltape.reader.lines(report.sessions[0])]
    scan = scan_file(source, src)
    scanned = [e for sid, e in scan.events() if sid == written[0].data["id"]]
    skip = {"session/flush", "import/sync"}
    # what the import adds at the end of a settled source (closers, ``turn/end``) is keyed
    # ``…:eof:…``: the scan never settles a source
    kept = [
        (e.type, e.data) for e in written[1:] if e.type not in skip and ":eof:" not in (e.key or "")
    ]
    assert [(e.type, e.data) for e in scanned[1:]] == kept
    assert scanned[0].data.get("title") == written[0].data.get("title")
    assert scanned[0].data.get("cwd") == written[0].data.get("cwd")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``jsonltape ARGS`` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def one_verdict(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """A refused import: exit 2, one stderr line holding ``needles``, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    for n in needles:
        assert n in lines[0], lines[0]


def nested(depth: int) -> Any:
    """A value nested ``depth`` lists deep."""
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def survives(source: str, src: Path, root: Path) -> None:
    """An import of a source of any shape never breaks: it is imported (every session clean,
    each problem one line) or refused in one line naming the file."""
    from jsonltape.interop import import_file

    report = import_file(source, src, root)
    assert report.status in ("imported", "error"), report.error
    if report.status == "error":
        assert report.error is not None and "\n" not in report.error and str(src) in report.error
        return
    for _n, why in report.problems:
        assert "\n" not in why
    for session in report.sessions:
        assert jsonltape.verify(session).state == "clean"


def current_records(session: Path) -> list[Any]:
    """The records of the source version the imported session holds last (a source rewritten in
    place: its kept lines cut at the rewrite points of its last ``import/sync``)."""
    from jsonltape.interop._rewrite import document

    kept = raws([session])
    marker = [e.data for e in jsonltape.read(session) if e.type == "import/sync"][-1]
    lines = [kept[n].encode() for n in range(1, int(marker["lines"]) + 1)]
    points = [tuple(p) for p in marker.get("rewrites", [])]
    return [msgspec.json.decode(r) for r in document(lines, points)]


def sessions_of(root: Path) -> dict[str, list[object]]:
    """Every session under ``root``, line by line, the wall-clock parts of an import's own
    markers left out (``time`` and ``crc`` of ``import/sync`` and ``session/flush``, and the
    checkpoint's span crc): what two imports of the same sources must both have written."""
    out: dict[str, list[object]] = {}
    for f in sorted(root.rglob("*.jsonl")):
        rows: list[object] = []
        for line in f.read_bytes().split(b"\n")[:-1]:  # never splitlines: U+2028 is text
            event = json.loads(line)
            if event["type"] in ("import/sync", "session/flush"):
                event.pop("time"), event.pop("crc")
                event["data"].get("span", {}).pop("crc", None)
                rows.append(event)
            else:
                rows.append(line)
        out[str(f.relative_to(root))] = rows
    return out
