"""Importing many sources: in this process, then, when that is slow, in worker processes too.

An import of a tree is one :func:`~._engine.import_file` per source, and a source's mapping is
Python under one interpreter lock: on a machine with several cores, one process uses one. So an
import of many sources starts in this process, and once it has taken :data:`ALONE` seconds, or
the last source it imported says the files left would take :data:`SOONER` times that long, with
at least two files left, the files left go to worker processes (one more than the cores,
``workers`` at most: a worker waiting for its syncs leaves its core to another; none on a
single core), each importing one source at a time (:mod:`._worker`). Until one of them has
started (a tenth of a second), this process imports files too. Sources are independent: each
writes only its own sessions, and two imports of one source take turns (:mod:`._one_import`),
so the sessions are the same bytes as one process writes (the markers' wall-clock times aside).
Most imports (a source or a few, a tree whose sources are all unchanged) end in this process
before a worker would have started.

A worker is ``python -P -m jsonltape.interop._worker`` started as every jsonltape process is
(:mod:`jsonltape._spawn`: from ``/``, without the current directory on its path). It ignores
``SIGINT`` (this process decides), and exits when its input ends. A source that was not a file
of its own (a :class:`Unit`: a database's session) is imported here. Reports come in the order
of the sources, whoever imported them.

A worker that dies (killed, out of memory) loses only its source's report: that source gets an
``error`` report saying so (what it wrote is whole: an import is crash-safe, and the next one
goes on from it), a new worker takes the files left, and the other sources are imported.

Two sources share a lock when their keys hash alike (:mod:`._one_import`'s stripes): never
imported at once here, one would wait for the other, and say it waits for "another import"
(among a few hundred sources, some always do). A source whose lock a source being imported
holds waits for its turn in the list instead, and a worker with nothing else to take waits
idle.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO

import msgspec

from .._spawn import start
from ..errors import JsonltapeError
from ._engine import FileReport, as_input, discover, import_file, session_id_for
from ._one_import import lock_file, taken
from ._source import Unit

__all__ = [
    "ALONE",
    "SOONER",
    "WORKER",
    "Job",
    "Message",
    "import_many",
    "import_paths",
    "workers_default",
]

#: Seconds an import runs in this process alone before it starts workers for the files left.
ALONE = 0.2
#: How many times :data:`ALONE` the files left must take, by the last source's time, for the
#: workers to start before ALONE has passed: a source's time also holds the run's one-time
#: costs (the first one loads the importer) and a loaded machine's, and three workers cost
#: 0.9 s of CPU to start. A tree of ten 5 ms histories, 0.2 s alone, took 0.7-1.1 s with
#: workers its first source (26-50 ms) started; an Aider history of 20,000 lines (0.15 s)
#: with 19 more still starts them at once.
SOONER = 5
#: The module a worker runs.
WORKER = "jsonltape.interop._worker"

Source = str | os.PathLike[str] | Unit


class Job(msgspec.Struct, array_like=True):
    """One source for a worker (a line of its input)."""

    i: int
    source: str
    path: str
    root: str
    settle: float | None
    now: float


class Progress(msgspec.Struct, tag="progress", array_like=True):
    i: int
    bytes: int


class Waiting(msgspec.Struct, tag="waiting", array_like=True):
    i: int
    lock: str


class Done(msgspec.Struct, tag="done", array_like=True):
    i: int
    report: FileReport


#: A line of a worker's output.
Message = Progress | Waiting | Done
_decode_message = msgspec.json.Decoder(Message).decode
_encode_job = msgspec.json.Encoder().encode


def workers_default() -> int:
    """One more than the cores this process may run on (one on a single core): a worker
    waiting for its sessions' syncs leaves its core idle, and another worker takes it (the
    Aider tree of benchmarks/bench_interop.py, 2,020 sessions: about 7% faster on two cores
    than two workers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    # one core (a CI container, `taskset -c 0`): a worker would only share it, at the cost of
    # its start and the messages (an Aider tree of 12 histories: 2.26-2.65 s with two, against
    # 1.93-2.21 s in one process)
    return cores + 1 if cores > 1 else 1


