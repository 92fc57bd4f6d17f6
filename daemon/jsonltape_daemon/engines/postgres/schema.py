"""The PostgreSQL schema of the team index: numbered migrations, roles and row-level security.

Many machines push into one database; every row carries its ``origin`` (a stable id of the
machine and user that pushed it) in its key, so two machines never collide. The tables mirror
the SQLite index (``schema.py``, ``daemon/SCHEMA.md``) per origin:

* ``origins`` (one row per pushing machine: roots, time of the last push, for the lag) and
  ``origin_members`` (which login role may write which origin);
* ``files``: the sync registry, and the per-file watermark (``offset``, ``last_seq``,
  ``last_crc``: seq and crc of the last pushed line), written in the same transaction as the
  rows it covers, as in SQLite;
* ``sessions`` keyed by ``(origin, sid)``; ``events``, ``messages`` and ``tool_calls`` keyed
  by ``(origin, sid, seq)``, deleted with their session (``ON DELETE CASCADE``).

Unlike the local index, ``messages`` keeps the texts (other machines cannot read the files),
with three search columns:

* ``words``, a ``tsvector`` generated from the text: every run of characters other than letters
  and digits becomes a space (words are runs of letters and digits, as SQLite's ``unicode61``
  cuts them: ``foo.py`` is ``foo`` and ``py``, not one "file" token), then the ``words``
  text-search configuration: ``simple`` after ``unaccent`` (diacritics folded, lower case, no
  stemming: the query language means words). A query term goes through the same replacement.
* ``idents``, the code-like tokens of the text (computed by jsonltape), under a ``pg_trgm`` GIN
  index: substrings inside identifiers, ``idents LIKE '%NotFound%'``.
* ``cjk``, the distinct CJK characters and bigrams of the text (``cjk.grams``, split), under a
  GIN array index: ``cjk @> '{東京,京都}'`` gives the candidates of ``東京都``, ``cjk @>
  '{雨}'`` those of ``雨``, then checked on ``text``. An array, not a tsvector phrase: a
  tsvector's positions stop at 16383 and its parser drops CJK punctuation.

Bulk first pushes (schema 2): ``messages`` is partitioned by ``origin`` (LIST). Rows of an
origin without a partition of its own (every row of schema 1, kept in place) are in the
DEFAULT partition ``messages_shared``, whose word, substring and CJK GIN indexes are kept in
step by every insert. The first push of an origin (``PgStore.start_bulk``) calls
``start_bulk(origin)``, which creates ``messages_<md5 of origin>`` with the parent's keys and
b-trees but without the three GIN indexes (or, for an emptied partition, drops them), and
``index_origin(origin)`` builds them once the rows are in: bulk GIN builds are several times
faster than row-by-row maintenance, so the origin is searchable sooner. Meanwhile its committed
rows are found by a scan; ``origin_indexed(origin)`` says whether a build is due (an interrupted
first push leaves one for the next sync). Both functions run with the rights of the tables'
owner (``SECURITY DEFINER``, a fixed ``search_path``) and refuse a login role that neither
owns the tables nor is mapped to the origin (``check_pusher``). The GIN indexes are per
partition (not on the parent): the planner uses them through the parent, and a query of one
origin reads only its partition.

Only extensions shipped with PostgreSQL are used (``pg_trgm``, ``unaccent``; both trusted, so
a database owner may create them). Tested on PostgreSQL 15.18 (Debian 12).

What ``index status`` shows per origin (counts, last push, roots) is :func:`origin_status`:
any role may call it and sees what its policies let it see.

Schema versions are recorded in ``schema_migrations``; :func:`migrate` applies the missing
steps and refuses a database whose version is newer than :data:`SCHEMA_VERSION`.

Roles (:func:`init_sql`): ``<prefix>_owner`` owns the schema and bypasses row-level security
(no ``FORCE``: the owner administers every origin; machines never connect as it);
``<prefix>_writer`` members may read, insert, update and delete only the rows of the origins
``origin_members`` maps them to; ``<prefix>_reader`` members may read every row and write
none. The prefix (default ``jsonltape``) keeps two teams' databases on one cluster apart
(roles are cluster-wide). Passwords never appear in this SQL: the DBA sets them. A single
user syncing into a database of their own needs none of this: :func:`migrate` creates the
tables, owned by them (and so exempt from row-level security).

Pushing under row-level security: ``COPY FROM`` is refused on tables with row-level security,
so a writer copies into a temporary staging table and moves the rows with ``INSERT ... SELECT
... ON CONFLICT DO NOTHING`` (checked by the policies, idempotent). ``TRUNCATE``, which ignores
row-level security, is granted to nobody.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsonltape_daemon.engines.postgres.migrations import EXTENSIONS, MIGRATIONS, SEARCH_PATH
from jsonltape_daemon.errors import IndexStateError

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "MIGRATIONS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TABLES",
    "OriginStatus",
    "Roles",
    "check_version",
    "grant_reader_sql",
    "grant_writer_sql",
    "init",
    "init_sql",
    "migrate",
    "origin_status",
    "schema_version",
    "security_sql",
]

#: The schema (namespace) holding the tables; every statement names it explicitly.
SCHEMA = "jsonltape"
#: Tables whose rows belong to one origin (row-level security on ``origin``).
TABLES = (
    "files", "sessions", "events", "messages", "tool_calls",
    "usage", "usage_slots", "usage_sessions",  # token usage (engines/postgres/usage.py)
)  # fmt: skip
#: Serializes migrations of one database (two daemons starting at once).
_LOCK_KEY = 0x6A736F6E6C7470  # "jsonltp"


SCHEMA_VERSION = MIGRATIONS[-1][0]

_NAME_MAX = 63  # PostgreSQL truncates longer identifiers (NAMEDATALEN - 1 bytes)


def _ident(name: str, what: str = "name") -> str:
    if not name or "\x00" in name or len(name.encode()) > _NAME_MAX:
        raise ValueError(f"{what} {name!r}: must be 1-{_NAME_MAX} bytes without NUL")
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str, what: str = "value") -> str:
    # standard_conforming_strings is on (the default since PostgreSQL 9.1): only ' is special.
    if not value or "\x00" in value:
        raise ValueError(f"{what} {value!r}: must be non-empty without NUL")
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Roles:
    """The group roles of one team index: ``<prefix>_owner``, ``_writer``, ``_reader``."""

    prefix: str = "jsonltape"

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,50}", self.prefix):
            raise ValueError(
                f"role prefix {self.prefix!r}: use lower-case letters, digits and _ "
                "(at most 51, not starting with a digit)"
            )

    @property
    def owner(self) -> str:
        return f"{self.prefix}_owner"

    @property
    def writer(self) -> str:
        return f"{self.prefix}_writer"

    @property
    def reader(self) -> str:
        return f"{self.prefix}_reader"


def _steps(after: int, schema: str) -> str:
    s = _ident(schema, "schema")
    out: list[str] = []
    for number, name, sql in MIGRATIONS:
        if number > after:
            out.append(f"-- migration {number}: {name}")
            out.append(sql.format(s=s, n=_literal(schema)).strip())
            out.append(
                f"INSERT INTO {s}.schema_migrations (version, name) "
                f"VALUES ({number}, {_literal(name)});"
            )
    return "\n".join(out)


def _prelude(schema: str) -> str:
    s = _ident(schema, "schema")
    return "\n".join(
        [
            f"SELECT pg_advisory_xact_lock({_LOCK_KEY});",
            EXTENSIONS.format(s=s).strip(),
            SEARCH_PATH.format(sq=_literal(s)).strip(),
            f"CREATE TABLE IF NOT EXISTS {s}.schema_migrations (\n"
            "    version integer PRIMARY KEY,\n"
            "    name    text NOT NULL,\n"
            "    applied timestamptz NOT NULL DEFAULT now()\n"
            ");",
        ]
    )


def security_sql(roles: Roles = Roles(), schema: str = SCHEMA) -> str:
    """Grants, row-level security and policies for the current schema version (idempotent:
    policies are dropped and created again)."""
    s = _ident(schema, "schema")
    w, r = _ident(roles.writer), _ident(roles.reader)
    mine = f"origin IN (SELECT m.origin FROM {s}.origin_members m WHERE m.role = current_user)"
    out = [
        f"REVOKE ALL ON SCHEMA {s} FROM PUBLIC;",
        f"GRANT USAGE ON SCHEMA {s} TO {w}, {r};",
        # TRUNCATE is never granted: it ignores row-level security.
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON {', '.join(f'{s}.{t}' for t in TABLES)} TO {w};",
        f"GRANT SELECT, UPDATE (pushed, roots) ON {s}.origins TO {w};",
        f"GRANT SELECT ON {s}.origin_members, {s}.schema_migrations TO {w};",
        f"GRANT USAGE ON SEQUENCE {s}.sessions_sid_seq TO {w};",
        f"GRANT SELECT ON {s}.origins, {s}.schema_migrations, "
        f"{', '.join(f'{s}.{t}' for t in TABLES)} TO {r};",
    ]
    for table in (*TABLES, "origins", "origin_members"):
        t = f"{s}.{table}"
        out.append(f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;")
        for policy in ("own_rows", "read_all"):
            out.append(f"DROP POLICY IF EXISTS {policy} ON {t};")
        if table == "origin_members":
            out.append(
                f"CREATE POLICY own_rows ON {t} FOR SELECT TO {w} USING (role = current_user);"
            )
        elif table == "origins":
            out.append(f"CREATE POLICY own_rows ON {t} TO {w} USING ({mine}) WITH CHECK ({mine});")
            out.append(f"CREATE POLICY read_all ON {t} FOR SELECT TO {r} USING (true);")
        else:
            out.append(f"CREATE POLICY own_rows ON {t} TO {w} USING ({mine}) WITH CHECK ({mine});")
            out.append(f"CREATE POLICY read_all ON {t} FOR SELECT TO {r} USING (true);")
    return "\n".join(out)


def _create_role(name: str) -> str:
    return (
        "DO $$ BEGIN\n"
        f"    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {_literal(name)}) THEN\n"
        f"        CREATE ROLE {_ident(name)} NOLOGIN;\n"
        "    END IF;\n"
        "END $$;"
    )


def _take_over(schema: str, owner: str) -> str:
    # A schema first created by a database owner's own sync (`migrate`) belongs to that user:
    # the team's owner role takes it, its tables (their indexes and identity sequences follow)
    # and its text-search configuration, so that this script can change them.
    n, o = _literal(schema), _literal(owner)
    return f"""DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT format('SCHEMA %I', nspname) AS what FROM pg_namespace
        WHERE nspname = {n} AND nspowner::regrole::text <> quote_ident({o})
    UNION ALL SELECT format('TABLE %s', c.oid::regclass) FROM pg_class c
        JOIN pg_namespace ns ON ns.oid = c.relnamespace
        WHERE ns.nspname = {n} AND c.relkind IN ('r', 'p')
        AND c.relowner::regrole::text <> quote_ident({o})
    UNION ALL SELECT format('TEXT SEARCH CONFIGURATION %s', t.oid::regconfig) FROM pg_ts_config t
        JOIN pg_namespace ns ON ns.oid = t.cfgnamespace
        WHERE ns.nspname = {n} AND t.cfgowner::regrole::text <> quote_ident({o})
    UNION ALL SELECT format('FUNCTION %s', p.oid::regprocedure) FROM pg_proc p
        JOIN pg_namespace ns ON ns.oid = p.pronamespace
        WHERE ns.nspname = {n} AND p.proowner::regrole::text <> quote_ident({o})
        AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                        AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER %s OWNER TO %I', r.what, {o});
    END LOOP;
