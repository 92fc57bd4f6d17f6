"""The daemon with a PostgreSQL ``--index``: it pushes what agents append into the team index
and keeps its local index; while the server is down the local index goes on and the push
resumes by itself once the server is back, with nothing missing and nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

import jsonltape
from tests._pg import PgServer


def _count(url: str) -> int:
    with psycopg.connect(url, autocommit=True, connect_timeout=3) as con:
        row = con.execute(
            "SELECT count(*) FROM jsonltape.messages WHERE origin = 'daemon-test'"
        ).fetchone()
    return int(row[0]) if row else 0


def _local_count(index: Path) -> int:
    import sqlite3

    con = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM messages").fetchone()[0])
    finally:
        con.close()


def _until(what: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if what():
                return
        except (psycopg.Error, OSError, Exception):  # the server or index not there yet
            pass
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_the_daemon_pushes_appends_and_catches_up_after_the_server_was_down(
    pg_server: PgServer, tmp_path: Path
) -> None:
    # one user, one database they own, a password in the URL: the schema is created on first
    # use, and the password never reaches the log
    user = pg_server.unique("solo")
    pg_server.create_role(user, "S3cret-in-url")
    db = pg_server.unique("solo_db")
    pg_server.create_database(db, owner=user)
    pg_db = pg_server.url(db, user, "S3cret-in-url")
    root = tmp_path / "sessions"
    root.mkdir()
    local = tmp_path / "local.db"
    log = open(tmp_path / "daemon.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jsonltape",
            "daemon",
            "run",
            str(root),
            "--local-index",
            str(local),
            "--origin",
            "daemon-test",
            "--debounce",
            "0.05",
        ],
        env={**os.environ, "JSONLTAPE_INDEX": pg_db},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        path = root / "s.jsonl"
        with jsonltape.open(path, create=True) as tape:
            tape.user("first prompt about migrations")
            tape.flush()
            started = time.monotonic()
            _until(lambda: _count(pg_db) == 1)
            latency = time.monotonic() - started
            assert latency < 10, latency

            shown = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "jsonltape",
                    "daemon",
                    "status",
                    "--index",
                    pg_db,
                    "--local-index",
                    str(local),
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert shown.returncode == 0, shown.stderr
            assert "push:" in shown.stdout and "connected" in shown.stdout, shown.stdout
            assert "S3cret-in-url" not in shown.stdout

            pg_server.stop()
            tape.assistant("written while the team index is down")
            tape.flush()
            _until(lambda: _local_count(local) == 2)  # the local index goes on
            pg_server.start()
            tape.user("and after it came back")
            tape.flush()
            _until(lambda: _count(pg_db) == 3, timeout=90)  # backoff, then a catch-up rescan
        with psycopg.connect(pg_db, autocommit=True) as con:
            rows = con.execute(
                "SELECT seq, count(*) FROM jsonltape.messages GROUP BY seq ORDER BY seq"
            ).fetchall()
        assert [n for _seq, n in rows] == [1, 1, 1]  # nothing twice
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    text = (tmp_path / "daemon.log").read_text()
    assert "retrying in" in text  # it saw the server go
    assert f"{user}:***@" in text or user in text
    assert "S3cret-in-url" not in text
