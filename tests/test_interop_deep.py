"""Sources nested deeper than an importer decodes (issue 29, item 10): every importer, every
kind of input, one verdict where the nesting is, and the other sessions import.

A JSONL source's line nested deeper than ``_source.MAX_DEPTH`` levels is kept raw with one
problem naming the byte where it goes too deep; a source read whole (a Gemini CLI legacy
``.json`` chat, an OpenCode session in ``opencode.db`` or in its storage tree) is refused
for that session, naming the file (the database's table, row and column) and the byte. The
limit is fixed, so the verdict is the same from any call stack: the decoders recurse once per
level within Python's recursion limit, and a line a little under it used to decode or not
depending on how deep the caller was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape.interop import import_paths
from jsonltape.interop._opencode_db import ROW_DEPTH
from jsonltape.interop._source import MAX_DEPTH, too_deep

from .test_interop_opencode import FIX as OPENCODE
from .test_interop_opencode import build_db

FIXTURES = Path(__file__).parent / "fixtures"
OLD = time.time() - 7200
#: Where the deep value goes: JSONL sources take it in a line; the others in a message.
JSONL = {
    "claude-code": (
        FIXTURES / "interop" / "claude-rewind-compact.jsonl",
        "c0ffee00-0000-4000-8000-00000000000{}.jsonl",
    ),
    "codex": (
        FIXTURES / "interop" / "codex-compacted.jsonl",
        "rollout-2026-01-05T08-00-00-0199aaaa-bbbb-7ccc-8ddd-eeeeffff000{}.jsonl",
    ),
    "pi": (
        FIXTURES / "interop" / "pi-v3-tree.jsonl",
        "2026-02-01T09-00-00-000Z_5e55i0n0-0000-4000-8000-00000000000{}.jsonl",
    ),
    "gemini-cli": (
        FIXTURES / "gemini" / "session-2026-03-02T10-00-4f1c2b9e.jsonl",
        "session-2026-03-02T10-00-4f1c2b9{}.jsonl",
    ),
}
LEGACY = FIXTURES / "gemini" / "legacy" / "session-2026-03-02T10-00-5d2e8f1a.json"
KINDS = [*JSONL, "gemini-legacy", "opencode-db", "opencode-tree"]
SOURCE = {"gemini-legacy": "gemini-cli", "opencode-db": "opencode", "opencode-tree": "opencode"}
DEEP_SID = "ses_0deep0000000000000000000"


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _settled(path: Path) -> None:
    for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(p, (OLD, OLD), follow_symlinks=False)


def _with_deep(value: dict[str, Any], levels: int, **dumps: Any) -> str:
    """``value`` as JSON text with a member ``deep`` nested ``levels`` deep (json.dumps itself
    stops near 1,000, so the nesting is spliced in as text)."""
    value["deep"] = "@deep@"
    return json.dumps(value, **dumps).replace('"@deep@"', nested(levels), 1)


def _jsonl(kind: str, tree: Path, levels: int) -> None:
    src, name = JSONL[kind]
    tree.mkdir(parents=True)
    lines = src.read_bytes().splitlines(keepends=True)
    shutil.copyfile(src, tree / name.format(1))  # the neighbour, untouched
    lines[3] = _with_deep(json.loads(lines[3]), levels - 1).encode() + b"\n"
    (tree / name.format(2)).write_bytes(b"".join(lines))


def _legacy(tree: Path, levels: int) -> None:
    tree.mkdir(parents=True)
    shutil.copyfile(LEGACY, tree / LEGACY.name)
    chat = json.loads(LEGACY.read_text())
    first = {k: v for k, v in chat.items() if k != "messages"}
    # the file, its messages list and the second message are three levels
    message = _with_deep(chat["messages"][1], levels - 3)
    others = [json.dumps(m) for m in chat["messages"]]
    others[1] = message
    text = json.dumps(first)[:-1] + ', "messages": [' + ", ".join(others) + "]}"
    (tree / "session-2026-03-02T10-00-5d2e8f1b.json").write_text(text)


def _deep_data(levels: int) -> str:
    """A message's data (JSON text) nested ``levels`` deep."""
    return _with_deep({"role": "user", "time": {"created": 5}}, levels - 1, separators=(",", ":"))


