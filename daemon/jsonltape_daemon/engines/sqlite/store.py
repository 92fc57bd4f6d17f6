"""The SQLite implementation of the index's storage interface (``rows.Store``).

Every change happens inside ``begin()`` ... ``commit()``; the engine bounds what goes into one
transaction. The full-text tables, the texts kept for foreign sessions and the bulk-load helper
are in ``fulltext.py`` (a mixin of this class).

A bulk load into an empty index (the first sync of an archive) or ``index rebuild`` writes a
private file beside the index with no journal and no syncs, then syncs it and renames it into
place: a crash leaves the old index (or none) and a stray file that the next writer deletes,
never half an index. A big one hands the texts to a helper process (``fts_helper.py``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import msgspec

from jsonltape_daemon.engines.sqlite.fts_helper import Helper
from jsonltape_daemon.engines.sqlite.fulltext import FTS_TABLES, FullText
from jsonltape_daemon.engines.sqlite.keys import Keys
from jsonltape_daemon.engines.sqlite.schema import (
    connect,
    finish_bulk_merging,
    migrate,
    probe,
    start_bulk_merging,
    tkey_base,
)
from jsonltape_daemon.engines.sqlite.usage import UsageRows
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.ingest.rows import EventRow, FileRow, MessageRow, Node, SessionRow, Store
from jsonltape_daemon.paths import build_path, fsync_path, helper_path, new_path, remove_db

__all__ = [
    "FTS_TABLES",
    "EventRow",
    "FileRow",
    "MessageRow",
    "Node",
    "SessionRow",
    "SqliteStore",
    "Store",
    "build_path",
    "helper_path",
    "remove_db",
]


_FILE_COLS = "path, status, sid, error, dev, ino, size, mtime_ns, offset, last_seq, last_crc"
_SESSION_COLS = (
    "sid, id, path, header_crc, title, cwd, agent, created, updated, parent, parent_seq, "
    "events, messages, state, error, open_turn, closed"
)
_MESSAGE_INSERT = (
    "INSERT INTO messages (id, tkey, sid, seq, type, role, time, status, anchor, call_id, calls, "
    "truncated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)

_calls_dec = msgspec.json.Decoder(list[str])


def _file(r: tuple[object, ...]) -> FileRow:
    return FileRow(**dict(zip(_FILE_COLS.split(", "), r, strict=True)))  # type: ignore[arg-type]


def _session(r: tuple[object, ...]) -> SessionRow:
    d = dict(zip(_SESSION_COLS.split(", "), r, strict=True))
    d["closed"] = bool(d["closed"])
    return SessionRow(**d)  # type: ignore[arg-type]


def _calls(text: str | None) -> tuple[str, ...]:
    return tuple(_calls_dec.decode(text)) if text else ()


def _create(path: Path) -> None:
    """Create the index with its whole schema under a temporary name, then give it its name:
    a reader that comes while it is made (``daemon status`` as the daemon starts) finds no
    index, never one at schema version 0. The caller holds the index lock, so the name is
    free and the temporary file is nobody else's."""
    tmp = new_path(path)
    try:
        con = connect(tmp, create=True)
        try:
            migrate(con)
        finally:
            con.close()
        fsync_path(tmp)
        try:
            os.link(tmp, path)  # never over a file: an index is not replaced here
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            os.rename(tmp, path)
    finally:
        remove_db(tmp)  # also what a full disk left half made
    fsync_path(path.parent, directory=True)


