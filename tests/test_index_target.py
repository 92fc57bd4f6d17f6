"""``--index`` takes a file path or a postgresql:// URL; any other URL is one clear error, and a
URL's password is never shown (the bug: a URL became a folder named after it, password
included, with a SQLite file inside)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jsonltape_daemon import origin, target
from jsonltape_daemon.errors import IndexTargetError

from jsonltape.errors import InvalidArgumentError


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "url",
    [
        "mysql://alice:s3cr3t-pw@db.example/x",
        "sqlite://alice:s3cr3t-pw@/tmp/x.db",
        "http://alice:s3cr3t-pw@host/",
    ],
)
def test_an_unknown_url_scheme_is_one_error_and_creates_nothing(tmp_path: Path, url: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    r = _cli("sync", str(root), "--index", url, cwd=work)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "unsupported index URL scheme" in lines[0], r.stderr
    assert "s3cr3t-pw" not in r.stderr + r.stdout
    assert "Traceback" not in r.stderr
    assert list(work.iterdir()) == []  # no folder named after the URL


def test_a_url_in_the_environment_is_not_a_path_either(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    r = _cli(
        "sync", str(root), cwd=tmp_path, env={"JSONLTAPE_INDEX": "redis://:s3cr3t-pw@localhost/0"}
    )
    assert r.returncode == 2 and "unsupported index URL scheme 'redis'" in r.stderr
    assert "s3cr3t-pw" not in r.stderr
    assert not [p for p in tmp_path.rglob("*") if "redis" in p.name or "s3cr3t" in p.name]


def test_postgresql_urls_are_the_postgresql_engine() -> None:
    for url in ("postgresql://u@/db?host=/run/pg", "postgres://u:pw@localhost:5432/db"):
        t = target.parse(url)
        assert isinstance(t, target.PgTarget) and t.url == url
    t = target.parse("some/dir/index.db")
    assert isinstance(t, target.SqliteTarget) and t.path.is_absolute()
    with pytest.raises(IndexTargetError) as e:
        target.parse("ftp://x/y")
    assert e.value.scheme == "ftp"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://alice:s3cr3t@host:5432/db", "postgresql://alice:***@host:5432/db"),
        ("postgresql://alice@host/db", "postgresql://alice@host/db"),
        (
            "postgresql:///db?host=/tmp/s&password=s3cr3t",
            "postgresql:///db?host=/tmp/s&password=***",
        ),
        ("postgresql://al%40ce:p%40ss@h/db", "postgresql://al%40ce:***@h/db"),
        ("postgresql://u:pw@h1:5432,h2:5433/db", "postgresql://u:***@h1:5432,h2:5433/db"),
        # the TLS key's passphrase is a secret too
        ("postgresql://u@h/db?sslpassword=KEY-s3cr3t", "postgresql://u@h/db?sslpassword=***"),
        # raw @ # ? / in a password: none of it is shown as a host
        ("postgresql://u:p@ss-s3cr3t@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:pa#ss@/db", "postgresql://u:***@/db"),
        ("postgresql://u:pa/ss@host/db", "postgresql://u:***@host/db"),
        # an @ in a parameter is not a userinfo's
        ("postgresql://h:5432/db?user=admin@corp", "postgresql://h:5432/db?user=admin%40corp"),
        ("postgresql://[::1]:5432/db?user=a@b", "postgresql://[::1]:5432/db?user=a%40b"),
    ],
)
def test_redact_drops_every_password(url: str, shown: str) -> None:
    assert target.redact(url) == shown
    assert str(target.PgTarget(url)) == shown


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("postgresql://u:p@ss-tail@127.0.0.1:1/db", "ss-tail"),  # libpq's host: "ss-tail@…"
        ("postgresql://u:a@127.0.0.1:1/db", "a"),  # a short password is not cut out of words
        ("postgresql://u@127.0.0.1:1/db?sslpassword=KEY-s3cr3t", "KEY-s3cr3t"),
    ],
)
def test_a_driver_error_line_never_gives_a_secret_away(url: str, password: str) -> None:
    psycopg = pytest.importorskip("psycopg")
    from jsonltape_daemon.engines.postgres.conn import error_line

    with pytest.raises(psycopg.Error) as e:
        psycopg.connect(url, connect_timeout=2).close()
    line = error_line(e.value, url)
    assert not re.search(rf"(?<![\w]){re.escape(password)}(?![\w])", line), line
    assert "f***" not in line and "***iled" not in line, line  # words stay whole


def test_the_default_origin_is_created_once_and_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JSONLTAPE_ORIGIN", raising=False)
    first = origin.default_origin(tmp_path / "data")
    assert origin.ORIGIN_RE.fullmatch(first) and "@" in first
    assert (tmp_path / "data" / "origin").stat().st_mode & 0o777 == 0o600
    assert origin.default_origin(tmp_path / "data") == first  # stable across runs
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["origin"]  # no temp file left
    monkeypatch.setenv("JSONLTAPE_ORIGIN", "ci-runner-7")
    assert origin.default_origin(tmp_path / "data") == "ci-runner-7"


@pytest.mark.parametrize("bad", ["", "-x", "a b", "x" * 65, "a/b", "é", "a;drop"])
def test_an_invalid_origin_is_refused(bad: str) -> None:
    with pytest.raises(InvalidArgumentError):
        origin.validate(bad)