def _opencode_db(tree: Path, levels: int) -> None:
    tree.mkdir(parents=True)
    db = build_db(OPENCODE / "storage", tree / "opencode.db")
    con = sqlite3.connect(db)
    con.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created,"
        " time_updated) SELECT ?, project_id, 's', '/x', 't', '1', 0, 0 FROM session LIMIT 1",
        (DEEP_SID,),
    )
    con.execute(
        "INSERT INTO message VALUES ('msg_deep', ?, 1, 1, ?)", (DEEP_SID, _deep_data(levels))
    )
    con.commit()
    con.close()


def _opencode_tree(tree: Path, levels: int) -> None:
    storage = tree / "storage"
    shutil.copytree(OPENCODE / "storage", storage)
    (project,) = (storage / "session").iterdir()
    info = {"id": DEEP_SID, "projectID": project.name, "directory": "/x", "title": "t",
            "version": "1", "time": {"created": 0, "updated": 0}}  # fmt: skip
    (project / f"{DEEP_SID}.json").write_text(json.dumps(info))
    (storage / "message" / DEEP_SID).mkdir()
    data = _deep_data(levels)
    message = '{"id":"msg_deep","sessionID":"' + DEEP_SID + '",' + data[1:]  # the whole info
    (storage / "message" / DEEP_SID / "msg_deep.json").write_text(message)


def make(kind: str, tree: Path, levels: int) -> None:
    """A source tree of ``kind`` with two sessions, one holding a value nested ``levels`` deep
    (counting the line, file or row it is in as one level)."""
    builders: dict[str, Callable[[Path, int], None]] = {
        "gemini-legacy": _legacy,
        "opencode-db": _opencode_db,
        "opencode-tree": _opencode_tree,
    }
    if kind in JSONL:
        _jsonl(kind, tree, levels)
    else:
        builders[kind](tree, levels)
    _settled(tree)


def _imported(root: Path) -> set[str]:
    return {p.name for p in root.rglob("*.jsonl")}


def _depth_at(text: bytes, at: int) -> int:
    """How deep the bracket at byte ``at`` opens (strings stepped over)."""
    depth = 0
    for m in re.finditer(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text[: at + 1]):
        c = text[m.start() : m.start() + 1]
        depth += 1 if c in b"[{" else -1 if c in b"]}" else 0
    return depth


def _import(kind: str, tree: Path, root: Path) -> list[Any]:
    return list(import_paths(SOURCE.get(kind, kind), [tree], root, settle=0))


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1_000, 2_000, 100_000])
@pytest.mark.parametrize("kind", KINDS)
def test_a_value_nested_too_deep_gets_one_verdict_naming_where_and_the_rest_imports(
    kind: str, levels: int, tmp_path: Path
) -> None:
    tree, root = tmp_path / "src", tmp_path / "root"
    make(kind, tree, levels)
    reports = _import(kind, tree, root)
    bad = [r for r in reports if r.status == "error" or r.problems]
    assert len(bad) == 1, [(r.path, r.status, r.error, r.problems) for r in reports]
    (report,) = bad
    good = [r for r in reports if r is not report]
    assert good and all(r.status == "imported" and not r.problems for r in good)
    if kind in JSONL:
        # the line is kept raw with one problem; everything else of that file is imported
        assert report.status == "imported"
        ((n, why),) = report.problems
        assert n == 4 and f"nest deeper than {MAX_DEPTH} levels" in why
        at = int(re.search(r"at byte (\d+)", why).group(1))  # type: ignore[union-attr]
        line = Path(report.path).read_bytes().splitlines()[3]
        assert line[at : at + 1] == b"[" and _depth_at(line, at) == MAX_DEPTH + 1
        raw = [
            e.data["import"]["raw"]
            for s in report.sessions
            for e in jsonltape.read(s)
            if e.type == "import/raw" and e.data["import"]["lines"] == [4]
        ]
        assert raw == [{"4": line.decode()}]  # kept verbatim
        return
    # read whole: that session is refused, named with the byte; nothing of it is written
    assert report.status == "error" and report.sessions == []
    error = str(report.error)
    limit = MAX_DEPTH if kind == "gemini-legacy" else ROW_DEPTH
    assert f"nest deeper than {limit} levels (at byte " in error, error
    assert "\n" not in error and "Traceback" not in error
    if kind == "gemini-legacy":
        assert "session-2026-03-02T10-00-5d2e8f1b.json" in error
    elif kind == "opencode-db":
        assert (
            "opencode.db" in error and DEEP_SID in error and "message row 'msg_deep': data" in error
        )
    else:
        assert f"{DEEP_SID}/msg_deep.json" in error
    assert not any(DEEP_SID in name or "5d2e8f1b" in name for name in _imported(root))


