"""The ``import/sync`` marker of a source that makes many sessions (each run of an Aider history
is one): only the source's own session lists the others, so the markers of an import grow with
the number of sessions, not its square, and a re-import still finds every session."""

from __future__ import annotations

from pathlib import Path

from jsonltape import reader
from jsonltape.interop import import_paths

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
