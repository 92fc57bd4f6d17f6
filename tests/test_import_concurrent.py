"""Two imports of one source into one root at the same moment: the second waits for the
first, then finds the source imported. Before, both created the same staged sessions and both
failed at naming time ("session file already exists")."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsonltape
from jsonltape.interop import import_paths
from jsonltape.interop._engine import as_input, session_id_for
from jsonltape.interop._one_import import STRIPES, lock_file, one_import

from .test_import_kill import _content, _repo, _sessions


def _import(root: Path, repo: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "aider", "--json",
         "--settle", "0", "-o", str(root), str(repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _created(out: str) -> int:
    return sum(len(json.loads(line).get("created") or []) for line in out.splitlines() if line)


@pytest.mark.timeout(300)
def test_two_imports_of_one_source_at_once_both_succeed_and_write_each_session_once(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    (fresh,) = import_paths("aider", [repo], tmp_path / "fresh", settle=0)
    want = {name: _content(p) for name, p in _sessions(tmp_path / "fresh").items()}
    root = tmp_path / "root"
    first, second = _import(root, repo), _import(root, repo)
    results = [(p, *p.communicate(timeout=240)) for p in (first, second)]
    for proc, _out, err in results:
        assert proc.returncode == 0, err
    assert sorted(_created(out) for _p, out, _e in results) == [0, len(want)]
    named = _sessions(root)
    assert sorted(named) == sorted(want)
    for name, path in named.items():
        assert _content(path) == want[name], name
        assert jsonltape.verify(path).state == "clean"
    assert fresh.status == "imported"


@pytest.mark.timeout(120)
def test_an_import_waits_while_another_import_of_its_source_runs(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    root = tmp_path / "root"
    history = repo / ".aider.chat.history.md"
    base_id = session_id_for("aider", as_input("aider", history).name)
    with one_import(root / "aider", base_id):
        child = _import(root, repo)
        time.sleep(1.5)
        assert child.poll() is None  # waiting, not failed
        assert _sessions(root) == {}  # and nothing written
    out, err = child.communicate(timeout=100)
    assert child.returncode == 0, err
    assert _created(out) == len(_sessions(root)) > 0


def test_lock_files_are_few_owner_only_and_outside_the_archive(tmp_path: Path) -> None:
    paths = {lock_file(tmp_path / "root" / "aider", f"aider-{n}") for n in range(4 * STRIPES)}
    assert len(paths) <= STRIPES
    with one_import(tmp_path / "root" / "aider", "aider-1"):
        pass
    (made,) = [p for p in paths if p.exists()]
    assert made.stat().st_mode & 0o777 == 0o600
    assert made.parent.stat().st_mode & 0o777 == 0o700
    assert not (tmp_path / "root").exists()


def test_without_a_usable_data_directory_an_import_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    monkeypatch.setenv("JSONLTAPE_HOME", str(home))
    repo = _repo(tmp_path)
    (report,) = import_paths("aider", [repo], tmp_path / "root", settle=0)
    assert report.status == "imported" and report.created
