"""The test suite's PostgreSQL harness (tests/_pg.py) does what the engine's tests rely on:
a real server, password logins, restarts that keep data, cut connections, nothing left behind,
and a loud failure in CI when the server is missing."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from tests._pg import LOCK, PREFIX, PgServer, dbname_of, sweep_stale

REPO = Path(__file__).resolve().parents[1]


def _processes_under(root: Path) -> list[int]:
    """Pids of live processes that name ``root`` (the cluster's directory) on their command
    line (the postmaster) or work inside it (every server process: its cwd is the data dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(root).encode() in cmdline or cwd.startswith(str(root)):
            found.append(int(entry.name))
    return found


def test_restart_keeps_committed_rows_and_cuts_connections(pg_server: PgServer, pg_db: str) -> None:
    con = psycopg.connect(pg_db, autocommit=True)
    con.execute("CREATE TABLE t (x int)")
    con.execute("INSERT INTO t VALUES (1), (2)")
    pg_server.restart()
    with pytest.raises(psycopg.OperationalError):
        con.execute("SELECT 1")
    con.close()
    with psycopg.connect(pg_db) as again:
        assert again.execute("SELECT sum(x) FROM t").fetchone() == (3,)


def test_terminate_backends_cuts_a_live_connection(pg_server: PgServer, pg_db: str) -> None:
    con = psycopg.connect(pg_db, autocommit=True)
    dbname = con.info.dbname
    assert pg_server.terminate_backends(dbname) == 1
    with pytest.raises(psycopg.OperationalError):
        con.execute("SELECT 1")
    con.close()
    with psycopg.connect(pg_db) as again:  # the server itself is fine
        assert again.execute("SELECT 1").fetchone() == (1,)


def test_other_roles_log_in_with_scram_passwords_only(pg_server: PgServer, pg_db: str) -> None:
    role = pg_server.unique("pw")
    pg_server.create_role(role, "right horse battery")
    dbname = dbname_of(pg_db)
    with psycopg.connect(pg_server.url(dbname, role, "right horse battery")) as con:
        assert con.execute("SELECT current_user").fetchone() == (role,)
    for wrong in ("wrong", None):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(pg_server.url(dbname, role, wrong), connect_timeout=5)
    with pg_server.connect() as admin:
        stored = admin.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (role,)
        ).fetchone()
    assert stored is not None and str(stored[0]).startswith("SCRAM-SHA-256$")


def test_the_server_runs_as_another_user_than_root(pg_server: PgServer) -> None:
    assert pg_server.proc is not None
    status = Path(f"/proc/{pg_server.proc.pid}/status").read_text()
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    assert uid != 0
    assert uid == os.geteuid() or os.geteuid() == 0


def _run_pytest(tmp_path: Path, body: str, env: dict[str, str]) -> subprocess.Popen[str]:
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            """
            import os
            import tests._pg
            from tests._pg import pg_db, pg_server  # noqa: F401

            if os.environ.get("HIDE_PG"):
                tests._pg.find_bindir = lambda: None
            """
        )
    )
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(body))
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "JSONLTAPE_REQUIRE_PG")}
    base["PYTHONPATH"] = str(REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env={**base, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


USES_SERVER = """
def test_uses_server(pg_db):
    assert pg_db.startswith("postgresql://")
"""


def test_without_a_server_tests_skip_with_one_reason(tmp_path: Path) -> None:
    proc = _run_pytest(tmp_path, USES_SERVER, {"HIDE_PG": "1"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "1 skipped" in out and "PostgreSQL server binaries" in out, out


@pytest.mark.parametrize("var", ["CI", "JSONLTAPE_REQUIRE_PG"])
def test_without_a_server_ci_fails_instead_of_skipping(tmp_path: Path, var: str) -> None:
    proc = _run_pytest(tmp_path, USES_SERVER, {"HIDE_PG": "1", var: "1"})
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "this is a failure" in out and "skipped" not in out, out


def test_a_failing_session_leaves_no_server_behind(tmp_path: Path) -> None:
    marker = tmp_path / "root.txt"
    proc = _run_pytest(
        tmp_path,
        f"""
        def test_fails(pg_server):
            open({str(marker)!r}, "w").write(str(pg_server.root))
            assert False, "a failing test"
        """,
        {},
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "a failing test" in out, out
    root = Path(marker.read_text())
    assert not root.exists()
    assert _processes_under(root) == []


def test_a_killed_test_run_takes_its_server_with_it(tmp_path: Path) -> None:
    marker = tmp_path / "root.txt"
    proc = _run_pytest(
        tmp_path,
        f"""
        import time

        def test_hangs(pg_server):
            open({str(marker)!r}, "w").write(str(pg_server.root))
            time.sleep(120)
        """,
        {},
    )
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "no server started"
            time.sleep(0.05)
        root = Path(marker.read_text())
        assert _processes_under(root) != []
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 15
        while _processes_under(root) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_under(root) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        if marker.exists() and marker.read_text():
            # SIGKILL gives the run no chance to delete its directory (the server is gone).
            subprocess.run(["rm", "-rf", marker.read_text()], check=False)


def test_sweep_deletes_the_directories_of_killed_runs_only(tmp_path: Path) -> None:
    killed, live, young = (tmp_path / (PREFIX + n) for n in ("killed", "live", "young"))
    for d in (killed, live, young):
        d.mkdir()
        (d / "data").mkdir()
    (killed / LOCK).touch()
    (live / LOCK).touch()
    fd = os.open(live / LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        sweep_stale(tmp_path)
    finally:
        os.close(fd)
    assert not killed.exists()
    assert live.exists()
    assert young.exists()  # no lock file yet: being created