END $$;"""


def init_sql(roles: Roles = Roles(), schema: str = SCHEMA, *, after: int = 0) -> str:
    """The whole set-up, for a DBA to read or run in one transaction: the group roles, the
    schema owned by the owner role, the extensions, the migrations past ``after`` (0: a fresh
    database) run as the owner, then grants and policies. Needs a superuser, or a role with
    CREATEROLE and CREATE on the database. A schema a database owner created by syncing
    alone is handed to the owner role, rows kept."""
    s = _ident(schema, "schema")
    o = _ident(roles.owner)
    parts = [
        "-- jsonltape team index: roles, schema and row-level security",
        "BEGIN;",
        *(_create_role(name) for name in (roles.owner, roles.writer, roles.reader)),
        f"GRANT {o} TO CURRENT_USER;",
        f"CREATE SCHEMA IF NOT EXISTS {s} AUTHORIZATION {o};",
        _take_over(schema, roles.owner),
        EXTENSIONS.format(s=s).strip(),
        f"SET LOCAL ROLE {o};",
        _prelude(schema),
        _steps(after, schema),
        security_sql(roles, schema),
        "RESET ROLE;",
        "COMMIT;",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def grant_writer_sql(role: str, origin: str, roles: Roles = Roles(), schema: str = SCHEMA) -> str:
    """Let the login role ``role`` (created by the DBA, with its password) push ``origin``."""
    s = _ident(schema, "schema")
    o = _literal(origin, "origin")
    return "\n".join(
        [
            f"INSERT INTO {s}.origins (origin) VALUES ({o}) ON CONFLICT DO NOTHING;",
            f"INSERT INTO {s}.origin_members (role, origin) VALUES ({_literal(role, 'role')}, "
            f"{o}) ON CONFLICT DO NOTHING;",
            f"GRANT {_ident(roles.writer)} TO {_ident(role, 'role')};",
        ]
    )


def grant_reader_sql(role: str, roles: Roles = Roles()) -> str:
    """Let the login role ``role`` search every origin of the team."""
    return f"GRANT {_ident(roles.reader)} TO {_ident(role, 'role')};"


def schema_version(con: psycopg.Connection[Any], schema: str = SCHEMA) -> int:
    """The database's schema version; 0 when the schema has not been created."""
    row = con.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{_ident(schema, 'schema')}.schema_migrations",)
    ).fetchone()
    if not row or not row[0]:
        return 0
    found = con.execute(
        f"SELECT coalesce(max(version), 0) FROM {_ident(schema, 'schema')}.schema_migrations"
    ).fetchone()
    return int(found[0]) if found else 0


