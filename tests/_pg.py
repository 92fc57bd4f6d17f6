"""A throwaway PostgreSQL cluster for the tests: started once per session, never left behind.

The cluster lives in a fresh temporary directory: data in ``data/``, the server's Unix socket
in the directory itself (no TCP: ``listen_addresses = ''``), ``fsync=off`` (the data is thrown
away). Authentication on the socket (``pg_hba.conf``): the superuser by ``trust`` (only the
cluster's owner and root can enter the 0700 directory), every other role by
``scram-sha-256``, so tests of the roles exercise real password logins.

``initdb`` refuses to run as root and CI runs as root: then the server runs as another user
(``postgres`` if the system has it, else ``nobody``), the directory is handed to that user and
the processes drop to it before ``exec`` (:func:`subprocess.Popen`'s ``user``/``group``). The
postmaster is a direct child of the test process with a parent-death signal (``SIGQUIT``,
immediate shutdown): a test run that crashes or is killed takes the server with it, and a
normal session end stops it (:meth:`PgServer.stop`).

Binaries are found through ``pg_config --bindir``, then ``/usr/lib/postgresql/*/bin`` (newest
first), then ``PATH``. Without them the tests that need the server skip with one reason,
except when ``CI`` or ``JSONLTAPE_REQUIRE_PG`` is set: then they fail (a CI without the
server must not pass by skipping).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import importlib.util
import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    import psycopg

__all__ = ["PgServer", "dbname_of", "find_bindir", "pg_db", "pg_server"]

SUPERUSER = "postgres"
PREFIX = "jsonltape-pg-"
LOCK = "harness.lock"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
_PR_SET_PDEATHSIG = 1

#: Throwaway settings: durability off, small memory, enough connections for the load tests.
SETTINGS = {
    "listen_addresses": "''",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "60",
    "shared_buffers": "64MB",
    "password_encryption": "'scram-sha-256'",
    "log_min_messages": "warning",
    "logging_collector": "off",
    "max_wal_size": "1GB",
    "checkpoint_timeout": "30min",
}


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", path.parent.name)) or (0,)


def find_bindir() -> Path | None:
    """The directory holding ``initdb``, ``postgres`` and ``pg_ctl``, or None."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            candidates.append(Path(out))
    # Debian's pg_config (libpq-dev) may name a bindir without the server: look beside it.
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    on_path = shutil.which("postgres")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for d in candidates:
        if all(os.access(d / tool, os.X_OK) for tool in ("initdb", "postgres")):
            return d
    return None


def _server_user() -> pwd.struct_passwd | None:
    """The user the server runs as when the tests run as root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


def dbname_of(url: str) -> str:
    """The database a libpq URL names."""
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url).get("dbname")
    if not isinstance(name, str):
        raise ValueError(f"{url}: no database name")
    return name


def sweep_stale(parent: Path) -> None:
    """Delete the directories of clusters whose test run was killed (SIGKILL leaves them: the
    server dies with the run, the files stay). A live run holds its directory's lock."""
    for d in parent.glob(PREFIX + "*"):
        try:
            fd = os.open(d / LOCK, os.O_RDONLY)
        except OSError:
            continue  # being created right now, or not ours to open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run
        finally:
            os.close(fd)
        shutil.rmtree(d, ignore_errors=True)


def _set_pdeathsig() -> None:
    # Runs in the child after the uid change (a change of credentials clears the setting).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)


