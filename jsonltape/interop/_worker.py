"""An import worker (:mod:`._many`): ``python -P -m jsonltape.interop._worker``.

Reads one :class:`~._many.Job` a line on its input, imports it as
:func:`~._engine.import_file` does, and writes what the import says (progress, a wait for
another import of the source, then its report) as :data:`~._many.Message` lines on its
output; exits when its input ends. Nothing else is written to that output: what a library
might print goes to standard error.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import msgspec

from ._engine import FileReport, import_file
from ._many import Done, Job, Message, Progress, Waiting

_decode_job = msgspec.json.Decoder(Job).decode
_encode = msgspec.json.Encoder().encode


def main() -> None:
    # Ctrl-C reaches the whole process group: the parent decides (it stops its workers), and a
    # worker killed mid-import leaves whole sessions anyway.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr

    def send(message: Message) -> None:
        out.write(_encode(message) + b"\n")
        out.flush()

    for line in sys.stdin.buffer:
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
        send(Done(i, report))


if __name__ == "__main__":
    main()
