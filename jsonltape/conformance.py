"""The conformance adapter: ``python -m jsonltape.conformance CMD < input``.

It speaks the protocol of ``spec/conformance.md`` so that ``spec/tools/conformance.py`` can feed
every vector in ``spec/vectors/`` to jsonltape exactly as it feeds them to any other
implementation. ``CMD`` is one of ``checksum``, ``read``, ``verify``, ``repair`` and ``fold``;
the input arrives on stdin as bytes and the answer is exactly one JSON object on stdout. The exit
status is 0 whenever the input was handled (also when it was rejected) and non-zero only on an
internal failure (then a traceback goes to stderr and stdout may be empty).

The adapter only translates: every decision (what is committed, the classification, repair and
its closers, the fold) is made by the library's public functions on a temporary copy of the
input. Nothing here re-implements a format rule.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from . import reader
from .errors import (
    CorruptError,
    FormatError,
    InvalidEventError,
    SessionNotFoundError,
    UnknownEventTypeError,
    UnsupportedVersionError,
)
from .repair import repair as repair_file

__all__ = ["COMMANDS", "main", "run"]

#: The protocol's commands, in the order ``spec/conformance.md`` lists them.
COMMANDS = ("checksum", "read", "verify", "repair", "fold")

_decode = msgspec.json.Decoder().decode


def run(cmd: str, data: bytes) -> dict[str, Any]:
    """Answer one protocol command for ``data``; return the JSON object to print."""
    if cmd == "checksum":
        return {"crc": f"{zlib.crc32(data):08x}"}
    handler = _HANDLERS.get(cmd)
    if handler is None:
        raise ValueError(f"unknown command {cmd!r}; expected one of {', '.join(COMMANDS)}")
    with tempfile.TemporaryDirectory(prefix="jsonltape-conformance-") as tmp:
        os.chmod(tmp, 0o700)
        path = Path(tmp) / "session.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return handler(path)


def _error_name(exc: FormatError) -> str:
    """The protocol's name for a refused header: a version problem or not a session at all."""
    if isinstance(exc, UnsupportedVersionError):
        return "unsupported-version"
    return "not-jsonltape"


def _read(path: Path) -> dict[str, Any]:
    try:
        events = [_decode(line.raw) for line in reader.lines(path)]
    except CorruptError as exc:
        return {"ok": False, "error": "corrupt", "line": exc.line, "offset": exc.offset}
    except FormatError as exc:
        return {"ok": False, "error": _error_name(exc), "line": None, "offset": None}
    return {"ok": True, "events": events}


def _verify(path: Path) -> dict[str, Any]:
    try:
        report = reader.verify(path)
    except FormatError as exc:
        return {"error": _error_name(exc)}
    return {
        "state": report.state,
        "events": report.events,
        "line": report.line,
        "offset": report.offset,
    }


_CLOSER_MEMBERS = ("type", "data", "surface", "sources")


def _repair(path: Path) -> dict[str, Any]:
    try:
        before = reader.verify(path)
    except FormatError as exc:
        return {"error": _error_name(exc)}
    try:
        result = repair_file(path)
    except CorruptError as exc:
        return {"error": "corrupt", "line": exc.line, "offset": exc.offset}
    closers: list[dict[str, Any]] = []
    if result.closers:
        wanted = set(result.closers)
        for line in reader.lines(path, from_seq=min(wanted)):
            if line.event.seq in wanted:
                obj = _decode(line.raw)
                closers.append({k: obj[k] for k in _CLOSER_MEMBERS if k in obj})
    return {
        "state": result.state_before,
        "cut": result.cut_offset,
        "kept": before.events,
        "closers": closers,
    }


def _fold(path: Path) -> dict[str, Any]:
    from .fold import messages

    try:
        result = messages(path)
    except UnknownEventTypeError as exc:
        return {"error": "unknown-type", "type": exc.type, "line": exc.line}
    except CorruptError:
        return {"error": "corrupt"}
    except SessionNotFoundError:
        return {"error": "parent-not-found"}  # a fork folded alone: its parent is elsewhere
    except FormatError as exc:
        return {"error": _error_name(exc)}
    except InvalidEventError as exc:
        return {"error": "invalid-event", "line": exc.line}
    return {"messages": result["messages"]}


_HANDLERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "read": _read,
    "verify": _verify,
    "repair": _repair,
    "fold": _fold,
}


def main(argv: list[str] | None = None) -> int:
    """Run one command on stdin; print its JSON object; return the exit status."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in COMMANDS:
        print(
            f"usage: python -m jsonltape.conformance {{{','.join(COMMANDS)}}} < input",
            file=sys.stderr,
        )
        return 2
    data = sys.stdin.buffer.read()
    try:
        result = run(args[0], data)
        out = json.dumps(result, ensure_ascii=True, allow_nan=False)
    except Exception:
        traceback.print_exc()
        return 1
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
