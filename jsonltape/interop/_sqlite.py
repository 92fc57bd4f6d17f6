"""Reading an agent's SQLite database (OpenCode, Goose, Crush): its real tables only, every row
checked against the types the agent writes, the work capped, and nothing written beside it, so
that a crafted, damaged or live database gets a verdict (one line naming the file, table, row and
column), never a hang, a traceback or a change to the user's files.

* **Nothing is created or written beside the database.** Without a ``-wal`` (or with an empty
  one) every row is in the database file, which is opened ``immutable=1`` (no lock, no ``-shm``
  or ``-wal`` created). An agent that is running (or crashed) keeps its latest rows only in the
  ``-wal`` (Crush writes there all the time): then the database and its ``-wal`` are copied into
  a private directory (0700, removed when the reader goes; one a killed process left is
  removed by the next, :mod:`._private_dir`) and the copy is opened ``mode=ro``,
  which reads the WAL as SQLite does (rebuilding its index in a new ``-shm`` beside the copy)
  and never checkpoints it into the copied database file. Opening the user's files ``mode=ro``
  instead would still write the ``-shm`` (a reader records its read marks there) and create it
  when it is missing. A copy is taken again when the database changed while it was copied (a
  checkpoint moved pages from the ``-wal`` into it); pages the agent appends to the ``-wal``
  during the copy are fine (SQLite reads up to the last commit whose checksums hold).
* **The copied database file is kept for the next read** (per process, the last
  :data:`KEPT` databases, in a 0700 directory removed at exit), so a running agent's change
  costs a copy of its ``-wal``, not of a database of hundreds of MB. A kept copy is reused (hard
  linked into the reader's own directory, beside a fresh copy of the ``-wal``) only while the
  user's database file has the same device, inode, size and change time as when it was copied
  *and* its ``-wal`` is of the same generation (the header's checkpoint sequence and salts,
  which SQLite changes at every restart of the WAL): within one generation every page a
  checkpoint writes into the database is still a frame of the ``-wal``, read from there, so the
  kept bytes and the current ``-wal`` read as the user's files do; a WAL of another generation
  may lack pages the database now holds, and is never read with a kept copy.
* **Only real tables, with the columns read.** A name that is a view (which may be a
  recursive query that never ends), a virtual table or a column computed when read (generated)
  refuses the database, in one line, before a row is read.
* **Every row read is checked** against the types the agent's schema gives each column read
  (:func:`checked`); text that is not UTF-8 is named the same way. A JSON column must hold a
  JSON object (or array) nested at most as deep as a record may be.
* **The work is capped**: SQLite's virtual-machine steps are counted over all reads of one
  database (a progress handler, so the cap does not depend on time), at most
  :data:`STEPS_PER_PAGE` per page of the file plus :data:`BASE_STEPS`. Past the cap every read
  of the database is refused. Values come from the file (no function is applied to them), so
  none is larger than the file.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
import urllib.parse
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import msgspec

from ..errors import JsonltapeError
from ._private_dir import PrivateDir
from ._source import Unit, rendering, too_deep

__all__ = [
    "BASE_STEPS",
    "INT",
    "KEPT",
    "OPTIONAL",
    "OPTIONAL_INT",
    "STEPS_PER_PAGE",
    "TEXT",
    "Columns",
    "Listing",
    "RowError",
    "SessionStore",
    "SqliteSource",
    "StoreError",
    "checked",
    "is_sqlite",
    "json_value",
    "utf8",
]

#: SQLite steps allowed per page of the database, and in any case (see the module docs).
STEPS_PER_PAGE = 10_000
BASE_STEPS = 20_000_000
#: The progress handler runs every this many steps.
_TICK = 100
#: Copies of a live database taken before giving up (it changed during each).
_COPIES = 5
#: Databases whose copied file a process keeps for its next read (the least recently read goes).
KEPT = 4
#: Where a WAL header keeps its checkpoint sequence and salts (sqlite.org/fileformat2.html).
_WAL_GENERATION = slice(12, 24)
_T = TypeVar("_T")
_decode = msgspec.json.decode
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

TEXT = ("text",)
OPTIONAL = ("text", "null")
INT = ("integer",)
OPTIONAL_INT = ("integer", "null")
#: The columns read from each table and the kinds each may hold (``typeof`` names).
Columns = Mapping[str, Sequence[tuple[str, tuple[str, ...]]]]


class StoreError(JsonltapeError):
    """An agent's database that cannot be read (not the agent's, damaged, capped)."""

    code = "bad-source"


class RowError(Exception):
    """A row breaks the types the agent writes (the message names the row and column)."""


class Text(bytes):
    """A TEXT value as SQLite stored it (``text_factory``): told apart from a BLOB, and decoded
    by :func:`checked`, so text that is not UTF-8 is a verdict on its row, not an error of the
    whole read."""


#: What ``typeof`` calls each value ``sqlite3`` returns (with ``text_factory = Text``).
_KIND: dict[type, str] = {
    Text: "text",
    type(None): "null",
    bytes: "blob",
    int: "integer",
    float: "real",
}
_SAID = {
    "text": "text",
    "null": "NULL",
    "integer": "an integer",
    "real": "a real number",
    "blob": "a blob",
}


class SqliteSource:
    """One agent database, read through short-lived connections under one work cap shared by
    all of them. ``columns``: what each table read must hold (``needed``: further columns that
    must exist, only filtered on); ``agent``: whose database it is, for the verdicts."""

    def __init__(
        self,
        path: Path,
        columns: Columns,
        *,
        agent: str,
        needed: Mapping[str, Sequence[str]] | None = None,
        error: type[StoreError] = StoreError,
    ) -> None:
        self.path = path
        self.columns = columns
        self.agent = agent
        self.needed = {t: [c for c, _k in cols] + list((needed or {}).get(t, ())) for t, cols
                       in columns.items()}  # fmt: skip
        self.error = error
        self.used = 0  # SQLite steps so far, in hundreds (_TICK)
        self.cap = BASE_STEPS // _TICK
        self.pages = 0
        self._copy: Path | None = None

    @property
    def steps(self) -> int:
        """SQLite steps taken so far by reads of this database (counted to the hundred)."""
        return self.used * _TICK

    @property
    def copied(self) -> bool:
        """Whether the reads go to a private copy (the database had a ``-wal``)."""
        return self._copy is not None

    # -- connections ----------------------------------------------------------------------

    def read(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn`` on a fresh connection (closed after it); SQLite errors, the cap reached
        included, become the reader's :class:`StoreError` naming the file."""
        if self.used > self.cap:
            raise self._capped()
        try:
            con = self._connect()
        except sqlite3.Error as exc:
            raise self.error(f"cannot read the database: {exc}", path=self.path) from None
        try:
            return fn(con)
        except sqlite3.Error as exc:
            if self.used > self.cap:
                raise self._capped() from None
            raise self.error(f"cannot read the database: {exc}", path=self.path) from None
        finally:
            con.close()

    def _capped(self) -> StoreError:
        return self.error(
            f"reading it stopped after {self.cap * _TICK:,} SQLite steps, the most its "
            f"{self.pages:,} pages allow ({STEPS_PER_PAGE:,} a page; {self.agent}'s own "
            "databases need far fewer): a crafted or damaged database",
            path=self.path,
        )

    def _connect(self) -> sqlite3.Connection:
        db = self.path
        try:
            live = os.stat(db.with_name(db.name + "-wal")).st_size > 0
        except OSError:
            live = False
        if live and self._copy is None:
            self._copy = self._snapshot()
        if self._copy is not None:
            # Read-only: SQLite never checkpoints the -wal into the copy, whose database file
            # stays the user's bytes (it may be a kept one, hard linked).
            uri = f"file:{urllib.parse.quote(str(self._copy))}?mode=ro"
        else:
            uri = f"file:{urllib.parse.quote(str(db.resolve()))}?immutable=1"
        con = sqlite3.connect(uri, uri=True)
        try:
            con.text_factory = Text
            con.set_progress_handler(self._tick, _TICK)
            (pages,) = con.execute("PRAGMA page_count").fetchone()
            if isinstance(pages, int) and pages > self.pages:  # a live database grows
                self.pages = pages
                self.cap = max(self.cap, (BASE_STEPS + STEPS_PER_PAGE * pages) // _TICK)
        except BaseException:
            con.close()
            raise
        return con

    def _snapshot(self) -> Path:
        """Copy the database (or link its kept copy) and its ``-wal`` into a private directory;
        the copy's path."""
        private = PrivateDir("jsonltape-db-")  # 0700, removed at the next start if killed
        where = private.path
        holding: list[sqlite3.Connection] = []
        weakref.finalize(self, _discard, private, holding)
        db = self.path
        wal = db.with_name(db.name + "-wal")
        copy = where / "source.db"
        for _ in range(_COPIES):
            before = _stamp(db)
            generation = _wal_generation(wal)
            kept = _kept.take(before, generation, copy)
            if not kept:
                _copy_file(db, copy)
            _copy_file(wal, copy.with_name(copy.name + "-wal"))
            if (
                _stamp(db) == before
                and _wal_generation(copy.with_name(copy.name + "-wal")) == generation
            ):
                if not kept:
                    _kept.keep(before, generation, copy)
                # Held open while the reader lives: the next connection to a read-only copy
                # that none holds rebuilds the WAL index, reading the whole -wal again (100
                # connections to a 125 MB -wal: 5.1 s, 8 ms held).
                uri = f"file:{urllib.parse.quote(str(copy))}?mode=ro"
                holding.append(sqlite3.connect(uri, uri=True, check_same_thread=False))
                holding[0].execute("PRAGMA schema_version").fetchone()
                return copy
            for suffix in ("", "-wal", "-shm"):
                copy.with_name(copy.name + suffix).unlink(missing_ok=True)
        raise self.error(
            f"the database changed during each of {_COPIES} copies (a checkpoint of the agent "
            "running): import again",
            path=db,
        )

    def _tick(self) -> int:
        self.used += 1
        return 1 if self.used > self.cap else 0

    # -- the schema -----------------------------------------------------------------------

    def check(self, con: sqlite3.Connection) -> None:
        """Refuse a database whose tables read are not tables with the columns read, as stored
        values."""
        for table, wanted in self.needed.items():
            why = _table_problem(con, table, wanted, self.agent)
            if why is not None:
                raise self.error(f"not {_a(self.agent)} database ({why})", path=self.path)

    def has(self, con: sqlite3.Connection, table: str, column: str | None = None) -> bool:
        """Whether ``table`` is a real table (holding ``column``): for what older versions of
        the agent's schema lack."""
        return _table_problem(con, table, [column] if column else [], self.agent) is None


class Listing(NamedTuple):
    """A session of a :class:`SessionStore`, as its listing gives it."""

    sid: str
    record: dict[str, Any]
    """Its first record: what never changes."""
    title: str | None
    """Its title as the agent shows it (rewritten in place: not in a record)."""
    size: int
    """A change counter (rows and their lengths)."""
    changed_ms: int
    """When it last changed (epoch ms)."""


class SessionStore(SqliteSource):
    """A database holding many sessions, each rendered as a :class:`~._source.Unit` of JSONL
    records. Subclasses read the rows: :meth:`_sessions` (a row that breaks the agent's
    types is its verdict, a string) and :meth:`_records` (the session's records, encoded, and
    the first one that may still change)."""

    def _sessions(self, con: sqlite3.Connection) -> list[Listing | str]:
        raise NotImplementedError  # pragma: no cover - abstract

    def _records(self, con: sqlite3.Connection, session: Listing) -> tuple[list[bytes], int | None]:
        raise NotImplementedError  # pragma: no cover - abstract

    def units(self) -> list[Unit]:
        """One unit per session, oldest first; a session whose row breaks the agent's types
        is a unit too, whose rendering gives the verdict (each time it is imported)."""
        found: list[Unit] = []
        db = self.path
        for n, s in enumerate(self.read(self._sessions), 1):
            if isinstance(s, str):
                found.append(Unit(str(db), f"{db.name}#(session row {n})", 0, -1,
                                  self._refused(s)))  # fmt: skip
            else:
                found.append(Unit(str(db), f"{db.name}#{s.sid}", s.size, s.changed_ms * 10**6,
                                  self._render(s), s.title))  # fmt: skip
        return found

    def sessions(self) -> list[Listing | str]:
        return self.read(self._sessions)

    def _render(self, s: Listing) -> Callable[[bool], tuple[bytes, int]]:
        def render(settled: bool) -> tuple[bytes, int]:
            try:
                lines, held = self.read(lambda con: self._records(con, s))
            except RowError as exc:
                raise self.error(
                    f"session {s.sid}: {exc}; nothing of this session is imported", path=self.path
                ) from None
            return rendering(lines, None if settled else held)

        return render

    def _refused(self, why: str) -> Callable[[bool], tuple[bytes, int]]:
        def render(settled: bool) -> tuple[bytes, int]:
            raise self.error(f"{why}; nothing of this session is imported", path=self.path)

        return render


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a symlink) holding a SQLite database."""
    try:
        fd = os.open(path, _NOFOLLOW)
    except OSError:
        return False
    with open(fd, "rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def _a(agent: str) -> str:
    return f"an {agent}" if agent[:1].lower() in "aeiou" else f"a {agent}"


def _table_problem(
    con: sqlite3.Connection, table: str, wanted: Sequence[str], agent: str
) -> str | None:
    found = con.execute(
        "SELECT type, sql FROM sqlite_master WHERE name = ? COLLATE NOCASE"
        " AND type IN ('table', 'view')",
        (table,),
    ).fetchall()
    if not found:
        return f"no {table!r} table"
    if found[0][0] != b"table":
        return f"{table!r} is a view, not a table: {agent}'s is a table"
    if bytes(found[0][1] or b"").upper().startswith(b"CREATE VIRTUAL"):
        return f"{table!r} is a virtual table, not a table: {agent}'s is a table"
    have = {
        bytes(r[1]).decode("utf-8", "replace"): r[6]
        for r in con.execute(f"PRAGMA table_xinfo({table})")
    }
    missing = [c for c in wanted if c not in have]
    computed = [c for c in wanted if have.get(c, 0) != 0]
    if missing:
        return f"{table!r} lacks {', '.join(missing)}"
    if computed:
        return f"{table!r} computes {', '.join(computed)} when read (generated)"
    return None


def _stamp(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _discard(private: PrivateDir, holding: list[sqlite3.Connection]) -> None:
    for con in holding:
        con.close()
    private.remove()


def _wal_generation(wal: Path) -> bytes:
    """The ``-wal``'s checkpoint sequence and salts (empty: no ``-wal``, or too short)."""
    try:
        fd = os.open(wal, _NOFOLLOW)
    except FileNotFoundError:
        return b""
    with open(fd, "rb") as f:
        return f.read(_WAL_GENERATION.stop)[_WAL_GENERATION]


