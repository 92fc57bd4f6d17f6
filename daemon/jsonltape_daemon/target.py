"""Where an index lives: a SQLite file, or a PostgreSQL database named by a URL or a libpq
keyword/value string.

``--index`` and ``$JSONLTAPE_INDEX`` take any of them, read in this order:

1. a value with a ``scheme://`` prefix is never a path: ``postgresql://`` and ``postgres://``
   name the PostgreSQL engine, any other scheme is one clear error (before this rule,
   ``postgresql://user:pw@/db`` became a folder of that name, with the password in it, and a
   SQLite file inside);
2. a libpq keyword/value string (``host=db user=alice password=… dbname=team``, which libpq
   and psycopg take as they take a URL) names the PostgreSQL engine when every keyword is
   libpq's;
3. anything else is a SQLite file, except a value holding ``:`` or ``=`` that names no existing
   file: that is a connection string gone wrong (a URL without its ``//``,
   ``postgresql:user:pw@host/db``, or a keyword libpq does not have), refused with one error
   instead of becoming a file named after its password.

A connection string is shown only through :func:`redact`, which drops the password wherever
libpq accepts one (a URL's userinfo and ``password=`` parameter, a keyword/value string's
secret keywords, every value of a keyword it does not know: a misspelt ``pasword``);
credentials may also come from ``PGPASSFILE``/``~/.pgpass`` or ``PGPASSWORD``, which jsonltape
never reads itself: libpq does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from jsonltape_daemon.errors import IndexTargetError

__all__ = [
    "LIBPQ_KEYWORDS",
    "SECRET_KEYS",
    "PgTarget",
    "SqliteTarget",
    "Target",
    "conninfo_pairs",
    "default_target",
    "parse",
    "redact",
    "userinfo_end",
]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
PG_SCHEMES = ("postgresql", "postgres")
#: Parameters libpq takes a secret from: the password, the TLS client key's passphrase and
#: the OAuth client secret (a URL's query parameters and a keyword/value string's keywords).
SECRET_KEYS = frozenset({"password", "sslpassword", "oauth_client_secret"})
#: The keywords of libpq's connection strings (PostgreSQL 18's ``PQconndefaults``; a test
#: compares them with the libpq psycopg runs on): a keyword/value string made of these alone
#: names a PostgreSQL index.
LIBPQ_KEYWORDS = frozenset(
    """
    application_name channel_binding client_encoding connect_timeout dbname
    fallback_application_name gssdelegation gssencmode gsslib host hostaddr keepalives
    keepalives_count keepalives_idle keepalives_interval krbsrvname load_balance_hosts
    max_protocol_version min_protocol_version oauth_client_id oauth_client_secret oauth_issuer
    oauth_scope options passfile password port replication require_auth requirepeer
    scram_client_key scram_server_key service ssl_max_protocol_version ssl_min_protocol_version
    sslcert sslcertmode sslcompression sslcrl sslcrldir sslkey sslkeylogfile sslmode
    sslnegotiation sslpassword sslrootcert sslsni target_session_attrs tcp_user_timeout user
    """.split()  # noqa: SIM905 - a list of 51 words, one a line, would be 51 lines
)
#: What ``--index`` takes, for the errors of what it does not.
_KINDS = "an index is a file path, a postgresql:// URL or a libpq keyword/value string"
#: The white space of libpq's keyword/value strings (C's ``isspace``).
_SPACE = " \t\n\v\f\r"


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
        pairs = conninfo_pairs(text)
        if pairs and all(k in LIBPQ_KEYWORDS for k, _ in pairs):
            return PgTarget(text)
        path = Path(text).expanduser()
        if (":" in text or "=" in text) and not os.path.lexists(path):
            raise IndexTargetError(_refusal(text, pairs), scheme=None)
        return SqliteTarget(path.absolute())
    scheme = m.group(1).lower()
    if scheme in PG_SCHEMES:
        # libpq reads only a lower-case scheme (``POSTGRESQL://`` would be taken for a
        # key=value string): every connection is made from a parsed target
        return PgTarget(scheme + text[len(scheme) :])
    raise IndexTargetError(
        f"{redact(text)}: unsupported index URL scheme {scheme!r} ({_KINDS})",
        scheme=scheme,
    )


def _refusal(text: str, pairs: list[tuple[str, str]] | None) -> str:
    """Why ``text``, which holds ``:`` or ``=`` and names no file, is no index (masked)."""
    if pairs:
        unknown = sorted({k for k, _ in pairs if k not in LIBPQ_KEYWORDS})
        return (
            f"{redact(text)}: no such file, and not a connection string libpq reads: no "
            f"keyword {', '.join(map(repr, unknown))}; {_KINDS} (a new index file's name may "
            "not hold ':' or '=')"
        )
    return (
        f"{redact(text)}: no such file, and not a connection string: a URL needs "
        f"postgresql://, keywords need key=value; {_KINDS} (a new index file's name may not "
        "hold ':' or '=')"
    )


def conninfo_pairs(text: str) -> list[tuple[str, str]] | None:
    """The ``(keyword, value)`` pairs of a libpq keyword/value string as libpq reads them
    (``conninfo_parse``: ``key = value`` separated by white space, a value bare or in single
    quotes, a backslash taking the next character as it is, or dropped at the very end), or
    None if ``text`` is not one (a keyword without ``=``, an unterminated quote). The keywords
    are not checked."""
    pairs: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _SPACE:
            i += 1
        if i == n:
            return pairs
        j = i
        while j < n and text[j] != "=" and text[j] not in _SPACE:
            j += 1
        key = text[i:j]
        while j < n and text[j] in _SPACE:
            j += 1
        if j == n or text[j] != "=":
            return None
        j += 1
        while j < n and text[j] in _SPACE:
            j += 1
        quoted = j < n and text[j] == "'"
        j += quoted
        value: list[str] = []
        while True:
            if j == n:
                if quoted:
                    return None
                break
            c = text[j]
            if c == "'" if quoted else c in _SPACE:
                j += quoted
                break
            if c == "\\":  # the next character as it is; none at the end
                j += 1
                if j == n:
                    continue
                c = text[j]
            value.append(c)
            j += 1
        pairs.append((key, "".join(value)))
        i = j


def _kv_shown(pairs: list[tuple[str, str]]) -> str:
    """A keyword/value string without its secrets: the value of a secret keyword, or of one
    libpq does not have (a misspelt ``pasword``), is ``***``."""
    out = []
    for key, value in pairs:
        if key.lower() in SECRET_KEYS or key not in LIBPQ_KEYWORDS:
            shown = "***"
        elif value and not any(c in _SPACE or c in "'\\" for c in value):
            shown = value
        else:
            shown = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
        out.append(f"{key}={shown}")
    return " ".join(out)


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
    """``url`` without its password (userinfo and ``password=`` parameter; a keyword/value
    string's secret keywords), for messages. Any other text holding ``:`` or ``=`` is shown
    only up to the first of them: what follows may be a password."""
    m = _SCHEME.match(url)
    if m is None:
        pairs = conninfo_pairs(url)
        if pairs:
            return _kv_shown(pairs)
        cut = min((i for i in (url.find(":"), url.find("=")) if i >= 0), default=-1)
        return url if cut < 0 else url[: cut + 1] + "…"
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
