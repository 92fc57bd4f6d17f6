"""The PostgreSQL implementation of the index's storage interface (``rows.Store``): one origin.

A :class:`PgStore` is the writer of one origin (a machine and user) in a shared database whose
schema ``pg_schema.py`` describes: every statement is scoped to that origin, so the same ingest
engine, registry and continuity logic as the SQLite index (``ingest.py``) push this machine's
sessions, and two machines never touch each other's rows. What differs from SQLite:

* Opening one migrates the schema on first use (a database owner syncing alone needs nothing
  else), registers the origin if the role may, and takes a *session-level advisory lock* keyed
  on the origin: one writer per origin, as one writer per SQLite index. The server drops the
  lock with the connection, so a killed pusher never blocks the next one.
* Event, message and tool-call rows are buffered and sent with ``COPY`` into temporary staging
  tables (``COPY FROM`` is refused on tables with row-level security), then moved with ``INSERT
  ... SELECT ... ON CONFLICT DO NOTHING``: a re-sent row adds nothing. The buffer is flushed
  before every look-up that could see it and at commit, so the file watermark (``files``) is
  committed in the same transaction as its rows.
* Messages keep their text (other machines cannot read the files), with ``idents`` (the
  code-like tokens, ``idents.py``) and ``cjk`` (``cjk.grams``) computed here.
* The bulk-load and full-text hooks do nothing: PostgreSQL keeps its indexes in step in every
  transaction, and a partial first load is as consistent as any other sync.
* A lost connection raises :class:`IndexUnreachableError` (the password never in its text); the
  next call connects again, takes the origin lock again and goes on from the committed
  watermarks.

``psycopg`` (3) is imported only here: without it, opening a store raises
:class:`~.errors.EngineMissingError`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from . import pg_schema
from .cjk import grams
from .errors import EngineMissingError, IndexBusyError, IndexStateError, IndexUnreachableError
from .idents import idents
from .pg_schema import OriginStatus, origin_status
from .rows import EventRow, FileRow, MessageRow, Node, SessionRow
from .target import redact

if TYPE_CHECKING:
    import psycopg

__all__ = ["IndexUnreachableError", "OriginStatus", "PgStore", "origin_status"]


_FILE_COLS = 'path, status, sid, error, dev, ino, size, mtime_ns, "offset", last_seq, last_crc'
_FILE_NAMES = [c.strip('"') for c in _FILE_COLS.split(", ")]
_SESSION_COLS = (
    "sid, id, path, header_crc, title, cwd, agent, created, updated, parent, parent_seq, "
    "events, messages, state, error, open_turn, closed"
)
_SESSION_NAMES = _SESSION_COLS.split(", ")
_STAGE = {
    "events": 'sid bigint, seq bigint, type text, time bigint, "offset" bigint, size bigint, '
    "crc text",
    "messages": "sid bigint, seq bigint, type text, role text, time bigint, status text, "
    "anchor bigint, call_id text, calls text[], text text, truncated boolean, idents text, "
    "cjk text[]",
    "tool_calls": "sid bigint, call_id text, seq bigint",
}
_MESSAGE_COLS = (
    "sid, seq, type, role, time, status, anchor, call_id, calls, text, truncated, idents, cjk"
)
_COMPACTIONS = ("compaction/summary", "compaction/prune", "handoff/anchor")


def _clean(s: str) -> str:
    """``s`` as PostgreSQL text can hold it: no NUL, no lone surrogate (both replaced)."""
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    if not s.isascii():
        try:
            s.encode()
        except UnicodeEncodeError:
            s = s.encode(errors="replace").decode()
    return s


def _opt(s: str | None) -> str | None:
    return None if s is None else _clean(s)


def _values(row: FileRow | SessionRow) -> tuple[Any, ...]:
    """A row's columns in declaration order (the ``_*_COLS`` order), texts cleaned."""
    return tuple(_clean(v) if isinstance(v, str) else v for v in msgspec.structs.astuple(row))


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def _file(r: Sequence[Any]) -> FileRow:
    d = dict(zip(_FILE_NAMES, r, strict=True))
    d["dev"], d["ino"] = _int(d["dev"]), _int(d["ino"])
    return FileRow(**d)


