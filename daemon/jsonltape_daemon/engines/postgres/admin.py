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

    denied = IndexStateError(
        f"{target}: optimizing needs the role that owns the index's tables "
        "(the owner role of `jsonltape index init`)"
    )
    con = read_only(target)
    # VACUUM of a table the role may not vacuum only warns and succeeds; the words differ
    # between server versions (15: 'skipping "t" --- only table or database owner can vacuum
    # it', 16: 'permission denied to vacuum "t", skipping it') and languages, so any warning
    # of a VACUUM of the index's own tables is taken as that.
    skipped: list[str] = []
    con.add_notice_handler(
        lambda d: (
            skipped.append(d.message_primary or "")
            if d.severity_nonlocalized == "WARNING"
            else None
        )
    )
    done = []
    try:
        con.execute("SET default_transaction_read_only = off")
        for table in (*TABLES, "origins"):
            try:
                con.execute(f"VACUUM (ANALYZE) {_ident(schema, 'schema')}.{_ident(table)}")
            except psycopg.errors.InsufficientPrivilege:
                raise denied from None
            except psycopg.Error as exc:
                raise IndexStateError(f"{target}: {error_line(exc, target.url)}") from None
            if skipped:
                raise denied
            done.append(table)
    finally:
        con.close()
    return done
