"""A second process that builds the full-text indexes of a bulk load, on the other core.

Python's GIL keeps two threads from decoding lines and running SQLite at once, so a big bulk
load (``SqliteStore.start_bulk``) hands the message texts to a helper process, which builds the
word index while the loader is still reading files, and the substring (trigram) index when it
has nothing else to do, and after. Both are written in key order, a batch at a time (FTS5
starts a new segment at every rowid that is not above the last one, and keys, in time order, go
back at every session: sorted, the indexes take about half the CPU time). Both land in the
helper's own database file, with tables declared exactly as in the index (contentless; the
helper keeps the code-like tokens of the texts it was sent, not the texts, in a table of its
own until it exits), each merged into one segment; their FTS5 shadow tables (``_data``,
``_idx``, ``_docsize``, ``_config``) are then copied into the index in one transaction each,
which takes a fraction of a second. Message ids and keys are never reused and
texts never change, so a copied index is right for every message it covers; the keys of
messages dropped from the index after the snapshot are in its ``dead_keys``.

Protocol: the parent writes frames (4-byte big-endian length, msgpack) on the helper's stdin:
``["rows", [[id, tkey, text], ...]]``, ``["done"]`` (no more rows: commit the word index and say
``words``), ``["go"]`` (the word index was copied: build the trigram index and say
``trigram``), ``["bye"]``. The helper answers one
word per line on stdout. It exits at once when its stdin closes without ``bye``: its parent is
gone. Any failure is a non-zero exit; the parent then does the work itself.

    python -P -m jsonltape_daemon.engines.sqlite.fts_helper HELPER.db

(started by ``jsonltape._spawn``, in ``/``: ``HELPER.db`` is absolute).
"""

from __future__ import annotations

import os
import queue
import sqlite3
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from jsonltape import _index_api as _api
from jsonltape_daemon.engines.sqlite import words as word_list
from jsonltape_daemon.engines.sqlite.failures import storage_error
from jsonltape_daemon.engines.sqlite.schema import (
    BULK_CACHE_KIB,
    FTS_TRIGRAM,
    FTS_WORDS,
    PAGE_SIZE,
    create_private,
    finish_bulk_merging,
    start_bulk_merging,
)
from jsonltape_daemon.engines.sqlite.words import WORDS_TABLE
from jsonltape_daemon.text.idents import idents

__all__ = ["SHADOW_TABLES", "Helper", "main"]

#: The shadow tables of an external-content FTS5 table.
SHADOW_TABLES = ("data", "idx", "docsize", "config")
_HEADER = struct.Struct(">I")
# Messages per frame (a segment of the word index each) and per trigram step: frames of 16384
# cost the same CPU at 1M events and raised the largest process's peak RSS from 84 to 111 MB.
_BATCH = 4096
_TRIGRAM_STEP = 4096


# -- the parent's side ----------------------------------------------------------------------


