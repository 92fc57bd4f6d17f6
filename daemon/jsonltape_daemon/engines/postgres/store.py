"""The PostgreSQL implementation of the index's storage interface (``rows.Store``): one origin.

A :class:`PgStore` is the writer of one origin (a machine and user) in a shared database whose
schema ``schema.py`` describes: every statement is scoped to that origin, so the same ingest
engine, registry and continuity logic as the SQLite index (``ingest/``) push this machine's
sessions, and two machines never touch each other's rows. Its connection (connecting,
migrating, the origin lock, errors) is :class:`~.link.OriginLink`. What differs from SQLite:

* Opening one migrates the schema on first use (a database owner syncing alone needs nothing
  else), registers the origin if the role may, and takes a *session-level advisory lock* keyed
  on the origin: one writer per origin, as one writer per SQLite index. The server drops the
  lock with the connection, so a killed pusher never blocks the next one.
* Event, message and tool-call rows are buffered (``_rows.Pending``) and sent with ``COPY``
  into temporary staging tables (``COPY FROM`` is refused on tables with row-level security),
  then moved with ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: a re-sent row adds nothing.
  The buffer is flushed at commit, so the file watermark (``files``) is committed in the same
  transaction as its rows. The surface look-ups of the fold do not flush it: they combine the
  database's rows with the held-back ones (``_rows.Lookups``), one statement each, so a
  session full of revisions is still sent in a few large batches, not one per tool call.
  Session and registry rows, which a sync rewrites after every chunk of a file, are held back
  too (the latest of each, read back from there) and written just before the batch.
* Messages keep their text (other machines cannot read the files), with ``idents`` (the
  code-like tokens, ``idents.py``) and ``cjk`` (``cjk.grams``) computed here.
* A first push of an origin is a bulk load into a partition of its own whose word, substring
  and CJK indexes are built once at the end (``pg_schema.py``, "Bulk first pushes"): the
  engine's full-text hooks (``fts_live``, ``rebuild_fts``) drive it. Every transaction of it
  commits its rows and watermarks as any other sync; an interrupted one leaves the build to
  the next sync, and its rows are searchable meanwhile, only without those indexes.
* A lost connection raises :class:`IndexUnreachableError` (the password never in its text); the
  next call connects again, takes the origin lock again and goes on from the committed
  watermarks.

``psycopg`` (3) is imported only here: without it, opening a store raises
:class:`~.errors.EngineMissingError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import msgspec

from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.postgres._rows import (
    FILE_COLS,
    MESSAGE_COLS,
    SESSION_COLS,
    SESSION_NAMES,
    Lookups,
    Pending,
    clean,
    file_row,
    message_values,
    row_values,
    session_row,
)
from jsonltape_daemon.engines.postgres.link import OriginLink
from jsonltape_daemon.engines.postgres.schema import OriginStatus, origin_status
from jsonltape_daemon.engines.postgres.usage import PgUsage
from jsonltape_daemon.errors import IndexStateError, IndexUnreachableError
from jsonltape_daemon.ingest.rows import EventRow, FileRow, MessageRow, Node, SessionRow
from jsonltape_daemon.target import redact

if TYPE_CHECKING:
    import psycopg

__all__ = ["IndexUnreachableError", "OriginStatus", "PgStore", "origin_status"]


class PgStore(OriginLink, PgUsage):
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
        super().__init__(
            url, origin, schema=schema, lock_timeout=lock_timeout, connect_timeout=connect_timeout
        )
        self._bulk = False
        self._wrote = False
        self._pending = Pending()
        # registry and session rows written at the next flush (the latest of each), as the
        # database will hold them: a sync puts both after every chunk of a file
        self._held_files: dict[str, FileRow] = {}
        self._held_sessions: dict[int, SessionRow] = {}
        self._look = Lookups(self._all, self._s, origin, self._pending)
        self.commits = 0
        self._connection()

    def __str__(self) -> str:
        return f"{redact(self._url)} (origin {self.origin})"

    def _forget_held(self) -> None:
        self._forget_usage()
        self._pending.clear()
        self._held_files.clear()
        self._held_sessions.clear()

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

    # -- bulk loads: a first push fills its own partition, indexed once at the end -------

    def is_empty(self) -> bool:
        return not self._held_files and (
            self._one(f"SELECT 1 FROM {self._s}.files WHERE origin = %s LIMIT 1", (self.origin,))
            is None
        )

    @property
    def in_bulk(self) -> bool:
        return self._bulk

    def start_bulk(self) -> None:
        """Start a first push of this origin: its messages go into a partition of their own
        without the word, substring and CJK indexes, built once by :meth:`rebuild_fts` (bulk
        GIN builds are several times faster than keeping them in step row by row). Every
        committed transaction is visible meanwhile (searched without those indexes). A role
        the schema's ``check_pusher`` does not recognise (its login role is not the one mapped
        to the origin, after a ``SET ROLE``) pushes into the shared partition as before."""
        self._bulk = True
        try:
            row = self._one(f"SELECT {self._s}.start_bulk(%s)", (self.origin,))
        except IndexUnreachableError:
            raise
        except IndexStateError:
            return  # the incremental path is as correct, only slower
        self._indexed = not (row and row[0])

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
        sql = f"SELECT {FILE_COLS} FROM {self._s}.files WHERE origin = %s"
        params: list[Any] = [self.origin]
        if under is not None:
            # starts_with, not a range or LIKE: exact whatever the database's collation.
            sql += " AND starts_with(path, %s)"
            params.append(clean(under.rstrip("/") + "/"))
        found = {r[0]: file_row(r) for r in self._all(sql, params)}
        prefix = None if under is None else clean(under.rstrip("/") + "/")
        for path, row in self._held_files.items():
            if prefix is None or path.startswith(prefix):
                found[path] = msgspec.structs.replace(row)
        return found

    def file(self, path: str) -> FileRow | None:
        held = self._held_files.get(clean(path))
        if held is not None:
            return msgspec.structs.replace(held)
        r = self._one(
            f"SELECT {FILE_COLS} FROM {self._s}.files WHERE origin = %s AND path = %s",
            (self.origin, clean(path)),
        )
        return None if r is None else file_row(r)

    def put_file(self, row: FileRow) -> None:
        self._wrote = True
        held = file_row(row_values(row))
        self._held_files[held.path] = held

    def delete_file(self, path: str) -> None:
        self._wrote = True
        self._held_files.pop(clean(path), None)
        self._exec(
            f"DELETE FROM {self._s}.files WHERE origin = %s AND path = %s",
            (self.origin, clean(path)),
        )

    def move_file(self, old: str, new: str) -> None:
        self._flush_held()
        self._wrote = True
        s, o, old, new = self._s, self.origin, clean(old), clean(new)
        self._exec(f"DELETE FROM {s}.files WHERE origin = %s AND path = %s", (o, new))
        self._exec(f"UPDATE {s}.files SET path = %s WHERE origin = %s AND path = %s", (new, o, old))
        self._exec(
            f"UPDATE {s}.sessions SET path = %s WHERE origin = %s AND path = %s", (new, o, old)
        )
        self.moved_usage(new)

    # -- sessions ------------------------------------------------------------------------

    def _sessions(self, where: str, params: Sequence[Any]) -> list[SessionRow]:
        return [
            session_row(r)
            for r in self._all(
                f"SELECT {SESSION_COLS} FROM {self._s}.sessions WHERE origin = %s AND {where}",
                (self.origin, *params),
            )
        ]

    def _over_held(
        self, stored: list[SessionRow], wanted: Callable[[SessionRow], bool]
    ) -> list[SessionRow]:
        """The stored sessions a query found, with the held-back versions in their place."""
        found = {r.sid: r for r in stored}
        for sid, row in self._held_sessions.items():
            if wanted(row):
                found[sid] = msgspec.structs.replace(row)
            else:
                found.pop(sid, None)
        return sorted(found.values(), key=lambda r: r.sid)

    def session(self, sid: int) -> SessionRow | None:
        held = self._held_sessions.get(sid)
        if held is not None:
            return msgspec.structs.replace(held)
        found = self._sessions("sid = %s", (sid,))
        return found[0] if found else None

    def session_at(self, path: str) -> SessionRow | None:
        path = clean(path)
        found = self._over_held(self._sessions("path = %s", (path,)), lambda r: r.path == path)
        return found[0] if found else None

    def sessions_with(self, session_id: str, header_crc: str) -> list[SessionRow]:
        key = (clean(session_id), header_crc)
        return self._over_held(
            self._sessions("id = %s AND header_crc = %s", key),
            lambda r: (r.id, r.header_crc) == key,
        )

    def add_session(self, row: SessionRow) -> int:
        self._wrote = True
        values = row_values(row)[1:]
        r = self._one(
            f"INSERT INTO {self._s}.sessions (origin, {SESSION_COLS.partition(', ')[2]}) "
            f"VALUES (%s, {', '.join(['%s'] * len(values))}) RETURNING sid",
            (self.origin, *values),
        )
        row.sid = int(r[0])
        return row.sid

    def put_session(self, row: SessionRow) -> None:
        self._wrote = True
        self._held_sessions[row.sid] = session_row(row_values(row))

    def drop_session(self, sid: int) -> None:
        """Delete a session; its events, messages and tool calls go with it (cascade, and
        those not sent yet are forgotten)."""
        self.drop_usage(sid)
        self._pending.discard(sid)
        self._held_sessions.pop(sid, None)
        for held in self._held_files.values():
            if held.sid == sid:
                held.sid = None
        self._wrote = True
        s, o = self._s, self.origin
        self._exec(f"DELETE FROM {s}.sessions WHERE origin = %s AND sid = %s", (o, sid))
        self._exec(f"UPDATE {s}.files SET sid = NULL WHERE origin = %s AND sid = %s", (o, sid))

    def drop_origin(self) -> None:
        """Delete every row of this origin (``index rebuild --origin``); its roots stay."""
        s, o = self._s, self.origin
        self.begin()
        try:
            self._forget_held()
            self._exec(f"DELETE FROM {s}.files WHERE origin = %s", (o,))
            self._exec(f"DELETE FROM {s}.sessions WHERE origin = %s", (o,))
            self._wrote = True
            self.commit()
        except BaseException:
            self.rollback()
            raise

    # -- rows ----------------------------------------------------------------------------

    def add_events(self, rows: Sequence[EventRow]) -> None:
        self._pending.add_events(rows)

    def add_messages(self, rows: Sequence[MessageRow]) -> None:
        self._pending.add_messages(rows)

    def _flush(self) -> None:
        """Send the buffered rows: COPY into the staging tables, then move them (see the
        module docs). A row already there (a push re-sent) is left as it is."""
        self._flush_held()  # the sessions' final versions first: the rows' keys check them
        self._flush_usage()
        if not self._pending:
            return
        events, messages, calls = self._pending.take()
        self._wrote = True
        rows = [message_values(m) for m in messages]
        con = self._live()
        try:
            with con.cursor() as cur:
                self._move(cur, "events", 'sid, seq, type, time, "offset", size, crc', events)
                self._move(cur, "messages", MESSAGE_COLS, rows)
                self._move(cur, "tool_calls", "sid, call_id, seq", calls)
        except self._pg.Error as exc:
            self._fail(exc)

    def _flush_held(self) -> None:
        """Write the held-back session and registry rows (``executemany``: psycopg pipelines
        them where libpq can)."""
        sessions, self._held_sessions = list(self._held_sessions.values()), {}
        files, self._held_files = list(self._held_files.values()), {}
        if not sessions and not files:
            return
        s, names = self._s, FILE_COLS.split(", ")
        con = self._live()
        try:
            with con.cursor() as cur:
                if sessions:
                    cur.executemany(
                        f"UPDATE {s}.sessions SET "
                        + ", ".join(f"{n} = %s" for n in SESSION_NAMES[1:])
                        + " WHERE origin = %s AND sid = %s",
                        [(*row_values(r)[1:], self.origin, r.sid) for r in sessions],
                    )
                if files:
                    cur.executemany(
                        f"INSERT INTO {s}.files (origin, {FILE_COLS}) "
                        f"VALUES ({', '.join(['%s'] * 12)}) ON CONFLICT (origin, path) DO UPDATE "
                        "SET " + ", ".join(f"{n} = EXCLUDED.{n}" for n in names[1:]),
                        [(self.origin, *row_values(r)) for r in files],
                    )
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
        cur.execute(
            f"INSERT INTO {self._s}.{table} (origin, {cols}) SELECT %s, {cols} "
            f"FROM pg_temp.stage_{table} ON CONFLICT DO NOTHING",
            (self.origin,),
        )
        # empty for the next flush of this transaction: cheaper than DELETE ... RETURNING
        # (which marks every row), and as transactional
        cur.execute(f"TRUNCATE pg_temp.stage_{table}")

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
        return self._look.current(sid, seq)

    def current_between(self, sid: int, lo: int, hi: int) -> list[Node]:
        return self._look.current_between(sid, lo, hi)

    def declared(self, sid: int, call_id: str) -> int:
        return self._look.declared(sid, call_id)

    def answers(self, sid: int, call_id: str) -> list[tuple[int, int]]:
        return self._look.answers(sid, call_id)

    def has_compaction(self, sid: int, seqs: Iterable[int], before: int) -> bool:
        wanted = sorted({s for s in seqs if isinstance(s, int) and s < before})
        return bool(wanted) and self._look.has_compaction(sid, wanted)

    def set_status(self, sid: int, seqs: Sequence[int], status: str) -> None:
        if not seqs:
            return
        self._pending.set_status(sid, seqs, status)
        self._wrote = True
        self._exec(
            f"UPDATE {self._s}.messages SET status = %s WHERE origin = %s AND sid = %s "
            "AND seq = ANY(%s)",
            (status, self.origin, sid, list(seqs)),
        )

    # -- full text: PostgreSQL keeps its indexes in step ---------------------------------

    @property
    def fts_live(self) -> bool:
        """False while this origin's partition lacks its word, substring and CJK indexes (a
        first push, or one interrupted): the engine then calls :meth:`rebuild_fts` at the
        end of its sync. Otherwise every insert keeps them in step."""
        return self._indexed

    def set_fts_stale(self) -> None:
        """Nothing to mark: :attr:`fts_live` is read from the database."""

    def rebuild_fts(self) -> None:
        """Build this origin's missing search indexes (``index_origin`` in the schema: one
        bulk GIN build each, then ``ANALYZE``), outside a transaction. The substring index,
        the slowest, is built on a second connection meanwhile: a build uses one core."""
        if self._indexed:
            return
        self._flush_held()
        one = f"SELECT {self._s}.index_origin(%s, %s)"

        def side() -> None:
            try:
                with self._pg.connect(
                    self._url, autocommit=True, connect_timeout=self.connect_timeout
                ) as con:
                    con.execute(one, (self.origin, "idents"))
            except self._pg.Error:
                pass  # the last call below builds what is still missing, or says why not

        with ThreadPoolExecutor(1) as pool:
            pool.submit(side)
            self._exec(one, (self.origin, "words"))
            self._exec(one, (self.origin, "cjk"))
        self._exec(f"SELECT {self._s}.index_origin(%s)", (self.origin,))
        self._indexed = True

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
        self._flush_held()
        con = self._live()
        try:
            return origin_status(con, self.schema)
        except self._pg.Error as exc:
            self._fail(exc)

    def counts(self) -> OriginStatus:
        """This origin's counts and last push."""
        self._flush_held()
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
