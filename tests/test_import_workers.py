"""An import of many sources goes on in worker processes once it has run a while alone
(``interop._many``): the sessions, the reports and their order must be what one process makes of
them; a worker that dies loses only its source's report (the next import completes it); a worker
runs from ``/`` without the current directory on its path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jsonltape.interop import _engine, _many, discover, import_many, import_paths

from ._agents_b import FIXTURES, database
from ._importers import sessions_of

HEAD = (FIXTURES / "aider" / "aider-repo-head.chat.history.md").read_text()


def _aider_tree(root: Path, repos: int, copies: int) -> Path:
    """``repos`` repositories, each history Aider's own first runs ``copies`` times over; one
    more whose history is not one (refused with an error report)."""
    for r in range(repos):
        repo = root / f"repo{r:02d}"
        repo.mkdir(parents=True)
        (repo / ".aider.chat.history.md").write_text(HEAD * copies)
        os.utime(repo / ".aider.chat.history.md", (1_700_000_000 + r, 1_700_000_000 + r))
    bad = root / "repo-bad"
    bad.mkdir()
    (bad / ".aider.chat.history.md").write_text("just notes\n" * 10)
    return root


def _said(reports: list[_many.FileReport], root: Path) -> list[tuple[object, ...]]:
    """What the reports say, the sessions they name relative to ``root`` (the created ones
    too: a worker's report names them again as the caller named the root)."""
    return [
        (r.path, r.status, r.events, r.lines, r.problems, r.error,
         [str(Path(s).relative_to(root)) for s in r.sessions],
         [str(Path(s).relative_to(root)) for s in r.created])
        for r in reports
    ]  # fmt: skip


@pytest.fixture
def hired(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The workers an import started (their pids); workers start at once."""
    pids: list[int] = []
    init = _many._Worker.__init__

    def counting(self: _many._Worker) -> None:
        init(self)
        pids.append(self.proc.pid)

    monkeypatch.setattr(_many._Worker, "__init__", counting)
    monkeypatch.setattr(_many, "ALONE", 0.0)
    return pids


def test_sources_imported_by_workers_are_what_one_process_imports(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _aider_tree(tmp_path / "src", 6, 2)
    monkeypatch.chdir(tmp_path)  # relative names: the reports name them so, whoever imported
    alone = list(import_paths("aider", [Path("src")], "alone", settle=0, workers=1))
    assert hired == []
    read: list[int] = []
    shared = list(
        import_paths("aider", [Path("src")], "shared", settle=0, workers=3, progress=read.append)
    )
    assert len(hired) == 3
    assert _said(shared, Path("shared")) == _said(alone, Path("alone"))
    assert not any(r.path.startswith("/") or "/tmp" in str(r.error) for r in shared)
    assert [r.status for r in shared].count("error") == 1
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")
    files = [p for p in src.rglob(".aider.chat.history.md") if "bad" not in str(p)]
    assert sum(read) == sum(p.stat().st_size for p in files)
    for pid in hired:  # every worker has exited and been waited for
        assert (
            not Path(f"/proc/{pid}").exists()
            or "zombie" not in Path(f"/proc/{pid}/status").read_text()
        )
    again = list(import_paths("aider", [src], tmp_path / "shared", settle=0, workers=3))
    assert [r.status for r in again] == [r.status.replace("imported", "unchanged") for r in alone]


def test_units_are_imported_here_between_the_workers_files(
    tmp_path: Path, hired: list[int]
) -> None:
    src = _aider_tree(tmp_path / "src", 3, 1)
    database("goose", tmp_path / "goose" / "sessions.db").close()
    units, _ = discover("goose", [tmp_path / "goose" / "sessions.db"])
    files, _ = discover("aider", [src])
    assert units and len(files) == 4
    jobs = [("aider", files[0]), *[("goose", u) for u in units], *[("aider", f) for f in files[1:]]]
    alone = list(import_many(jobs, tmp_path / "alone", settle=0, workers=1))
    shared = list(import_many(jobs, tmp_path / "shared", settle=0, workers=2))
    assert len(hired) == 2
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


def _imported_here(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources this process imports itself (their paths), in order."""
    here: list[str] = []
    imported = _many.import_file

    def counting(name: str, item: object, *args: object, **kwargs: object) -> object:
        here.append(str(item))
        return imported(name, item, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_many, "import_file", counting)
    return here


def test_workers_start_after_one_source_that_says_the_rest_would_take_long(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first source that took long enough for the files left to take ``SOONER`` times
    ``ALONE`` seconds starts the workers at once, not ``ALONE`` seconds in (a core idle
    meanwhile)."""
    src = _aider_tree(tmp_path / "src", 40, 1)
    first = src / "repo00" / ".aider.chat.history.md"
    # takes half a second or so (times 40 files left: 20 s, SOONER * ALONE being 5 s here),
    # the others a few ms each
    first.write_text(HEAD * 200)
    alone = list(import_paths("aider", [src], tmp_path / "alone", settle=0, workers=1))
    monkeypatch.setattr(_many, "ALONE", 1.0)  # the old rule: the 40 small files, here
    here = _imported_here(monkeypatch)
    before: list[int] = []
    init = _many._Worker.__init__

    def hiring(self: _many._Worker) -> None:
        before.append(len(here))
        init(self)

    monkeypatch.setattr(_many._Worker, "__init__", hiring)
    shared = list(import_paths("aider", [src], tmp_path / "shared", settle=0, workers=2))
    # hired right after the big history: the first source, the one that is not a history,
    # was refused at once, and said little of the rest
    assert before == [2, 2]
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


def test_a_first_source_slowed_by_the_runs_start_up_starts_no_worker_for_small_files(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first source of a run also pays its one-time costs (loading, the first lock
    directory, a loaded machine): a tree of ten small histories, imported in a fifth of a
    second alone, took 0.7-1.1 s once that first source's 26-50 ms, times the files left,
    said they were worth three workers. Here it takes 0.4 s longer, as such a start would
    (times the 9 files left: more than ALONE, less than SOONER times it): the files left are
    still imported here, before ALONE has passed (ALONE is 3 s here: room for a slow
    machine)."""
    src = _aider_tree(tmp_path / "src", 10, 1)
    monkeypatch.setattr(_many, "ALONE", 3.0)
    imported = _many.import_file
    first: list[str] = []

    def slow_start(name: str, item: object, *args: object, **kwargs: object) -> object:
        report = imported(name, item, *args, **kwargs)  # type: ignore[arg-type]
        if not first and report.status == "imported":
            first.append(str(item))
            time.sleep(0.4)
        return report

    monkeypatch.setattr(_many, "import_file", slow_start)
    began = time.monotonic()
    reports = list(import_paths("aider", [src], tmp_path / "out", settle=0, workers=3))
    assert first and hired == []
    assert time.monotonic() - began < 3.0  # else ALONE would have started them anyway
    assert [r.status for r in reports].count("imported") == 10


def test_this_process_imports_files_while_its_workers_start(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers that take long to start (here until this process has imported five files, or
    30 s; a tenth of a second usually): this process imports the files meanwhile, and the
    reports and sessions are what one process makes. (A worker that slept one second was
    outrun by five imports here on a loaded machine.)"""
    src = _aider_tree(tmp_path / "src", 6, 1)
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "five-imported-here"
    (site / "slow_worker.py").write_text(
        "import os, time\nend = time.monotonic() + 30\n"
        f"while not os.path.exists({str(marker)!r}) and time.monotonic() < end:\n"
        "    time.sleep(0.01)\n"
        "from jsonltape.interop._worker import main\nmain()\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setattr(_many, "WORKER", "slow_worker")
    alone = list(import_paths("aider", [src], tmp_path / "alone", settle=0, workers=1))
    here = _imported_here(monkeypatch)
    counted = _many.import_file

    def marking(*args: object, **kwargs: object) -> object:
        report = counted(*args, **kwargs)  # type: ignore[arg-type]
        if len(here) == 5:
            marker.touch()
        return report

    monkeypatch.setattr(_many, "import_file", marking)
    shared = list(import_paths("aider", [src], tmp_path / "shared", settle=0, workers=2))
    assert len(hired) == 2
    # each worker was given a file when it was started; the other five are imported here
    assert len(here) == 5
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


def _workers_of(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid and b"jsonltape.interop._worker" in cmd:
            found.append(int(proc.name))
    return found


def _cli(*args: str, cwd: Path) -> subprocess.Popen[bytes]:
    """``jsonltape ARGS`` started in ``cwd``, its output in files (a pipe nobody reads while
    the test watches its workers would fill up and stop it)."""
    with (cwd / "stdout").open("w") as out, (cwd / "stderr").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "jsonltape", *args],
            cwd=cwd,
            stdout=out,
            stderr=err,
            # as from a terminal: a SIGINT ignored by a background test run would stay ignored
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def _ended(run: subprocess.Popen[bytes], cwd: Path) -> str:
    """The stderr of ``run``, once it has exited."""
    run.wait(timeout=120)
    return (cwd / "stderr").read_text()


def _first_workers(run: subprocess.Popen[bytes]) -> list[int]:
    """The workers of the import ``run`` once it has started any."""
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while not workers and run.poll() is None and time.monotonic() < deadline:
        workers = _workers_of(run.pid)
        time.sleep(0.01)
    assert workers, "the import never started a worker"
    return workers


def _completed_by_the_next_import(src: Path, out: Path, tmp_path: Path) -> None:
    """The next import of ``src`` into ``out`` (one process) completes what was cut short:
    ``out`` then holds what one uninterrupted import writes."""
    done = subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "aider", "-o", str(out),
         "-j", "1", str(src)],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr  # the bad source still
    fresh = tmp_path / "fresh"
    list(import_paths("aider", [src], fresh, workers=1))
    assert sessions_of(out) == sessions_of(fresh)


def test_a_killed_worker_loses_only_its_source_and_the_next_import_completes_it(
    tmp_path: Path,
) -> None:
    src = _aider_tree(tmp_path / "src", 10, 40)
    out = tmp_path / "out"
    run = _cli("import", "--from", "aider", "-o", str(out), "-j", "2", str(src), cwd=tmp_path)
    workers = _first_workers(run)
    time.sleep(0.15)  # inside its first source
    os.kill(workers[0], signal.SIGKILL)
    stderr = _ended(run, tmp_path)
    assert run.returncode == 2, stderr
    assert "Traceback" not in stderr
    lost = [line for line in stderr.splitlines() if "was killed by SIGKILL" in line]
    assert len(lost) == 1 and "import again to go on" in lost[0], stderr
    assert "not an Aider chat history" in stderr  # the bad one, said as ever
    _completed_by_the_next_import(src, out, tmp_path)


def test_a_worker_starts_from_the_root_without_the_current_directory_on_its_path(
    tmp_path: Path,
) -> None:
    src = _aider_tree(tmp_path / "src", 6, 40)
    clone = tmp_path / "clone"  # a repository one cloned, where the import is typed
    marker = tmp_path / "planted-code-ran"
    for name in ("msgspec", "jsonltape", "filelock"):
        (clone / name).mkdir(parents=True)
        (clone / name / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('{name}')\n")
    run = _cli("import", "--from", "aider", "-o", str(tmp_path / "out"), "-j", "2", str(src),
               cwd=clone)  # fmt: skip
    seen: set[str] = set()
    while run.poll() is None:
        for pid in _workers_of(run.pid):
            try:
                seen.add(os.readlink(f"/proc/{pid}/cwd"))
            except OSError:
                pass
        time.sleep(0.01)
    stderr = _ended(run, clone)
    assert run.returncode == 2 and "Traceback" not in stderr, stderr  # the bad source only
    assert seen == {"/"}
    assert not marker.exists()


@pytest.mark.parametrize("broken", ["a worker that exits at once", "no interpreter to start"])
def test_when_no_worker_can_run_the_sources_are_imported_here(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    src = _aider_tree(tmp_path / "src", 4, 1)
    alone = list(import_paths("aider", [src], tmp_path / "alone", settle=0, workers=1))
    if broken == "a worker that exits at once":  # python -P -m <no such module>: status 1
        monkeypatch.setattr(_many, "WORKER", "jsonltape.interop._no_such_worker")
    else:  # the interpreter is gone (an upgrade under a running import): Popen fails
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    shared = list(import_paths("aider", [src], tmp_path / "shared", settle=0, workers=2))
    assert len(hired) == (2 if broken == "a worker that exits at once" else 0)
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


_LIBRARY_IMPORT = """
import sys
from jsonltape.interop import _many, import_paths
_many.ALONE = 0.0  # workers at once
said = lambda source, lock: print("waiting", flush=True)
jobs = [("aider", p) for p in _many.discover("aider", [sys.argv[1]])[0]]
for r in _many.import_many(jobs, sys.argv[2], settle=0, workers=2, waiting=said):
    print(r.status, flush=True)
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_workers_of_an_import_killed_outright_end_at_once_and_quietly(
    tmp_path: Path, how: str
) -> None:
    """SIGTERM or SIGKILL to the importing process runs none of its code: its workers, here
    waiting for the lock of a source another import holds, must end by themselves at once
    (not import on for nobody, or wait for good), and say nothing (no broken pipe traceback)."""
    import fcntl

    from jsonltape._project import data_dir
    from jsonltape.interop._one_import import STRIPES

    src = _aider_tree(tmp_path / "src", 4, 1)
    (data_dir() / "locks").mkdir(parents=True)
    held = []
    for stripe in range(STRIPES):  # every source's lock is held by "another import"
        fd = os.open(data_dir() / "locks" / f"import-{stripe:03d}.lock", os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.append(fd)
    with (tmp_path / "stderr").open("w") as err:
        run = subprocess.Popen(
            [sys.executable, "-P", "-c", _LIBRARY_IMPORT, str(src), str(tmp_path / "out")],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
    try:
        assert run.stdout is not None
        said = [run.stdout.readline() for _ in range(3)]  # the bad source's error, 2 waits
        assert sorted(said) == ["error\n", *["waiting\n"] * 2], (tmp_path / "stderr").read_text()
        workers = _workers_of(run.pid)
        assert len(workers) == 2
        os.kill(run.pid, getattr(signal, how))
        run.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(Path(f"/proc/{w}").exists() for w in workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        left = [w for w in workers if Path(f"/proc/{w}").exists()]
        assert not left, "workers went on after their import was killed"
    finally:
        for fd in held:
            os.close(fd)
        run.kill()
        run.wait()
        if run.stdout is not None:
            run.stdout.close()
    time.sleep(0.5)  # a worker that went on would now import and write to the broken pipe
    assert "Traceback" not in (tmp_path / "stderr").read_text()


def _sharing_a_lock(tree: Path, root: Path, copies: int) -> list[Path]:
    """Two Aider histories under ``tree`` whose imports into ``root`` take the same lock file
    (their keys hash to one of ``_one_import``'s stripes), each Aider's first runs ``copies``
    times over."""
    from jsonltape.interop import session_id_for
    from jsonltape.interop._one_import import lock_file
    from jsonltape.interop.aider import history

    seen: dict[Path, Path] = {}
    for r in range(10_000):
        f = tree / f"repo{r:04d}" / ".aider.chat.history.md"
        f.parent.mkdir(parents=True)
        f.write_text(HEAD)
        lock = lock_file(root / "aider", session_id_for("aider", history(f).name))
        if lock in seen:
            pair = [seen[lock], f]
            for p in pair:
                p.write_text(HEAD * copies)
            return pair
        seen[lock] = f
    raise AssertionError("no two sources share a lock")


def test_sources_sharing_a_lock_take_turns_without_saying_they_wait_for_another_import(
    tmp_path: Path, hired: list[int]
) -> None:
    """Two sources whose locks are one stripe, given to two workers at once: one would wait
    for the other and the import would say it waits for "another import of it"."""
    told: list[tuple[object, Path]] = []
    pair = _sharing_a_lock(tmp_path / "src", tmp_path / "shared", 100)
    jobs = [("aider", p) for p in pair]
    alone = list(import_many(jobs, tmp_path / "alone", settle=0, workers=1))
    shared = list(
        import_many(
            jobs, tmp_path / "shared", settle=0, workers=2,
            waiting=lambda source, lock: told.append((source, lock)),
        )
    )  # fmt: skip
    assert told == []
    assert len(hired) == 2
    assert [r.status for r in shared] == ["imported", "imported"]
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


def test_what_a_worker_prints_on_its_standard_output_goes_to_its_standard_error(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library (or a program it starts) writing to descriptor 1 of a worker, not through
    ``sys.stdout``: the line must not reach the pipe of the worker's messages (read as garbage,
    the worker was killed and its source lost)."""
    src = _aider_tree(tmp_path / "src", 3, 1)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os\n"
        "from jsonltape.interop import aider\n"
        "_eof = aider.AiderMapper.eof\n"
        "def eof(self, settled):\n"
        "    os.write(1, b'a library says hello\\n')\n"
        "    _eof(self, settled)\n"
        "aider.AiderMapper.eof = eof\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    alone = list(import_paths("aider", [src], tmp_path / "alone", settle=0, workers=1))
    shared = list(import_paths("aider", [src], tmp_path / "shared", settle=0, workers=2))
    assert len(hired) == 2
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


def test_an_import_interrupted_with_ctrl_c_exits_130_and_leaves_no_worker(tmp_path: Path) -> None:
    # Click would say "Aborted!" and exit 1, which `verify` uses for a torn tail. The parent
    # alone gets the signal here (as `kill -INT`): it stops its workers, which ignore SIGINT.
    src = _aider_tree(tmp_path / "src", 10, 40)
    run = _cli("import", "--from", "aider", "-o", str(tmp_path / "out"), "-j", "2", str(src),
               cwd=tmp_path)  # fmt: skip
    workers = _first_workers(run)
    run.send_signal(signal.SIGINT)
    stderr = _ended(run, tmp_path)
    assert run.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "jsonltape: interrupted"
    assert "Traceback" not in stderr and "Aborted" not in stderr
    for pid in workers:  # stopped and waited for: gone, not a zombie
        assert not Path(f"/proc/{pid}").exists()
    _completed_by_the_next_import(src, tmp_path / "out", tmp_path)


def test_ctrl_c_to_the_process_group_at_any_moment_exits_130_without_a_traceback(
    tmp_path: Path,
) -> None:
    """Ctrl-C in a terminal reaches the whole process group: the import itself (importing a
    file while its workers start, or reading theirs) and its workers, which ignore it. Sent
    at several moments, each must end the command with 130 and nothing but the one line: a
    Python callback the interpreter runs (the collector's, thousands of times in an import)
    swallowed it ("Exception ignored in") and the import went on to exit 0."""
    src = _aider_tree(tmp_path / "src", 6, 40)
    (src / "repo00" / ".aider.chat.history.md").write_text(HEAD * 400)  # imported here
    for n, delay in enumerate((0.4, 0.55, 0.7, 0.85, 1.0, 1.15, 1.3, 1.45)):
        cwd = tmp_path / f"run{n}"
        cwd.mkdir()
        with (cwd / "stdout").open("w") as out, (cwd / "stderr").open("w") as err:
            run = subprocess.Popen(
                [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "aider", "-o",
                 str(cwd / "out"), "-j", "2", str(src)],
                cwd=cwd, stdout=out, stderr=err, start_new_session=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )  # fmt: skip
        time.sleep(delay)
        os.killpg(run.pid, signal.SIGINT)
        stderr = _ended(run, cwd)
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
        if run.returncode != 2:  # not ended before it (the bad source's error)
            assert run.returncode == 130, stderr
            assert stderr.splitlines()[-1] == "jsonltape: interrupted"


def test_workers_whose_output_fills_while_this_process_imports_a_big_file_lose_nothing(
    tmp_path: Path, hired: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers that start while this process imports a big file itself, and say progress
    at every event: their pipes (a page here) fill and they wait until it reads them again.
    Every byte is counted once, and the reports and sessions are what one process makes."""
    src = _aider_tree(tmp_path / "src", 4, 20)
    # the bad one and repo00 go to the workers as they are started: repo01 is this process's
    big = src / "repo01" / ".aider.chat.history.md"
    big.write_text(HEAD * 300)
    site = tmp_path / "site"
    site.mkdir()
    (site / "slow_chatty_worker.py").write_text(
        "import fcntl, time\ntime.sleep(0.3)\n"
        "fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 4096)\n"  # a page: it fills at once
        "from jsonltape.interop import _engine\n_engine.CHUNK = 1\n"  # progress at each spec
        "from jsonltape.interop._worker import main\nmain()\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setattr(_many, "WORKER", "slow_chatty_worker")
    monkeypatch.setattr(_engine, "CHUNK", 1)  # here too: `created` lists sessions as written
    alone = list(import_paths("aider", [src], tmp_path / "alone", settle=0, workers=1))
    here = _imported_here(monkeypatch)
    read: list[int] = []
    shared = list(
        import_paths("aider", [src], tmp_path / "shared", settle=0, workers=2, progress=read.append)
    )
    assert len(hired) == 2
    assert str(big) in here  # imported here while the workers started
    assert len(read) > 2 * 4096 // len(b'["progress",9,99]\n')  # more than two pipes hold
    files = [p for p in src.rglob(".aider.chat.history.md") if "bad" not in str(p)]
    assert sum(read) == sum(p.stat().st_size for p in files)
    assert _said(shared, tmp_path / "shared") == _said(alone, tmp_path / "alone")
    assert sessions_of(tmp_path / "shared") == sessions_of(tmp_path / "alone")


def test_an_import_on_one_core_starts_no_worker(tmp_path: Path) -> None:
    """A process allowed one core (a CI container, ``taskset -c 0``): workers would only share
    it with this one, at the cost of their start (two of them made an import 15% slower)."""
    src = _aider_tree(tmp_path / "src", 4, 1)
    code = (
        "import os, sys; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from jsonltape.interop import _many; _many.ALONE = 0.0; "
        "hired = []; init = _many._Worker.__init__; "
        "_many._Worker.__init__ = lambda self: hired.append(init(self)); "
        "r = list(_many.import_paths('aider', [sys.argv[1]], sys.argv[2], settle=0)); "
        "print(_many.workers_default(), len(hired), sum(x.status == 'imported' for x in r))"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", code, str(src), str(tmp_path / "out")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["1", "0", "4"], done.stderr
