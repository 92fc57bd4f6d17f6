"""The connection of one origin's writer to a PostgreSQL team index (:class:`OriginLink`):
connecting (and migrating the schema on first use), the origin's advisory lock, transactions,
and driver errors turned into the index's errors, the password never in their text.

:class:`~jsonltape_daemon.engines.postgres.store.PgStore` is built on it; what it holds back
for the next flush is forgotten with a lost connection (``_forget_held``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.postgres._rows import STAGE
from jsonltape_daemon.engines.postgres.conn import driver, error_line
from jsonltape_daemon.errors import IndexBusyError, IndexStateError, IndexUnreachableError
from jsonltape_daemon.target import redact

if TYPE_CHECKING:
    import psycopg

__all__ = ["OriginLink"]


class OriginLink:
    """One origin's connection: connected at once, again after a loss (see the module docs)."""

    def __init__(
        self,
        url: str,
        origin: str,
        *,
        schema: str = pg_schema.SCHEMA,
        lock_timeout: float = 0.0,
        connect_timeout: int = 10,
    ) -> None:
        self._pg = driver()
        self._url = url
        self.origin = origin
        self.schema = schema
        self.lock_timeout = lock_timeout
        self.connect_timeout = connect_timeout
        self._s = pg_schema._ident(schema, "schema")
        self._con: psycopg.Connection[Any] | None = None
        self._indexed = True  # this origin's search indexes exist (see PgStore.start_bulk)
        self._in_tx = False
        self._lost_tx = False

    def _forget_held(self) -> None:
        """Drop what is held back for the next flush (a subclass holds rows)."""

    # -- the connection ------------------------------------------------------------------

    def _text(self, exc: BaseException) -> str:
        """The error's first line, without the password even if libpq echoed it."""
        return error_line(exc, self._url)

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
        self._forget_held()
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
        version = None
        try:
            version = pg_schema.schema_version(con, self.schema)
            if version != pg_schema.SCHEMA_VERSION:
                pg_schema.migrate(con, self.schema)
        except pg.errors.InsufficientPrivilege as exc:
            if version is None:  # the schema exists, and this role may not even look in it
                raise IndexStateError(
                    f"PostgreSQL index {redact(self._url)}: this role may not use its schema "
                    f"({self._text(exc)}); its DBA grants it: `jsonltape index grant --writer "
                    "ROLE --origin ORIGIN`"
                ) from None
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
            for table, cols in STAGE.items():
                con.execute(
                    f"CREATE TEMP TABLE IF NOT EXISTS stage_{table} ({cols}) ON COMMIT DELETE ROWS"
                )
            row = con.execute(f"SELECT {s}.origin_indexed(%s)", (self.origin,)).fetchone()
            self._indexed = bool(row and row[0])
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

    def rollback(self) -> None:
        """Throw the open transaction away (a connection lost meanwhile is just forgotten)."""
        self._lost_tx = False
        self._forget_held()
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
