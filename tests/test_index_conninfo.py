"""``--index`` and ``$JSONLTAPE_INDEX`` given a connection string that is not a ``scheme://``
URL: a libpq keyword/value string (``host=… password=…``) is the PostgreSQL engine, as libpq
reads it; a URL that lost its ``//`` or a keyword libpq does not have is one clear error. None
of them becomes a SQLite file named after its password (the bug), and no command shows the
password: not in an error, not in ``index status``, not in the daemon's status or log."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonltape_daemon import target
from jsonltape_daemon.errors import IndexTargetError

from ._pg import PgServer, dbname_of
from .test_index_target import _cli

SECRET = "Pw-s3cr3t-Zq"

#: Connection strings gone wrong: no engine, so refused before anything is made of them.
REFUSED = [
    f"postgresql:alice:{SECRET}@db.example/team",  # a URL without its //
    f"postgresql:/alice:{SECRET}@db.example/team",
    f"alice:{SECRET}@db.example:5432/team",  # no scheme at all
    f"host=db.example user=alice pasword={SECRET}",  # a keyword libpq does not have
    f"host=db.example password='{SECRET} dbname=team",  # an unterminated quote
    f"host=db.example {SECRET}",  # a word without its =
]
#: Keyword/value strings libpq reads: a PostgreSQL index (here an unreachable one).
UNREACHABLE = [
    f"host=/nonexistent-socket-dir dbname=team user=alice password={SECRET}",
    f"host = '/nonexistent socket dir' password = '{SECRET}' sslpassword={SECRET}x",
]


# -- the parser --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", UNREACHABLE + ["dbname=team", "service=team"])
def test_a_keyword_value_string_is_the_postgresql_engine_shown_without_secrets(
    value: str,
) -> None:
    t = target.parse(value)
    assert isinstance(t, target.PgTarget) and t.url == value  # handed to libpq as it is
    assert SECRET not in str(t) and SECRET not in target.redact(value)


@pytest.mark.parametrize("value", REFUSED)
def test_a_connection_string_gone_wrong_is_refused_without_its_password(value: str) -> None:
    with pytest.raises(IndexTargetError) as caught:
        target.parse(value)
    assert caught.value.scheme is None
    assert SECRET not in str(caught.value), caught.value
    assert "postgresql://" in str(caught.value)  # says what an index is


def test_an_existing_file_with_a_colon_or_an_equals_sign_is_still_an_index_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("a:b.db", "c=d.db", "e f=g"):
        (tmp_path / name).touch()
        t = target.parse(name)
        assert isinstance(t, target.SqliteTarget) and t.path == tmp_path / name
    t = target.parse("plain.db")  # a new file without them: as before
    assert isinstance(t, target.SqliteTarget) and t.path == tmp_path / "plain.db"


def test_the_keywords_are_those_of_the_libpq_psycopg_runs_on() -> None:
    pq = pytest.importorskip("psycopg.pq")
    libpq = {o.keyword.decode() for o in pq.Conninfo.get_defaults()}
    assert libpq == target.LIBPQ_KEYWORDS
    assert libpq >= target.SECRET_KEYS


_PIECES = st.sampled_from(
    ["host", "dbname", "password", "user", "bogus", "=", " ", "  ", "\t", "'", "\\", "a", "b c"]
    + ["x=y", "''", "\\'", "é", "\n"]
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_PIECES, max_size=12).map("".join))
def test_conninfo_pairs_reads_what_libpq_reads(text: str) -> None:
    """A differential test against libpq's own parser: libpq takes a string exactly when every
    keyword we read is libpq's, and takes the same values."""
    conninfo = pytest.importorskip("psycopg.conninfo")
    import psycopg

    ours = target.conninfo_pairs(text)
    try:
        theirs = conninfo.conninfo_to_dict(text)
    except psycopg.Error:
        theirs = None
    known = ours is not None and all(k in target.LIBPQ_KEYWORDS for k, _ in ours)
    assert (theirs is not None) == known, (text, ours, theirs)
    if theirs is not None and ours is not None:
        assert theirs == dict(ours), (text, ours, theirs)


@pytest.mark.parametrize(
    "value", [*UNREACHABLE, f"host=h password='{SECRET}", f"host=h bogus=x password={SECRET}"]
)
def test_a_driver_error_never_gives_a_keyword_value_secret_away(value: str) -> None:
    """Whatever libpq echoes (here, a message quoting every value), even of a string it
    cannot read, the error line hides the secrets."""
    psycopg = pytest.importorskip("psycopg")
    from jsonltape_daemon.engines.postgres.conn import error_line

    quoted = " ".join(f'"{v}"' for v in (SECRET, "h", "bogus"))
    line = error_line(psycopg.OperationalError(f"connection failed: {quoted}"), value)
    assert SECRET not in line, line
    assert line.startswith("connection failed: ")


# -- every command -----------------------------------------------------------------------------

_COMMANDS = [
    ["sync", "ROOT"],
    ["search", "migration"],
    ["sessions"],
    ["show", "abc"],
    ["index", "status"],
    ["index", "optimize"],
    ["daemon", "start", "ROOT"],
    ["daemon", "status"],
    ["daemon", "stop"],
]


