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
* Message status follows :class:`jsonltape.fold.SurfaceFold` incrementally with the same anchor
  scheme, persisted in the ``messages`` table: an append is an insert, a replace or retract
  looks up only the nodes it touches. A surface operation the fold would refuse leaves the
  message ``rejected``.
* Transactions are bounded by rows and time. On an empty index (or after a bulk load was cut
  short) rows are loaded without full-text upkeep and the FTS tables are rebuilt once at the
  end, which is several times faster for a first sync of a large archive.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import msgspec

from jsonltape import _framing
from jsonltape._scan import check, read_header
from jsonltape.errors import CorruptError, FormatError
from jsonltape.events import SURFACE_TYPES, Event, FlushData, Replace, Retract

from .extract import message_fields
from .store import FileRow, MessageRow, SessionRow, Store

__all__ = ["Budget", "Ingestor", "SyncStats", "walk"]

_decoder = msgspec.json.Decoder(Event)
_O_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_CHUNK_LINES = 256


class _Seq(msgspec.Struct):
    seq: int


_seq_decoder = msgspec.json.Decoder(_Seq)


@dataclass(frozen=True)
class Budget:
    """Bounds of one write transaction: rows and seconds of held write lock."""

    rows: int = 1000
    seconds: float = 0.05


@dataclass
class SyncStats:
    files: int = 0  #: files opened (changed since the last sync)
    sessions_added: int = 0
    sessions_removed: int = 0
    reingested: int = 0
    events: int = 0
    messages: int = 0
    bytes: int = 0
    errors: int = 0
    transactions: int = 0
    seconds: float = 0.0


class _Stop(Exception):
    """Raised at a transaction boundary once a stop was requested."""


def walk(root: str) -> list[str]:
    """Every ``*.jsonl`` regular file under ``root``; dot-names skipped, symlinks not followed."""
    out: list[str] = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = os.scandir(d)
        except OSError:
            continue
        with entries:
            for e in entries:
                if e.name.startswith("."):
                    continue
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif e.name.endswith(".jsonl") and e.is_file(follow_symlinks=False):
                        out.append(e.path)
                except OSError:
                    continue
    out.sort()
    return out


