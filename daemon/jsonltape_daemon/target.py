"""Where an index lives: a SQLite file, or a PostgreSQL database named by a URL.

``--index`` and ``$JSONLTAPE_INDEX`` take either. A value with a ``scheme://`` prefix is never a
path: ``postgresql://`` and ``postgres://`` name the PostgreSQL engine, any other scheme is one
clear error (before this rule, ``postgresql://user:pw@/db`` became a folder of that name, with
the password in it, and a SQLite file inside). A URL is shown only through :func:`redact`,
which drops the password wherever libpq accepts one (the userinfo and a ``password=`` query
parameter); credentials may also come from ``PGPASSFILE``/``~/.pgpass`` or ``PGPASSWORD``,
which jsonltape never reads itself: libpq does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from jsonltape_daemon.errors import IndexTargetError

__all__ = ["PgTarget", "SqliteTarget", "Target", "default_target", "parse", "redact"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
PG_SCHEMES = ("postgresql", "postgres")


class SqliteTarget(NamedTuple):
    """A local SQLite index file."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)


class PgTarget(NamedTuple):
    """A PostgreSQL database; ``url`` is passed to libpq as it is and never printed."""

    url: str

    def __str__(self) -> str:
        return redact(self.url)


Target = SqliteTarget | PgTarget


def parse(value: str | os.PathLike[str]) -> Target:
    """The index that ``value`` names (a path is made absolute; ``~`` is expanded)."""
    text = os.fspath(value)
    m = _SCHEME.match(text)
    if m is None:
        return SqliteTarget(Path(text).expanduser().absolute())
    scheme = m.group(1).lower()
    if scheme in PG_SCHEMES:
        return PgTarget(text)
    raise IndexTargetError(
        f"{redact(text)}: unsupported index URL scheme {scheme!r} "
        "(an index is a file path or a postgresql:// URL)",
        scheme=scheme,
    )


def default_target(data_dir: Path) -> Target:
    """``$JSONLTAPE_INDEX`` if set, else ``<data dir>/index.db``."""
    env = os.environ.get("JSONLTAPE_INDEX")
    return parse(env) if env else SqliteTarget(data_dir / "index.db")


def redact(url: str) -> str:
    """``url`` without its password (userinfo and ``password=`` parameter), for messages."""
    m = _SCHEME.match(url)
    if m is None:
        return url
    import urllib.parse  # only when a URL is shown: not on a query's start-up path

    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return f"{m.group(1)}://…"  # unparsable: show only the scheme
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{hosts}" if ":" in userinfo else f"{user}@{hosts}"
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{urllib.parse.quote(k)}=***"
            if k.lower() == "password"
            else f"{urllib.parse.quote(k)}={urllib.parse.quote(v, safe='/')}"
            for k, v in pairs
        )
    # Not urlunsplit: it drops the empty authority of ``postgresql:///db``.
    tail = (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    return f"{parts.scheme}://{netloc}{parts.path}{tail}"
