"""Message texts read back from the session files: the index keeps no copy of them.

A message row points at its event (``events``: offset, size and crc of the line). Its text is
that line read again, its crc checked, decoded, and given to ``extract.message_fields`` -- the
same steps that made the text at ingest. A line whose crc no longer matches (the file was
edited under the index) or whose file is gone or unreadable gives no text: a search then skips
the hit wherever the text decides, and shows a word match without a snippet.

Sessions whose lines cannot be read back from a byte range of a jsonltape file (foreign
sessions, rendered from another agent's file) keep their texts in ``message_texts``; the store
decides which when it adds a session's first messages (:func:`reads_back`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

from jsonltape._index_api import crc_of, frame_ok
from jsonltape_daemon.text.extract import message_fields

if TYPE_CHECKING:
    import sqlite3

__all__ = ["Texts", "line_text"]

#: Non-blocking: a session path replaced by a FIFO must not hang a search.
_O_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_BATCH = 500
#: What a line that is no longer what was indexed can make decoding raise.
_BAD = (ValueError, TypeError, KeyError, RecursionError, OverflowError)


class _Envelope(msgspec.Struct):
    """What a text needs of a line. Not the library's Event: the crc already says this is the
    line ingest judged good, and a query must not load the event Structs (start-up cost)."""

    type: str
    data: dict[str, Any]


_decode = msgspec.json.Decoder(_Envelope).decode


def line_text(raw: bytes, type_: str, crc: str) -> str | None:
    """The text of a message line, or None when the line is not the one indexed."""
    if not frame_ok(raw) or crc_of(raw) != crc:
        return None
    try:
        event = _decode(raw)
    except (*_BAD, msgspec.DecodeError):
        return None
    if event.type != type_:
        return None
    return message_fields(type_, event.data)[1]


class Texts:
    """Texts of messages by key (``messages.tkey``), for one search or one task: each file is
    opened once, and texts read once are kept. Use as a context manager, or :meth:`close`."""

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self._fds: dict[str, int | None] = {}
        self._got: dict[int, str | None] = {}

    def __enter__(self) -> Texts:
        return self

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()

    def get(self, keys: Iterable[int]) -> dict[int, str | None]:
        """The text of each key (None: unreadable, or no such message)."""
        keys = list(keys)
        missing = [k for k in keys if k not in self._got]
        for at in range(0, len(missing), _BATCH):
            part = missing[at : at + _BATCH]
            for k in part:
                self._got[k] = None
            rows = self.con.execute(
                "SELECT m.tkey, m.type, s.path, e.offset, e.size, e.crc, t.text FROM messages m "
                "JOIN sessions s ON s.sid = m.sid "
                "LEFT JOIN events e ON e.sid = m.sid AND e.seq = m.seq "
                "LEFT JOIN message_texts t ON t.tkey = m.tkey "
                f"WHERE m.tkey IN ({', '.join('?' * len(part))})",
                part,
            ).fetchall()
            rows.sort(key=lambda r: (r[2], r[3] or 0))  # each file front to back
            for key, type_, path, offset, size, crc, kept in rows:
                self._got[key] = (
                    kept if kept is not None else self._read(path, offset, size, crc, type_)
                )
        return {k: self._got[k] for k in keys}

    def forget(self, keys: Iterable[int]) -> None:
        """Drop kept texts (a long pass keeps only what it will show)."""
        for k in keys:
            self._got.pop(k, None)

    def iter(self, keys: Iterable[int]) -> Iterator[tuple[int, str | None]]:
        """``(key, text)`` for each key, in order, read a batch at a time."""
        keys = list(keys)
        for at in range(0, len(keys), _BATCH):
            part = keys[at : at + _BATCH]
            got = self.get(part)
            for k in part:
                yield k, got[k]
            for k in part:  # a long pass keeps only what it is reading
                self._got.pop(k, None)

    def _read(
        self, path: str, offset: int | None, size: int | None, crc: str | None, type_: str
    ) -> str | None:
        if offset is None or size is None or crc is None:
            return None
        fd = self._fd(path)
        if fd is None:
            return None
        try:
            raw = os.pread(fd, size, offset)
        except OSError:
            return None
        return line_text(raw, type_, crc)

    def _fd(self, path: str) -> int | None:
        if path not in self._fds:
            try:
                self._fds[path] = os.open(path, _O_READ)
            except OSError:
                self._fds[path] = None
        return self._fds[path]