class _Kept:
    """The copied database files a process keeps (see the module docs): at most :data:`KEPT`,
    each under the user's file's stamp and its ``-wal``'s generation when it was copied."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._where: Path | None = None
        self._files: OrderedDict[tuple[int, int], tuple[tuple[int, int, int, int], bytes, Path]]
        self._files = OrderedDict()
        self._made = 0

    def take(self, stamp: tuple[int, int, int, int], generation: bytes, dst: Path) -> bool:
        """Link the copy kept for ``stamp`` and ``generation`` to ``dst``; whether there was one."""
        with self._lock:
            found = self._files.get(stamp[:2])
            if found is None or found[:2] != (stamp, generation):
                return False
            self._files.move_to_end(stamp[:2])
            try:
                os.link(found[2], dst)
            except OSError:  # a file system without hard links: copy instead
                return False
            return True

    def keep(self, stamp: tuple[int, int, int, int], generation: bytes, copy: Path) -> None:
        """Keep ``copy`` (a database file just copied, never written) for the next read."""
        with self._lock:
            if self._where is None:
                private = PrivateDir("jsonltape-kept-")  # 0700, removed at the next start if killed
                self._where = private.path
                atexit.register(private.remove)
            self._made += 1
            kept = self._where / f"{self._made}.db"
            try:
                os.link(copy, kept)
                os.chmod(kept, 0o400)
            except OSError:
                kept.unlink(missing_ok=True)
                return
            old = self._files.pop(stamp[:2], None)
            self._files[stamp[:2]] = (stamp, generation, kept)
            if old is not None:
                old[2].unlink(missing_ok=True)
            while len(self._files) > KEPT:
                self._files.popitem(last=False)[1][2].unlink(missing_ok=True)


_kept = _Kept()


def _copy_file(src: Path, dst: Path) -> int:
    """Copy ``src`` (never through a symlink) to the new file ``dst``; the bytes copied. A
    missing ``src`` (a ``-wal`` checkpointed away meanwhile) copies nothing."""
    try:
        fd = os.open(src, _NOFOLLOW)
    except FileNotFoundError:
        return 0
    with open(fd, "rb") as f, open(dst, "xb") as out:
        done = 0
        try:
            # In the kernel (a reflink where the file system shares extents).
            while n := os.copy_file_range(f.fileno(), out.fileno(), 1 << 30):
                done += n
        except OSError:  # not supported here (or across file systems): read and write
            pass
        while chunk := f.read(1 << 20):
            done += out.write(chunk)
        return done


# -- the rows -------------------------------------------------------------------------------


def checked(
    columns: Sequence[tuple[str, tuple[str, ...]]],
    table: str,
    row: Sequence[Any],
    *,
    raw: Sequence[str] = (),
    fallback: str = "with an unusable id",
) -> list[Any]:
    """The row's values (text decoded, except in the ``raw`` columns, kept as :class:`Text`
    bytes), or :class:`RowError` naming the row (by its first column, else as ``fallback``
    says) and the column."""
    out = list(row)
    for i, (column, kinds) in enumerate(columns):
        kind = _KIND[type(row[i])]
        if kind not in kinds:
            wanted = " or ".join(_SAID[k] for k in kinds)
            raise _row_error(table, row, fallback, f"{column} holds {_SAID[kind]}, not {wanted}")
        if kind == "text" and column not in raw:
            try:
                out[i] = row[i].decode("utf-8")
            except UnicodeDecodeError:
                out[i] = ""
            if not out[i] and (row[i] or i == 0):
                raise _row_error(table, row, fallback, f"{column} is not UTF-8 text, or empty")
    return out


def _row_error(table: str, row: Sequence[Any], fallback: str, why: str) -> RowError:
    rid = row[0]
    if isinstance(rid, int) and not isinstance(rid, bool):
        return RowError(f"{table} row {rid}: {why}")
    named = utf8(rid) if isinstance(rid, Text) and rid else None
    return RowError(f"{table} row {repr(named) if named is not None else fallback}: {why}")


def json_value(where: str, data: bytes, depth: int, kinds: tuple[type, ...] = (dict,)) -> Any:
    """A JSON column's value (a JSON object, or what ``kinds`` allows, nested at most ``depth``
    levels), or :class:`RowError` saying why not (``where``: the row and column)."""
    deep = too_deep(data, depth)
    if deep is not None:
        raise RowError(f"{where}: {deep}")
    try:
        value = _decode(data)
    except msgspec.DecodeError as exc:
        raise RowError(f"{where} is not JSON ({exc})") from None
    if not isinstance(value, kinds):
        names = " or ".join("a JSON object" if k is dict else "a JSON array" for k in kinds)
        raise RowError(f"{where} is not {names} (a {type(value).__name__})")
    return value


def utf8(value: bytes) -> str | None:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None
