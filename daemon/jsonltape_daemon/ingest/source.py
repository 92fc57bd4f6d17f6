"""Kinds of session files the ingest engine reads.

The engine (``ingest.py``) owns the registry, continuity, transactions and rows; a *kind* owns
what is particular to one file format: which files it wants, the header (the session's
identity), the good lines from an offset on, how to check that the line at the cursor is still
the same, and whether damage is a torn tail or corruption. :class:`JsonltapeFiles` is the native
kind; an importer's mapping (Claude Code, Codex, pi files read as jsonltape events) is another
class with these methods, passed as ``Ingestor(kind=...)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple, Protocol

import msgspec

from jsonltape._index_api import (
    TOO_DEEP,
    Bad,
    crc_of,
    frame_ok,
    iter_lines,
    iter_lines_reverse,
    read_header,
    scan,
    witness_after,
)
from jsonltape.events import HeaderData, Line

__all__ = ["Damage", "FileKind", "Header", "JsonltapeFiles"]


class Header(NamedTuple):
    """Line 1 of a session: its data, where it ends, and its crc (with the id, the identity)."""

    data: HeaderData
    end: int
    crc: str


class Damage(NamedTuple):
    """The first line that is not good: where it starts and what is wrong with it.

    ``intact``: the line may well be sound but cannot be decoded here (nested too deep, spec
    §6); the file is indexed up to it, and neither torn nor corrupt.
    """

    offset: int
    problem: str
    intact: bool = False


class FileKind(Protocol):
    def wants(self, path: str) -> bool:
        """Whether a file (its name not a dot-name) is one of this kind's files."""
        ...

    def header(self, fd: int, path: str) -> Header:
        """The header, or FormatError (not this kind's file) / CorruptError (damaged)."""
        ...

    def lines(
        self, fd: int, start: int, end: int, seq: int, room: Callable[[], int]
    ) -> Iterator[list[Line] | Damage]:
        """Good lines from ``start`` (the first has seq ``seq``) in lists of up to ``room()``
        lines (asked before each list), then the first bad one (if any)."""
        ...

    def continues(self, fd: int, end: int, seq: int, crc: str | None, stop: int) -> bool:
        """True if the line ending at ``end`` (not before ``stop``) still has this seq/crc."""
        ...

    def intact(
        self, fd: int, start: int, end: int, ingested: Iterable[tuple[int, int, str]]
    ) -> bool:
        """True if ``[start, end)`` still holds the ``ingested`` lines (``(offset, size,
        crc)`` of each, from seq 1 on, in order), each good with that crc: a file that kept
        its last line but not the ones before it (another continuation of the same length) is
        not intact."""
        ...

    def corrupt_after(self, fd: int, start: int, end: int) -> bool:
        """True if the damage at ``start`` is corruption, not a torn tail."""
        ...


class _Seq(msgspec.Struct):
    seq: int


_seq_decoder = msgspec.json.Decoder(_Seq)
_COMPARE_BYTES = 1 << 20  # file bytes compared with the stored lines per read


class JsonltapeFiles:
    """jsonltape session files: ``*.jsonl``, framed lines with a crc and dense seqs. A line is
    good exactly when ``jsonltape verify`` says so: both read through the library's one scan."""

    def wants(self, path: str) -> bool:
        return path.endswith(".jsonl")

    def header(self, fd: int, path: str) -> Header:
        data, end, _time = read_header(fd, path)
        return Header(data, end, crc_of(os.pread(fd, end, 0)) or "")

    def lines(
        self, fd: int, start: int, end: int, seq: int, room: Callable[[], int]
    ) -> Iterator[list[Line] | Damage]:
        out: list[Line] = []
        chunk = room()
        for item in scan(fd, start, seq, end):
            if isinstance(item, Bad):
                if out:
                    yield out
                # Too deep to decode: index what comes before it; the line may be intact.
                problem = TOO_DEEP if item.too_deep else item.problem
                yield Damage(item.offset, problem, intact=item.too_deep)
                return
            out.append(Line(item[0], item[1] + b"\n", item[2]))
            if len(out) >= chunk:
                yield out
                out = []
                chunk = room()
        if out:
            yield out

    def continues(self, fd: int, end: int, seq: int, crc: str | None, stop: int) -> bool:
        for _start, raw in iter_lines_reverse(fd, end, stop):
            if not frame_ok(raw) or crc_of(raw) != crc:
                return False
            try:
                return _seq_decoder.decode(raw).seq == seq
            except (msgspec.DecodeError, RecursionError):
                return False
        return False

    def intact(
        self, fd: int, start: int, end: int, ingested: Iterable[tuple[int, int, str]]
    ) -> bool:
        # Each line where it was, as long, good (its crc checks) and with the same crc: the
        # index keeps no copy of the lines, and a line is its crc (good lines were checked
        # when they were ingested; a changed one cannot keep both its crc and a good frame).
        marks = iter(ingested)
        at = start
        for off, raw in iter_lines(fd, start, end):
            mark = next(marks, None)
            if (
                mark is None
                or (off, len(raw)) != (mark[0], mark[1])
                or not frame_ok(raw)
                or crc_of(raw) != mark[2]
            ):
                return False
            at = off + len(raw)
        return at == end and next(marks, None) is None

    def corrupt_after(self, fd: int, start: int, end: int) -> bool:
        # The library's witness rule: a good checkpoint line anywhere after the bad one.
        first = next(iter_lines(fd, start, end), None)  # the bad line itself
        return first is not None and witness_after(fd, start + len(first[1]), end)
