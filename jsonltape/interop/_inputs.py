"""What an import reads: a foreign JSONL file, or a :class:`~._source.Unit` rendered as JSONL.

Everything downstream (the mapping, the prefix check that refuses a rewritten source, the
``import/sync`` markers, the read-only scan) sees the same thing either way: numbered lines, a
size and a change time, the hash of a prefix. A file is read as it is on disk; a unit is
rendered once per input (``render(settled)``) and read from memory, its still-changing tail
held back the way a file's unfinished last line is.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from ._source import SourceReader, Unit, prefix_sha256, split_records

__all__ = ["FileInput", "Input", "LogInput", "TextInput", "UnitInput"]


class Input:
    """One foreign session source."""

    path: Path
    """The file the lines come from (for a unit: the file its records are read from)."""
    name: str
    """The name the session id derives from, unique within the source."""
    tail = "torn"
    """What a held-back end is: a file's unfinished line (``torn``), or a unit's records still
    changing (``held``)."""

    def stat(self) -> tuple[int, int]:
        """``(size, mtime_ns)``: with both unchanged, nothing new can be in it."""
        raise NotImplementedError  # pragma: no cover - abstract

    def reader(self, *, settled: bool) -> SourceReader:
        """A fresh reader of the lines (``settled``: the source is finished)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def first_line_sha(self) -> str:
        """SHA-256 of the first line (with its newline): tells two sources of one name apart."""
        raise NotImplementedError  # pragma: no cover - abstract

    def prefix_sha(self, nbytes: int) -> str | None:
        """SHA-256 of the first ``nbytes`` bytes, None if there are fewer."""
        raise NotImplementedError  # pragma: no cover - abstract

    def data(self) -> bytes | None:
        """The lines in memory (a unit's rendering), or None for a file read from disk."""
        return None

    def records(self) -> tuple[list[bytes], int, bytes]:
        """The current version as records (see :mod:`._rewrite`): its complete lines without
        their newline, the index from which they may still change, an unfinished last line."""
        raise NotImplementedError  # pragma: no cover - abstract

    def title(self) -> str | None:
        """The session's own title kept beside its lines (:attr:`Unit.title`), or None."""
        return None

    def created(self) -> int | None:
        """The session's creation time kept beside its lines (:attr:`Unit.created`), or None."""
        return None

    def same_source(self, meta: dict[str, object]) -> bool:
        """Whether the session whose ``meta.import`` is ``meta`` was imported from this source
        (and not from another one of the same name): its first line is the same."""
        return meta.get("first_line_sha256") == self.first_line_sha()


class FileInput(Input):
    """A JSONL file on disk, read as it is. ``name`` (default: the file's name) is what the
    session id derives from, for a source whose files share one name (Kimi CLI's
    ``<session>/wire.jsonl``); ``title`` reads the title the agent keeps beside the file and
    rewrites in place (its ``state.json``), as :attr:`Unit.title` does for a unit."""

    def __init__(
        self,
        path: Path,
        name: str | None = None,
        title: Callable[[], str | None] | None = None,
    ) -> None:
        self.path = path
        self.name = name or path.name
        self._title = title

    def stat(self) -> tuple[int, int]:
        st = os.stat(self.path)
        return st.st_size, st.st_mtime_ns

    def reader(self, *, settled: bool) -> SourceReader:
        return SourceReader(str(self.path))

    def first_line_sha(self) -> str:
        with open(self.path, "rb") as f:
            return hashlib.sha256(f.readline()).hexdigest()

    def prefix_sha(self, nbytes: int) -> str | None:
        return prefix_sha256(str(self.path), nbytes)

    def title(self) -> str | None:
        return self._title() if self._title is not None else None

    def records(self) -> tuple[list[bytes], int, bytes]:
        with open(self.path, "rb") as f:
            records, tail = split_records(f.read())
        return records, len(records), tail


class TextInput(FileInput):
    """A text file that is not JSONL (an Aider Markdown history): each line is a record
    ``{"text": line}``, its raw text the line as stored, so the file is rebuilt byte for byte.
    ``name`` (the session id derives from it) is the importer's."""

    def __init__(self, path: Path, name: str) -> None:
        super().__init__(path)
        self.name = name

    def reader(self, *, settled: bool) -> SourceReader:
        return SourceReader(str(self.path), text=True)


class UnitInput(Input):
    """A unit, rendered once on first use and read from memory."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        self.path = Path(unit.path)
        self.name = unit.name
        self._rendered: tuple[bytes, int] | None = None
        self.tail = "held"

    def _render(self, settled: bool) -> tuple[bytes, int]:
        # once per input: the bytes do not depend on ``settled``, only what is held does
        if self._rendered is None:
            self._rendered = self.unit.render(False)
        data, held = self._rendered
        return data, 0 if settled else held

    def stat(self) -> tuple[int, int]:
        return self.unit.size, self.unit.mtime_ns

    def reader(self, *, settled: bool) -> SourceReader:
        data, held = self._render(settled)
        return SourceReader(
            str(self.path), data=data, held=held, size=self.unit.size, mtime_ns=self.unit.mtime_ns
        )

    def first_line_sha(self) -> str:
        data, _held = self._render(True)
        end = data.find(b"\n")
        return hashlib.sha256(data if end < 0 else data[: end + 1]).hexdigest()

    def prefix_sha(self, nbytes: int) -> str | None:
        data, _held = self._render(True)
        if len(data) < nbytes:
            return None
        return hashlib.sha256(data[:nbytes]).hexdigest()

    def data(self) -> bytes | None:
        return self._render(True)[0]

    def title(self) -> str | None:
        title = self.unit.title
        return title() if callable(title) else title

    def created(self) -> int | None:
        return self.unit.created

    def records(self) -> tuple[list[bytes], int, bytes]:
        data, held = self._render(False)
        records, _tail = split_records(data)  # a rendering's lines all end with a newline
        kept = len(data) - held
        at, k = 0, 0
        while k < len(records) and at < kept:
            at += len(records[k]) + 1
            k += 1
        return records, k, b""

    def same_source(self, meta: dict[str, object]) -> bool:
        # the same file and name need no rendering (an unchanged unit is then never rendered)
        if meta.get("file") == os.path.abspath(self.path) and meta.get("name") == self.name:
            return True
        return super().same_source(meta)


class LogInput(Input):
    """What an import reads from a source that rewrites its sessions in place (see
    :mod:`._rewrite`): the lines imported before, then the current version's from where it
    differs, in memory; everything else is the source's."""

    def __init__(self, base: Input, data: bytes, held: int) -> None:
        self.base = base
        self.path = base.path
        self.name = base.name
        self.tail = base.tail
        self._data = data
        self._held = held

    def stat(self) -> tuple[int, int]:
        return self.base.stat()

    def reader(self, *, settled: bool) -> SourceReader:
        size, mtime_ns = self.base.stat()
        held = 0 if settled else self._held
        return SourceReader(
            str(self.path), data=self._data, held=held, size=size, mtime_ns=mtime_ns
        )

    def first_line_sha(self) -> str:
        return self.base.first_line_sha()

    def prefix_sha(self, nbytes: int) -> str | None:
        if len(self._data) < nbytes:
            return None
        return hashlib.sha256(self._data[:nbytes]).hexdigest()

    def data(self) -> bytes | None:
        return self._data

    def title(self) -> str | None:
        return self.base.title()

    def created(self) -> int | None:
        return self.base.created()

    def records(self) -> tuple[list[bytes], int, bytes]:
        return self.base.records()

    def same_source(self, meta: dict[str, object]) -> bool:
        return self.base.same_source(meta)
