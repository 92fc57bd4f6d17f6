"""The ingest engine: bring the index in line with the session files under a root.

One engine serves ``jsonltape sync`` and the daemon. Per file it keeps a registry row (path,
stat hints, session id and header crc, the end offset, seq and crc of the last ingested line)
that is written in the same transaction as the rows it covers, so the index is never ahead of
or behind its own cursor, and a kill at any moment loses nothing.

* Identity is the header: session id + the crc of line 1. ``(dev, inode, size, mtime)`` is only
  a hint that lets an unchanged file be skipped without opening it.
* Continuity: before reading on from the stored offset, the line that ends there must still be
  the same (crc and seq). A file that shrank, was replaced or rewritten is reingested, so the
  result always equals a rebuild from scratch. A renamed file (its old path gone, its header
  found at a new path) keeps its rows and its cursor.
* Only complete lines with a good crc and the next seq are ingested; a torn tail waits, damage
  before a checkpoint marks the session corrupt. Bad files are recorded and skipped.
* Message status follows :class:`jsonltape.fold.SurfaceFold` incrementally (``surface.py``).
* Transactions are bounded by rows and time. A sync into an empty index is a bulk load
  (``Store.start_bulk``): rows only, the word index built once (at the end, or meanwhile by a
  helper process), the whole load published at once; the substring index is built afterwards
  (:meth:`Ingestor.build_substrings`), while the index is already searchable.
* What is particular to the file format lives in a *kind* (``source.py``); the engine works the
  same for any kind that can say where a good line ends and whether the cursor still holds.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable

from jsonltape._index_api import checkpoint_at, crc_of
from jsonltape.errors import CorruptError, FormatError
from jsonltape.events import SURFACE_TYPES, Line
from jsonltape.usage import response_of, session_links
from jsonltape_daemon.ingest.files import (
    DATA_ERRORS,
    O_READ,
    UNNAMED,
    Budget,
    Stat,
    SyncStats,
    storable,
    walk,
)
from jsonltape_daemon.ingest.rows import FileRow, MessageRow, SessionRow, Store
from jsonltape_daemon.ingest.source import Damage, FileKind, JsonltapeFiles
from jsonltape_daemon.ingest.surface import SurfaceMirror

__all__ = ["UNNAMED", "Budget", "Ingestor", "Stat", "SyncStats", "walk"]

_CHUNK_LINES = 256
_SUBSTRING_STEP = 128  # messages per substring-indexing statement


class _Stop(Exception):
    """Raised at a transaction boundary once a stop was requested."""


def _hint(st: Stat) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Ingestor:
    """Sync a root into a :class:`Store`. Not thread-safe: one engine per store."""

    #: Dot-names that are walked all the same (an agent's ``.crush`` directory in a project).
    dotted: frozenset[str] = frozenset()

    def __init__(
        self,
        store: Store,
        root: str | os.PathLike[str],
        *,
        budget: Budget = Budget(),
        bulk_budget: Budget = Budget(50_000, 2.0),
        kind: FileKind | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.root = os.path.abspath(root)
        self.budget = budget
        self.bulk_budget = bulk_budget
        self.kind: FileKind = kind or JsonltapeFiles()
        self.should_stop = should_stop
        self.progress = progress
        self.surface = SurfaceMirror(store)
        self._open = False
        self._rows = 0
        self._t0 = 0.0
        #: files of the last rescan whose names the index cannot store (:data:`UNNAMED`)
        self.unnamed: list[str] = []
        self._bulk = False
        self._stats = SyncStats()

    # -- entry points --------------------------------------------------------------------

    def rescan(self) -> SyncStats:
        """Compare every file under the root with the registry; sync what changed."""
        return self._run(self._rescan)

    def sync_paths(self, paths: Iterable[str]) -> SyncStats:
        """Sync just these paths (watcher hints); paths outside the root are ignored."""
        wanted = {os.path.abspath(p) for p in paths}
        return self._run(lambda: self._sync_some(wanted))

    def take_held(self) -> dict[str, float]:
        """Paths ``sync_paths`` held back (a costly foreign file mapped again too soon), with
        the monotonic time each may be synced; the caller hints them again then."""
        return {}

    def sync_file(self, path: str) -> SyncStats:
        """Sync one file wherever it is and whatever its name (``show`` without an index)."""
        p = os.path.abspath(path)
        return self._run(lambda: self._sync_path(p, self.store.file(p)))

    def eligible(self, path: str) -> bool:
        return self._in_tree(path) and storable(path)

    def hinted(self, path: str) -> bool:
        """Whether a watcher's event for ``path`` concerns this tree (``sync_paths`` takes it)."""
        return self._in_tree(path)

    def _in_tree(self, path: str) -> bool:
        rel = os.path.relpath(path, self.root)
        if rel.startswith("..") or not self.kind.wants(path):
            return False
        return not any(p.startswith(".") and p not in self.dotted for p in rel.split(os.sep))

    def build_substrings(
        self, seconds: float | None = None, *, tx_seconds: float = 0.25
    ) -> SyncStats:
        """Add messages to the substring index, in transactions of about ``tx_seconds``, until
        it is complete, ``seconds`` have passed, or a stop is requested. The index stays
        searchable meanwhile (substring queries scan what is not indexed yet)."""
        stats = SyncStats()
        store = self.store
        start = time.monotonic()
        commits = store.commits
        try:
            while store.substrings_pending() and not self.should_stop():
                if store.substrings_waiting():  # a helper process is building it
                    if seconds is not None and time.monotonic() - start >= seconds:
                        break
                    time.sleep(0.02)
                    continue
                store.begin()
                t0 = time.monotonic()
                while time.monotonic() - t0 < tx_seconds:
                    n = store.build_substrings(_SUBSTRING_STEP)
                    stats.substrings += n
                    if n < _SUBSTRING_STEP:
                        break
                store.commit()
                if seconds is not None and time.monotonic() - start >= seconds:
                    break
        except BaseException:
            store.rollback()
            raise
        stats.transactions = store.commits - commits
        stats.seconds = time.monotonic() - start
        stats.add("substrings", stats.seconds)
        return stats

    # -- transaction bookkeeping ---------------------------------------------------------

    def _run(self, body: Callable[[], None]) -> SyncStats:
        self._stats = stats = SyncStats()
        store = self.store
        start = time.monotonic()
        commits = store.commits
        started = not store.in_bulk and store.is_empty()
        if started:
            store.start_bulk()
            stats.bulk = True
        self._bulk = store.in_bulk or not store.fts_live
        stopped = False
        try:
            try:
                body()
            except _Stop:
                stopped = True
            self._commit()
            if not stopped and not store.fts_live and (started or not store.in_bulk):
                t = time.perf_counter()
                store.rebuild_fts()
                stats.add("words", time.perf_counter() - t)
            if started:
                t = time.perf_counter()
                store.finish_bulk()
                stats.add("publish", time.perf_counter() - t)
        except BaseException:
            self._open = False
            if started and store.in_bulk:
                store.abort_bulk()
            else:
                store.rollback()
            raise
        stats.transactions = store.commits - commits
        stats.seconds = time.monotonic() - start
        return stats

    def _tx(self) -> None:
        if not self._open:
            self.store.begin()
            self._open = True
            self._rows = 0
            self._t0 = time.monotonic()

    def _commit(self) -> None:
        if self._open:
            self._open = False
            t = time.perf_counter()
            self.store.commit()
            self._stats.add("insert", time.perf_counter() - t)

    def _room(self) -> int:
        b = self.bulk_budget if self._bulk else self.budget
        return max(1, min(_CHUNK_LINES, b.rows - self._rows))

    def _checkpoint(self) -> None:
        """Called where the registry matches the rows: commit if the budget is spent."""
        b = self.bulk_budget if self._bulk else self.budget
        if self._open and (self._rows >= b.rows or time.monotonic() - self._t0 >= b.seconds):
            self._commit()
        if self.should_stop():
            self._commit()
            raise _Stop

    # -- walking -------------------------------------------------------------------------

    def _rescan(self) -> None:
        regs = self.store.files(under=self.root)
        on_disk = walk(self.root, self.kind.wants, self.dotted)
        named: list[str] = []
        self.unnamed = []
        for p in on_disk:
            (named if storable(p) else self.unnamed).append(p)
        on_disk = named
        self._stats.errors += len(self.unnamed)
        for path in on_disk:
            self._sync_path(path, regs.get(path))
        for path in sorted(set(regs) - set(on_disk)):
            reg = self.store.file(path)  # a rename earlier in this pass may have moved it
            if reg is not None:
                self._sync_path(path, reg)

    def _sync_some(self, wanted: set[str]) -> None:
        # A name the index cannot store, renamed to or from: the report follows at once.
        odd = {p for p in wanted if not storable(p) and self._in_tree(p)}
        if odd:
            gone = {p for p in odd if not os.path.lexists(p)}
            new = sorted(odd - gone - set(self.unnamed))
            self.unnamed = [p for p in self.unnamed if p not in gone] + new
            self._stats.errors += len(new)
        paths = [p for p in wanted if self.eligible(p)]
        # Paths that exist first, so a rename is seen before its old path is forgotten.
        paths.sort(key=lambda p: (not os.path.lexists(p), p))
        for path in paths:
            self._sync_path(path, self.store.file(path))

    def _sync_path(self, path: str, reg: FileRow | None) -> None:
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            if reg is not None:
                self._forget(reg)
            return
        except OSError as exc:
            self._record(path, reg, None, "error", exc.strerror or str(exc))
            return
        if not stat.S_ISREG(st.st_mode):
            if reg is not None:
                self._forget(reg)
            return
        if reg is not None and _hint(st) == (reg.dev, reg.ino, reg.size, reg.mtime_ns):
            return
        try:
            fd = os.open(path, O_READ)
        except (FileNotFoundError, NotADirectoryError):
            if reg is not None:
                self._forget(reg)
            return
        except OSError as exc:
            self._record(path, reg, st, "error", exc.strerror or str(exc))
            return
        self._stats.files += 1
        try:
            self._sync_fd(fd, path, reg)
        except OSError as exc:
            self._record(path, reg, None, "error", exc.strerror or str(exc))
        except DATA_ERRORS as exc:
            # Whatever one file holds must not stop the index from serving the others (spec
            # invariant 9): the file is listed with its error, the rest is indexed.
            self._record(path, reg, None, "error", f"cannot index this file: {exc}")
        finally:
            os.close(fd)

    def _forget(self, reg: FileRow) -> None:
        self._tx()
        if reg.sid is not None:
            self.store.drop_session(reg.sid)
            self._stats.sessions_removed += 1
        self.store.delete_file(reg.path)
        self._rows += 1
        self._checkpoint()

    def _record(
        self,
        path: str,
        reg: FileRow | None,
        st: Stat | None,
        status: str,
        error: str | None,
    ) -> None:
        """Register a file that is not (or not yet) an indexable session."""
        self._tx()
        if reg is not None and reg.sid is not None:
            self.store.drop_session(reg.sid)
            self._stats.sessions_removed += 1
        # A session this sync began for the file (a new one, or a new generation) before an
        # error stopped it: without its file row it would block the path for good.
        begun = self.store.session_at(path)
        if begun is not None:
            self.store.drop_session(begun.sid)
            self._stats.sessions_removed += 1
        dev, ino, size, mtime = _hint(st) if st is not None else (None, None, None, None)
        self.store.put_file(
            FileRow(
                path=path, status=status, error=error, dev=dev, ino=ino, size=size, mtime_ns=mtime
            )
        )
        if status == "error":
            self._stats.errors += 1
        self._rows += 1
        self._checkpoint()

    # -- one file ------------------------------------------------------------------------

    def _sync_fd(self, fd: int, path: str, reg: FileRow | None, st: Stat | None = None) -> None:
        """Sync the session open at ``fd``; ``st`` stands for its stat when the session is not
        the file (a unit of a database: its change counter, kept as the registry's hint)."""
        if st is None:
            st = os.fstat(fd)
        size = st.st_size
        try:
            head = self.kind.header(fd, path)
        except (FormatError, CorruptError) as exc:
            if size < (1 << 24) and b"\n" not in os.pread(fd, min(size, 1 << 16), 0):
                self._record(path, reg, st, "pending", None)  # header still being written
            else:
                status = "error" if isinstance(exc, CorruptError) else "foreign"
                self._record(path, reg, st, status, exc.message)
            return
        header, hend, hcrc = head
        store = self.store
        sess = store.session(reg.sid) if reg is not None and reg.sid is not None else None
        if sess is not None and (sess.id, sess.header_crc) != (header.id, hcrc):
            self._tx()  # another session now lives at this path: a new generation
            store.drop_session(sess.sid)
            self._stats.sessions_removed += 1
            sess = None
        if sess is None:
            moved = self._moved_here(header.id, hcrc, path)
            if moved is not None:
                self._tx()
                store.move_file(moved[0].path, path)
                reg, sess = moved
                reg.path = sess.path = path
        start, last_seq = 0, -1
        if sess is not None and reg is not None:
            # Another inode (a copy or checkout put in place) or the same size with a new mtime
            # (a rewrite in place, or a touch) is not an append: the whole ingested region must
            # then still be the lines the rows came from, not just its last line (another
            # continuation of the same length can end in the same line).
            rewritten = (reg.dev, reg.ino) != (st.st_dev, st.st_ino) or reg.size == size
            if self._continuous(fd, size, hend, reg) and (
                not rewritten or self.kind.intact(fd, hend, reg.offset, store.line_marks(sess.sid))
            ):
                start, last_seq = reg.offset, reg.last_seq or 0
            else:
                self._tx()
                store.drop_session(sess.sid)
                self._stats.reingested += 1
                sess = None
        if sess is None:
            self._tx()
            parent = header.parent
            sess = SessionRow(
                id=header.id,
                path=path,
                header_crc=hcrc,
                title=header.title,
                cwd=header.cwd,
                agent=header.agent,
                created=header.created,
                updated=header.created,
                parent=parent.session if parent is not None else None,
                parent_seq=parent.seq if parent is not None else None,
            )
            store.add_session(sess)
            store.add_usage_session(sess.sid, session_links(header.id, sess.parent, header.meta))
            self._stats.sessions_added += 1
        self._read(fd, path, st, sess, start, last_seq)

    def _moved_here(
        self, session_id: str, hcrc: str, path: str
    ) -> tuple[FileRow, SessionRow] | None:
        for cand in self.store.sessions_with(session_id, hcrc):
            if cand.path != path and not os.path.lexists(cand.path):
                reg = self.store.file(cand.path)
                if reg is not None:
                    return reg, cand
        return None

    def _continuous(self, fd: int, size: int, hend: int, reg: FileRow) -> bool:
        off = reg.offset
        if reg.last_seq is None or off > size or off < hend:
            return False
        if off == hend:
            return reg.last_seq == 0
        return self.kind.continues(fd, off, reg.last_seq, reg.last_crc, hend)

    def _read(
        self, fd: int, path: str, st: Stat, sess: SessionRow, start: int, last_seq: int
    ) -> None:
        size = st.st_size
        expected = last_seq + 1
        bad: Damage | None = None
        stats = self._stats
        t = time.perf_counter()
        # Chunks end where the transaction budget is spent, so a commit can follow any chunk.
        for item in self.kind.lines(fd, start, size, expected, self._room):
            stats.add("read", time.perf_counter() - t)
            if isinstance(item, Damage):
                bad = item
                break
            self._apply(sess, path, item)
            expected += len(item)
            t = time.perf_counter()
        else:
            stats.add("read", time.perf_counter() - t)
        intact = bad is not None and bad.intact
        corrupt = bad is not None and not intact and self.kind.corrupt_after(fd, bad.offset, size)
        if corrupt:
            sess.state = "corrupt"
        elif bad is not None and not intact:
            sess.state = "torn-tail"
        elif sess.open_turn is not None and not sess.closed:
            sess.state = "open-turn"
        else:
            sess.state = "clean"
        sess.error = None
        if bad is not None:
            where = f"line {expected + 1}, byte {bad.offset}: {bad.problem}"
            sess.error = where + ("; damage before the last checkpoint" if corrupt else "")
        cursor = self.store.file(path)
        assert cursor is not None and cursor.sid == sess.sid, "the header line is always ingested"
        cursor.status = "indexed"
        # A problem to list (index status): corruption, or a line this reader cannot decode.
        cursor.error = sess.error if corrupt or intact else None
        cursor.dev, cursor.ino, cursor.size, cursor.mtime_ns = _hint(st)
        self._tx()
        self.store.put_session(sess)
        self.store.put_file(cursor)
        if corrupt:
            self._stats.errors += 1
        self._rows += 1
        self._checkpoint()

    # -- rows ----------------------------------------------------------------------------

    def _apply(self, sess: SessionRow, path: str, chunk: list[Line]) -> None:
        t0 = time.perf_counter()
        self._tx()
        store = self.store
        sid = sess.sid
        events = [
            (sid, e.seq, e.type, e.time, off, len(raw), crc_of(raw) or "") for off, raw, e in chunk
        ]
        t1 = time.perf_counter()
        store.add_events(events)
        t2 = time.perf_counter()
        pending: list[MessageRow] = []
        added = 0
        for off, _raw, event in chunk:
            t = event.type
            if event.seq > 0:
                if t == "session/flush":
                    ck = checkpoint_at(event, off)
                    sess.closed = ck is not None and ck.closed
                else:
                    sess.closed = False
                    if t == "turn/start":
                        sess.open_turn = event.seq
                    elif t == "turn/end":
                        sess.open_turn = None
                    elif t == "session/title" and isinstance(event.data.get("title"), str):
                        sess.title = event.data["title"]  # a later title wins (spec §8.4)
            if t in SURFACE_TYPES or t == "surface/retract":
                added += self.surface.apply(sid, event, pending)
        fork = sess.parent is not None
        responses = [
            (e.seq, r)
            for (_o, _r, e), row in zip(chunk, events, strict=True)
            if e.type in _RESPONSES
            and (r := response_of(sess.id, fork, e.type, e.seq, e.time, row[6], e.data, e.key))
        ]
        if responses:
            store.add_usage(sid, responses)
        t3 = time.perf_counter()
        store.add_messages(pending)
        last_off, last_raw, last = chunk[-1]
        sess.events = last.seq + 1
        sess.messages += added
        # Activity is the last time something happened in the session, not when a writer
        # checkpointed or an importer synced it: an imported archive sorts by its source.
        times = [e.time for _o, _r, e in chunk if e.type not in _NOT_ACTIVITY]
        if times:
            sess.updated = max(sess.updated, max(times))
        store.put_session(sess)
        store.put_file(
            FileRow(
                path=path,
                status="indexed",
                sid=sid,
                offset=last_off + len(last_raw),
                last_seq=last.seq,
                last_crc=crc_of(last_raw),
            )
        )
        t4 = time.perf_counter()
        stats = self._stats
        stats.add("rows", (t1 - t0) + (t3 - t2))
        stats.add("insert", (t2 - t1) + (t4 - t3))
        nbytes = last_off + len(last_raw) - chunk[0].offset
        stats.events += len(chunk)
        stats.messages += added
        stats.bytes += nbytes
        self._rows += len(chunk) + added
        if self.progress is not None:
            self.progress(nbytes)
        self._checkpoint()


#: The events that may be a model response with token usage (``jsonltape.usage.response_of``).
_RESPONSES = frozenset({"assistant/message", "branch/event"})

#: Bookkeeping lines whose time says when a writer or importer ran, not when anything happened.
_NOT_ACTIVITY = frozenset({"session/flush", "import/sync"})
