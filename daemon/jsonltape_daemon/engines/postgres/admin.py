"""Maintenance of a PostgreSQL team index (``index optimize``)."""

from __future__ import annotations

from jsonltape_daemon.engines.postgres.conn import error_line, read_only
from jsonltape_daemon.engines.postgres.schema import SCHEMA, TABLES, _ident
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.target import PgTarget

__all__ = ["optimize"]


def optimize(target: PgTarget, schema: str = SCHEMA) -> list[str]:
    """``VACUUM (ANALYZE)`` every table of the index (fresh planner statistics, dead rows of
    deleted or replaced sessions reclaimed); returns the tables done. Needs the role that
    owns them (the owner role, or the single user who created the index by syncing)."""
    import psycopg

    con = read_only(target)
    done = []
    try:
        con.execute("SET default_transaction_read_only = off")
        for table in (*TABLES, "origins"):
            try:
                con.execute(f"VACUUM (ANALYZE) {_ident(schema, 'schema')}.{_ident(table)}")
            except psycopg.errors.InsufficientPrivilege:
                raise IndexStateError(
                    f"{target}: optimizing needs the role that owns the index's tables "
                    "(the owner role of `jsonltape index init`)"
                ) from None
            except psycopg.Error as exc:
                raise IndexStateError(f"{target}: {error_line(exc, target.url)}") from None
            done.append(table)
    finally:
        con.close()
    return done