class PgServer:
    """One running cluster (see the module docs). URLs use the socket directory as ``host``."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.user = _server_user()
        sweep_stale(Path(tempfile.gettempdir()))
        self.root = Path(tempfile.mkdtemp(prefix=PREFIX))
        # Held until this process ends: sweep_stale of another run leaves the directory alone.
        # Locked before it gets its name, so that no sweep ever finds it unlocked.
        self._lock = os.open(self.root / (LOCK + ".new"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        os.rename(self.root / (LOCK + ".new"), self.root / LOCK)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._names = itertools.count(1)
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self._initdb()

    # -- processes ---------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        # No PG* variables of the caller (PGHOST, PGDATA ...) may steer the throwaway server.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C.UTF-8"
        if self.user is not None:
            env["HOME"] = str(self.root)
            env["USER"] = env["LOGNAME"] = self.user.pw_name
        return env

    def _drop(self) -> dict[str, Any]:
        if self.user is None:
            return {}
        return {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}

    def _initdb(self) -> None:
        cmd = [
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--auth-local=trust",
            "--auth-host=reject",
            "--no-sync",
        ]
        r = subprocess.run(
            cmd, cwd=self.root, env=self._env(), capture_output=True, text=True, **self._drop()
        )
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        (self.data / "pg_hba.conf").write_text(
            f"local all {SUPERUSER} trust\nlocal all all scram-sha-256\n"
        )
        with (self.data / "postgresql.conf").open("a") as f:
            f.write("\n# tests/_pg.py\n")
            f.write(f"unix_socket_directories = '{self.root}'\n")
            for key, value in SETTINGS.items():
                f.write(f"{key} = {value}\n")

    def start(self) -> None:
        """Start the postmaster and wait until it accepts connections."""
        if self.proc is not None and self.proc.poll() is None:
            return
        logf = self.log.open("ab")
        try:
            self.proc = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data)],
                cwd=self.root,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=logf,
                start_new_session=True,  # a Ctrl-C in the terminal reaches us, not the server
                preexec_fn=_set_pdeathsig,  # before any thread of ours exists
                **self._drop(),
            )
        finally:
            logf.close()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.proc.returncode}:\n{self._tail()}")
            try:
                self.connect().close()
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"postgres did not start: {exc}\n{self._tail()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Fast shutdown (SIGINT); immediate (SIGQUIT), then SIGKILL if it hangs."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(STOP_TIMEOUT)
                break
            except subprocess.TimeoutExpired:
                continue

    def restart(self) -> None:
        """Stop and start again: committed data stays, every connection is cut."""
        self.stop()
        self.start()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._lock)

    def _tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no server log)"

    # -- URLs and objects --------------------------------------------------------------------

    def url(
        self, dbname: str = "postgres", user: str = SUPERUSER, password: str | None = None
    ) -> str:
        """A libpq URL over the socket (user and password percent-encoded)."""
        auth = quote(user, safe="")
        if password is not None:
            auth += ":" + quote(password, safe="")
        return f"postgresql://{auth}@/{quote(dbname, safe='')}?host={quote(str(self.root))}"

    def admin_url(self, dbname: str = "postgres") -> str:
        return self.url(dbname)

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        """A superuser connection in autocommit mode."""
        import psycopg

        return psycopg.connect(self.admin_url(dbname), autocommit=True, connect_timeout=5)

    def unique(self, prefix: str) -> str:
        """A fresh object name (databases and roles are cluster-wide)."""
        return f"{prefix}_{os.getpid()}_{next(self._names)}"

    def create_database(self, name: str, owner: str | None = None) -> str:
        from psycopg import sql

        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if owner is not None:
            query += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
        with self.connect() as con:
            con.execute(query)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self.connect() as con:
            con.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    def create_role(
        self, name: str, password: str, *, login: bool = True, create_on: str | None = None
    ) -> None:
        """A role with a (scram) password; ``login=False`` makes a group role; ``create_on``
        a database it may create schemas in (what a single user's first sync needs)."""
        from psycopg import sql

        with self.connect() as con:
            con.execute(
                sql.SQL("CREATE ROLE {} {} PASSWORD {}").format(
                    sql.Identifier(name),
                    sql.SQL("LOGIN" if login else "NOLOGIN"),
                    sql.Literal(password),
                )
            )
        if create_on is not None:
            with self.connect(create_on) as con:
                con.execute(
                    sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(
                        sql.Identifier(create_on), sql.Identifier(name)
                    )
                )

    def terminate_backends(self, dbname: str) -> int:
        """Kill every connection to ``dbname`` (as a DBA or a network cut would); return how
        many were killed."""
        with self.connect() as con:
            rows = con.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchall()
        return sum(1 for (ok,) in rows if ok)


def _require() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("JSONLTAPE_REQUIRE_PG"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL cluster (skips, or fails under CI, without the server)."""
    bindir = find_bindir()
    if bindir is None:
        reason = (
            "PostgreSQL server binaries (initdb, postgres) not found via pg_config, "
            "/usr/lib/postgresql/*/bin or PATH; install the 'postgresql' package"
        )
        if _require():
            pytest.fail(reason + " (CI or JSONLTAPE_REQUIRE_PG is set: this is a failure)")
        pytest.skip(reason)
    if importlib.util.find_spec("psycopg") is None:
        reason = "psycopg 3 is not installed: pip install 'jsonltape[postgres]'"
        if _require():
            pytest.fail(reason)
        pytest.skip(reason)
    server = PgServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def pg_db(pg_server: PgServer) -> Iterator[str]:
    """A fresh database for one test (dropped after it); its superuser URL."""
    name = pg_server.unique("t")
    url = pg_server.create_database(name)
    try:
        yield url
    finally:
        pg_server.start()  # a no-op, unless the test stopped the server: back for the others
        pg_server.drop_database(name)