def _session(r: Sequence[Any]) -> SessionRow:
    return SessionRow(**dict(zip(_SESSION_NAMES, r, strict=True)))


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise EngineMissingError(
            "a postgresql:// index needs psycopg 3: pip install 'jsonltape[postgres]'"
        ) from None
    return psycopg


class PgStore:
    """:class:`~.rows.Store` of one origin in a PostgreSQL database (see the module docs).

    ``url`` is handed to libpq as it is (credentials may also come from ``.pgpass`` or the
    environment) and shown only through :func:`~.target.redact`. ``lock_timeout``: seconds to
    wait for another writer of the same origin to finish (0: fail at once with
    :class:`~.errors.IndexBusyError`)."""

    def __init__(
        self,
        url: str,
        origin: str,
        *,
        schema: str = pg_schema.SCHEMA,
        lock_timeout: float = 0.0,
        connect_timeout: int = 10,
    ) -> None:
        self._pg = _driver()
        self._url = url
        self.origin = origin
        self.schema = schema
        self.lock_timeout = lock_timeout
        self.connect_timeout = connect_timeout
        self._s = pg_schema._ident(schema, "schema")
        self._con: psycopg.Connection[Any] | None = None
        self._bulk = False
        self._in_tx = False
        self._lost_tx = False
        self._wrote = False
        self._events: list[EventRow] = []
        self._messages: list[MessageRow] = []
        self.commits = 0
        self._connection()

    def __str__(self) -> str:
        return f"{redact(self._url)} (origin {self.origin})"

    # -- the connection ------------------------------------------------------------------

    def _secret(self) -> str | None:
        try:
            value = self._pg.conninfo.conninfo_to_dict(self._url).get("password")
        except self._pg.Error:
            return None
        return value if isinstance(value, str) and value else None

    def _text(self, exc: BaseException) -> str:
        """The error's first line, without the password even if libpq echoed it."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        secret = self._secret()
        return text.replace(secret, "***") if secret else text

    def _fail(self, exc: Exception) -> NoReturn:
        """Raise the index error that ``exc`` (a driver error) means."""
        con = self._con
        if con is None or con.closed or con.broken or isinstance(exc, self._pg.OperationalError):
            self._drop()
            raise IndexUnreachableError(
                f"PostgreSQL index {redact(self._url)} unreachable: {self._text(exc)}"
            ) from None
        raise IndexStateError(f"PostgreSQL index {redact(self._url)}: {self._text(exc)}") from None

    def _drop(self) -> None:
        """Forget a connection (the server rolls its transaction back and frees its lock)."""
        con, self._con = self._con, None
        # Statements after a transaction was lost must not run on a new connection outside
        # it: only a rollback (what the engine does) or a new transaction clears this.
        self._lost_tx = self._lost_tx or self._in_tx
        self._in_tx = False
        self._events.clear()
        self._messages.clear()
        if con is not None:
            try:
                con.close()
            except self._pg.Error:  # pragma: no cover - closing a dead socket
                pass

    def _connection(self) -> psycopg.Connection[Any]:
        if self._con is not None:
            return self._con
        pg = self._pg
        try:
            con: psycopg.Connection[Any] = pg.connect(
                self._url, autocommit=True, connect_timeout=self.connect_timeout
            )
        except pg.Error as exc:
            raise IndexUnreachableError(
                f"PostgreSQL index {redact(self._url)} unreachable: {self._text(exc)}"
            ) from None
        self._con = con
        try:
            self._setup(con)
        except BaseException:
            self._drop()
            raise
        return con

    def _setup(self, con: psycopg.Connection[Any]) -> None:
        pg, s = self._pg, self._s
        version = 0
        try:
            version = pg_schema.schema_version(con, self.schema)
            if version != pg_schema.SCHEMA_VERSION:
                pg_schema.migrate(con, self.schema)
        except pg.errors.InsufficientPrivilege as exc:
            state = "missing" if version == 0 else f"at version {version}"
            raise IndexStateError(
                f"PostgreSQL index {redact(self._url)}: its schema is {state} and this role "
                f"cannot migrate it ({self._text(exc)}); run `jsonltape index init --index URL` "
                "as its owner"
            ) from None
        except pg.Error as exc:
            self._fail(exc)
        self._lock(con)
        try:
            found = con.execute(
                f"SELECT 1 FROM {s}.origins WHERE origin = %s", (self.origin,)
            ).fetchone()
            if found is None:
                con.execute(
                    f"INSERT INTO {s}.origins (origin) VALUES (%s) ON CONFLICT DO NOTHING",
                    (self.origin,),
                )
            for table, cols in _STAGE.items():
                con.execute(
                    f"CREATE TEMP TABLE IF NOT EXISTS stage_{table} ({cols}) ON COMMIT DELETE ROWS"
                )
        except pg.errors.InsufficientPrivilege:
            raise IndexStateError(
                f"PostgreSQL index {redact(self._url)}: this role may not push origin "
                f"{self.origin!r}; its DBA grants it (see `jsonltape index init --print`)"
            ) from None
        except pg.Error as exc:
            self._fail(exc)

    def _lock(self, con: psycopg.Connection[Any]) -> None:
        key = f"jsonltape-origin:{self.schema}:{self.origin}"
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                row = con.execute(
                    "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)
                ).fetchone()
            except self._pg.Error as exc:
                self._fail(exc)
            if row is not None and row[0]:
                return
            if time.monotonic() >= deadline:
                raise IndexBusyError(
                    f"another writer is pushing origin {self.origin!r} into {redact(self._url)}"
                )
            time.sleep(0.05)

    def _live(self) -> psycopg.Connection[Any]:
        """The connection for the next statement (connecting again if it was lost)."""
        if self._lost_tx:
            raise IndexUnreachableError(
                f"PostgreSQL index {redact(self._url)}: the connection was lost in a transaction "
                "(roll it back first)"
            )
        return self._connection()

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        con = self._live()
        try:
            return con.execute(sql, params or None)
        except self._pg.Error as exc:
            self._fail(exc)

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        cur = self._exec(sql, params)
        try:
            return cur.fetchall()
        except self._pg.Error as exc:  # pragma: no cover - rows are fetched with the result
            self._fail(exc)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    # -- transactions --------------------------------------------------------------------

    def begin(self) -> None:
        self._lost_tx = False
        self._exec("BEGIN")
        self._in_tx = True
        self._wrote = False

    def commit(self) -> None:
        self._flush()
        if self._wrote:
            self._exec(
                f"UPDATE {self._s}.origins SET pushed = %s WHERE origin = %s",
                (int(time.time() * 1000), self.origin),
            )
        self._exec("COMMIT")
        self._in_tx = False
        self.commits += 1

    def rollback(self) -> None:
        """Throw the open transaction away (a connection lost meanwhile is just forgotten)."""
        self._lost_tx = False
        self._events.clear()
        self._messages.clear()
        con = self._con
        if con is None or not self._in_tx:
            return
        self._in_tx = False
        try:
            con.execute(b"ROLLBACK")
        except self._pg.Error:
            self._drop()

    def close(self) -> None:
        """Roll back what is not committed and let the origin's lock go."""
        self.rollback()
        con = self._con
        if con is not None:
            try:
                con.execute(b"SELECT pg_advisory_unlock_all()")
            except self._pg.Error:
                pass
        self._drop()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def roots(self) -> list[str]:
        """The roots this origin has synced into the index (``index rebuild`` syncs them)."""
        r = self._one(f"SELECT roots FROM {self._s}.origins WHERE origin = %s", (self.origin,))
        return list(r[0]) if r else []

    def add_root(self, root: str) -> None:
        roots = self.roots()
        if root not in roots:
            self._exec(
                f"UPDATE {self._s}.origins SET roots = %s::jsonb WHERE origin = %s",
                (msgspec.json.encode(sorted([*roots, root])).decode(), self.origin),
            )

    # -- bulk loads: nothing special here ------------------------------------------------

    def is_empty(self) -> bool:
        return (
            self._one(f"SELECT 1 FROM {self._s}.files WHERE origin = %s LIMIT 1", (self.origin,))
            is None
        )

    @property
    def in_bulk(self) -> bool:
        return self._bulk

    def start_bulk(self) -> None:
        """Only marks the load (the engine then uses its bulk budget): rows go straight into
        the shared tables, whose indexes PostgreSQL keeps in step, and every committed
        transaction of a first load is as consistent as any other sync."""
        self._bulk = True

    def finish_bulk(self) -> None:
        """Nothing to publish: every transaction of the load is already visible."""
        self._bulk = False

    def abort_bulk(self) -> None:
        """Roll the open transaction back; what the load committed before stays (each commit
        holds its watermarks, so the next sync goes on from there)."""
        self._bulk = False
        self.rollback()

    # -- the registry --------------------------------------------------------------------

    def files(self, under: str | None = None) -> dict[str, FileRow]:
        sql = f"SELECT {_FILE_COLS} FROM {self._s}.files WHERE origin = %s"
        params: list[Any] = [self.origin]
        if under is not None:
            # starts_with, not a range or LIKE: exact whatever the database's collation.
            sql += " AND starts_with(path, %s)"
            params.append(_clean(under.rstrip("/") + "/"))
        return {r[0]: _file(r) for r in self._all(sql, params)}

    def file(self, path: str) -> FileRow | None:
        r = self._one(
            f"SELECT {_FILE_COLS} FROM {self._s}.files WHERE origin = %s AND path = %s",
            (self.origin, _clean(path)),
        )
        return None if r is None else _file(r)

    def put_file(self, row: FileRow) -> None:
        self._wrote = True
        names = _FILE_COLS.split(", ")
        self._exec(
            f"INSERT INTO {self._s}.files (origin, {_FILE_COLS}) VALUES ({', '.join(['%s'] * 12)}) "
            f"ON CONFLICT (origin, path) DO UPDATE SET "
            + ", ".join(f"{n} = EXCLUDED.{n}" for n in names[1:]),
            (self.origin, *_values(row)),
        )

    def delete_file(self, path: str) -> None:
        self._wrote = True
        self._exec(
            f"DELETE FROM {self._s}.files WHERE origin = %s AND path = %s",
            (self.origin, _clean(path)),
        )

    def move_file(self, old: str, new: str) -> None:
        self._wrote = True
        s, o, old, new = self._s, self.origin, _clean(old), _clean(new)
        self._exec(f"DELETE FROM {s}.files WHERE origin = %s AND path = %s", (o, new))
        self._exec(f"UPDATE {s}.files SET path = %s WHERE origin = %s AND path = %s", (new, o, old))
        self._exec(
            f"UPDATE {s}.sessions SET path = %s WHERE origin = %s AND path = %s", (new, o, old)
        )

    # -- sessions ------------------------------------------------------------------------

    def _sessions(self, where: str, params: Sequence[Any]) -> list[SessionRow]:
        return [
            _session(r)
            for r in self._all(
                f"SELECT {_SESSION_COLS} FROM {self._s}.sessions WHERE origin = %s AND {where}",
                (self.origin, *params),
            )
        ]

    def session(self, sid: int) -> SessionRow | None:
        found = self._sessions("sid = %s", (sid,))
        return found[0] if found else None

    def session_at(self, path: str) -> SessionRow | None:
        found = self._sessions("path = %s", (_clean(path),))
        return found[0] if found else None

    def sessions_with(self, session_id: str, header_crc: str) -> list[SessionRow]:
        return self._sessions("id = %s AND header_crc = %s", (_clean(session_id), header_crc))

    def add_session(self, row: SessionRow) -> int:
        self._wrote = True
        values = _values(row)[1:]
        r = self._one(
            f"INSERT INTO {self._s}.sessions (origin, {_SESSION_COLS.partition(', ')[2]}) "
            f"VALUES (%s, {', '.join(['%s'] * len(values))}) RETURNING sid",
            (self.origin, *values),
        )
        row.sid = int(r[0])
        return row.sid

    def put_session(self, row: SessionRow) -> None:
        self._wrote = True
        self._exec(
            f"UPDATE {self._s}.sessions SET "
            + ", ".join(f"{n} = %s" for n in _SESSION_NAMES[1:])
            + " WHERE origin = %s AND sid = %s",
            (*_values(row)[1:], self.origin, row.sid),
        )

    def drop_session(self, sid: int) -> None:
        """Delete a session; its events, messages and tool calls go with it (cascade)."""
        self._flush()
        self._wrote = True
        s, o = self._s, self.origin
        self._exec(f"DELETE FROM {s}.sessions WHERE origin = %s AND sid = %s", (o, sid))
        self._exec(f"UPDATE {s}.files SET sid = NULL WHERE origin = %s AND sid = %s", (o, sid))

    def drop_origin(self) -> None:
        """Delete every row of this origin (``index rebuild --origin``); its roots stay."""
        s, o = self._s, self.origin
        self.begin()
        try:
            self._events.clear()
            self._messages.clear()
            self._exec(f"DELETE FROM {s}.files WHERE origin = %s", (o,))
            self._exec(f"DELETE FROM {s}.sessions WHERE origin = %s", (o,))
            self._wrote = True
            self.commit()
        except BaseException:
            self.rollback()
            raise

    # -- rows ----------------------------------------------------------------------------

    def add_events(self, rows: Sequence[EventRow]) -> None:
        self._events.extend(rows)

    def add_messages(self, rows: Sequence[MessageRow]) -> None:
        self._messages.extend(rows)

    def _flush(self) -> None:
        """Send the buffered rows: COPY into the staging tables, then move them (see the
        module docs). A row already there (a push re-sent) is left as it is."""
        if not self._events and not self._messages:
            return
        events, self._events = self._events, []
        messages, self._messages = self._messages, []
        self._wrote = True
        rows: list[tuple[Any, ...]] = []
        calls: list[tuple[int, str, int]] = []
        for m in messages:
            text = _clean(m.text)
            g = grams(text)
            rows.append(
                (
                    *m[:7],
                    _opt(m.call_id),
                    [_clean(c) for c in m.calls] if m.calls else None,
                    text,
                    bool(m.truncated),
                    idents(text) or None,
                    g.split() if g else None,
                )
            )
            calls.extend((m.sid, _clean(c), m.seq) for c in m.calls)
        con = self._live()
        try:
            with con.cursor() as cur:
                self._move(cur, "events", 'sid, seq, type, time, "offset", size, crc', events)
                self._move(cur, "messages", _MESSAGE_COLS, rows)
                self._move(cur, "tool_calls", "sid, call_id, seq", calls)
        except self._pg.Error as exc:
            self._fail(exc)

    def _move(
        self, cur: psycopg.Cursor[Any], table: str, cols: str, rows: Sequence[Sequence[Any]]
    ) -> None:
        if not rows:
            return
        with cur.copy(f"COPY pg_temp.stage_{table} ({cols}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
        # DELETE ... RETURNING empties the stage for the next flush of this transaction.
        cur.execute(
            f"WITH m AS (DELETE FROM pg_temp.stage_{table} RETURNING *) INSERT INTO "
            f"{self._s}.{table} (origin, {cols}) SELECT %s, {cols} FROM m ON CONFLICT DO NOTHING",
            (self.origin,),
        )

    def line_marks(self, sid: int) -> Iterator[tuple[int, int, str]]:
        """``(offset, size, crc)`` of each indexed line of a session after its header."""
        self._flush()
        rows = self._all(
            f'SELECT "offset", size, crc FROM {self._s}.events WHERE origin = %s AND sid = %s '
            "AND seq > 0 ORDER BY seq",
            (self.origin, sid),
        )
        return iter([(int(a), int(b), str(c)) for a, b, c in rows])

    # -- the surface (see surface.py) ----------------------------------------------------

    def current(self, sid: int, seq: int) -> tuple[int, str] | None:
        self._flush()
        r = self._one(
            f"SELECT anchor, type FROM {self._s}.messages WHERE origin = %s AND sid = %s "
            "AND seq = %s AND status = 'current'",
            (self.origin, sid, seq),
        )
        return None if r is None else (int(r[0]), str(r[1]))

    def current_between(self, sid: int, lo: int, hi: int) -> list[Node]:
        self._flush()
        return [
            Node(int(r[0]), int(r[1]), str(r[2]), r[3], tuple(r[4] or ()))
            for r in self._all(
                f"SELECT seq, anchor, type, call_id, calls FROM {self._s}.messages "
                "WHERE origin = %s AND sid = %s AND status = 'current' "
                "AND anchor BETWEEN %s AND %s ORDER BY anchor",
                (self.origin, sid, lo, hi),
            )
        ]

    def declared(self, sid: int, call_id: str) -> int:
        self._flush()
        s = self._s
        r = self._one(
            f"SELECT count(*) FROM {s}.tool_calls t JOIN {s}.messages m ON m.origin = t.origin "
            "AND m.sid = t.sid AND m.seq = t.seq WHERE t.origin = %s AND t.sid = %s "
            "AND t.call_id = %s AND m.status = 'current'",
            (self.origin, sid, _clean(call_id)),
        )
        return int(r[0])

    def answers(self, sid: int, call_id: str) -> list[tuple[int, int]]:
        self._flush()
        return [
            (int(r[0]), int(r[1]))
            for r in self._all(
                f"SELECT seq, anchor FROM {self._s}.messages WHERE origin = %s AND sid = %s "
                "AND call_id = %s AND status = 'current' AND type = 'tool/result'",
                (self.origin, sid, _clean(call_id)),
            )
        ]

    def has_compaction(self, sid: int, seqs: Iterable[int], before: int) -> bool:
        wanted = sorted({s for s in seqs if isinstance(s, int) and s < before})
        if not wanted:
            return False
        self._flush()
        r = self._one(
            f"SELECT 1 FROM {self._s}.events WHERE origin = %s AND sid = %s "
            "AND type = ANY(%s) AND seq = ANY(%s) LIMIT 1",
            (self.origin, sid, list(_COMPACTIONS), wanted),
        )
        return r is not None

    def set_status(self, sid: int, seqs: Sequence[int], status: str) -> None:
        if not seqs:
            return
        self._flush()
        self._wrote = True
        self._exec(
            f"UPDATE {self._s}.messages SET status = %s WHERE origin = %s AND sid = %s "
            "AND seq = ANY(%s)",
            (status, self.origin, sid, list(seqs)),
        )

    # -- full text: PostgreSQL keeps its indexes in step ---------------------------------

    @property
    def fts_live(self) -> bool:
        """Always: the word, substring and CJK indexes are updated by every insert."""
        return True

    def set_fts_stale(self) -> None:
        """Nothing to defer: see :attr:`fts_live`."""

    def rebuild_fts(self) -> None:
        """Nothing to rebuild: see :attr:`fts_live`."""

    def substrings_pending(self) -> bool:
        """Never: ``idents`` is written with each message."""
        return False

    def substrings_waiting(self) -> bool:
        """Never: no helper process builds anything."""
        return False

    def build_substrings(self, limit: int) -> int:
        """Nothing to catch up on: see :meth:`substrings_pending`."""
        return 0

    # -- status --------------------------------------------------------------------------

    def status(self) -> list[OriginStatus]:
        """Every origin this role may see, with counts and the time of its last push."""
        con = self._live()
        try:
            return origin_status(con, self.schema)
        except self._pg.Error as exc:
            self._fail(exc)

    def counts(self) -> OriginStatus:
        """This origin's counts and last push."""
        con = self._live()
        try:
            found = origin_status(con, self.schema, self.origin)
        except self._pg.Error as exc:
            self._fail(exc)
        return found[0] if found else OriginStatus(self.origin, 0, 0, 0, 0, None, ())

    def session_count(self) -> int:
        """How many sessions this origin has in the index."""
        r = self._one(f"SELECT count(*) FROM {self._s}.sessions WHERE origin = %s", (self.origin,))
        return int(r[0])
