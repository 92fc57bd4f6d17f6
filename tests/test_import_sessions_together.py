"""The sessions of a source of many runs are created and closed several at once
(``jsonltape._together.at_once``): every call runs to its end, a failure is returned in its
place, and an import whose session cannot be created leaves none of the others behind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import jsonltape
from jsonltape._together import WIDTH, at_once
from jsonltape.interop import import_paths

RUNS = 12


def test_at_once_runs_every_call_to_its_end_and_returns_failures_in_their_place() -> None:
    ran: list[int] = []
    lock = threading.Lock()
    gate = threading.Barrier(WIDTH, timeout=10)  # WIDTH calls must be running at the same time

    def call(i: int) -> int:
        if i < WIDTH:
            gate.wait()
        if i % 5 == 0:
            raise ValueError(f"call {i}")
        with lock:
            ran.append(i)
        return i * 10

    results = at_once([lambda i=i: call(i) for i in range(3 * WIDTH)])
    assert sorted(ran) == [i for i in range(3 * WIDTH) if i % 5]
    for i, result in enumerate(results):
        if i % 5 == 0:
            assert isinstance(result, ValueError) and str(result) == f"call {i}"
        else:
            assert result == i * 10


def test_at_once_of_one_call_runs_it_here_and_an_interrupt_is_raised() -> None:
    assert at_once([threading.current_thread]) == [threading.current_thread()]

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        at_once([lambda: 1, interrupted])


def _repo(tmp_path: Path) -> Path:
    """A history of runs where Aider started and left (455 of the 1,133 runs of Aider's own
    history): their sessions are created at the end of the import, together."""
    runs = [
        f"# aider chat started at 2024-08-05 19:{m:02d}:02\n\n> Aider v0.47.0\n> Model: gpt-4o\n"
        for m in range(RUNS)
    ]
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".aider.chat.history.md").write_text("\n".join(runs), encoding="utf-8")
    return repo


@pytest.mark.parametrize("which", [0, 1, 5, 11])
def test_an_import_whose_run_session_cannot_be_created_leaves_no_session_behind(
    tmp_path: Path, which: int
) -> None:
    repo = _repo(tmp_path)
    (first,) = import_paths("aider", [repo], tmp_path / "scratch", settle=0)
    names = sorted(Path(s).name for s in first.sessions)
    assert len(names) == RUNS
    root = tmp_path / "root"
    blocker = root / "aider" / f".{names[which]}.lock"
    blocker.mkdir(parents=True)  # that session's lock file cannot be made
    (report,) = import_paths("aider", [repo], root, settle=0)
    assert report.status == "error"
    assert report.error is not None and names[which] in report.error
    assert sorted(p.name for p in (root / "aider").iterdir()) == [blocker.name]
    blocker.rmdir()
    (again,) = import_paths("aider", [repo], root, settle=0)  # nothing was left locked
    assert again.status == "imported" and sorted(Path(s).name for s in again.sessions) == names
    for session in again.sessions:
        report = jsonltape.verify(session)
        assert (report.state, report.committed_bytes) == ("clean", report.size)