def import_paths(
    source: str,
    paths: Iterable[str | os.PathLike[str]],
    root: str | os.PathLike[str],
    *,
    settle: float | None = 3600.0,
    progress: Callable[[int], None] | None = None,
    workers: int | None = None,
) -> Iterator[FileReport]:
    """Import every session found under ``paths``; yields one report per file or unit (and one
    per file skipped on purpose, with status ``skipped``), in the order found. ``workers``: at
    most this many processes import at once (default: :func:`workers_default`; 1: this process
    alone)."""
    items, skipped = discover(source, paths, exclude=str(root))
    for f, why in skipped:
        yield FileReport(source=source, path=str(f), status="skipped", error=why)
    jobs = [(source, item) for item in items]
    yield from import_many(jobs, root, settle=settle, progress=progress, workers=workers)


def import_many(
    jobs: Sequence[tuple[str, Source]],
    root: str | os.PathLike[str],
    *,
    settle: float | None = 3600.0,
    progress: Callable[[int], None] | None = None,
    waiting: Callable[[Source, Path], None] | None = None,
    workers: int | None = None,
) -> Iterator[FileReport]:
    """Import each ``(source name, file or unit)`` of ``jobs`` into ``root`` as
    :func:`~._engine.import_file` does, one report each, in their order. ``progress`` is told
    the bytes read as they are; ``waiting(source, lock)`` when an import waits for another
    import of its source. ``workers``: at most this many processes at once (default:
    :func:`workers_default`; 1 imports in this process alone)."""
    most = workers_default() if workers is None else workers
    if most < 1:
        raise ValueError(f"workers must be at least 1, got {most}")
    now = time.time()
    began = time.monotonic()
    left = deque(range(len(jobs)))
    files = sum(not isinstance(item, Unit) for _name, item in jobs)

    def here(i: int) -> FileReport:
        name, item = jobs[i]
        told = None if waiting is None else (lambda lock: waiting(item, lock))
        return import_file(
            name, item, root, settle=settle, now=now, progress=progress, waiting=told
        )

    last = 0.0  # seconds the last source took, if it was imported (not unchanged)
    while left:
        if most > 1 and files >= 2 and _long(time.monotonic() - began, last, files):
            break
        i = left.popleft()
        files -= not isinstance(jobs[i][1], Unit)
        start = time.monotonic()
        report = here(i)
        last = time.monotonic() - start if report.status == "imported" else 0.0
        yield report
    if not left:
        return
    yield from _Pool(jobs, root, settle, now, progress, waiting, min(most, files)).run(left, here)


def _long(spent: float, last: float, files: int) -> bool:
    """Whether the ``files`` left are worth workers: this process has run :data:`ALONE`
    seconds, or the last source, imported in ``last`` seconds, says that many would take
    :data:`SOONER` times that long (an Aider history of 20,000 lines takes 0.15 s: waiting the
    whole 0.2 s left a core idle for a tenth of the import). An unchanged source says nothing:
    the first one of a run also loads the importer, and a tree of them ends in milliseconds."""
    return spent >= ALONE or last * files >= SOONER * ALONE


def _as_given(path: str | os.PathLike[str]) -> str:
    """A path as an import in this process names it (``~`` expanded, relative kept)."""
    return str(Path(os.path.expanduser(os.fspath(path))))


def _back(text: str, absolute: str, given: str) -> str:
    """``text`` naming ``given`` where it named ``absolute``, as this process would have."""
    return text.replace(absolute, given) if absolute != given else text


