"""The PostgreSQL team index schema (jsonltape_daemon/engines/postgres/schema.py) on a real
server: migrations, the search columns, and roles whose limits row-level security enforces."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.text import cjk
from psycopg import errors

from tests._pg import PgServer

S = pg_schema.SCHEMA


def _dbname(url: str) -> str:
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    assert isinstance(name, str)
    return name


def _tables(con: psycopg.Connection[Any]) -> set[str]:
    rows = con.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (S,)).fetchall()
    return {r[0] for r in rows}


def _session(con: psycopg.Connection[Any], origin: str, path: str) -> int:
    row = con.execute(
        f"INSERT INTO {S}.sessions (origin, id, path, header_crc, created, updated, events, "
        "messages, state, closed) VALUES (%s, 'sess', %s, 'c0', 0, 0, 1, 1, 'clean', false) "
        "RETURNING sid",
        (origin, path),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _message(con: psycopg.Connection[Any], origin: str, sid: int, seq: int, text: str) -> None:
    # What the pusher stores (cjk.grams): the distinct CJK characters and adjacent pairs.
    runs = re.findall(f"[{cjk.CJK_CHARS}]+", text)
    grams = list(
        dict.fromkeys([*"".join(runs), *(r[i : i + 2] for r in runs for i in range(len(r) - 1))])
    )
    idents = " ".join(w for w in text.split() if any(c.isupper() for c in w[1:])) or None
    con.execute(
        f"INSERT INTO {S}.messages (origin, sid, seq, type, role, time, status, text, "
        "truncated, idents, cjk) "
        "VALUES (%s, %s, %s, 'user/message', 'user', %s, 'current', %s, false, %s, %s)",
        (origin, sid, seq, seq * 1000, text, idents, grams or None),
    )


def _fill(con: psycopg.Connection[Any], origin: str, path: str = "/s.jsonl") -> int:
    """One session of ``origin`` with a row in every table."""
    sid = _session(con, origin, path)
    con.execute(
        f'INSERT INTO {S}.events (origin, sid, seq, type, time, "offset", size, crc) '
        "VALUES (%s, %s, 0, 'user/message', 0, 0, 10, 'c1')",
        (origin, sid),
    )
    _message(con, origin, sid, 0, f"hello from {origin}")
    con.execute(
        f"INSERT INTO {S}.tool_calls (origin, sid, call_id, seq) VALUES (%s, %s, 'k1', 0)",
        (origin, sid),
    )
    con.execute(
        f'INSERT INTO {S}.files (origin, path, sid, status, "offset", last_seq, last_crc) '
        "VALUES (%s, %s, %s, 'indexed', 10, 0, 'c1')",
        (origin, path, sid),
    )
    if con.execute(f"SELECT to_regclass('{S}.usage')").fetchone() == (None,):
        return sid  # a schema before token usage (4)
    tokens = "input, output, cache_5m, cache_1h, cache_read, reasoning"
    con.execute(
        f"INSERT INTO {S}.usage (origin, sid, seq, rkey, time, model, {tokens}, tier, fast, "
        "counted) VALUES (%s, %s, 0, 'k', 0, 'm', 1, 2, 0, 0, 0, 0, 0, false, true)",
        (origin, sid),
    )
    con.execute(
        f"INSERT INTO {S}.usage_slots (origin, sid, slot, model, tier, fast, responses, "
        f"{tokens}) VALUES (%s, %s, 0, 'm', 0, false, 1, 1, 2, 0, 0, 0, 0)",
        (origin, sid),
    )
    con.execute(
        f"INSERT INTO {S}.usage_sessions (origin, sid, name) VALUES (%s, %s, 'id:s')",
        (origin, sid),
    )
    return sid


# -- migrations ------------------------------------------------------------------------------


def test_migrations_apply_on_a_fresh_database_and_again_as_a_no_op(pg_db: str) -> None:
    with psycopg.connect(pg_db) as con:
        assert pg_schema.schema_version(con) == 0
        assert pg_schema.migrate(con) == pg_schema.SCHEMA_VERSION
        assert {*pg_schema.TABLES, "origins", "origin_members", "schema_migrations"} <= _tables(con)
        con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('m1')")
        _fill(con, "m1")
        con.commit()
        assert pg_schema.migrate(con) == pg_schema.SCHEMA_VERSION
        versions = con.execute(f"SELECT version, name FROM {S}.schema_migrations").fetchall()
        assert versions == [(n, name) for n, name, _ in pg_schema.MIGRATIONS]
        assert con.execute(f"SELECT count(*) FROM {S}.messages").fetchone() == (1,)


def test_a_database_owner_creates_the_schema_on_first_use(pg_server: PgServer) -> None:
    owner = pg_server.unique("solo")
    pg_server.create_role(owner, "solo-pw")
    name = pg_server.unique("solo_db")
    pg_server.create_database(name, owner=owner)
    try:
        with psycopg.connect(pg_server.url(name, owner, "solo-pw")) as con:
            assert pg_schema.migrate(con) == pg_schema.SCHEMA_VERSION
            con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('laptop')")
            _fill(con, "laptop")
    finally:
        pg_server.drop_database(name)


def test_init_hands_a_single_users_schema_to_the_team(pg_server: PgServer) -> None:
    solo = pg_server.unique("solo")
    pg_server.create_role(solo, "solo-pw")
    name = pg_server.unique("solo_db")
    pg_server.create_database(name, owner=solo)
    writer = pg_server.unique("w_laptop")
    pg_server.create_role(writer, "w-pw")
    try:
        with psycopg.connect(pg_server.url(name, solo, "solo-pw")) as con:
            pg_schema.migrate(con)
            con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('laptop')")
            _fill(con, "laptop")
        pg_schema.init(pg_server.url(name))
        with psycopg.connect(pg_server.url(name), autocommit=True) as con:
            con.execute(pg_schema.grant_writer_sql(writer, "laptop").encode())
            owners = con.execute(
                "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = %s", (S,)
            ).fetchall()
            assert owners == [("jsonltape_owner",)]
            functions = con.execute(
                "SELECT DISTINCT proowner::regrole::text FROM pg_proc p JOIN pg_namespace n "
                "ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname = 'start_bulk'",
                (S,),
            ).fetchall()
            assert functions == [("jsonltape_owner",)]  # its definer rights went along
        with psycopg.connect(pg_server.url(name, writer, "w-pw")) as con:
            assert con.execute(f"SELECT count(*) FROM {S}.messages").fetchone() == (1,)
            _fill(con, "laptop", "/second.jsonl")
            # rows pushed before the origin had a partition stay in the shared one
            assert con.execute(f"SELECT {S}.start_bulk('laptop')").fetchone() == (False,)
    finally:
        pg_server.drop_database(name)


@pytest.mark.parametrize("how", ["init", "migrate"])
def test_schema_1_is_upgraded_in_place_rows_indexes_and_policies_kept(
    pg_server: PgServer, pg_db: str, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    with monkeypatch.context() as m:  # a team index as schema 1 created it
        m.setattr(pg_schema, "MIGRATIONS", pg_schema.MIGRATIONS[:1])
        m.setattr(pg_schema, "TABLES", pg_schema.TABLES[:5])  # its tables (no usage yet)
        pg_schema.init(pg_db)
    writer = pg_server.unique("w_m1")
    pg_server.create_role(writer, "w-pw")
    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute(pg_schema.grant_writer_sql(writer, "m1").encode())
        con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('m2')")
        _fill(con, "m2")
        words = con.execute(f"SELECT to_regclass('{S}.messages_words')::oid").fetchone()
    with psycopg.connect(pg_server.url(_dbname(pg_db), writer, "w-pw")) as con:
        _fill(con, "m1")
    if how == "init":
        pg_schema.init(pg_db)
    else:  # the owner's own sync migrates; roles, policies and grants must carry over
        with psycopg.connect(pg_db) as con:
            pg_schema.migrate(con)
    with psycopg.connect(pg_db) as con:
        assert pg_schema.schema_version(con) == pg_schema.SCHEMA_VERSION
        parts = con.execute(
            f"SELECT relid::regclass::text, isleaf FROM pg_partition_tree('{S}.messages')"
        ).fetchall()
        assert parts == [(f"{S}.messages", False), (f"{S}.messages_shared", True)]
        assert con.execute(f"SELECT count(*) FROM {S}.messages_shared").fetchone() == (2,)
        # the GIN index of schema 1 is kept as it was, not built again
        assert con.execute(f"SELECT to_regclass('{S}.messages_words')::oid").fetchone() == words
    with psycopg.connect(pg_server.url(_dbname(pg_db), writer, "w-pw")) as con:
        assert con.execute(f"SELECT origin FROM {S}.messages").fetchall() == [("m1",)]
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            con.execute(
                f"INSERT INTO {S}.messages SELECT 'm2', sid, seq + 1, type, role, time, status, "
                f"anchor, call_id, calls, text, truncated FROM {S}.messages"
            )


def test_a_newer_schema_version_is_refused(pg_db: str) -> None:
    with psycopg.connect(pg_db) as con:
        pg_schema.migrate(con)
        con.execute(f"INSERT INTO {S}.schema_migrations (version, name) VALUES (99, 'future')")
        con.commit()
        with pytest.raises(IndexStateError, match="version 99 was written by a newer"):
            pg_schema.migrate(con)
    with pytest.raises(IndexStateError, match="version 99"):
        pg_schema.init(pg_db)


def test_init_twice_is_a_no_op_and_keeps_rows(pg_db: str) -> None:
    pg_schema.init(pg_db)
    with psycopg.connect(pg_db) as con:
        con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('m1')")
        _fill(con, "m1")
    pg_schema.init(pg_db)
    with psycopg.connect(pg_db) as con:
        assert con.execute(f"SELECT count(*) FROM {S}.schema_migrations").fetchone() == (
            len(pg_schema.MIGRATIONS),
        )
        assert con.execute(f"SELECT count(*) FROM {S}.messages").fetchone() == (1,)
        owner = con.execute(
            "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s", (S,)
        ).fetchone()
        assert owner == ("jsonltape_owner",)


def test_the_printed_sql_runs_in_psql(pg_server: PgServer, pg_db: str) -> None:
    sql = pg_schema.init_sql(pg_schema.Roles("printed"))
    r = subprocess.run(
        [str(pg_server.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg_db],
        input=sql,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    with psycopg.connect(pg_db) as con:
        assert pg_schema.schema_version(con) == pg_schema.SCHEMA_VERSION
        policies = con.execute(
            "SELECT count(*) FROM pg_policies WHERE schemaname = %s AND %s = ANY (roles)",
            (S, "printed_writer"),
        ).fetchone()
        assert policies == (len(pg_schema.TABLES) + 2,)


# -- search columns --------------------------------------------------------------------------


def test_search_columns_fold_diacritics_find_identifier_substrings_and_cjk(pg_db: str) -> None:
    with psycopg.connect(pg_db) as con:
        pg_schema.migrate(con)
        con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('m1')")
        sid = _session(con, "m1", "/a.jsonl")
        _message(con, "m1", sid, 0, "Crème brûlée migrations raised FileNotFoundError")
        _message(con, "m1", sid, 1, "我们讨论了数据库迁移")
        _message(con, "m1", sid, 2, "nothing here")
        _message(con, "m1", sid, 3, "see src/foo.py, snake_case and e-mail: ÆON")

        def seqs(where: str, *args: object) -> list[int]:
            rows = con.execute(
                f"SELECT seq FROM {S}.messages WHERE {where} ORDER BY seq", args
            ).fetchall()
            return [r[0] for r in rows]

        words = f"words @@ to_tsquery('{S}.words', %s)"
        assert seqs(words, "creme & brulee") == [0]
        assert seqs(words, "CRÈME") == [0]
        assert seqs(words, "migration") == []  # words, not English stems
        assert seqs(words, "migr:*") == [0]
        # Words are runs of letters and digits, as in the SQLite index (not file/host tokens).
        for term in ("foo", "py", "src", "snake", "case", "mail", "aeon"):
            assert seqs(words, term) == [3], term
        assert seqs("idents ILIKE %s", "%notfound%") == [0]
        assert seqs("cjk @> %s AND text LIKE %s", ["数据", "据库"], "%数据库%") == [1]
        assert seqs("cjk @> %s", ["迁"]) == [1]
        assert seqs("cjk @> %s", ["库数"]) == []
        # The planner can serve substrings from the trigram index (not only by a scan).
        con.execute("SET enable_seqscan = off")
        plan = con.execute(
            f"EXPLAIN SELECT seq FROM {S}.messages WHERE idents LIKE '%NotFound%'"
        ).fetchall()
        assert "messages_idents" in " ".join(r[0] for r in plan)


# -- roles and row-level security ------------------------------------------------------------


@dataclass
class Team:
    server: PgServer
    dbname: str
    admin: str
    writer: str  # may push origin "m1"
    other: str  # may push origin "m2"
    reader: str
    password: str = "s3cret pw"

    def url(self, role: str) -> str:
        return self.server.url(self.dbname, role, self.password)


@pytest.fixture
def team(pg_server: PgServer, pg_db: str) -> Iterator[Team]:
    pg_schema.init(pg_db)
    t = Team(
        pg_server,
        _dbname(pg_db),
        pg_db,
        pg_server.unique("w_m1"),
        pg_server.unique("w_m2"),
        pg_server.unique("reader"),
    )
    for role in (t.writer, t.other, t.reader):
        pg_server.create_role(role, t.password)
    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute(pg_schema.grant_writer_sql(t.writer, "m1").encode())
        con.execute(pg_schema.grant_writer_sql(t.other, "m2").encode())
        con.execute(pg_schema.grant_reader_sql(t.reader).encode())
    with psycopg.connect(t.url(t.other)) as con:
        _fill(con, "m2")
    yield t


def test_a_writer_pushes_updates_and_deletes_rows_of_its_own_origin(team: Team) -> None:
    with psycopg.connect(team.url(team.writer)) as con:
        sid = _fill(con, "m1")
        assert con.execute(f"SELECT count(*) FROM {S}.messages").fetchone() == (1,)
        con.execute(f"UPDATE {S}.sessions SET title = 'renamed' WHERE sid = %s", (sid,))
        con.execute(f"UPDATE {S}.files SET last_seq = 1, last_crc = 'c2'")
        con.execute(f"UPDATE {S}.origins SET pushed = 1, roots = '[\"/r\"]'")
        con.execute(
            f"INSERT INTO {S}.messages SELECT origin, sid, 1, type, role, time, status, anchor, "
            f"call_id, calls, text, truncated FROM {S}.messages WHERE sid = %s "
            "ON CONFLICT DO NOTHING",
            (sid,),
        )
        con.execute(f"DELETE FROM {S}.sessions WHERE sid = %s", (sid,))
        assert con.execute(f"SELECT count(*) FROM {S}.events").fetchone() == (0,)
    with psycopg.connect(team.admin) as con:
        assert con.execute(f"SELECT pushed FROM {S}.origins WHERE origin = 'm1'").fetchone() == (1,)
        assert con.execute(f"SELECT count(*) FROM {S}.messages").fetchone() == (1,)  # m2's


@pytest.mark.parametrize("table", pg_schema.TABLES)
def test_a_writer_cannot_insert_rows_of_another_origin(team: Team, table: str) -> None:
    with psycopg.connect(team.url(team.writer)) as con:
        sid = _fill(con, "m1")
        con.commit()
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            if table == "sessions":
                _session(con, "m2", "/other.jsonl")
            else:
                # Copy an own row under the other origin (its session exists: m2's sid).
                cols = {
                    "files": "'/x.jsonl', sid, status",
                    "events": 'sid, seq + 7, type, time, "offset", size, crc',
                    "messages": "sid, seq + 7, type, role, time, status, anchor, call_id, calls, "
                    "text, truncated",
                    "tool_calls": "sid, 'k9', seq",
                    "usage": "sid, seq + 7, rkey, time, model, input, output, cache_5m, "
                    "cache_1h, cache_read, reasoning, tier, fast, counted",
                    "usage_slots": "sid, slot + 1, model, tier, fast, responses, input, output, "
                    "cache_5m, cache_1h, cache_read, reasoning",
                    "usage_sessions": "sid, name, alias, up",
                }[table]
                other_sid = _other_sid(team)
                con.execute(
                    f"INSERT INTO {S}.{table} SELECT 'm2', {cols.replace('sid,', '%s,', 1)} "
                    f"FROM {S}.{table} WHERE sid = %s LIMIT 1",
                    (other_sid, sid),
                )


def _other_sid(team: Team) -> int:
    with psycopg.connect(team.admin) as con:
        row = con.execute(f"SELECT sid FROM {S}.sessions WHERE origin = 'm2'").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("table", [*pg_schema.TABLES, "origins", "origin_members"])
def test_a_writer_neither_sees_nor_changes_another_origins_rows(team: Team, table: str) -> None:
    with psycopg.connect(team.admin) as con:
        before = con.execute(f"SELECT count(*) FROM {S}.{table} WHERE origin = 'm2'").fetchone()
    assert before is not None and before[0] >= 1
    with psycopg.connect(team.url(team.writer), autocommit=True) as con:
        seen = con.execute(f"SELECT count(*) FROM {S}.{table} WHERE origin = 'm2'").fetchone()
        assert seen == (0,)
        if table in pg_schema.TABLES:
            assert con.execute(f"DELETE FROM {S}.{table} WHERE origin = 'm2'").rowcount == 0
            assert (
                con.execute(f"UPDATE {S}.{table} SET origin = 'm1' WHERE origin = 'm2'").rowcount
                == 0
            )
        elif table == "origins":
            assert (
                con.execute(f"UPDATE {S}.origins SET pushed = 5 WHERE origin = 'm2'").rowcount == 0
            )
        with pytest.raises(errors.InsufficientPrivilege):
            con.execute(f"TRUNCATE {S}.{table} CASCADE")
    with psycopg.connect(team.admin) as con:
        after = con.execute(f"SELECT count(*) FROM {S}.{table} WHERE origin = 'm2'").fetchone()
        assert after == before
        if table == "origins":
            assert con.execute(
                f"SELECT pushed FROM {S}.origins WHERE origin = 'm2'"
            ).fetchone() == (None,)


def test_a_writer_cannot_move_its_rows_to_another_origin_or_grant_itself_one(team: Team) -> None:
    with psycopg.connect(team.url(team.writer), autocommit=True) as con:
        _fill(con, "m1")
        with pytest.raises(errors.InsufficientPrivilege, match="row-level security"):
            con.execute(f"UPDATE {S}.files SET origin = 'm2'")
        with pytest.raises(errors.InsufficientPrivilege):
            con.execute(
                f"INSERT INTO {S}.origin_members (role, origin) VALUES (current_user, 'm2')"
            )
        with pytest.raises(errors.InsufficientPrivilege):
            con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('m3')")
        with pytest.raises(errors.InsufficientPrivilege):
            con.execute(f"ALTER TABLE {S}.messages DISABLE ROW LEVEL SECURITY")
        with pytest.raises(errors.InsufficientPrivilege):
            con.execute(f"SET ROLE {team.other}")


def test_a_reader_sees_every_origin_and_writes_nothing(team: Team) -> None:
    with psycopg.connect(team.url(team.writer)) as con:
        _fill(con, "m1")
    with psycopg.connect(team.url(team.reader), autocommit=True) as con:
        origins = con.execute(f"SELECT DISTINCT origin FROM {S}.messages ORDER BY 1").fetchall()
        assert origins == [("m1",), ("m2",)]
        assert con.execute(f"SELECT count(*) FROM {S}.origins").fetchone() == (2,)
        assert pg_schema.schema_version(con) == pg_schema.SCHEMA_VERSION
        for statement in (
            f"INSERT INTO {S}.origins (origin) VALUES ('m9')",
            f"UPDATE {S}.messages SET text = 'x'",
            f"DELETE FROM {S}.sessions",
            f"TRUNCATE {S}.events",
            f"SELECT * FROM {S}.origin_members",
            f"CREATE TABLE {S}.mine (x int)",
        ):
            with pytest.raises(errors.InsufficientPrivilege):
                con.execute(statement)


def test_sql_looking_role_and_origin_names_are_data(pg_server: PgServer, team: Team) -> None:
    role = pg_server.unique('w"; DROP TABLE x; --')
    origin = "o'); DELETE FROM jsonltape.sessions; --"
    pg_server.create_role(role, team.password)
    with psycopg.connect(team.admin, autocommit=True) as con:
        con.execute(pg_schema.grant_writer_sql(role, origin).encode())
    with psycopg.connect(team.url(role)) as con:
        _fill(con, origin)
        assert con.execute(f"SELECT origin FROM {S}.sessions").fetchall() == [(origin,)]
    with psycopg.connect(team.admin) as con:
        assert con.execute(f"SELECT count(*) FROM {S}.sessions").fetchone() == (2,)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", "m1"), "role"),
        (("r", ""), "origin"),
        (("r", "a\x00b"), "NUL"),
        (("r" * 64, "m"), "1-63"),
    ],
)
def test_grant_writer_sql_refuses_unusable_names(args: tuple[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pg_schema.grant_writer_sql(*args)


def test_role_prefixes_must_be_plain_identifiers() -> None:
    with pytest.raises(ValueError, match="role prefix"):
        pg_schema.Roles('x"; DROP ROLE postgres; --')
    sql = pg_schema.init_sql(pg_schema.Roles("team_a"))
    assert "team_a_writer" in sql and "PASSWORD" not in sql.upper()
