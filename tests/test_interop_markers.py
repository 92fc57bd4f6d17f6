"""The ``import/sync`` marker of a source that makes many sessions (each run of an Aider history
is one): only the source's own session lists the others, so the markers of an import grow with
the number of sessions, not its square, and a re-import still finds every session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import reader
from jsonltape.interop import SourceError, import_file, import_paths
from jsonltape.interop._rewrite import continue_log

from ._importers import FIXTURES, age, cli, copy_tree, one_verdict

FIX = Path(__file__).parent / "fixtures" / "interop" / "aider" / "aider-repo-head.chat.history.md"


def _history(dest: Path, copies: int) -> Path:
    text = FIX.read_text(encoding="utf-8")
    repo = dest / "repo"
    repo.mkdir(parents=True)
    f = repo / ".aider.chat.history.md"
    f.write_text(text * copies, encoding="utf-8")
    return repo


def _markers(session: Path) -> list[dict[str, object]]:
    return [e.data for e in reader.read(session) if e.type == "import/sync"]


def test_only_the_sources_own_session_lists_the_sessions_it_made(tmp_path: Path) -> None:
    repo = _history(tmp_path / "src", 10)
    root = tmp_path / "root"
    (report,) = [r for r in import_paths("aider", [repo], root) if r.status != "skipped"]
    assert report.status == "imported", report.error
    sessions = [Path(s) for s in report.sessions]
    assert len(sessions) >= 40  # four runs, ten times
    own, *others = sessions
    (mark,) = _markers(own)
    assert sorted(f"{t}.jsonl" for t in mark["targets"]) == sorted(s.name for s in sessions)
    for other in others:
        (m,) = _markers(other)
        assert "targets" not in m and m["lines"] == mark["lines"]
    again = list(import_paths("aider", [repo], root))
    assert [r.status for r in again] == ["unchanged"]
    assert sorted(again[0].sessions) == sorted(report.sessions)


def test_the_markers_of_an_import_grow_linearly_with_its_sessions(tmp_path: Path) -> None:
    def marker_bytes(copies: int) -> int:
        base = tmp_path / str(copies)
        repo = _history(base / "src", copies)
        (r,) = [r for r in import_paths("aider", [repo], base / "root") if r.status != "skipped"]
        total = 0
        for s in r.sessions:
            for line in Path(s).read_bytes().splitlines():
                if b'"import/sync"' in line:
                    total += len(line)
        return total

    small, large = marker_bytes(5), marker_bytes(20)
    # four times the sessions: about four times the marker bytes (the square would be 16x)
    assert large < 5 * small, (small, large)


# -- a session edited by hand ------------------------------------------------------------------

CONTINUE = FIXTURES / "continue" / "built-from-writer" / ".continue" / "sessions"
CLAUDE = Path(__file__).parent / "fixtures" / "claude21" / "streamed-tool-results.jsonl"


def _imported(tmp: Path, source: str) -> tuple[Path, Path, Path]:
    """A source imported once: (the source, the root, its session)."""
    if source == "continue":
        src = copy_tree(CONTINUE, tmp / "src") / "b7e1c2d3-0000-4000-8000-00000000c0de.json"
    else:
        src = copy_tree(CLAUDE, tmp / "src" / CLAUDE.name)
    root = tmp / "root"
    (session,) = import_file(source, src, root).sessions
    return src, root, Path(session)


def _changed(src: Path) -> None:
    """The source changed since: Continue saved it cut back, Claude Code appended a line."""
    if src.suffix == ".json":
        doc = json.loads(src.read_text(encoding="utf-8"))
        doc["history"] = doc["history"][:2]
        src.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    else:
        with src.open("ab") as f:
            f.write(b'{"type": "summary", "summary": "later"}\n')
    age([src], 7000)


@pytest.mark.parametrize(
    ("source", "edit", "member"),
    [
        ("claude-code", {"lines": "\u00b2"}, "lines"),
        ("claude-code", {"lines": [3]}, "lines"),
        ("continue", {"lines": 3, "rewrites": [["\u00b2", 1]]}, "rewrites"),
        ("continue", {"lines": 3, "rewrites": [[1]]}, "rewrites"),
        ("continue", {"lines": 3, "rewrites": [[1, "1" * 5000]]}, "rewrites"),
        ("claude-code", {"lines": 3, "targets": 5}, "targets"),
        ("claude-code", {"lines": 3, "targets": ["../../../elsewhere"]}, "targets"),
    ],
)
def test_a_marker_edited_into_a_session_is_one_verdict_naming_it(
    tmp_path: Path, source: str, edit: dict[str, Any], member: str
) -> None:
    """What a re-import reads of the ``import/sync`` markers (where earlier runs stopped, the
    rewrite points, the other sessions) is checked: a marker no import writes, edited into the
    session, refuses the source in one line naming the session, the marker's line and the
    member (each was a traceback: ValueError, TypeError or IndexError), and nothing is
    written."""
    src, root, session = _imported(tmp_path, source)
    with jsonltape.open(session) as tape:
        seq = tape.append("import/sync", edit, ignorable=True).seq
    before = session.read_bytes()
    _changed(src)
    done = cli("import", "--from", source, str(src), "-o", str(root))
    one_verdict(done, str(session), f"line {seq + 1}", f"{member}:", "import/sync")
    assert session.read_bytes() == before


def test_a_malformed_last_marker_of_an_unchanged_source_is_one_verdict(tmp_path: Path) -> None:
    """The marker that says a source is unchanged (its size and change time) is checked before
    its tail is read: one whose ``torn`` is not a line, an offset and a byte count (a hand
    edit) refuses the source in one line (it was a ValueError)."""
    src, root, session = _imported(tmp_path, "claude-code")
    (last,) = [e.data for e in reader.read(session) if e.type == "import/sync"]
    with jsonltape.open(session) as tape:
        tape.append("import/sync", {**last, "torn": {"line": "x"}}, ignorable=True)
    done = cli("import", "--from", "claude-code", str(src), "-o", str(root))
    one_verdict(done, str(session), "torn:", "import/sync")


def test_the_first_line_a_session_lacks_is_looked_for_among_those_it_keeps() -> None:
    """Continuing a rewritten source, the first line the session does not keep is looked for up
    to the lines it keeps, not to the marker's count (a hand-edited marker of 2**53-1 lines
    was a list of that many numbers)."""
    looked: list[int] = []

    class Kept(dict[int, str]):
        def __contains__(self, n: object) -> bool:
            looked.append(n)  # type: ignore[arg-type]
            return super().__contains__(n)

    raws = Kept({1: '{"a": 1}', 2: '{"b": 2}'})
    marker = {"lines": 10**6, "bytes": 10**7, "sha256": "0" * 64}
    with pytest.raises(SourceError, match="line 3 of what it imported is not in the session"):
        continue_log(raws, marker, [], [], 0, b"", lambda v: True, "src")
    assert looked == [1, 2, 3]