class Helper:
    """A running helper process and its database file (``path``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(os.path.abspath(path))  # the helper is started in another directory
        self.failed = False
        self._rows: list[tuple[int, int, str]] = []
        self._replies: queue.Queue[str | None] = queue.Queue()
        self._pending: str | None = None
        # In a safe directory, without it on sys.path (the parent runs inside projects)
        self.proc = _api.spawn.start(
            "jsonltape_daemon.engines.sqlite.fts_helper",
            self.path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        threading.Thread(
            target=self._read_replies, args=(self.proc.stdout,), daemon=True, name="fts-helper"
        ).start()

    def _read_replies(self, out: BinaryIO) -> None:
        for line in out:
            self._replies.put(line.decode().strip())
        self._replies.put(None)

    def _send(self, *msg: Any) -> None:
        if self.failed:
            return
        payload = msgspec.msgpack.encode(list(msg))
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(_HEADER.pack(len(payload)) + payload)
            if msg[0] != "rows":
                stdin.flush()
        except (BrokenPipeError, OSError):
            self.failed = True

    def _wait(self, word: str, timeout: float | None = None) -> bool:
        try:
            reply = self._replies.get(timeout=timeout)
        except queue.Empty:
            return False
        if reply != word:
            self.failed = True
            return False
        return True

    def add(self, rows: list[tuple[int, int, str]]) -> None:
        self._rows += rows
        if len(self._rows) >= _BATCH:
            self._send("rows", self._rows)
            self._rows = []

    def finish_words(self) -> bool:
        """Send what is left and wait until the word index is committed."""
        if self._rows:
            self._send("rows", self._rows)
            self._rows = []
        self._send("done")
        return not self.failed and self._wait("words")

    def go(self) -> None:
        self._send("go")

    def trigram_state(self) -> str:
        """``ready``, ``working`` or ``failed`` (without waiting)."""
        if self.failed:
            return "failed"
        if self._pending is None:
            try:
                self._pending = self._replies.get_nowait()
            except queue.Empty:
                return "working"
        if self._pending != "trigram":
            self.failed = True
            return "failed"
        return "ready"

    def close(self) -> None:
        """Stop the helper and remove its database (what it was building is not needed)."""
        if self.proc.poll() is None:
            self._send("bye")  # an idle helper exits on its own; a busy one is stopped
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        for suffix in ("", "-journal", "-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass


# -- the helper's side ----------------------------------------------------------------------


def _read_frames(stdin: BinaryIO, frames: queue.Queue[list[Any]]) -> None:
    dec = msgspec.msgpack.Decoder()
    while True:
        head = stdin.read(_HEADER.size)
        if len(head) < _HEADER.size:
            break
        (n,) = _HEADER.unpack(head)
        body = stdin.read(n)
        if len(body) < n:
            break
        msg = dec.decode(body)
        frames.put(msg)
        if msg[0] == "bye":
            return
    os._exit(3)  # the parent is gone: nobody will read what we build


def _say(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    path = argv[1]
    frames: queue.Queue[list[Any]] = queue.Queue()
    threading.Thread(
        target=_read_frames, args=(sys.stdin.buffer, frames), daemon=True, name="frames"
    ).start()
    create_private(Path(path))  # the code-like tokens of every message: owner-only
    con = sqlite3.connect(path, isolation_level=None)
    con.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
    con.execute(
        "CREATE TABLE messages "
        "(id INTEGER PRIMARY KEY, tkey INTEGER NOT NULL, idents TEXT NOT NULL)"
    )
    con.execute(FTS_WORDS)
    con.execute(FTS_TRIGRAM)
    for table in ("messages_fts", "messages_trigram"):
        start_bulk_merging(con, table)  # each merged once, at its end
    con.execute("BEGIN")
    last = 0  # the highest id received
    tri = 0  # messages up to this id are in the trigram index
    while True:
        try:
            # Between batches, the trigram index takes small steps on what has arrived.
            msg = frames.get(timeout=None if tri >= last else 0.0)
        except queue.Empty:
            tri = _trigram_step(con, tri, last)
            continue
        if msg[0] == "rows":
            rows = msg[1]
            # Every message it was sent (its parent reads the highest id covered), with only
            # what the trigram index will hold: the code-like tokens, a fraction of the text.
            con.executemany(
                "INSERT INTO messages (id, tkey, idents) VALUES (?, ?, ?)",
                [(i, k, idents(t)) for i, k, t in rows],
            )
            # In key order (see the module docs): a batch is one segment.
            con.executemany(
                "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                sorted((k, t) for _i, k, t in rows),
            )
            last = rows[-1][0]
        elif msg[0] == "done":
            break
        else:
            return 2
    finish_bulk_merging(con, "messages_fts")
    con.execute(WORDS_TABLE)
    word_list.refresh(con)  # copied in with the word index
    con.execute("COMMIT")
    _say("words")
    if frames.get()[0] != "go":
        return 2
    con.execute("BEGIN")
    while tri < last:  # in steps: each one sorted in memory
        tri = _trigram_step(con, tri, last)
    finish_bulk_merging(con, "messages_trigram")
    con.execute("COMMIT")
    _say("trigram")
    while True:
        msg = frames.get()
        if msg[0] == "bye":
            con.close()
            return 0
        else:
            return 2


def _trigram_step(con: sqlite3.Connection, tri: int, last: int) -> int:
    """Add the messages with ids in ``(tri, tri + _TRIGRAM_STEP]`` to the trigram index, in
    key order (a new segment at every key that goes back: see the word index)."""
    hi = min(last, tri + _TRIGRAM_STEP)
    con.execute(
        "INSERT INTO messages_trigram (rowid, idents) "
        "SELECT tkey, idents FROM messages WHERE id > ? AND id <= ? AND idents != '' "
        "ORDER BY tkey",
        (tri, hi),
    )
    return hi


if __name__ == "__main__":
    try:
        code = main(sys.argv)
    except BaseException as exc:
        # A full disk is the parent's to report: it builds the indexes itself when the helper
        # fails, and says so in one line if it cannot either.
        if storage_error(exc, sys.argv[1]) is None:
            import traceback

            traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # not a normal exit: the frame reader thread may sit in a read