class SqliteStore(FullText, UsageRows):
    """:class:`Store` over one SQLite file (``:memory:`` works too). Opening one makes you
    the writer: hold the index lock (``lock.index_lock``) first."""

    def __init__(self, path: Path | str, *, helper_from: int | None = 20_000) -> None:
        """``helper_from``: a bulk load with this many messages starts a helper process for
        its full-text indexes (None: never)."""
        probe()
        self.path = path
        self._memory = str(path) == ":memory:"
        self._main: sqlite3.Connection | None = None  # the published index during a bulk load
        self._bulk = False
        self._bulk_messages = 0
        self._helper_from = None if self._memory else helper_from
        self._helper: Helper | None = None
        #: Texts of a bulk load kept until its helper starts or its word index is built (at
        #: most ``helper_from`` messages; ``None``: dropped, read back from the files).
        self._early: list[tuple[int, int, str]] | None = None
        self._copy: dict[int, bool] = {}  # sid -> its texts go to message_texts
        self._cjk: list[tuple[int, str]] = []  # CJK rows of a bulk load not inserted yet
        self._keys = Keys()
        if not self._memory:
            remove_db(build_path(path))  # left by a bulk load that was killed
            remove_db(helper_path(path))
            remove_db(new_path(path))  # left by a creation that was killed
            if not os.path.lexists(path):
                _create(Path(path))
            elif not os.path.exists(path):  # SQLite would create the file where it points
                raise IndexStateError(
                    f"{path}: a symlink to nothing ({os.readlink(path)}); an index is not "
                    "created through a symlink: remove it, or give the index's own path"
                )
        self.con = connect(path, create=True)
        migrate(self.con)
        self.commits = 0
        self._load_state()

    def _load_state(self) -> None:
        self._fts_live = self._meta("fts") != "stale"
        self._sub_upto = int(self._meta("substrings") or 0)
        r = self.con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
        self._next_id = (int(r[0]) if r else 0) + 1
        # What search's bounds rely on (schema step 5): read again after a rollback, so that
        # a value that did not commit is written again when a later batch needs it.
        self._spill = int(self._meta("tkey_spill") or 0)
        self._kinds: set[tuple[str, str]] | None = None  # loaded when first needed
        self._keys.reset()  # its runs too: they may not have committed, or are another file's

    # -- transactions --------------------------------------------------------------------

    def begin(self) -> None:
        self.con.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.flush_cjk()
        self.con.execute("COMMIT")
        self.commits += 1

    def rollback(self) -> None:
        if self.con.in_transaction:
            self.con.execute("ROLLBACK")
        self._copy.clear()
        self._cjk = []
        if self._bulk and not self._memory:
            # No journal in a bulk load's file (``connect(bulk=True)``): nothing was undone and
            # the file may not read back (a full disk mid-commit leaves it malformed). Every
            # failure there throws the load away (``abort_bulk``): reading it would only raise
            # another error in place of the one that stopped the load.
            return
        self._load_state()
        if self._early:  # the ids of what was rolled back are given again
            self._early = [r for r in self._early if r[0] < self._next_id]

    def close(self) -> None:
        if self._bulk:
            self.abort_bulk()
        self._drop_helper()
        try:
            self.rollback()
            self.con.execute("PRAGMA optimize")
        except sqlite3.Error:  # pragma: no cover - closing anyway
            pass
        self.con.close()

    def _meta(self, key: str) -> str | None:
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self.con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def roots(self) -> list[str]:
        """The roots synced into this index so far (``index rebuild`` syncs them again)."""
        raw = self._meta("roots")
        return list(msgspec.json.decode(raw, type=list[str])) if raw else []

    def add_root(self, root: str) -> None:
        roots = self.roots()
        if root in roots:
            return
        self.begin()
        self.set_meta("roots", msgspec.json.encode(sorted([*roots, root])).decode())
        self.commit()

    def session_count(self) -> int:
        """Sessions the index holds."""
        return int(self.con.execute("SELECT count(*) FROM sessions").fetchone()[0])

    def checkpoint(self) -> None:
        """Copy the WAL into the database file and truncate it (after a rebuild)."""
        self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- bulk loads ----------------------------------------------------------------------

    def is_empty(self) -> bool:
        return self.con.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None

    @property
    def in_bulk(self) -> bool:
        return self._bulk

    def start_bulk(self) -> None:
        """Load into a private copy (see the module docs) until :meth:`finish_bulk`. Word
        full-text upkeep is deferred to the end and substring indexing to later. The copy
        starts empty but for the settings (``meta``): this is a first load or a rebuild."""
        assert not self._bulk and not self.con.in_transaction
        self._bulk = True
        self._bulk_messages = 0
        self._early = []
        self._drop_helper()
        if self._memory:
            self.begin()
            self.set_fts_stale()
            self.commit()
            return
        tmp = build_path(self.path)
        remove_db(tmp)
        con = connect(tmp, create=True, bulk=True)
        try:
            migrate(con)
            start_bulk_merging(con, "messages_cjk")  # merged once, when published
            con.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                self.con.execute("SELECT key, value FROM meta WHERE key = 'roots'").fetchall(),
            )
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts', 'stale')")
        except BaseException:
            con.close()
            remove_db(tmp)
            self._bulk = False
            raise
        self._main, self.con = self.con, con
        self._load_state()

    def finish_bulk(self) -> None:
        """Publish the load: sync the file and rename it over the index. The word index is
        built before (``rebuild_fts``), or left ``stale`` for the next sync to build."""
        assert self._bulk and not self.con.in_transaction
        if not self._memory:
            # The heaviest step of publishing (it rewrites the table), so before the load
            # stops being one: if it fails, the ingest aborts the load, not the index.
            finish_bulk_merging(self.con, "messages_cjk")
        self._bulk = False
        self._early = None
        if not self._fts_live:
            self._drop_helper()  # stopped early: the next sync builds both indexes here
        if self._memory:
            return
        main, self._main = self._main, None
        assert main is not None
        tmp = build_path(self.path)
        self.con.close()
        main.close()
        fsync_path(tmp)
        # A WAL left beside the index would be replayed into the new file: remove it first.
        # Only writers create WAL frames, and we hold the writer lock.
        for suffix in ("-wal", "-shm"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass
        os.replace(tmp, self.path)
        fsync_path(Path(self.path).parent, directory=True)
        self.con = connect(self.path, create=True)
        self._load_state()

    def abort_bulk(self) -> None:
        """Throw a bulk load away; the published index is untouched."""
        if not self._bulk:
            return
        self._bulk = False
        self._early = None
        self._cjk = []
        self._drop_helper()
        if self._memory:
            self.rollback()
            return
        try:
            self.con.close()
        finally:
            assert self._main is not None
            self.con, self._main = self._main, None
            remove_db(build_path(self.path))
            self._load_state()

    # -- registry ------------------------------------------------------------------------

    def files(self, under: str | None = None) -> dict[str, FileRow]:
        sql = f"SELECT {_FILE_COLS} FROM files"
        params: tuple[str, ...] = ()
        if under is not None:
            # Paths under a directory: a range scan on the primary key, no LIKE escaping.
            base = under.rstrip("/") + "/"
            sql += " WHERE path >= ? AND path < ?"
            params = (base, base[:-1] + "0")
        return {r[0]: _file(r) for r in self.con.execute(sql, params)}

    def file(self, path: str) -> FileRow | None:
        r = self.con.execute(f"SELECT {_FILE_COLS} FROM files WHERE path = ?", (path,)).fetchone()
        return None if r is None else _file(r)

    def put_file(self, row: FileRow) -> None:
        self.con.execute(
            f"INSERT OR REPLACE INTO files ({_FILE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                row.path,
                row.status,
                row.sid,
                row.error,
                row.dev,
                row.ino,
                row.size,
                row.mtime_ns,
                row.offset,
                row.last_seq,
                row.last_crc,
            ),
        )

    def delete_file(self, path: str) -> None:
        self.con.execute("DELETE FROM files WHERE path = ?", (path,))

    def move_file(self, old: str, new: str) -> None:
        self.con.execute("DELETE FROM files WHERE path = ?", (new,))
        self.con.execute("UPDATE files SET path = ? WHERE path = ?", (new, old))
        self.con.execute("UPDATE sessions SET path = ? WHERE path = ?", (new, old))
        self.moved_usage(new)

    # -- sessions ------------------------------------------------------------------------

    def session(self, sid: int) -> SessionRow | None:
        r = self.con.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE sid = ?", (sid,)
        ).fetchone()
        return None if r is None else _session(r)

    def session_at(self, path: str) -> SessionRow | None:
        r = self.con.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE path = ?", (path,)
        ).fetchone()
        return None if r is None else _session(r)

    def sessions_with(self, session_id: str, header_crc: str) -> list[SessionRow]:
        rows = self.con.execute(
            f"SELECT {_SESSION_COLS} FROM sessions WHERE id = ? AND header_crc = ?",
            (session_id, header_crc),
        )
        return [_session(r) for r in rows]

    def add_session(self, row: SessionRow) -> int:
        values = msgspec.structs.astuple(row)[1:]
        cur = self.con.execute(
            f"INSERT INTO sessions ({_SESSION_COLS.partition(', ')[2]}) "
            f"VALUES ({', '.join('?' * len(values))})",
            values,
        )
        assert cur.lastrowid is not None
        row.sid = cur.lastrowid
        return row.sid

    def put_session(self, row: SessionRow) -> None:
        names = _SESSION_COLS.split(", ")[1:]
        values = msgspec.structs.astuple(row)[1:]
        self.con.execute(
            f"UPDATE sessions SET {', '.join(n + ' = ?' for n in names)} WHERE sid = ?",
            (*values, row.sid),
        )

    def drop_session(self, sid: int) -> None:
        con = self.con
        self.drop_usage(sid)
        # The full-text tables keep the keys (contentless: nothing to delete them with);
        # dead_keys makes sure they are never given to another message.
        con.execute(
            "INSERT OR IGNORE INTO dead_keys (tkey) SELECT tkey FROM messages WHERE sid = ?", (sid,)
        )
        con.execute(
            "DELETE FROM message_texts WHERE tkey IN (SELECT tkey FROM messages WHERE sid = ?)",
            (sid,),
        )
        if self._early:
            gone = {r[0] for r in con.execute("SELECT id FROM messages WHERE sid = ?", (sid,))}
            self._early = [r for r in self._early if r[0] not in gone]
        self._copy.pop(sid, None)
        con.execute("DELETE FROM tool_calls WHERE sid = ?", (sid,))
        con.execute("DELETE FROM messages WHERE sid = ?", (sid,))
        con.execute("DELETE FROM events WHERE sid = ?", (sid,))
        con.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
        con.execute("UPDATE files SET sid = NULL WHERE sid = ?", (sid,))

    # -- rows ----------------------------------------------------------------------------

    def add_events(self, rows: Sequence[EventRow]) -> None:
        self.con.executemany(
            "INSERT OR IGNORE INTO events (sid, seq, type, time, offset, size, crc) "
            "VALUES (?,?,?,?,?,?,?)",
            rows,
        )

    def line_marks(self, sid: int) -> Iterator[tuple[int, int, str]]:
        """``(offset, size, crc)`` of each indexed line of a session after its header (seq 1
        on), in order."""
        yield from self.con.execute(
            "SELECT offset, size, crc FROM events WHERE sid = ? AND seq > 0 ORDER BY seq", (sid,)
        )

    def add_messages(self, rows: Sequence[MessageRow]) -> None:
        """Insert message rows with ids from the store's own counter (ids are never reused,
        which the substring cursor relies on), and keep the full-text tables in step. The
        texts are not stored, but for sessions whose file cannot give them back."""
        if not rows:
            return
        con = self.con
        first = self._next_id
        self._next_id += len(rows)
        ids = range(first, self._next_id)
        keys = self._keys.assign(con, ids, [r.time for r in rows])
        con.executemany(
            _MESSAGE_INSERT,
            [
                (
                    i,
                    k,
                    r.sid,
                    r.seq,
                    r.type,
                    r.role,
                    r.time,
                    r.status,
                    r.anchor,
                    r.call_id,
                    msgspec.json.encode(r.calls).decode() if r.calls else None,
                    r.truncated,
                )
                for i, k, r in zip(ids, keys, rows, strict=True)
            ],
        )
        self._note_bounds(keys, rows)
        kept = [(k, r.text) for k, r in zip(keys, rows, strict=True) if self._copies(r)]
        if kept:
            con.executemany("INSERT INTO message_texts (tkey, text) VALUES (?, ?)", kept)
        declared = [(r.sid, c, r.seq) for r in rows for c in r.calls]
        if declared:
            con.executemany(
                "INSERT OR IGNORE INTO tool_calls (sid, call_id, seq) VALUES (?, ?, ?)", declared
            )
        if self._bulk:
            self._feed_helper(
                [(first + n, k, r.text) for n, (k, r) in enumerate(zip(keys, rows, strict=True))]
            )
        self._index(
            [(first + n, k, r.text) for n, (k, r) in enumerate(zip(keys, rows, strict=True))],
            words=self._fts_live,
            substrings=self._sub_upto >= first - 1 and not self._bulk,  # complete: keep it so
        )

    # -- the surface -------------------------------------------------------------------------

    def current(self, sid: int, seq: int) -> tuple[int, str] | None:
        """``(anchor, type)`` of a current surface node."""
        r = self.con.execute(
            "SELECT anchor, type FROM messages WHERE sid = ? AND seq = ? AND status = 'current'",
            (sid, seq),
        ).fetchone()
        return None if r is None else (int(r[0]), str(r[1]))

    def current_between(self, sid: int, lo: int, hi: int) -> list[Node]:
        """The current nodes with anchors in ``[lo, hi]``, in surface order."""
        return [
            Node(int(r[0]), int(r[1]), str(r[2]), r[3], _calls(r[4]))
            for r in self.con.execute(
                "SELECT seq, anchor, type, call_id, calls FROM messages INDEXED BY "
                "messages_surface WHERE sid = ? AND status = 'current' AND anchor BETWEEN ? AND ? "
                "ORDER BY anchor",
                (sid, lo, hi),
            )
        ]

    def declared(self, sid: int, call_id: str) -> int:
        """How many current assistant messages declare tool call ``call_id``."""
        r = self.con.execute(
            "SELECT count(*) FROM tool_calls t JOIN messages m ON m.sid = t.sid AND m.seq = t.seq "
            "WHERE t.sid = ? AND t.call_id = ? AND m.status = 'current'",
            (sid, call_id),
        ).fetchone()
        return int(r[0])

    def answers(self, sid: int, call_id: str) -> list[tuple[int, int]]:
        """``(seq, anchor)`` of the current tool results answering ``call_id``."""
        return [
            (int(r[0]), int(r[1]))
            for r in self.con.execute(
                "SELECT seq, anchor FROM messages WHERE sid = ? AND call_id = ? "
                "AND status = 'current' AND call_id IS NOT NULL AND type = 'tool/result'",
                (sid, call_id),
            )
        ]

    def has_compaction(self, sid: int, seqs: Iterable[int], before: int) -> bool:
        """True if one of ``seqs`` (below ``before``) is a compaction, prune or handoff event."""
        wanted = sorted({s for s in seqs if isinstance(s, int) and s < before})
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            r = self.con.execute(
                "SELECT 1 FROM events WHERE sid = ? AND type IN "
                "('compaction/summary', 'compaction/prune', 'handoff/anchor') "
                f"AND seq IN ({', '.join('?' * len(part))}) LIMIT 1",
                (sid, *part),
            ).fetchone()
            if r is not None:
                return True
        return False

    def set_status(self, sid: int, seqs: Sequence[int], status: str) -> None:
        self.con.executemany(
            "UPDATE messages SET status = ? WHERE sid = ? AND seq = ?",
            [(status, sid, s) for s in seqs],
        )

    # -- keys ----------------------------------------------------------------------------

    def _note_bounds(self, keys: list[int], rows: Sequence[MessageRow]) -> None:
        """Keep ``meta.tkey_spill``, ``message_kinds`` and the sessions' key bounds covering new
        rows (``schema._M005``, ``_M007``: what the bounds of an ``until``, role/type, session or
        path filter rely on)."""
        spill = max(k - tkey_base(r.time) for k, r in zip(keys, rows, strict=True))
        if spill > self._spill:
            self._spill = spill
            self.set_meta("tkey_spill", str(spill))
        sid = rows[0].sid
        if all(r.sid == sid for r in rows):  # the usual batch: one session's lines
            spans = [(min(keys), max(keys), sid)]
        else:
            by_sid: dict[int, list[int]] = {}
            for k, r in zip(keys, rows, strict=True):
                by_sid.setdefault(r.sid, []).append(k)
            spans = [(min(ks), max(ks), s) for s, ks in by_sid.items()]
        self.con.executemany(
            "UPDATE sessions SET key_lo = min(coalesce(key_lo, ?1), ?1), "
            "key_hi = max(coalesce(key_hi, ?2), ?2) WHERE sid = ?3",
            spans,
        )
        if self._kinds is None:
            self._kinds = set(self.con.execute("SELECT role, type FROM message_kinds"))
        new = {(r.role, r.type) for r in rows} - self._kinds
        if new:
            self.con.executemany(
                "INSERT OR IGNORE INTO message_kinds (role, type) VALUES (?, ?)", sorted(new)
            )
            self._kinds |= new