def _hint(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Ingestor:
    """Sync a root into a :class:`Store`. Not thread-safe: one engine per store."""

    def __init__(
        self,
        store: Store,
        root: str | os.PathLike[str],
        *,
        budget: Budget = Budget(),
        bulk_budget: Budget = Budget(20_000, 1.0),
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.root = os.path.abspath(root)
        self.budget = budget
        self.bulk_budget = bulk_budget
        self.should_stop = should_stop
        self.progress = progress
        self._open = False
        self._rows = 0
        self._t0 = 0.0
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

    def sync_file(self, path: str) -> SyncStats:
        """Sync one file wherever it is and whatever its name (``show`` without an index)."""
        p = os.path.abspath(path)
        return self._run(lambda: self._sync_path(p, self.store.file(p)))

    def eligible(self, path: str) -> bool:
        rel = os.path.relpath(path, self.root)
        if rel.startswith("..") or not rel.endswith(".jsonl"):
            return False
        return not any(part.startswith(".") for part in rel.split(os.sep))

    # -- transaction bookkeeping ---------------------------------------------------------

    def _run(self, body: Callable[[], None]) -> SyncStats:
        self._stats = SyncStats()
        start = time.monotonic()
        commits = self.store.commits
        self._bulk = not self.store.fts_live or self.store.is_empty()
        try:
            try:
                body()
                if not self.store.fts_live:
                    self._tx()
                    self.store.rebuild_fts()
                self._commit()
            except _Stop:
                pass
        except BaseException:
            self._open = False
            self.store.rollback()
            raise
        self._stats.transactions = self.store.commits - commits
        self._stats.seconds = time.monotonic() - start
        return self._stats

    def _tx(self) -> None:
        if not self._open:
            self.store.begin()
            self._open = True
            self._rows = 0
            self._t0 = time.monotonic()
            if self._bulk and self.store.fts_live:
                self.store.set_fts_stale()

    def _commit(self) -> None:
        if self._open:
            self._open = False
            self.store.commit()

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
        on_disk = walk(self.root)
        for path in on_disk:
            self._sync_path(path, regs.get(path))
        for path in sorted(set(regs) - set(on_disk)):
            reg = self.store.file(path)  # a rename earlier in this pass may have moved it
            if reg is not None:
                self._sync_path(path, reg)

    def _sync_some(self, wanted: set[str]) -> None:
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
            fd = os.open(path, _O_READ)
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
        st: os.stat_result | None,
        status: str,
        error: str | None,
    ) -> None:
        """Register a file that is not (or not yet) an indexable session."""
        self._tx()
        if reg is not None and reg.sid is not None:
            self.store.drop_session(reg.sid)
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

    def _sync_fd(self, fd: int, path: str, reg: FileRow | None) -> None:
        st = os.fstat(fd)
        size = st.st_size
        try:
            header, hend, _time = read_header(fd, path)
        except (FormatError, CorruptError) as exc:
            if size < (1 << 24) and b"\n" not in os.pread(fd, min(size, 1 << 16), 0):
                self._record(path, reg, st, "pending", None)  # header still being written
            else:
                status = "error" if isinstance(exc, CorruptError) else "foreign"
                self._record(path, reg, st, status, exc.message)
            return
        hcrc = _framing.crc_of(os.pread(fd, hend, 0)) or ""
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
        start, last_seq, last_crc = 0, -1, None
        if sess is not None and reg is not None:
            # Another inode (a copy or checkout put in place) or the same size with a new mtime
            # (a rewrite in place, or a touch) is not an append: the whole ingested region is
            # checked then, not just its last line.
            rewritten = (reg.dev, reg.ino) != (st.st_dev, st.st_ino) or reg.size == size
            if self._continuous(fd, size, hend, reg) and (
                not rewritten or self._intact(fd, hend, reg.offset)
            ):
                start, last_seq, last_crc = reg.offset, reg.last_seq or 0, reg.last_crc
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
            self._stats.sessions_added += 1
        self._read(fd, path, st, sess, start, last_seq, last_crc)

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
        for _start, raw in _framing.iter_lines_reverse(fd, off, hend):
            if not _framing.frame_ok(raw) or _framing.crc_of(raw) != reg.last_crc:
                return False
            try:
                return _seq_decoder.decode(raw).seq == reg.last_seq
            except msgspec.DecodeError:
                return False
        return False

    def _intact(self, fd: int, hend: int, end: int) -> bool:
        """Every line in ``[hend, end)`` still has a good crc and the next seq."""
        expected = 1
        for _off, raw in _framing.iter_lines(fd, hend, end):
            if not _framing.frame_ok(raw):
                return False
            try:
                if _seq_decoder.decode(raw).seq != expected:
                    return False
            except msgspec.DecodeError:
                return False
            expected += 1
        return True

    def _read(
        self,
        fd: int,
        path: str,
        st: os.stat_result,
        sess: SessionRow,
        start: int,
        last_seq: int,
        last_crc: str | None,
    ) -> None:
        size = st.st_size
        expected = last_seq + 1
        chunk: list[tuple[int, bytes, Event]] = []
        bad: tuple[int, str] | None = None
        for off, raw in _framing.iter_lines(fd, start, size):
            problem = None
            event: Event | None = None
            if _framing.frame_ok(raw):
                try:
                    event = _decoder.decode(raw)
                except msgspec.DecodeError as exc:
                    problem = f"not a valid event envelope: {exc}"
                else:
                    if event.seq != expected:
                        problem = f"seq {event.seq} where {expected} was expected"
            else:
                problem = check(raw, None)[1] or "bad line"
            if problem is not None or event is None:
                bad = (off, problem or "bad line")
                break
            chunk.append((off, raw, event))
            expected += 1
            if len(chunk) >= self._room():
                self._apply(sess, path, chunk)
                chunk = []
        if chunk:
            self._apply(sess, path, chunk)
        corrupt = bad is not None and self._checkpoint_after(fd, bad[0], size)
        if corrupt:
            sess.state = "corrupt"
        elif bad is not None:
            sess.state = "torn-tail"
        elif sess.open_turn is not None and not sess.closed:
            sess.state = "open-turn"
        else:
            sess.state = "clean"
        sess.error = None
        if bad is not None:
            where = f"line {expected + 1}, byte {bad[0]}: {bad[1]}"
            sess.error = where + ("; damage before the last checkpoint" if corrupt else "")
        cursor = self.store.file(path)
        assert cursor is not None and cursor.sid == sess.sid, "the header line is always ingested"
        cursor.status = "indexed"
        cursor.error = sess.error if corrupt else None
        cursor.dev, cursor.ino, cursor.size, cursor.mtime_ns = _hint(st)
        self._tx()
        self.store.put_session(sess)
        self.store.put_file(cursor)
        if corrupt:
            self._stats.errors += 1
        self._rows += 1
        self._checkpoint()

    def _checkpoint_after(self, fd: int, start: int, size: int) -> bool:
        """True if a valid checkpoint follows the bad line at ``start`` (so: corruption)."""
        for off, raw in _framing.iter_lines(fd, start, size):
            if b'"session/flush"' not in raw or not _framing.frame_ok(raw):
                continue
            try:
                event = _decoder.decode(raw)
            except msgspec.DecodeError:
                continue
            if event.type == "session/flush" and _valid_checkpoint(event, off):
                return True
        return False

    # -- rows ----------------------------------------------------------------------------

    def _apply(self, sess: SessionRow, path: str, chunk: list[tuple[int, bytes, Event]]) -> None:
        self._tx()
        store = self.store
        sid = sess.sid
        store.add_events([(sid, e.seq, e.type, e.time, off, raw.decode()) for off, raw, e in chunk])
        pending: list[MessageRow] = []
        added = 0
        for off, _raw, event in chunk:
            t = event.type
            if event.seq > 0:
                if t == "session/flush":
                    sess.closed = _valid_checkpoint(event, off) and bool(event.data.get("closed"))
                else:
                    sess.closed = False
                    if t == "turn/start":
                        sess.open_turn = event.seq
                    elif t == "turn/end":
                        sess.open_turn = None
            if t in SURFACE_TYPES or t == "surface/retract":
                added += self._fold(sid, event, pending)
        store.add_messages(pending)
        last_off, last_raw, last = chunk[-1]
        sess.events = last.seq + 1
        sess.messages += added
        sess.updated = last.time
        store.put_session(sess)
        store.put_file(
            FileRow(
                path=path,
                status="indexed",
                sid=sid,
                offset=last_off + len(last_raw),
                last_seq=last.seq,
                last_crc=_framing.crc_of(last_raw),
            )
        )
        nbytes = last_off + len(last_raw) - chunk[0][0]
        self._stats.events += len(chunk)
        self._stats.messages += added
        self._stats.bytes += nbytes
        self._rows += len(chunk) + added
        if self.progress is not None:
            self.progress(nbytes)
        self._checkpoint()

    def _fold(self, sid: int, event: Event, pending: list[MessageRow]) -> int:
        """Mirror ``SurfaceFold.apply`` for one event; return 1 if it added a message row."""
        t = event.type
        is_message = t in SURFACE_TYPES
        call_id = str(event.data.get("call_id")) if t == "tool/result" else None

        def row(status: str, anchor: int | None) -> MessageRow:
            role, text, truncated = message_fields(t, event.data)
            return MessageRow(
                sid, event.seq, t, role, event.time, status, anchor, call_id, text, truncated
            )

        surface = event.surface
        if surface is None or surface == "append":
            if not is_message:
                return 0  # a retract without a range: refused by the fold
            pending.append(row("current", event.seq))
            return 1
        if not isinstance(surface, (Replace, Retract)):  # pragma: no cover - decoder guarantees
            return 0
        self.store.add_messages(pending)  # look-ups below must see earlier rows
        pending.clear()
        outcome = self._range_op(sid, event, surface, call_id)
        if outcome is None:
            if is_message:
                pending.append(row("rejected", None))
            return int(is_message)
        anchor, shadowed, status = outcome
        self.store.set_status(sid, shadowed, status)
        if isinstance(surface, Replace):
            pending.append(row("current", anchor))
            return 1
        return 0

    def _range_op(
        self, sid: int, event: Event, op: Replace | Retract, call_id: str | None
    ) -> tuple[int, list[int], str] | None:
        store = self.store
        t = event.type
        first = store.current(sid, op.start)
        last = store.current(sid, op.end)
        if first is None or last is None or first[0] > last[0]:
            return None
        nodes = store.current_between(sid, first[0], last[0])
        shadowed = [seq for seq, _c, _t in nodes]
        if isinstance(op, Retract):
            return (first[0], shadowed, "retracted") if t == "surface/retract" else None
        if t == "surface/retract":
            return None
        sources = set(event.sources or ())
        if any(s not in sources for s in shadowed):
            return None
        tools = {seq: c for seq, c, typ in nodes if typ == "tool/result"}
        if t == "tool/result" or tools:
            if t != "tool/result" or len(shadowed) != 1 or shadowed[0] not in tools:
                if t == "tool/result" or len(shadowed) == 1:
                    return None
            elif tools[shadowed[0]] != call_id:
                return None
        compacted = store.has_compaction(sid, sources, event.seq)
        return first[0], shadowed, "compacted" if compacted else "superseded"


def _valid_checkpoint(event: Event, off: int) -> bool:
    try:
        data = msgspec.convert(event.data, type=FlushData)
    except msgspec.ValidationError:
        return False
    return data.offset == off
