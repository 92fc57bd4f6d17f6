"""A hostile pass over the PostgreSQL team index on a real server: URLs libpq cannot read (and
whose password it echoes), every error path of a URL with a password, service files and
passfiles, a schema that is missing or newer, ``GLOB`` filters that PostgreSQL would refuse as
regular expressions, LIKE wildcards, bytes that are not UTF-8, and queries of thousands of
terms. The roles are tried in ``test_pg_hostile_roles.py``."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
from jsonltape_daemon.engines.postgres.conn import error_line
from jsonltape_daemon.engines.postgres.query import glob_regex

import jsonltape

from ._pg import PgServer, dbname_of
from .test_pg_cli import _cli, _tree

SECRET = "Sekr1t-Hostile-42"


def _one_clean_error(r: subprocess.CompletedProcess[str], *secrets: str) -> str:
    """The single stderr line of a refused command, checked for tracebacks and secrets."""
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "Traceback" not in out, out
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for secret in secrets:
        assert secret not in out, out
    return r.stderr.strip()


def _psql(server: PgServer, url: str, sql: str) -> None:
    run = subprocess.run(
        [str(server.bindir / "psql"), "-v", "ON_ERROR_STOP=1", "-q", "-d", url, "-f", "-"],
        input=sql,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr


# -- passwords ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://me:{SECRET}@[::1/db",  # libpq quotes the whole URI
        f"postgresql://me:{SECRET}%zz@/db",  # libpq quotes the percent-encoded token
        f"postgresql://me@/db?password={SECRET}%zz",
        f"postgresql://me:{SECRET}%00@/db",
        f"POSTGRESQL://me:{SECRET}@/db?host=/nowhere&x",  # read as key=value by libpq
    ],
)
def test_a_url_libpq_cannot_read_never_shows_its_password(url: str) -> None:
    r = _cli("search", "migration", "--index", url)
    _one_clean_error(r, SECRET)
    if url.startswith("postgresql://"):
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as exc:
            assert SECRET in str(exc)  # libpq does echo it
            line = error_line(exc, url)
            assert SECRET not in line and "%zz" not in line, line
        else:
            raise AssertionError(f"{url}: libpq read it")


def test_a_url_error_keeps_the_parameter_name_libpq_complains_of() -> None:
    url = f"postgresql://me:{SECRET}@/db?host=/nowhere&bogus_option=1"
    r = _cli("search", "migration", "--index", url)
    assert "bogus_option" in _one_clean_error(r, SECRET)


def test_every_error_path_of_a_url_with_a_password_hides_it(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    db = dbname_of(pg_db)
    role = pg_server.unique("pwd")
    pg_server.create_role(role, SECRET, create_on=db)
    good = pg_server.url(db, role, SECRET)
    root = tmp_path / "root"
    _tree(root)
    r = _cli("sync", str(root), "--index", good, "--origin", "o-pw")
    assert r.returncode == 0 and SECRET not in r.stdout + r.stderr, r.stdout + r.stderr
    status = _cli("index", "status", "--index", good, "--json")
    assert status.returncode == 0 and SECRET not in status.stdout + status.stderr

    refused = f"postgresql://{role}:{SECRET}@/{db}?host=/nonexistent-socket-dir"
    wrong = pg_server.url(db, role, SECRET + "-wrong")
    missing = pg_server.url(pg_server.unique("nodb"), role, SECRET)
    for url in (refused, wrong, missing):
        for args in (
            ["search", "migration"],
            ["sessions"],
            ["index", "status"],
            ["index", "optimize"],
            ["sync", str(root), "--origin", "o-pw"],
        ):
            _one_clean_error(_cli(*args, "--index", url), SECRET, SECRET + "-wrong")

    with pg_server.connect(db) as con:  # a newer jsonltape migrated the index
        con.execute("INSERT INTO jsonltape.schema_migrations VALUES (99, 'from the future')")
    for args in (["search", "migration"], ["sessions"], ["sync", str(root), "--origin", "o-pw"]):
        line = _one_clean_error(_cli(*args, "--index", good), SECRET)
        assert "newer jsonltape" in line, line


# -- schema ------------------------------------------------------------------------------------


def test_readers_refuse_a_newer_schema_and_name_a_missing_one(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    empty = {
        tuple(a): _cli(*a, "--index", pg_db)
        for a in (["search", "x"], ["sessions"], ["show", "abc"], ["index", "optimize"])
    }
    for r in empty.values():
        assert "no team index here yet" in _one_clean_error(r)
    root = tmp_path / "root"
    path = _tree(root)
    assert _cli("sync", str(root), "--index", pg_db, "--origin", "o-n").returncode == 0
    with psycopg.connect(pg_db, autocommit=True) as con:
        con.execute("INSERT INTO jsonltape.schema_migrations VALUES (99, 'from the future')")
    for args in (["search", "migration"], ["sessions"], ["show", str(path)]):
        line = _one_clean_error(_cli(*args, "--index", pg_db))
        assert "schema version 99" in line and "newer jsonltape" in line, line
    status = _cli("index", "status", "--index", pg_db, "--json")  # reports, does not refuse
    assert status.returncode == 0 and '"schema":99' in status.stdout, status.stderr


def test_an_upper_case_scheme_reaches_the_server(pg_db: str, tmp_path: Path) -> None:
    url = "POSTGRESQL" + pg_db[len("postgresql") :]
    root = tmp_path / "root"
    _tree(root)
    r = _cli("sync", str(root), "--index", url, "--origin", "o-up")
    assert r.returncode == 0, r.stderr
    found = _cli("search", "alembic", "--index", url)
    assert found.returncode == 0 and "alembic" in found.stdout, found.stderr


# -- filters -----------------------------------------------------------------------------------

#: Sets that PostgreSQL would refuse as written (reversed ranges), and SQLite's reading of
#: ``-`` and ``]`` in a set.
GLOBS = [
    "[z-a]",
    "*[z-a]*",
    "[é-!?]",
    "[-[-!-]",
    "[]-a]",
    "[^]-a]",
    "[a-c-e]",
    "[^z-a]",
    "[a-]",
    "[-a]",
    "[]]",
    "[^]]",
    "[\\-^]",
    "*[--/]*",
    "[!-/]x",
]
STRINGS = ["", "a", "b", "c", "d", "e", "z", "-", "]", "^", "!", ".", "/", "\\", "é", "ax", "-x"]


@pytest.mark.parametrize("glob", GLOBS)
def test_glob_filters_match_what_sqlite_glob_matches(pg_db: str, glob: str) -> None:
    lite = sqlite3.connect(":memory:")
    regex = glob_regex(glob)
    with psycopg.connect(pg_db, autocommit=True) as con:
        for s in STRINGS:
            want = bool(lite.execute("SELECT ? GLOB ?", (s, glob)).fetchone()[0])
            row = con.execute("SELECT %s ~ %s", (s, regex)).fetchone() if regex else None
            assert (row is not None and row[0]) == want, (glob, regex, s)


def test_a_path_or_type_glob_with_a_reversed_range_finds_nothing_as_on_sqlite(
    pg_db: str, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    _tree(root)
    assert _cli("sync", str(root), "--index", pg_db, "--origin", "o-g").returncode == 0
    for flag, glob in (("--path", "*/[t-a]1.jsonl"), ("--type", "[z-a]*")):
        r = _cli("search", "migration", "--index", pg_db, flag, glob)
        assert r.returncode == 0 and "no matches" in r.stderr and not r.stdout, r.stdout + r.stderr
    for flag, glob in (("--path", "*/[s-a]1.jsonl"), ("--type", "user/messag[e-a]")):
        r = _cli("search", "migration", "--index", pg_db, flag, glob)
        assert r.returncode == 0 and "alembic" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("query", ["%", "_", "\\", "a_b", "100%", "a%b", "%_%"])
def test_like_wildcards_in_a_substring_query_are_literal(
    pg_db: str, tmp_path: Path, query: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    with jsonltape.open(root / "w.jsonl", create=True) as tape:
        tape.user("plain words only and aXb, 100x")
        tape.user("literal a_b 100% a%b %_% back\\slash")
    assert _cli("sync", str(root), "--index", pg_db, "--origin", "o-w").returncode == 0
    r = _cli("search", query, "--index", pg_db, "--json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1 and "literal" in r.stdout, r.stdout


@pytest.mark.parametrize("password", ["pa#ss-Hostile-42", "pa?ss-Hostile-42"])
def test_a_raw_hash_or_question_mark_in_a_password_is_not_shown(
    pg_server: PgServer, pg_db: str, password: str
) -> None:
    role = pg_server.unique("raw")
    pg_server.create_role(role, password)
    db = dbname_of(pg_db)
    url = f"postgresql://{role}:{password}@/{db}?host={pg_server.root}"
    r = _cli("index", "status", "--index", url)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out  # it connects with the password as written
    assert f"{role}:***@" in out and "Traceback" not in out, out
    assert password not in out and password.split("-")[0] not in out, out


def test_bytes_that_are_not_utf8_in_queries_and_filters_are_data(
    pg_db: str, tmp_path: Path
) -> None:
    # A shell passes them on (argv is bytes); Python holds them as lone surrogates, which
    # PostgreSQL text cannot hold. A file with such a name is not pushed (a warning says so),
    # and a second sync is as quiet as the first.
    root = tmp_path / "root"
    root.mkdir()
    odd = os.fsdecode(os.fsencode(root) + b"/odd\xffname.jsonl")
    with jsonltape.open(odd, create=True) as tape:
        tape.user("a surrogate path test")
    with jsonltape.open(root / "oddZname.jsonl", create=True) as tape:
        tape.user("a plain path test")
    for _ in range(2):
        r = _cli("sync", str(root), "--index", pg_db, "--origin", "o-b")
        assert r.returncode == 0 and "1 session indexed" in r.stdout, r.stdout + r.stderr
        assert "odd\\udcffname.jsonl: the file name is not UTF-8" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr, r.stderr
    bad = "\udcff"
    for args in (
        ["search", bad],
        ["search", f"ab{bad}cd"],
        ["search", "surrogate", "--phrase", bad],
        ["search", "surrogate", "--session", bad],
        ["search", "surrogate", "--role", bad],
        ["search", "surrogate", "--type", bad],
        ["search", "surrogate", "--origin", bad],
        ["sessions", "--path", bad],
    ):
        r = _cli(*args, "--index", pg_db)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "surrogate" not in r.stdout, r.stdout
    found = _cli("search", "path", "--path", f"*odd{bad}name*", "--index", pg_db)
    assert found.returncode == 0 and found.stdout == "", found.stdout + found.stderr
    assert "plain" in _cli("search", "path", "--index", pg_db).stdout  # the byte is not a wildcard


# -- many terms ----------------------------------------------------------------------------

_MANY = [f"word{i}" for i in range(40)]
MANY_QUERIES = [
    " ".join(_MANY),  # every word: the full message only
    " ".join(_MANY) + " zzznowhere",
    " ".join(_MANY[:20]) + " NotFound user_conf",  # inside identifiers, past the first terms
    " ".join(_MANY[:20]) + " NotFound user_cong",
    " ".join(_MANY[:20]) + " -> 東京 京都",
    " ".join(_MANY[:20]) + " -> 大阪",
    " ".join(_MANY[:20]) + ' "word3 word4" word5*',
    " ".join(_MANY[:20]) + ' "word4 word3"',
    " ".join(_MANY[:20]) + " 100% a_b",
    " ".join(_MANY[:20]) + " a%b",
]


def test_a_query_of_many_terms_plans_quickly_and_finds_what_sqlite_finds(
    pg_db: str, tmp_path: Path
) -> None:
    # The planner's work grows with the square of the conditions: 2,000 words took minutes.
    root = tmp_path / "root"
    root.mkdir()
    with jsonltape.open(root / "many.jsonl", create=True) as tape:
        tape.user(" ".join(_MANY) + " FileNotFoundError parse_user_config 東京都 -> 100% a_b")
        tape.user(" ".join(w for w in _MANY if w != "word37") + " FileNotFoundError")
    lite = tmp_path / "index.db"
    for index, extra in ((str(lite), []), (pg_db, ["--origin", "o-m"])):
        assert _cli("sync", str(root), "--index", index, *extra).returncode == 0
    for other in ("a", "b"):  # partitions multiply the planner's work
        _tree(tmp_path / other)
        assert (
            _cli("sync", str(tmp_path / other), "--index", pg_db, "--origin", other).returncode == 0
        )

    def seqs(index: str, query: str) -> list[int]:
        r = _cli("search", query, "--index", index, "--json", "--path", "*/many.jsonl")
        assert r.returncode == 0, r.stderr
        return sorted(int(line.split('"seq":')[1].split(",")[0]) for line in r.stdout.splitlines())

    for query in MANY_QUERIES:
        assert seqs(pg_db, query) == seqs(str(lite), query), query
    assert seqs(pg_db, MANY_QUERIES[0]) == [1]
    huge = " ".join(f"w{i}x" for i in range(1024))  # the most a query may have
    started = time.monotonic()
    r = _cli("search", huge, "--index", pg_db)
    assert r.returncode == 0 and "no matches" in r.stderr, r.stderr
    assert time.monotonic() - started < 20
    # Past the cap a query is refused before the server is asked, with one line, as on SQLite
    # (tests/test_search_query_cap.py holds both engines to the same rule).
    words = [f"w{i}x" for i in range(20_000)] + _MANY[:5]
    r = _cli("search", *words, "--index", pg_db)
    assert r.returncode == 2 and "at most 1,024" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1, r.stderr
    r = _cli("search", *_MANY, *_MANY, "--index", pg_db, "--json", "--path", "*/many.jsonl")
    assert r.returncode == 0 and r.stdout.count("\n") == 1, r.stderr


def test_service_files_and_passfiles_reach_the_index_and_their_passwords_stay_hidden(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    db = dbname_of(pg_db)
    role = pg_server.unique("svc")
    pg_server.create_role(role, SECRET, create_on=db)
    services = tmp_path / "pg_service.conf"
    services.write_text(
        f"[team]\nhost={pg_server.root}\ndbname={db}\nuser={role}\npassword={SECRET}\n"
        f"[wrong]\nhost={pg_server.root}\ndbname={db}\nuser={role}\npassword={SECRET}-x\n"
    )
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:{db}:{role}:{SECRET}\n")
    passfile.chmod(0o600)
    env = {"PGSERVICEFILE": str(services), "PGPASSFILE": str(passfile)}
    root = tmp_path / "root"
    _tree(root)
    for url, extra in (
        ("postgresql://?service=team", {}),
        ("postgres://", {"PGSERVICE": "team"}),
        (f"postgresql://{role}@/{db}?host={pg_server.root}", {}),  # the passfile's password
    ):
        for args in (["sync", str(root), "--origin", "o-svc"], ["search", "alembic"]):
            r = _cli(*args, "--index", url, env={**env, **extra})
            assert r.returncode == 0 and SECRET not in r.stdout + r.stderr, r.stdout + r.stderr
    r = _cli("search", "alembic", "--index", "postgresql://?service=wrong", env=env)
    assert "password authentication failed" in _one_clean_error(r, SECRET)