class _Worker:
    def __init__(self) -> None:
        self.proc = start(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.buffer = b""
        self.job: int | None = None
        self.said = False  # whether it ever answered (it started)

    def give(self, job: Job) -> None:
        self.job = job.i
        self.stdin.write(_encode_job(job) + b"\n")
        self.stdin.flush()

    def lines(self) -> list[bytes] | None:
        """The complete lines that came; None at the end of its output."""
        chunk = os.read(self.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        *done, self.buffer = (self.buffer + chunk).split(b"\n")
        return done

    def stop(self, *, kill: bool) -> None:
        try:
            self.stdin.close()
        except OSError:
            pass
        if kill and self.proc.poll() is None:
            self.proc.terminate()  # an import is crash-safe: what it wrote is whole
        self.proc.wait()
        self.stdout.close()


class _Pool:
    """Workers importing the files of ``jobs`` left, one each at a time, while this process
    imports the units (and the files, when no worker can run); the reports are yielded in the
    order of ``jobs``."""

    def __init__(
        self,
        jobs: Sequence[tuple[str, Source]],
        root: str | os.PathLike[str],
        settle: float | None,
        now: float,
        progress: Callable[[int], None] | None,
        waiting: Callable[[Source, Path], None] | None,
        size: int,
    ) -> None:
        self.jobs = jobs
        # a worker runs in "/": it is given absolute paths, and its reports name them as given
        self.root = _as_given(root)
        self.abs_root = os.path.abspath(self.root)
        self.settle = settle
        self.now = now
        self.progress = progress
        self.waiting = waiting
        self.size = size
        self.reports: dict[int, FileReport] = {}
        self.files: deque[int] = deque()  # for the workers
        self.mine: deque[int] = deque()  # for this process
        self.workers: list[_Worker] = []
        self.idle: list[_Worker] = []  # whose files left all wait for a lock held here
        self.locks: dict[int, Path | None] = {}  # the lock file each import takes
        self.held: set[Path] = set()  # those of the sources the workers import now
        self.selector = selectors.DefaultSelector()

    def run(self, left: deque[int], here: Callable[[int], FileReport]) -> Iterator[FileReport]:
        for i in left:
            (self.mine if isinstance(self.jobs[i][1], Unit) else self.files).append(i)
        order = deque(left)
        finished = False
        try:
            for _ in range(self.size):
                self._hire()
            while order:
                while order and order[0] in self.reports:
                    yield self.reports.pop(order.popleft())
                if not order:
                    break
                # what the workers said first: one that never started gives this process files
                starting = self._starting()
                mine = self._free(self.mine)
                if mine is not None:  # this process's share, while the workers import theirs
                    self.mine.remove(mine)
                elif starting:
                    mine = self._meanwhile()
                if mine is not None:
                    self.reports[mine] = here(mine)
                    continue
                if not self.workers:  # every worker ended with files left: one more takes them
                    assert self.files, "sources left that no process imports"  # never a hang
                    self._hire()
                    continue
                for key, _ in self.selector.select():
                    self._read(key.data)
            finished = True
        finally:
            self.selector.close()
            for w in self.workers:
                w.stop(kill=not finished)

    def _starting(self) -> bool:
        """Whether workers run and none has started yet (once what they said is read)."""
        if not self.workers or any(w.said for w in self.workers):
            return False
        for key, _ in self.selector.select(0):
            self._read(key.data)
        return bool(self.workers) and not any(w.said for w in self.workers)

    def _meanwhile(self) -> int | None:
        """A file this process imports while its workers start (a tenth of a second), taken
        from theirs; none whose lock another import holds: this process would wait for it, and
        the workers for their next file meanwhile."""
        i = self._free(self.files)
        lock = None if i is None else self._lock(i)
        if i is None or (lock is not None and taken(lock)):
            return None
        self._take(i)
        return i

    def _take(self, i: int) -> None:
        """Take file ``i`` from the workers' files."""
        self.files.remove(i)
        if not self.files:
            self._wake()  # the idle ones have nothing left: they exit

    def _hire(self) -> None:
        if not self.files:
            return
        try:
            w = _Worker()
        except OSError:  # no process to be had (a limit, no memory): this process imports them
            self._alone()
            return
        self.workers.append(w)
        self.selector.register(w.stdout, selectors.EVENT_READ, w)
        self._next(w)

    def _alone(self) -> None:
        self.mine.extend(self.files)
        self.files.clear()
        self._wake()

    def _lock(self, i: int) -> Path | None:
        """The lock file the import of ``jobs[i]`` takes (None: it fails before it takes one)."""
        if i not in self.locks:
            name, item = self.jobs[i]
            try:
                base_id = session_id_for(name, as_input(name, item).name)
            except (JsonltapeError, OSError, UnicodeError):
                self.locks[i] = None
            else:
                self.locks[i] = lock_file(Path(self.abs_root) / name, base_id)
        return self.locks[i]

    def _free(self, todo: deque[int]) -> int | None:
        """The first of ``todo`` whose lock no source being imported here holds."""
        return next((i for i in todo if self._lock(i) not in self.held), None)

    def _done(self, w: _Worker) -> int | None:
        """``w``'s job, which has ended: its lock is free, and an idle worker may take a file."""
        i, w.job = w.job, None
        if i is not None:
            lock = self._lock(i)
            if lock is not None:
                self.held.discard(lock)
            self._wake()
        return i

    def _wake(self) -> None:
        idle, self.idle = self.idle, []
        for w in idle:
            self._next(w)

    def _next(self, w: _Worker) -> None:
        i = self._free(self.files)
        if i is None:
            w.job = None
            if self.files:  # each waits for a lock a source imported now holds
                self.idle.append(w)
            else:
                w.stdin.close()  # nothing left: it exits
            return
        self._take(i)
        lock = self._lock(i)
        if lock is not None:
            self.held.add(lock)
        name, item = self.jobs[i]
        path = os.path.abspath(_as_given(item))  # type: ignore[arg-type]  # files only here
        try:
            w.give(Job(i, name, path, self.abs_root, self.settle, self.now))
        except OSError:  # it has ended already: its end is read next
            pass

    def _read(self, w: _Worker) -> None:
        lines = w.lines()
        if lines is None:  # it ended: after its input did, or it died
            self.selector.unregister(w.stdout)
            self.workers.remove(w)
            if w in self.idle:
                self.idle.remove(w)
            w.stop(kill=False)
            i = self._done(w)
            if i is None:
                return
            code = w.proc.returncode
            if code is not None and code >= 0 and not w.said:
                # it never ran (a broken installation, an interpreter that will not start):
                # its source and the rest are imported here, as without workers
                self.mine.append(i)
                self._alone()
            else:  # killed while importing: that source is lost; another worker goes on
                self.reports[i] = self._lost(i, code)
                self._hire()
            return
        for line in lines:
            try:
                message = _decode_message(line)
            except msgspec.MsgspecError:  # not a worker of this version: its source is lost
                w.proc.kill()
                return
            w.said = True
            if isinstance(message, Progress):
                if self.progress is not None:
                    self.progress(message.bytes)
            elif isinstance(message, Waiting):
                if self.waiting is not None:
                    self.waiting(self.jobs[message.i][1], Path(message.lock))
            else:
                self.reports[message.i] = self._named(message.i, message.report)
                self._done(w)
                self._next(w)

    def _named(self, i: int, report: FileReport) -> FileReport:
        """A worker's report naming the source and the sessions as ``jobs`` and the root do."""
        given = _as_given(self.jobs[i][1])  # type: ignore[arg-type]  # files only here
        absolute = os.path.abspath(given)
        report.path = _back(report.path, absolute, given)
        if report.error is not None:
            report.error = _back(report.error, absolute, given)
        if self.abs_root != self.root:
            inside = self.abs_root + os.sep
            report.sessions = [self._in_root(p, inside) for p in report.sessions]
            report.created = [self._in_root(p, inside) for p in report.created]
        return report

    def _in_root(self, path: str, inside: str) -> str:
        if not path.startswith(inside):
            return path
        return str(Path(self.root) / path[len(inside) :])

    def _lost(self, i: int, code: int | None) -> FileReport:
        name, item = self.jobs[i]
        path = _as_given(item)  # type: ignore[arg-type]  # files only here
        return FileReport(
            source=name,
            path=path,
            status="error",
            error=f"{path}: not imported: its import process {_ended(code)}; what it wrote is "
            "whole, import again to go on",
        )


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"
