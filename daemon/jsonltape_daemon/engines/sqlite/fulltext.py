"""The full-text side of the SQLite store: the contentless tables kept in step, the bulk-load
helper, the substring cursor, and ``optimize`` (a mixin of ``store.SqliteStore``).

The index keeps no copy of the message texts: the session files hold them (``texts.py`` reads
them back), except for sessions that cannot be read back from their file (foreign ones), whose
texts go to ``message_texts`` (:meth:`FullText._copies`). The tables get each new message's
text as it is added (not by triggers):

* ``messages_fts`` (words) on every insert, except during a bulk load, which builds it once at
  the end (``meta.fts`` says ``stale`` until then; a later sync finishes the job);
* ``messages_cjk`` (CJK unigrams and bigrams) always (a bulk load keeps them until its next
  commit, to insert them in key order: FTS5 starts a segment at every key that goes back);
* ``messages_trigram`` (the code-like tokens, ``idents.py``) behind a cursor,
  ``meta.substrings``: messages with an id up to it are indexed. New messages are indexed at
  once while the cursor is at the end; after a bulk load it is not, and
  :meth:`FullText.build_substrings` catches up in small steps, reading the texts back (message
  ids only grow, so everything past the cursor is exactly what is missing).

Nothing is deleted from them (a contentless delete needs the old text): the keys of deleted
messages go to ``dead_keys``, are never given again, and searches never see them (a hit needs
its ``messages`` row); :meth:`FullText.optimize` rebuilds the tables from the files when there
are dead keys.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

from jsonltape_daemon.engines.sqlite import words as word_list
from jsonltape_daemon.engines.sqlite.fts_helper import SHADOW_TABLES, Helper
from jsonltape_daemon.engines.sqlite.keys import Keys
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.texts import Texts, line_text
from jsonltape_daemon.ingest.rows import MessageRow
from jsonltape_daemon.paths import helper_path
from jsonltape_daemon.text.cjk import grams
from jsonltape_daemon.text.idents import idents

__all__ = ["FTS_TABLES", "FullText"]

#: The full-text tables ``index optimize`` merges.
FTS_TABLES = ("messages_fts", "messages_trigram", "messages_cjk")
#: Non-blocking: a session path replaced by a FIFO must not hang a search.
_O_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
#: Messages per statement when the full-text tables are filled from the files.
_REFILL_STEP = 2000
#: CJK rows a bulk load keeps before inserting them sorted (sorted, half the CPU time).
_CJK_BATCH = 8192


def _read_back(path: str, offset: int, size: int, crc: str, type_: str) -> str | None:
    """The text of a message line read again from its file, or None."""
    try:
        fd = os.open(path, _O_READ)
    except OSError:
        return None
    try:
        return line_text(os.pread(fd, size, offset), type_, crc)
    except OSError:
        return None
    finally:
        os.close(fd)


def _key(row: tuple[int, int, str]) -> int:
    return row[1]


class FullText:
    """Full-text upkeep over the store's connection; ``SqliteStore`` sets the state."""

    con: sqlite3.Connection
    path: Path | str
    _bulk: bool
    _bulk_messages: int
    _helper_from: int | None
    _helper: Helper | None
    _early: list[tuple[int, int, str]] | None
    _cjk: list[tuple[int, str]]
    _copy: dict[int, bool]
    _fts_live: bool
    _sub_upto: int
    _next_id: int
    _keys: Keys

    def begin(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def rollback(self) -> None:
        raise NotImplementedError

    def set_meta(self, key: str, value: str) -> None:
        raise NotImplementedError

    def _load_state(self) -> None:
        raise NotImplementedError

    def _index(
        self, rows: Sequence[tuple[int, int, str]], *, words: bool, substrings: bool
    ) -> None:
        """Add ``(id, key, text)`` rows to the CJK table, and to the word and substring tables
        as asked (the substring cursor moves to the last id)."""
        con = self.con
        cjk = [(k, g) for _i, k, text in rows if (g := grams(text)) is not None]
        if self._bulk:
            # Kept, then inserted in key order (``flush_cjk``): FTS5 starts a new segment at
            # every key that is not above the last one, and keys jump back at every session.
            self._cjk += cjk
            if len(self._cjk) >= _CJK_BATCH:
                self.flush_cjk()
        elif cjk:
            con.executemany("INSERT INTO messages_cjk (rowid, grams) VALUES (?, ?)", cjk)
        if words:
            con.executemany(
                "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                [(k, t) for _i, k, t in rows],
            )
            word_list.add(con, (t for _i, _k, t in rows))
        if substrings:
            self._index_substrings(rows)

    def flush_cjk(self) -> None:
        """Insert the CJK rows a bulk load keeps, in key order (before each commit)."""
        if self._cjk:
            self._cjk.sort()
            self.con.executemany("INSERT INTO messages_cjk (rowid, grams) VALUES (?, ?)", self._cjk)
            self._cjk = []

    def _copies(self, row: MessageRow) -> bool:
        """Whether the texts of this message's session go to ``message_texts``: its first
        message line, read back from the session file, does not give its text (a foreign
        session, rendered from another agent's file, or a file that is not one)."""
        got = self._copy.get(row.sid)
        if got is None:
            r = self.con.execute(
                "SELECT s.path, e.offset, e.size, e.crc FROM events e JOIN sessions s "
                "ON s.sid = e.sid WHERE e.sid = ? AND e.seq = ?",
                (row.sid, row.seq),
            ).fetchone()
            got = r is None or _read_back(r[0], r[1], r[2], r[3], row.type) != row.text
            self._copy[row.sid] = got
        return got

    # -- rebuilding -----------------------------------------------------------------------

    @property
    def fts_live(self) -> bool:
        return self._fts_live

    def set_fts_stale(self) -> None:
        self.set_meta("fts", "stale")
        self._fts_live = False

    def rebuild_fts(self) -> None:
        """Build the word index (after a bulk load), in its own transaction: adopt the helper's
        if one built it, else index the texts of the load (kept while it was small, or read
        back from the files)."""
        assert not self.con.in_transaction
        h = self._helper
        if h is not None and self._bulk and h.finish_words():
            self._adopt(h, "messages_fts", [])
            h.go()  # now the trigram index
        else:
            self._drop_helper()
            early = self._early if self._bulk else None
            self._early = None
            self.begin()
            self.con.execute("INSERT INTO messages_fts (messages_fts) VALUES ('delete-all')")
            parts = (
                (early[at : at + _REFILL_STEP] for at in range(0, len(early), _REFILL_STEP))
                if early is not None
                else self._texts_from_files()
            )
            if early is not None:
                early.sort(key=_key)  # in key order: see _index_substrings
            for part in parts:
                self.con.executemany(
                    "INSERT INTO messages_fts (rowid, text) VALUES (?, ?)",
                    sorted((k, t) for _i, k, t in part),
                )
            word_list.refresh(self.con)
            self.set_meta("fts", "live")
            self.commit()
        self._fts_live = True

    def _index_substrings(self, rows: Sequence[tuple[int, int, str]]) -> None:
        # In key order: FTS5 writes what it holds out as a new segment at every key that is
        # not above the last one, and keys (time order) go back at every session.
        tri = sorted((k, g) for _i, k, text in rows if (g := idents(text)))
        if tri:
            self.con.executemany("INSERT INTO messages_trigram (rowid, idents) VALUES (?, ?)", tri)
        if rows and rows[-1][0] > self._sub_upto:
            self._sub_upto = rows[-1][0]
            self.set_meta("substrings", str(self._sub_upto))

    def _texts_from_files(
        self, after: int = 0, upto: int | None = None
    ) -> Iterator[list[tuple[int, int, str]]]:
        """``(id, key, text)`` of the messages with ids in ``(after, upto]``, in id order, a
        step at a time, read back from the files (unreadable ones left out)."""
        with Texts(self.con) as texts:
            while True:
                ids = self.con.execute(
                    "SELECT id, tkey FROM messages WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                    (after, upto if upto is not None else self._next_id, _REFILL_STEP),
                ).fetchall()
                if not ids:
                    return
                got = dict(texts.iter([k for _i, k in ids]))
                yield [(i, k, t) for i, k in ids if (t := got[k]) is not None]
                after = ids[-1][0]

    # -- the helper process --------------------------------------------------------------

    def _feed_helper(self, rows: list[tuple[int, int, str]]) -> None:
        self._bulk_messages += len(rows)
        h = self._helper
        if h is None:
            if self._early is not None:
                self._early += rows
            if self._helper_from is None or self._bulk_messages < self._helper_from:
                return
            try:
                self._helper = h = Helper(helper_path(self.path))
            except OSError:  # pragma: no cover - cannot start a process: do it all here
                self._helper_from = None
                return
            early, self._early = self._early, None
            if early is not None:
                h.add(early)
            else:  # pragma: no cover - texts dropped before: read them back
                for part in self._texts_from_files():
                    h.add(part)
        else:
            h.add(rows)

    def _drop_helper(self) -> None:
        if self._helper is not None:
            self._helper.close()
            self._helper = None

    def _adopt(self, h: Helper, table: str, meta: list[tuple[str, str]]) -> None:
        """Copy the helper's index ``table`` in, with ``meta`` settings, in one transaction."""
        con = self.con
        con.execute("ATTACH DATABASE ? AS fts_helper", (str(h.path),))
        try:
            self.begin()
            for shadow in SHADOW_TABLES:
                name = f"{table}_{shadow}"
                if not con.execute(
                    "SELECT 1 FROM main.sqlite_master WHERE name = ?", (name,)
                ).fetchone():
                    continue  # no _docsize with columnsize=0
                con.execute(f"DELETE FROM main.{name}")
                con.execute(f"INSERT INTO main.{name} SELECT * FROM fts_helper.{name}")
            if table == "messages_fts":  # the helper's word list goes with its word index
                con.execute("DELETE FROM main.words")
                con.execute("INSERT INTO main.words SELECT * FROM fts_helper.words")
                self.set_meta("fts", "live")
            for key, value in meta:
                self.set_meta(key, value)
            self.commit()
        except BaseException:
            self.rollback()
            raise
        finally:
            con.execute("DETACH DATABASE fts_helper")

    def substrings_waiting(self) -> bool:
        """True while a helper builds the substring index (nothing to do here meanwhile);
        once it is done, its index is copied in."""
        h = self._helper
        if h is None or self._bulk:
            return False
        state = h.trigram_state()
        if state == "working":
            return True
        if state == "ready":
            con = self.con
            con.execute("ATTACH DATABASE ? AS fts_helper", (str(h.path),))
            try:
                top = con.execute("SELECT max(id) FROM fts_helper.messages").fetchone()[0]
            finally:
                con.execute("DETACH DATABASE fts_helper")
            # Messages dropped since the snapshot keep their keys in dead_keys: searches never
            # see them, and no other message gets them.
            if self._sub_upto == 0:
                self._adopt(h, "messages_trigram", [("substrings", str(top))])
                # FTS5 caches index structure per connection: start afresh after the copy.
                self.con.close()
                self.con = connect(self.path, create=True)
                self._load_state()
        self._drop_helper()
        return False

    def substrings_pending(self) -> bool:
        return self._sub_upto < self._next_id - 1

    def build_substrings(self, limit: int) -> int:
        """Index up to ``limit`` more messages for substring search, their texts read back
        from the files; return how many."""
        con = self.con
        ids = [
            r[0]
            for r in con.execute(
                "SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT ?", (self._sub_upto, limit)
            )
        ]
        hi = ids[-1] if len(ids) == limit else self._next_id - 1
        if ids:
            for part in self._texts_from_files(self._sub_upto, hi):
                self._index_substrings(part)
        if hi > self._sub_upto:
            self._sub_upto = hi
            self.set_meta("substrings", str(hi))
        return len(ids)

    def substring_progress(self) -> tuple[int, int]:
        """``(indexed, total)`` messages of the substring index."""
        done, total = self.con.execute(
            "SELECT count(*) FILTER (WHERE id <= ?), count(*) FROM messages", (self._sub_upto,)
        ).fetchone()
        return int(done), int(total)

    def optimize(self) -> None:
        """Merge every full-text index into one segment (slow; ``index optimize``). With dead
        keys (messages deleted since), the tables are first rebuilt from the files without
        them, and ``dead_keys`` is emptied: their keys are then nowhere and can be given again."""
        con = self.con
        if con.execute("SELECT 1 FROM dead_keys LIMIT 1").fetchone() is not None:
            self.begin()
            try:
                for table in FTS_TABLES:
                    con.execute(f"INSERT INTO {table} ({table}) VALUES ('delete-all')")
                self._sub_upto = 0
                con.execute("DELETE FROM words")  # counted again as the texts go in
                for part in self._texts_from_files():
                    self._index(part, words=True, substrings=True)
                self._sub_upto = self._next_id - 1
                self.set_meta("substrings", str(self._sub_upto))
                con.execute("DELETE FROM dead_keys")
                self._keys.forget(con)  # their runs held some of those keys
                self.set_meta("fts", "live")
                self.commit()
                self._fts_live = True
            except BaseException:
                self.rollback()
                raise
        for table in FTS_TABLES:
            con.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
