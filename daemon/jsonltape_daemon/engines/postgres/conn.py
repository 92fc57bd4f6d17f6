"""Reaching PostgreSQL: the driver, read-only connections, and driver errors as one line.

Every PostgreSQL path (the store, the reader, status, maintenance, ``index init|grant``) goes
through here, so that a missing driver, an unreachable server and a password libpq may echo
are each handled in one place.
"""

from __future__ import annotations

import re
from typing import Any

from jsonltape_daemon.errors import EngineMissingError, IndexStateError, IndexUnreachableError
from jsonltape_daemon.target import SECRET_KEYS, PgTarget, conninfo_pairs, redact, userinfo_end

__all__ = ["driver", "error_line", "failure", "read_only"]


def driver() -> Any:
    """The psycopg module; :class:`EngineMissingError` (what to install) without it."""
    try:
        import psycopg
    except ImportError:
        raise EngineMissingError(
            "a postgresql:// index needs psycopg 3: pip install 'jsonltape[postgres]'"
        ) from None
    return psycopg


def _secrets(url: str) -> set[str]:
    """Every form of the URL's secrets libpq may echo: as written (percent-encoded or not) and
    decoded; the password of the userinfo as shown (up to the last ``@`` before the path) and
    as libpq reads it (up to the first), and each piece of it between raw ``@`` (libpq takes
    the rest for the host); ``password=`` and ``sslpassword=`` parameters. For a keyword/value
    string, the values of its secret keywords."""
    from urllib.parse import unquote

    found: set[str] = set()
    if "://" not in url:
        pairs = conninfo_pairs(url) or []
        return {v for k, v in pairs if k in SECRET_KEYS and v}
    rest = url.split("://", 1)[1]
    at = userinfo_end(rest)
    if at >= 0:
        userinfo = rest[:at]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            found.add(password)
            found.update(password.split("@"))
    if "?" in rest:
        for pair in rest.split("?", 1)[1].split("&"):
            key, _, value = pair.partition("=")
            if unquote(key).strip().lower() in SECRET_KEYS:
                found.add(value)
    found |= {unquote(v) for v in found}
    return {v for v in found if v}


def error_line(exc: BaseException, url: str) -> str:
    """The error's first line, without the URL's password even if the driver echoed it."""
    pg = driver()
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    secrets = _secrets(url)
    try:
        given = pg.conninfo.conninfo_to_dict(url)
    except pg.Error:
        # libpq could not read the URL, and its message quotes the URL or the piece it could
        # not read, which may hold (a piece of) a password it did not recognise as one: keep
        # only quotes from past the URL's last "@" (host, database, parameters), or from a
        # keyword/value string as shown without its secrets.
        tail = url.rpartition("@")[2] if "://" in url else redact(url)
        text = re.sub(r'"([^"]*)"', lambda m: m[0] if m[1] in tail else '"…"', text)
        given = {}
    secrets |= {v for k, v in given.items() if k in SECRET_KEYS and isinstance(v, str) and v}
    for value in sorted(secrets, key=len, reverse=True):
        # whole words only: a password "a" must not turn "failed" into "f***iled" (which
        # would give it away)
        text = re.sub(rf"(?<![\w]){re.escape(value)}(?![\w])", "***", text)
    return text


def read_only(target: PgTarget, *, check: bool = True) -> Any:
    """A read-only connection (autocommit: every query is its own snapshot). With ``check``
    (readers: search, sessions, show, optimize) a database without the team index's schema,
    or with a newer one than this jsonltape reads, is refused, as the SQLite index is;
    ``index status`` (``check=False``) reports the version instead."""
    from jsonltape_daemon.engines.postgres import schema as pg_schema

    pg = driver()
    try:
        con = pg.connect(target.url, autocommit=True, connect_timeout=10)
    except pg.Error as exc:
        raise IndexUnreachableError(f"{target}: {error_line(exc, target.url)}") from None
    try:
        con.execute("SET default_transaction_read_only = on")
        if not check:
            return con
        version = pg_schema.schema_version(con)
    except pg.Error as exc:
        con.close()
        raise failure(target, con, exc) from None
    if version == 0:
        con.close()
        raise IndexStateError(
            f"{target}: no team index here yet: `jsonltape sync ROOT --index URL` or "
            "`jsonltape index init`"
        )
    try:
        pg_schema.check_version(version)
    except IndexStateError as exc:
        con.close()
        raise IndexStateError(f"{target}: {exc}") from None
    return con


def failure(target: PgTarget, con: Any, exc: Exception) -> IndexStateError:
    """What a query that failed on ``con`` with the driver's ``exc`` is: the index out of
    reach when the connection broke or could not go on, else a state it refused; one line,
    without the URL's secrets."""
    import psycopg

    broken = isinstance(exc, psycopg.OperationalError) or con.broken
    cls = IndexUnreachableError if broken else IndexStateError
    return cls(f"{target}: {error_line(exc, target.url)}")
