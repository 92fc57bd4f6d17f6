"""``index init`` and ``index grant``: set up a team index on PostgreSQL (roles, schema, row-level
security), or print the SQL for a DBA to run. psycopg is imported only when SQL is run."""

from __future__ import annotations

from typing import NoReturn

import click
from jsonltape_daemon import target

from ._base import CliError, say
from ._daemon_cmds import index_option, target_of

__all__ = ["index_grant", "index_init"]

_prefix_option = click.option(
    "--prefix",
    default="jsonltape",
    show_default=True,
    help="Prefix of the group roles (<prefix>_owner, _writer, _reader): one per team index.",
)


def _pg(index_path: str | None, *, required: bool) -> target.PgTarget | None:
    t = target_of(index_path)
    if isinstance(t, target.PgTarget):
        return t
    if required:
        raise CliError(
            f"{t}: needs a PostgreSQL index, a postgresql:// URL or a key=value string (--index "
            "or $JSONLTAPE_INDEX)",
            2,
        )
    return None


def _run(t: target.PgTarget, sql: str) -> None:
    from jsonltape_daemon.engines.postgres.conn import driver

    pg = driver()
    try:
        with pg.connect(t.url, autocommit=True) as con:
            con.execute(sql.encode())
    except pg.Error as exc:
        _fail(t, exc)


def _fail(t: target.PgTarget, exc: Exception) -> NoReturn:
    from jsonltape_daemon.engines.postgres.conn import error_line

    raise CliError(f"{t}: {error_line(exc, t.url)}", 2) from None


def _roles(prefix: str) -> object:
    from jsonltape_daemon.engines.postgres.schema import Roles

    try:
        return Roles(prefix)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None


@click.command("init")
@index_option
@_prefix_option
@click.option("--print", "print_only", is_flag=True, help="Print the SQL instead of running it.")
def index_init(index_path: str | None, prefix: str, print_only: bool) -> None:
    """Create a team index on PostgreSQL: group roles, the schema and row-level security.

    Run it once as a superuser, or as a role with CREATEROLE and CREATE on the database; run
    again after an upgrade (it only refreshes grants and policies, and applies new migrations).
    With --print, only print the SQL, for a DBA to read and run (psql -f). Then give each
    machine a login role and `jsonltape index grant --writer ROLE --origin ORIGIN`, and each
    reader `--reader ROLE`. A single user syncing into a database they own needs none of this:
    the schema is created on first use.
    """
    from jsonltape_daemon.engines.postgres import schema as pg_schema

    roles = _roles(prefix)
    assert isinstance(roles, pg_schema.Roles)
    t = _pg(index_path, required=not print_only)
    if print_only:
        click.echo(pg_schema.init_sql(roles), nl=False)
        return
    assert t is not None
    from jsonltape_daemon.engines.postgres.conn import driver

    pg = driver()
    try:
        pg_schema.init(t.url, roles)
    except pg.Error as exc:
        _fail(t, exc)
    say(f"{t}: team index ready (roles {roles.owner}, {roles.writer}, {roles.reader})")


@click.command("grant")
@index_option
@_prefix_option
@click.option("--writer", "writer", metavar="ROLE", help="Let login ROLE push --origin.")
@click.option("--origin", "origin", help="The origin a --writer may push (its machine's).")
@click.option("--reader", "reader", metavar="ROLE", help="Let login ROLE search every origin.")
@click.option("--print", "print_only", is_flag=True, help="Print the SQL instead of running it.")
def index_grant(
    index_path: str | None,
    prefix: str,
    writer: str | None,
    origin: str | None,
    reader: str | None,
    print_only: bool,
) -> None:
    """Grant a login role (created by the DBA, with its password) write access to one origin's
    rows (--writer ROLE --origin ORIGIN), or read access to the team's (--reader ROLE).

    Row-level security enforces it: a writer reads and changes only its origins' rows.
    """
    from jsonltape_daemon import origin as origins
    from jsonltape_daemon.engines.postgres import schema as pg_schema

    roles = _roles(prefix)
    assert isinstance(roles, pg_schema.Roles)
    if (writer is None) == (reader is None):
        raise CliError("give exactly one of --writer ROLE (with --origin) or --reader ROLE", 2)
    if writer is not None and origin is None:
        raise CliError("--writer needs --origin ORIGIN (the origin that machine pushes)", 2)
    try:
        if writer is not None:
            assert origin is not None
            sql = pg_schema.grant_writer_sql(writer, origins.validate(origin), roles)
        else:
            assert reader is not None
            sql = pg_schema.grant_reader_sql(reader, roles)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    t = _pg(index_path, required=not print_only)
    if print_only:  # SQL for psql -f, as it is: built here from validated names
        click.echo(sql)
        return
    assert t is not None
    _run(t, sql)
    say(f"{t}: granted" + (f" {writer} origin {origin}" if writer else f" {reader} read"))