@pytest.mark.parametrize("kind", KINDS)
def test_values_at_the_limit_import_and_the_verdict_does_not_depend_on_the_call_stack(
    kind: str, tmp_path: Path
) -> None:
    # At the limit itself everything imports (what is deeper than the format's 128 levels is
    # stored as JSON text); one level more is refused. Run again 200 frames deeper: the same.
    limit = {"gemini-legacy": MAX_DEPTH, "opencode-db": ROW_DEPTH, "opencode-tree": ROW_DEPTH}
    at = limit.get(kind, MAX_DEPTH)

    def outcome(levels: int, run: int, frames: int) -> list[tuple[str, bool]]:
        tree, root = tmp_path / f"src{levels}-{run}", tmp_path / f"root{levels}-{run}"
        make(kind, tree, levels)

        def deeper(n: int) -> list[Any]:
            return deeper(n - 1) if n else _import(kind, tree, root)

        reports = deeper(frames)
        return sorted((Path(r.path).name, r.status == "error" or bool(r.problems)) for r in reports)

    fine, refused = outcome(at, 0, 0), outcome(at + 1, 0, 0)
    assert not any(bad for _name, bad in fine)
    assert sum(bad for _name, bad in refused) == 1
    assert outcome(at, 1, 200) == fine and outcome(at + 1, 1, 200) == refused


@pytest.mark.parametrize("kind", KINDS)
def test_the_cli_prints_the_verdict_in_one_line_and_says_what_the_exit_code_means(
    kind: str, tmp_path: Path
) -> None:
    tree, root = tmp_path / "src", tmp_path / "root"
    make(kind, tree, 100_000)
    r = subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "import", "--from", SOURCE.get(kind, kind),
         str(tree), "-o", str(root)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in r.stderr and "input:" not in r.stderr
    verdicts = [line for line in r.stderr.splitlines() if "nest deeper than" in line]
    assert len(verdicts) == 1, r.stderr
    summary = r.stderr.splitlines()[-1]
    assert summary.startswith("jsonltape: import: 2 files, ")
    if kind in JSONL:
        # a line kept raw is a problem, not an error: exit 0, both files imported
        assert r.returncode == 0 and "2 imported" in summary
        assert verdicts[0].endswith("(kept raw)") and ": line 4: " in verdicts[0]
    else:
        assert r.returncode == 2 and "1 error, 1 imported" in summary, r.stderr
        assert verdicts[0].startswith("jsonltape: error: ")


# -- the depth check itself -------------------------------------------------------------------

#: Strings full of what could be taken for structure: brackets, quotes, escapes.
_tricky = st.text(alphabet='[]{}"\\ax\n\u00e9', max_size=6)
_values = st.recursive(
    st.none() | st.integers() | _tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky, inner, max_size=3),
    max_leaves=40,
)


def _levels(value: Any) -> int:
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return 1 + max(map(_levels, items), default=0)
    return 0


@settings(max_examples=500, deadline=None)
@given(_values, st.integers(0, 6), st.sampled_from(["msgspec", "indented", "ascii"]))
def test_the_depth_check_agrees_with_the_decoded_depth_and_names_an_opener_one_too_deep(
    value: Any, limit: int, how: str
) -> None:
    raw = {
        "msgspec": lambda: msgspec.json.encode(value),
        "indented": lambda: json.dumps(value, indent=1, ensure_ascii=False).encode(),
        "ascii": lambda: json.dumps(value).encode(),
    }[how]()
    levels = _levels(value)
    why = too_deep(raw, limit)
    assert (why is not None) == (levels > limit), (raw, levels, why)
    if why is not None:
        at = int(why.rsplit("at byte ", 1)[1].rstrip(")"))
        assert raw[at : at + 1] in (b"[", b"{") and _depth_at(raw, at) == limit + 1
