"""The roles of the PostgreSQL team index on a real server, tried hostile: a reader denied a
write, a role that may not vacuum asking to optimize, a login role not granted the schema, and
a writer's own credentials used in raw SQL against another origin's rows, partitions, functions
and sequence, after the DBA ran the printed SQL (helpers in ``test_pg_hostile.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from jsonltape_daemon.engines.postgres import schema as pg_schema

from ._pg import PgServer, dbname_of
from .test_pg_hostile import SECRET, _cli, _one_clean_error, _psql, _tree


def _initialized_role(
    server: PgServer, pg_db: str, tag: str, password: str, *, reader: bool
) -> str:
    """``index init`` with a role prefix of its own, and a login role (a reader of the index
    if ``reader``, else granted nothing); the role's URL."""
    prefix = server.unique(f"{tag}p")
    assert _cli("index", "init", "--index", pg_db, "--prefix", prefix).returncode == 0
    role = server.unique(tag)
    server.create_role(role, password)
    if reader:
        g = _cli("index", "grant", "--index", pg_db, "--prefix", prefix, "--reader", role)
        assert g.returncode == 0, g.stderr
    return server.url(dbname_of(pg_db), role, password)


def test_a_reader_denied_a_write_sees_no_password(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    url = _initialized_role(pg_server, pg_db, "rd", SECRET, reader=True)
    root = tmp_path / "root"
    _tree(root)
    for args in (
        ["sync", str(root), "--origin", "o-r"],
        ["index", "rebuild", str(root), "--origin", "o-r"],
        ["index", "optimize"],
    ):
        _one_clean_error(_cli(*args, "--index", url), SECRET)


def test_optimize_by_a_role_that_may_not_vacuum_fails_instead_of_claiming_success(
    pg_server: PgServer, pg_db: str
) -> None:
    # VACUUM of another role's table only warns and succeeds.
    url = _initialized_role(pg_server, pg_db, "opr", "pw-r", reader=True)
    r = _cli("index", "optimize", "--index", url)
    assert "owns the index's tables" in _one_clean_error(r, "pw-r")
    assert "optimized" not in r.stdout
    done = _cli("index", "optimize", "--index", pg_db)  # the superuser may
    assert done.returncode == 0 and "optimized" in done.stdout, done.stderr


def _team(server: PgServer, url: str, root: Path) -> dict[str, str]:
    """The printed SQL run by psql as the superuser, two writers and a reader; each writer
    pushed its origin with its own credentials. Returns the roles' URLs."""
    db = dbname_of(url)
    prefix = server.unique("ht")
    printed = _cli("index", "init", "--print", "--prefix", prefix)
    assert printed.returncode == 0, printed.stderr
    _psql(server, url, printed.stdout)
    urls = {}
    for who in ("a", "b", "r"):
        role = server.unique(f"h{who}")
        server.create_role(role, f"pw-{who}")
        urls[who] = server.url(db, role, f"pw-{who}")
        grant = ["--reader", role] if who == "r" else ["--writer", role, "--origin", f"o-{who}"]
        g = _cli("index", "grant", "--print", "--prefix", prefix, *grant)
        assert g.returncode == 0, g.stderr
        _psql(server, url, g.stdout)
    for who in ("a", "b"):
        _tree(root / who, f"s-{who}", f"words-of-{who}")
        r = _cli("sync", str(root / who), "--index", urls[who], "--origin", f"o-{who}")
        assert r.returncode == 0, r.stderr
    return urls


def _refused(con: psycopg.Connection[Any], sql: str) -> None:
    with pytest.raises(psycopg.Error):
        con.execute(sql)


def test_a_writer_reaches_no_other_origin_through_partitions_functions_or_the_sequence(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    urls = _team(pg_server, pg_db, tmp_path)
    with psycopg.connect(pg_db, autocommit=True) as su:
        parts = [
            r[0]
            for r in su.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = 'jsonltape.messages'::regclass"
            )
        ]
        before = su.execute("SELECT origin, count(*) FROM jsonltape.messages GROUP BY 1").fetchall()
    assert len(parts) >= 3  # the default partition and one per pushed origin
    with psycopg.connect(urls["b"], autocommit=True) as b:
        for part in parts:  # row-level security is on the parent: a partition is not granted
            _refused(b, f'SELECT count(*) FROM jsonltape."{part}"')
        for fn in ("start_bulk('o-a')", "index_origin('o-a')", "check_pusher('o-a')"):
            _refused(b, f"SELECT jsonltape.{fn}")
        _refused(b, "SELECT setval('jsonltape.sessions_sid_seq', 1)")
        for table in (*pg_schema.TABLES, "origins"):
            _refused(b, f"TRUNCATE jsonltape.{table}")
        _refused(b, "INSERT INTO jsonltape.origin_members VALUES (current_user, 'o-a')")
        _refused(b, "INSERT INTO jsonltape.origins (origin) VALUES ('o-new')")
        _refused(b, "UPDATE jsonltape.origins SET origin = 'o-a' WHERE origin = 'o-b'")
        _refused(b, "INSERT INTO jsonltape.schema_migrations VALUES (99, 'x')")
        _refused(b, "UPDATE jsonltape.messages SET origin = 'o-a' WHERE origin = 'o-b'")
        b.execute("UPDATE jsonltape.origins SET pushed = 0, roots = '[]' WHERE origin = 'o-a'")
        b.execute("DELETE FROM jsonltape.sessions WHERE origin = 'o-a'")
        seen = b.execute("SELECT DISTINCT origin FROM jsonltape.messages").fetchall()
        assert seen == [("o-b",)]
    with psycopg.connect(urls["r"], autocommit=True) as r:
        for table in (*pg_schema.TABLES, "origins"):
            _refused(r, f"DELETE FROM jsonltape.{table}")
        _refused(r, "SELECT jsonltape.start_bulk('o-a')")
        assert r.execute("SELECT count(DISTINCT origin) FROM jsonltape.messages").fetchone() == (2,)
    with psycopg.connect(pg_db, autocommit=True) as su:
        after = su.execute("SELECT origin, count(*) FROM jsonltape.messages GROUP BY 1").fetchall()
        pushed = su.execute("SELECT pushed FROM jsonltape.origins WHERE origin = 'o-a'").fetchone()
    assert sorted(after) == sorted(before) and pushed is not None and pushed[0] != 0


def test_a_role_without_access_to_the_schema_gets_one_line_from_every_command(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    # A login role the DBA has not granted yet: `init` revoked the schema from PUBLIC.
    url = _initialized_role(pg_server, pg_db, "nobody", SECRET, reader=False)
    root = tmp_path / "root"
    _tree(root)
    for args in (
        ["index", "status"],
        ["index", "status", "--json"],
        ["search", "migration"],
        ["sessions"],
        ["index", "optimize"],
    ):
        assert "permission denied" in _one_clean_error(_cli(*args, "--index", url), SECRET)
    for args in (["sync", str(root)], ["index", "rebuild", str(root)]):
        line = _one_clean_error(_cli(*args, "--index", url, "--origin", "o-x"), SECRET)
        assert "schema is missing" not in line and "index grant" in line, line