def check_version(version: int) -> None:
    """Refuse a schema newer than this jsonltape reads."""
    if version > SCHEMA_VERSION:
        raise IndexStateError(
            f"PostgreSQL index schema version {version} was written by a newer jsonltape (this "
            f"one reads up to {SCHEMA_VERSION}); upgrade jsonltape"
        )


def migrate(con: psycopg.Connection[Any], schema: str = SCHEMA) -> int:
    """Create the schema or apply its missing migrations, in one transaction; return the
    version. The connection's role must own the schema (or create it: a database owner's
    first sync). Tables are created without roles or policies; :func:`init` adds them."""
    s = _ident(schema, "schema")
    with con.transaction():
        con.execute(f"SELECT pg_advisory_xact_lock({_LOCK_KEY})")
        version = schema_version(con, schema)
        check_version(version)
        if version == SCHEMA_VERSION:
            return version
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        con.execute(_prelude(schema).encode())
        version = schema_version(con, schema)  # another process may have migrated meanwhile
        check_version(version)
        if version < SCHEMA_VERSION:
            con.execute(_steps(version, schema).encode())
    return SCHEMA_VERSION


@dataclass(frozen=True)
class OriginStatus:
    """What ``index status`` shows for one origin of a shared index."""

    origin: str
    sessions: int
    events: int
    messages: int
    files: int
    pushed: int | None  #: ms since the epoch of the last commit of a push, None if never
    roots: tuple[str, ...]

    def lag(self, now_ms: int | None = None) -> float | None:
        """Seconds since the last push (None if there was none)."""
        if self.pushed is None:
            return None
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return max(0.0, (now - self.pushed) / 1000)


