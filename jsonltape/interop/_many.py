"""Importing many sources: in this process, then, when that is slow, in worker processes too.

An import of a tree is one :func:`~._engine.import_file` per source, and a source's mapping is
Python under one interpreter lock: on a machine with several cores, one process uses one. So an
import of many sources starts in this process, and when it has taken longer than
:data:`ALONE` seconds with at least two files left, the files left go to worker processes (as
many as the cores, ``workers`` at most), each importing one source at a time
(:mod:`._worker`). Sources are independent: each writes only its own sessions, and two imports
of one source take turns (:mod:`._one_import`), so the sessions are the same bytes as one
process writes (the markers' wall-clock times aside). Most imports (a source or a few, a tree
whose sources are all unchanged) end in this process before a worker would have started.

A worker is ``python -P -m jsonltape.interop._worker`` started as every jsonltape process is
(:mod:`jsonltape._spawn`: from ``/``, without the current directory on its path). It ignores
``SIGINT`` (this process decides), and exits when its input ends. A source that was not a file
of its own (a :class:`Unit`: a database's session) is imported here. Reports come in the order
of the sources, whoever imported them.

A worker that dies (killed, out of memory) loses only its source's report: that source gets an
``error`` report saying so (what it wrote is whole: an import is crash-safe, and the next one
goes on from it), a new worker takes the files left, and the other sources are imported.
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
from ._engine import FileReport, discover, import_file
from ._source import Unit

__all__ = ["ALONE", "Job", "Message", "import_many", "import_paths", "workers_default"]

#: Seconds an import runs in this process alone before it starts workers for the files left.
ALONE = 0.2

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


def workers_default() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


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
    most this many processes import at once (default: the cores; 1: this process alone)."""
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
    import of its source. ``workers``: at most this many processes at once (default: the
    cores; 1 imports in this process alone)."""
    most = workers_default() if workers is None else workers
    if most < 1:
        raise ValueError(f"workers must be at least 1, got {most}")
    out = os.path.abspath(os.path.expanduser(os.fspath(root)))
    now = time.time()
    began = time.monotonic()
    left = deque(range(len(jobs)))

    def here(i: int) -> FileReport:
        name, item = jobs[i]
        told = None if waiting is None else (lambda lock: waiting(item, lock))
        return import_file(name, item, out, settle=settle, now=now, progress=progress, waiting=told)

    while left:
        files = sum(not isinstance(jobs[i][1], Unit) for i in left)
        if most > 1 and files >= 2 and time.monotonic() - began >= ALONE:
            break
        yield here(left.popleft())
    if not left:
        return
    pool = _Pool(jobs, out, settle, now, progress, waiting, min(most, files))
    yield from pool.run(left, here)


class _Worker:
    def __init__(self) -> None:
        self.proc = start(
            "jsonltape.interop._worker", stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.buffer = b""
        self.job: int | None = None

    def give(self, job: Job) -> None:
        self.job = job.i
        self.stdin.write(msgspec.json.encode(job) + b"\n")
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
    """Workers importing the files of ``jobs`` left, one each at a time; this process imports
    the units, and yields the reports in the order of ``jobs``."""

    def __init__(
        self,
        jobs: Sequence[tuple[str, Source]],
        root: str,
        settle: float | None,
        now: float,
        progress: Callable[[int], None] | None,
        waiting: Callable[[Source, Path], None] | None,
        size: int,
    ) -> None:
        self.jobs = jobs
        self.root = root
        self.settle = settle
        self.now = now
        self.progress = progress
        self.waiting = waiting
        self.size = size
        self.reports: dict[int, FileReport] = {}

    def run(self, left: deque[int], here: Callable[[int], FileReport]) -> Iterator[FileReport]:
        files = deque(i for i in left if not isinstance(self.jobs[i][1], Unit))
        units = deque(i for i in left if isinstance(self.jobs[i][1], Unit))
        order = deque(left)
        selector = selectors.DefaultSelector()
        workers: list[_Worker] = []
        finished = False
        try:
            for _ in range(self.size):
                self._hire(workers, selector, files)
            while order:
                while order and order[0] in self.reports:
                    yield self.reports.pop(order.popleft())
                if not order:
                    break
                if units:  # this process's share, while the workers import theirs
                    i = units.popleft()
                    self.reports[i] = here(i)
                    continue
                if not workers:  # every worker ended with files left: one more takes them
                    assert files, "sources left that no process imports"
                    self._hire(workers, selector, files)
                for key, _ in selector.select():
                    self._read(key.data, workers, selector, files)
            finished = True
        finally:
            selector.close()
            for w in workers:
                w.stop(kill=not finished)

    def _hire(
        self, workers: list[_Worker], selector: selectors.BaseSelector, files: deque[int]
    ) -> None:
        if not files:
            return
        w = _Worker()
        workers.append(w)
        selector.register(w.stdout, selectors.EVENT_READ, w)
        self._next(w, files)

    def _next(self, w: _Worker, files: deque[int]) -> None:
        if not files:
            w.job = None
            w.stdin.close()  # nothing left: it exits
            return
        i = files.popleft()
        name, item = self.jobs[i]
        path = os.path.abspath(os.fspath(item))  # type: ignore[arg-type]  # files only here
        w.give(Job(i, name, path, self.root, self.settle, self.now))

    def _read(
        self,
        w: _Worker,
        workers: list[_Worker],
        selector: selectors.BaseSelector,
        files: deque[int],
    ) -> None:
        lines = w.lines()
        if lines is None:  # it ended: after its input did, or it died
            selector.unregister(w.stdout)
            workers.remove(w)
            w.stop(kill=False)
            if w.job is not None:
                self.reports[w.job] = self._lost(w.job, w.proc.returncode)
                self._hire(workers, selector, files)
            return
        for line in lines:
            try:
                message = _decode_message(line)
            except msgspec.MsgspecError:  # not a worker of this version: its source is lost
                w.proc.kill()
                return
            if isinstance(message, Progress):
                if self.progress is not None:
                    self.progress(message.bytes)
            elif isinstance(message, Waiting):
                if self.waiting is not None:
                    self.waiting(self.jobs[message.i][1], Path(message.lock))
            else:
                self.reports[message.i] = message.report
                self._next(w, files)

    def _lost(self, i: int, code: int | None) -> FileReport:
        name, item = self.jobs[i]
        path = os.fspath(item)  # type: ignore[arg-type]  # files only here
        how = _ended(code)
        return FileReport(
            source=name,
            path=path,
            status="error",
            error=f"{path}: not imported: its import process {how}; what it wrote is whole, "
            "import again to go on",
        )


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"
