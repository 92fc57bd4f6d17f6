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

__all__ = [
    "SECRET_KEYS",
    "PgTarget",
    "SqliteTarget",
    "Target",
    "default_target",
    "parse",
    "redact",
    "userinfo_end",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
PG_SCHEMES = ("postgresql", "postgres")
#: URL parameters libpq takes a secret from: the password, and the TLS client key's passphrase.
SECRET_KEYS = frozenset({"password", "sslpassword"})


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
        # libpq reads only a lower-case scheme (``POSTGRESQL://`` would be taken for a
        # key=value string): every connection is made from a parsed target
        return PgTarget(scheme + text[len(scheme) :])
    raise IndexTargetError(
        f"{redact(text)}: unsupported index URL scheme {scheme!r} "
        "(an index is a file path or a postgresql:// URL)",
        scheme=scheme,
    )


def default_target(data_dir: Path) -> Target:
    """``$JSONLTAPE_INDEX`` if set, else ``<data dir>/index.db``."""
    env = os.environ.get("JSONLTAPE_INDEX")
    return parse(env) if env else SqliteTarget(data_dir / "index.db")


def userinfo_end(rest: str) -> int:
    """Where the userinfo of a URL's text after ``scheme://`` ends (its ``@``), or -1: as
    shown, the last ``@`` before the first ``/`` (libpq stops at the first one: a raw ``@``,
    ``#`` or ``?`` in a password would show the rest of it as the host). With no ``@`` there,
    a ``:`` then an ``@`` later is a password with a raw ``/`` in it, unless the ``:`` is a
    port's (digits up to the ``/``) or an IPv6 host's (``[``): then a later ``@`` is in a
    parameter (``?user=admin@corp``)."""
    slash = rest.find("/")
    at = rest.rfind("@", 0, slash if slash >= 0 else len(rest))
    if at >= 0:
        return at
    last = rest.rfind("@")
    colon = rest.find(":")
    if last < 0 or colon < 0 or colon > last or rest.startswith("["):
        return -1
    port = rest[colon + 1 : slash if slash >= 0 else len(rest)]
    return -1 if port.isdigit() else last


def redact(url: str) -> str:
    """``url`` without its password (userinfo and ``password=`` parameter), for messages."""
    m = _SCHEME.match(url)
    if m is None:
        return url
    import urllib.parse  # only when a URL is shown: not on a query's start-up path

    rest = url[m.end() :]
    at = userinfo_end(rest)
    prefix = ""
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1 :]
        user = userinfo.split(":", 1)[0]
        if "/" in user or "?" in user:
            user = "…"
        prefix = f"{user}:***@" if ":" in userinfo else f"{user}@"
    base, sep, query = rest.partition("?")
    if sep:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{urllib.parse.quote(k)}=***"
            if k.lower() in SECRET_KEYS
            else f"{urllib.parse.quote(k)}={urllib.parse.quote(v, safe='/')}"
            for k, v in pairs
        )
    return f"{m.group(1)}://{prefix}{base}{sep}{query}"
