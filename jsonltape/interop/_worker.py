"""An import worker (:mod:`._many`): ``python -P -m jsonltape.interop._worker``.

Reads one :class:`~._many.Job` a line on its input, imports it as
:func:`~._engine.import_file` does, and writes what the import says (progress, a wait for
another import of the source, then its report) as :data:`~._many.Message` lines on its
output; exits when its input ends. Nothing else is written to that output: what a library
might print, through ``sys.stdout`` or to descriptor 1, goes to standard error.

Its input ending while it imports means its parent is gone (killed with SIGTERM or SIGKILL,
which no ``finally`` of the parent outlives) or stopping it: it exits at once, as a kill
would leave it (an import is crash-safe), rather than go on importing for nobody or wait for
a lock. An output nobody reads any more ends it the same way, without a traceback.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
from pathlib import Path

import msgspec

from ._engine import FileReport, import_file
from ._many import Done, Job, Message, Progress, Waiting

_decode_job = msgspec.json.Decoder(Job).decode
_encode = msgspec.json.Encoder().encode
#: The status of a worker that ended because its parent went away.
ORPHANED = 3


def main() -> None:
    # Ctrl-C reaches the whole process group: the parent decides (it stops its workers), and a
    # worker killed mid-import leaves whole sessions anyway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.dup(sys.stdout.fileno())
    # descriptor 1 too, not only sys.stdout: a library writing to it directly (or a program
    # it starts, which inherits it) would put lines among the messages
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    jobs: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    busy = threading.Event()

    def listen() -> None:
        for line in sys.stdin.buffer:
            busy.set()  # a job given: busy until its report is sent
            jobs.put(line)
        if busy.is_set():  # the parent is gone, or stops this worker: as a kill would
            os._exit(ORPHANED)
        jobs.put(None)

    threading.Thread(target=listen, daemon=True).start()

    def send(message: Message) -> None:
        data = memoryview(_encode(message) + b"\n")
        try:
            while data:
                data = data[os.write(out, data) :]
        except OSError:  # nobody reads it (the parent is gone): nothing left to do
            os._exit(ORPHANED)

    while (line := jobs.get()) is not None:
        job = _decode_job(line)
        i = job.i

        def told(lock: Path, i: int = i) -> None:
            send(Waiting(i, str(lock)))

        def read(n: int, i: int = i) -> None:
            send(Progress(i, n))

        try:
            report = import_file(
                job.source, job.path, job.root, settle=job.settle, now=job.now,
                progress=read, waiting=told,
            )  # fmt: skip
        except Exception as exc:  # a defect: this source's error, and the others go on
            report = FileReport(
                source=job.source, path=job.path, status="error",
                error=f"{job.path}: not imported: {type(exc).__name__}: {exc}",
            )  # fmt: skip
        busy.clear()  # before its report: the parent may close the input once it has it
        send(Done(i, report))


if __name__ == "__main__":
    main()
