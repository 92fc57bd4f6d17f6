"""The sessions of a source of many runs are created and closed several at once
(``jsonltape._together.at_once``): every call runs to its end, a failure is returned in its
place, and an import whose session cannot be created leaves none of the others behind."""

from __future__ import annotations

import builtins
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape._together import WIDTH, at_once
from jsonltape.interop import import_paths

from .conftest import SAMPLES

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
    blocker = root / "aider" / names[which]
    blocker.mkdir(parents=True)  # that session's name is taken: it cannot be created
    (report,) = import_paths("aider", [repo], root, settle=0)
    assert report.status == "error"
    assert report.error is not None and names[which] in report.error
    # neither the other runs' sessions nor their temp files are left
    assert sorted(p.name for p in (root / "aider").iterdir()) == [blocker.name]
    blocker.rmdir()
    (again,) = import_paths("aider", [repo], root, settle=0)  # nothing was left locked
    assert again.status == "imported" and sorted(Path(s).name for s in again.sessions) == names
    for session in again.sessions:
        report = jsonltape.verify(session)
        assert (report.state, report.committed_bytes) == ("clean", report.size)


def _source_opens(tmp_path: Path, runs: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times importing a history of ``runs`` runs opens the history file."""
    repo = tmp_path / f"repo-{runs}"
    repo.mkdir()
    source = repo / ".aider.chat.history.md"
    source.write_text(
        "".join(f"# aider chat started at 2024-08-05 19:{m:02d}:02\n\n#### hi {m}\n\nhello\n"
                for m in range(runs)),
        encoding="utf-8",
    )  # fmt: skip
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(os.fspath(file) if isinstance(file, (str, os.PathLike)) else "")
        return real_open(file, *args, **kwargs)

    def counting_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(path))
        return real_os_open(path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(builtins, "open", counting_open)
        m.setattr(os, "open", counting_os_open)
        (report,) = import_paths("aider", [repo], tmp_path / f"root-{runs}", settle=0)
    assert report.status == "imported" and len(report.sessions) == runs
    return sum(1 for p in opened if os.path.abspath(p) == os.path.abspath(source))


def test_an_import_opens_its_source_as_often_for_many_runs_as_for_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every session's header records the source's first-line SHA-256: it was read again, the
    # file opened, for each run (1,134 times for Aider's own history)
    few = _source_opens(tmp_path, 2, monkeypatch)
    many = _source_opens(tmp_path, 3 * RUNS, monkeypatch)
    assert 1 <= few == many


def _claude_code_with_sidechains(tmp_path: Path, count: int) -> Path:
    """A Claude Code session (the sample's main thread) that ran ``count`` sub-agents, each a
    copy of the sample's first sidechain with ids of its own: ``count`` sidechain sessions."""
    lines = (SAMPLES / "claude-code-v1.0.108-japanese.jsonl").read_text().splitlines()
    block = lines[15:22]
    assert json.loads(block[0])["isSidechain"] and not json.loads(block[0])["parentUuid"]
    out = list(lines[:15])
    for k in range(count):
        copy = "\n".join(block)
        for rec in block:
            uuid = json.loads(rec)["uuid"]
            copy = copy.replace(uuid, f"{uuid[:-4]}{k:04d}")
        out.extend(copy.replace("toolu_01", f"toolu_{k:04d}").splitlines())
    src = tmp_path / f"src-{count}" / "7d2c9a10-1b2c-4d3e-8f40-5a6b7c8d9e0f.jsonl"
    src.parent.mkdir()
    src.write_text("\n".join(out) + "\n", encoding="utf-8")
    return src


def _main_session_opens(tmp_path: Path, count: int, monkeypatch: pytest.MonkeyPatch) -> int:
    src = _claude_code_with_sidechains(tmp_path, count)
    opened: list[str] = []
    real_os_open = os.open

    def counting_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        opened.append(os.path.basename(os.fspath(path)))
        return real_os_open(path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(os, "open", counting_os_open)
        (report,) = import_paths("claude-code", [src], tmp_path / f"root-{count}", settle=0)
    assert report.status == "imported", report.error
    assert len(report.sessions) == count + 1
    main = min(report.sessions, key=len)  # the sidechains are named after it
    main_crc = next(iter(jsonltape.reader.lines(main))).event.crc
    for session in report.sessions:
        head = jsonltape.reader.header(session)
        if session != main:  # each sidechain forks the main session's header, by its crc
            assert head.parent is not None and head.parent.crc == main_crc
    return opened.count(os.path.basename(main))


def test_an_import_opens_the_main_session_as_often_for_many_sidechains_as_for_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each sidechain's header names the main session's header crc: the main session's first
    # line was read again (the file opened) for every sub-agent the session ran
    assert _main_session_opens(tmp_path, 2, monkeypatch) == _main_session_opens(
        tmp_path, 3 * RUNS, monkeypatch
    )


def test_a_refused_import_names_only_the_sessions_the_source_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [
        f"# aider chat started at 2024-08-05 19:{m:02d}:02\n\n> Aider v0.47.0\n> Model: gpt-4o\n"
        for m in range(RUNS)
    ]
    # the third run's usage is beyond JSON's interoperable integers: its event is refused
    runs[2] += "\n#### hello\n\nHi there.\n\n> Tokens: 99999999999999999999 sent, 5 received.\n"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".aider.chat.history.md").write_text("\n".join(runs), encoding="utf-8")
    linked: list[str] = []
    real_link = os.link

    def link(src: Any, dst: Any, **kwargs: Any) -> None:
        linked.append(os.path.basename(dst))
        real_link(src, dst, **kwargs)

    root = tmp_path / "root"
    with monkeypatch.context() as m:
        m.setattr(os, "link", link)
        (report,) = import_paths("aider", [repo], root, settle=0)
    assert report.status == "error" and report.error is not None
    assert "outside the interoperable range" in report.error
    left = sorted(p.name for p in (root / "aider").iterdir())
    # the two runs before it are kept, whole; the runs after it were being created and got
    # nothing: dropped without ever having a name (not named, then removed)
    assert len(left) == 2 and sorted(linked) == left
    for name in left:
        assert jsonltape.verify(root / "aider" / name).state == "clean"
