"""An import of a Claude Code session with sidechains SIGKILLed at each step of saving its
staged sessions (after each one gets its name, after each directory sync): importing again
ends exactly where an uninterrupted import ends, the file's own ``import/sync`` marker
included, so the import after that is the unchanged one (its marker read, nothing mapped)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape.interop import _state, import_file

from .conftest import SAMPLES

#: a Claude Code session with two sidechains: three sessions, created staged
JAPANESE = "claude-code-v1.0.108-japanese.jsonl"

#: Dies (SIGKILL) right after the ``n``-th call of ``what`` returned: ``link`` gives a staged
#: session its name, ``fsync_dir`` makes names durable.
CHILD = r"""
import os, signal, sys
from jsonltape import _fs
from jsonltape.interop import import_file
what, n = sys.argv[3], int(sys.argv[4])
calls = [0]
def dying(real):
    def call(*args, **kwargs):
        out = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    return call
if what == "link":
    os.link = dying(os.link)
else:
    _fs.fsync_dir = dying(_fs.fsync_dir)
import_file("claude-code", sys.argv[1], sys.argv[2])
"""


def _content(path: Path) -> list[tuple[str, Any]]:
    """A session's events apart from checkpoints (their times are the writer's clock)."""
    return [(e.type, e.data) for e in jsonltape.read(path) if e.type != "session/flush"]


def _source(tmp_path: Path) -> Path:
    src = tmp_path / "src" / JAPANESE
    src.parent.mkdir()
    shutil.copyfile(SAMPLES / JAPANESE, src)
    old = time.time() - 7200  # settled: nothing of it is held back
    os.utime(src, (old, old))
    return src


@pytest.mark.parametrize(("what", "n"), [("link", 1), ("link", 2), ("link", 3), ("fsync_dir", 4)])
def test_an_import_killed_while_naming_its_sessions_is_completed_by_the_next_with_its_marker(
    tmp_path: Path, what: str, n: int
) -> None:
    src = _source(tmp_path)
    fresh = import_file("claude-code", src, tmp_path / "fresh")
    assert fresh.status == "imported" and len(fresh.sessions) == 3
    want = {Path(s).name: _content(Path(s)) for s in fresh.sessions}
    main = tmp_path / "root" / "claude-code" / Path(fresh.sessions[0]).name
    assert want[main.name][-1][0] == "import/sync"
    killed = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(src), str(tmp_path / "root"), what, str(n)],
        cwd=tmp_path,
        check=False,
    )
    assert killed.returncode == -9  # it died where it was meant to
    # it left the file's own session (named first: its children name it) without its marker,
    # and not every sidechain, or every one of them with its own marker
    left = sorted(p.name for p in main.parent.glob("*.jsonl"))
    assert main.name in left and _content(main) == want[main.name][:-1]
    assert all(_content(main.parent / name) == want[name] for name in left if name != main.name)
    # the sidechains are named by the close's threads at once: one may get its name between
    # the n-th link and the signal landing (the main one is named alone, first)
    assert len(left) == 1 if n == 1 else min(n, 3) <= len(left) <= 3
    again = import_file("claude-code", src, tmp_path / "root")
    assert again.status in ("imported", "unchanged"), again.error
    got = {p.name: _content(p) for p in main.parent.glob("*.jsonl")}
    assert got == want
    # the import after that decides "unchanged" from the file's own marker, as after a
    # complete import, instead of mapping the whole source again
    mark = _state.last_sync(main)
    assert mark is not None and mark == _state.last_sync(Path(fresh.sessions[0]))
    assert import_file("claude-code", src, tmp_path / "root").status == "unchanged"


def test_a_failed_import_never_removes_a_session_another_writer_created_under_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The source holds only sidechain lines, so the file's own session is a header when the
    import names it first; another writer (a second import) takes that name just before. The
    refused import removes what it created that holds nothing, and that is not the other
    writer's session nor its lock file."""
    src = tmp_path / "src" / JAPANESE
    src.parent.mkdir()
    with (SAMPLES / JAPANESE).open(encoding="utf-8") as whole:
        src.write_text("".join(line for line in whole if '"isSidechain":true' in line))
    old = time.time() - 7200
    os.utime(src, (old, old))
    main = tmp_path / "root" / "claude-code" / JAPANESE
    real = os.link
    theirs: list[bytes] = []

    def taken_first(source: Any, target: Any, **kwargs: Any) -> None:
        if Path(target) == main and not theirs:
            theirs.append(b"")  # the other writer's own link goes through here too
            with jsonltape.open(main, create=True) as other:  # the other writer, meanwhile
                other.user("theirs")
            theirs[0] = main.read_bytes()
        real(source, target, **kwargs)

    monkeypatch.setattr(os, "link", taken_first)
    report = import_file("claude-code", src, tmp_path / "root")
    assert report.status == "error" and "already exists" in (report.error or "")
    assert theirs and main.read_bytes() == theirs[0]
    assert (main.parent / f".{main.name}.lock").exists()  # the other writer's, left alone
