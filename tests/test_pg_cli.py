"""``jsonltape index init|grant`` on a real PostgreSQL server: roles, schema and row-level
security set up from the command line; the SQL printed for a DBA is the SQL run; a password in
the URL is never shown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

import jsonltape
from tests._pg import PgServer, dbname_of


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as con:
        rows = con.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'jsonltape'"
        ).fetchall()
    return {r[0] for r in rows}


def test_init_creates_the_team_index_and_grant_lets_a_writer_push_only_its_origin(
    pg_server: PgServer, pg_db: str
) -> None:
    prefix = pg_server.unique("team")
    r = _cli("index", "init", "--index", pg_db, "--prefix", prefix)
    assert r.returncode == 0, r.stderr
    assert {"sessions", "events", "messages", "files", "origins"} <= _tables(pg_db)
    again = _cli("index", "init", "--index", pg_db, "--prefix", prefix)  # idempotent
    assert again.returncode == 0, again.stderr

    writer = pg_server.unique("laptop")
    pg_server.create_role(writer, "pw-of-the-laptop")
    g = _cli(
        "index",
        "grant",
        "--index",
        pg_db,
        "--prefix",
        prefix,
        "--writer",
        writer,
        "--origin",
        "alice@laptop-1",
    )
    assert g.returncode == 0, g.stderr
    url = pg_server.url(dbname_of(pg_db), writer, "pw-of-the-laptop")
    with psycopg.connect(url, autocommit=True) as con:
        mine = con.execute(
            "SELECT count(*) FROM jsonltape.origins WHERE origin = 'alice@laptop-1'"
        ).fetchone()
        assert mine == (1,)
        with pytest.raises(psycopg.Error):
            con.execute("INSERT INTO jsonltape.origins (origin) VALUES ('bob@desk-2')")


def test_print_gives_the_sql_that_init_runs(pg_server: PgServer, pg_db: str) -> None:
    prefix = pg_server.unique("dba")
    printed = _cli("index", "init", "--print", "--prefix", prefix)
    assert printed.returncode == 0 and printed.stdout.startswith("--")
    psql = pg_server.bindir / "psql"
    run = subprocess.run(
        [str(psql), "-v", "ON_ERROR_STOP=1", "-q", "-d", pg_db, "-f", "-"],
        input=printed.stdout,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert {"sessions", "messages"} <= _tables(pg_db)


def test_printed_grants_run_in_psql_as_they_are(pg_server: PgServer, pg_db: str) -> None:
    prefix = pg_server.unique("dbg")
    assert _cli("index", "init", "--index", pg_db, "--prefix", prefix).returncode == 0
    writer = pg_server.unique("w")
    pg_server.create_role(writer, "pw")
    printed = _cli(
        "index", "grant", "--print", "--prefix", prefix, "--writer", writer, "--origin", "lab-1"
    )
    assert printed.returncode == 0 and "\\n" not in printed.stdout, printed.stdout
    run = subprocess.run(
        [str(pg_server.bindir / "psql"), "-v", "ON_ERROR_STOP=1", "-q", "-d", pg_db, "-f", "-"],
        input=printed.stdout,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    with psycopg.connect(pg_db, autocommit=True) as con:
        got = con.execute(
            "SELECT role FROM jsonltape.origin_members WHERE origin = 'lab-1'"
        ).fetchall()
    assert got == [(writer,)]


def test_a_password_in_the_url_never_appears_in_errors(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    role = pg_server.unique("wrongpw")
    pg_server.create_role(role, "the-right-one")
    url = pg_server.url(dbname_of(pg_db), role, "Sekr1t-pass-XYZ")
    for args in (
        ["index", "init", "--index", url],
        ["index", "grant", "--index", url, "--reader", role],
        ["sync", "--index", url],
    ):
        r = _cli(*args, env={"JSONLTAPE_ROOT": str(tmp_path)})
        out = r.stdout + r.stderr
        assert r.returncode != 0, out
        assert "Sekr1t-pass-XYZ" not in out, out
        assert "Traceback" not in out
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def _tree(root: Path, name: str = "s1", words: str = "alembic") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user(f"who hit the {words} migration error?")
        tape.assistant(f"the FileNotFoundError in {words} was fixed by rerunning 数据库迁移")
    return path


def test_two_machines_sync_into_one_team_index_and_search_it_from_the_shell(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    _tree(tmp_path / "laptop", "s1", "alembic")
    _tree(tmp_path / "ci", "s2", "flyway")
    for name in ("laptop", "ci"):
        r = _cli("sync", str(tmp_path / name), "--index", pg_db, "--origin", f"alice@{name}")
        assert r.returncode == 0, r.stderr
        assert "1 session indexed" in r.stdout
    found = _cli("search", "migration", "--index", pg_db)
    assert found.returncode == 0, found.stderr
    assert "alice@laptop" in found.stdout and "alice@ci" in found.stdout
    only = _cli("search", "NotFound", "--index", pg_db, "--origin", "alice@ci", "--json")
    assert only.returncode == 0, only.stderr
    hits = [json.loads(line) for line in only.stdout.splitlines()]
    assert hits and {h["origin"] for h in hits} == {"alice@ci"}
    cjk = _cli("search", "数据库", "--index", pg_db, "--json")
    assert len(cjk.stdout.splitlines()) == 2, cjk.stdout + cjk.stderr
    listed = _cli("sessions", "--index", pg_db, "--origin", "alice@laptop")
    assert listed.returncode == 0 and listed.stdout.count("\n") == 1, listed.stdout
    shown = _cli("show", str(tmp_path / "ci" / "s2.jsonl"), "--index", pg_db)
    assert shown.returncode == 0, shown.stderr
    assert "flyway migration" in shown.stdout
    again = _cli("sync", str(tmp_path / "ci"), "--index", pg_db, "--origin", "alice@ci")
    assert again.returncode == 0 and "+0 events" in again.stdout, again.stdout  # idempotent
    status = _cli("index", "status", "--index", pg_db, "--json")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    by = {o["origin"]: o for o in info["origins"]}
    assert set(by) == {"alice@laptop", "alice@ci"}
    assert by["alice@ci"]["sessions"] == 1 and by["alice@ci"]["messages"] == 2
    assert by["alice@ci"]["lag_seconds"] is not None and by["alice@ci"]["lag_seconds"] < 600
    text = _cli("index", "status", "--index", pg_db)
    assert "alice@laptop: 1 sessions" in text.stdout and "last push" in text.stdout, text.stdout


def test_rebuild_of_one_origin_leaves_the_others_and_optimize_runs(
    pg_server: PgServer, pg_db: str, tmp_path: Path
) -> None:
    _tree(tmp_path / "a", "s1", "alembic")
    _tree(tmp_path / "b", "s2", "flyway")
    for name in ("a", "b"):
        r = _cli("sync", str(tmp_path / name), "--index", pg_db, "--origin", f"o-{name}")
        assert r.returncode == 0, r.stderr
    with psycopg.connect(pg_db, autocommit=True) as con:
        before = con.execute(
            "SELECT origin, sid, seq, text FROM jsonltape.messages ORDER BY 1, 3"
        ).fetchall()
        con.execute("UPDATE jsonltape.messages SET text = 'tampered' WHERE origin = 'o-a'")
    r = _cli("index", "rebuild", "--index", pg_db, "--origin", "o-a")
    assert r.returncode == 0, r.stderr
    assert "origin o-a rebuilt" in r.stdout
    with psycopg.connect(pg_db, autocommit=True) as con:
        after = con.execute(
            "SELECT origin, sid, seq, text FROM jsonltape.messages ORDER BY 1, 3"
        ).fetchall()
    assert [(o, q, t) for o, _s, q, t in after] == [(o, q, t) for o, _s, q, t in before]
    assert [r for r in after if r[0] == "o-b"] == [r for r in before if r[0] == "o-b"]
    opt = _cli("index", "optimize", "--index", pg_db)
    assert opt.returncode == 0 and "optimized" in opt.stdout, opt.stderr