def origin_status(
    con: psycopg.Connection[Any], schema: str = SCHEMA, origin: str | None = None
) -> list[OriginStatus]:
    """Counts, last push and roots of every origin the connection's role may see (or of
    ``origin`` only), for ``index status``."""
    s = _ident(schema, "schema")
    where, params = ("WHERE origin = %s", (origin,)) if origin is not None else ("", ())
    counts: dict[str, dict[str, int]] = {}
    for table in ("sessions", "events", "messages", "files"):
        for o, n in con.execute(
            f"SELECT origin, count(*) FROM {s}.{table} {where} GROUP BY origin", params
        ):
            counts.setdefault(o, {})[table] = int(n)
    out = []
    for o, pushed, roots in con.execute(
        f"SELECT origin, pushed, roots FROM {s}.origins {where} ORDER BY origin", params
    ):
        c = counts.get(o, {})
        out.append(
            OriginStatus(
                o,
                c.get("sessions", 0),
                c.get("events", 0),
                c.get("messages", 0),
                c.get("files", 0),
                None if pushed is None else int(pushed),
                tuple(roots),
            )
        )
    return out


def init(conninfo: str, roles: Roles = Roles(), schema: str = SCHEMA) -> None:
    """Run :func:`init_sql` on the database ``conninfo`` names (idempotent: a second run only
    refreshes grants and policies); refuse a newer schema."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as con:
        version = schema_version(con, schema)
        check_version(version)
        con.execute(init_sql(roles, schema, after=version).encode())
