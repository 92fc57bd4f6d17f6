"""Reaching PostgreSQL: the driver, read-only connections, and driver errors as one line.

Every PostgreSQL path (the store, the reader, status, maintenance, ``index init|grant``) goes
through here, so that a missing driver, an unreachable server and a password libpq may echo
are each handled in one place.
"""

from __future__ import annotations

from typing import Any

from jsonltape_daemon.errors import EngineMissingError, IndexUnreachableError
from jsonltape_daemon.target import PgTarget

__all__ = ["driver", "error_line", "read_only"]


def driver() -> Any:
    """The psycopg module; :class:`EngineMissingError` (what to install) without it."""
    try:
        import psycopg
    except ImportError:
        raise EngineMissingError(
            "a postgresql:// index needs psycopg 3: pip install 'jsonltape[postgres]'"
        ) from None
    return psycopg


def error_line(exc: BaseException, url: str) -> str:
    """The error's first line, without the URL's password even if the driver echoed it."""
    pg = driver()
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    try:
        secret = pg.conninfo.conninfo_to_dict(url).get("password")
    except pg.Error:
        secret = None
    return text.replace(secret, "***") if isinstance(secret, str) and secret else text


def read_only(target: PgTarget) -> Any:
    """A read-only connection (autocommit: every query is its own snapshot)."""
    pg = driver()
    try:
        con = pg.connect(target.url, autocommit=True, connect_timeout=10)
        con.execute("SET default_transaction_read_only = on")
    except pg.Error as exc:
        raise IndexUnreachableError(f"{target}: {error_line(exc, target.url)}") from None
    return con