def _made(tmp_path: Path) -> list[str]:
    """What was made under ``tmp_path`` that may be named after the string, or be an index."""
    return [
        str(p)
        for p in tmp_path.rglob("*")
        if SECRET in str(p) or p.suffix == ".db" or "@" in p.name or "=" in p.name
    ]


@pytest.mark.parametrize("value", REFUSED + UNREACHABLE)
@pytest.mark.parametrize("how", ["--index", "$JSONLTAPE_INDEX"])
def test_no_command_makes_a_file_of_a_connection_string_or_shows_its_password(
    tmp_path: Path, value: str, how: str
) -> None:
    root, work = tmp_path / "root", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    env = {"JSONLTAPE_HOME": str(tmp_path / "home")}
    for command in _COMMANDS:
        if value in UNREACHABLE and command[:2] == ["daemon", "start"]:
            continue  # a daemon of a reachable-looking index starts; tried on a real server
        args = [str(root) if a == "ROOT" else a for a in command]
        if how == "--index":
            r = _cli(*args, "--index", value, cwd=work, env=env)
        else:
            r = _cli(*args, cwd=work, env={**env, "JSONLTAPE_INDEX": value})
        out = r.stdout + r.stderr
        assert SECRET not in out, (command, out)
        assert "Traceback" not in out, (command, out)
        if command[:2] == ["daemon", "status"]:
            assert r.returncode in (2, 3), (command, out)  # refused, or not running
        elif command[:2] == ["daemon", "stop"]:
            assert r.returncode in (0, 2), (command, out)  # refused, or "not running"
        else:
            assert r.returncode == 2, (command, out)
            assert len(r.stderr.strip().splitlines()) == 1, (command, r.stderr)
        if value in REFUSED and r.returncode == 2:
            assert "postgresql://" in r.stderr, (command, r.stderr)
    assert list(work.iterdir()) == []
    assert _made(tmp_path) == []


# -- a real server -----------------------------------------------------------------------------


def _kv_of_a_new_role(server: PgServer, pg_db: str, *passwords: str) -> list[str]:
    """Keyword/value strings of a new role whose password is SECRET, with each password."""
    from psycopg.conninfo import make_conninfo

    db, role = dbname_of(pg_db), server.unique("kv")
    server.create_role(role, SECRET, create_on=db)
    return [
        make_conninfo(host=str(server.root), dbname=db, user=role, password=pw) for pw in passwords
    ]


def test_a_keyword_value_string_reaches_the_team_index_and_its_password_stays_hidden(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    from .test_pg_cli import _tree

    good, wrong = _kv_of_a_new_role(pg_server, pg_db, SECRET, SECRET + "-wrong")
    root, work = tmp_path / "root", tmp_path / "work"
    _tree(root)
    work.mkdir()
    env = {"JSONLTAPE_HOME": str(tmp_path / "home")}
    for args in (
        ["sync", str(root), "--origin", "o-kv"],
        ["search", "alembic"],
        ["sessions"],
        ["index", "status"],
        ["index", "status", "--json"],
    ):
        r = _cli(*args, "--index", good, cwd=work, env=env)
        out = r.stdout + r.stderr
        assert r.returncode == 0 and SECRET not in out, (args, out)
        if args[0] == "search":
            assert "alembic" in r.stdout
        if args[:2] == ["index", "status"]:
            assert "password=***" in r.stdout, r.stdout
        r = _cli(*args, cwd=work, env={**env, "JSONLTAPE_INDEX": wrong})
        out = r.stdout + r.stderr
        assert r.returncode == 2 and SECRET not in out, (args, out)
        assert "password authentication failed" in r.stderr, r.stderr
    assert list(work.iterdir()) == [] and _made(tmp_path) == []


def test_the_daemon_pushes_to_a_keyword_value_index_without_showing_its_password(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    import jsonltape

    (kv,) = _kv_of_a_new_role(pg_server, pg_db, SECRET)
    root, local = tmp_path / "root", tmp_path / "local.db"
    root.mkdir()
    env = {"JSONLTAPE_HOME": str(tmp_path / "home")}
    common = ["--index", kv, "--local-index", str(local)]
    r = _cli("daemon", "start", str(root), *common, "--origin", "o-kvd", cwd=tmp_path, env=env)
    assert r.returncode == 0 and SECRET not in r.stdout + r.stderr, r.stdout + r.stderr
    try:
        with jsonltape.open(root / "s.jsonl", create=True) as tape:
            tape.user("pushed through a keyword value string")
        deadline = time.monotonic() + 60
        while True:
            status = _cli("daemon", "status", *common, cwd=tmp_path, env=env)
            if "connected" in status.stdout and "last push" in status.stdout:
                break
            assert time.monotonic() < deadline, status.stdout + status.stderr
            time.sleep(0.2)
        assert SECRET not in status.stdout + status.stderr
        assert "password=***" in status.stdout, status.stdout
        found = _cli("search", "keyword", "--index", kv, cwd=tmp_path, env=env)
        assert found.returncode == 0 and "value string" in found.stdout, found.stderr
    finally:
        stop = _cli("daemon", "stop", *common, cwd=tmp_path, env=env)
        assert stop.returncode == 0, stop.stderr
    logs = list(tmp_path.rglob("*.log"))
    assert logs and all(SECRET not in p.read_text(errors="replace") for p in logs)
    assert any("password=***" in p.read_text(errors="replace") for p in logs)
