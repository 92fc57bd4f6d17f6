"""Shared fixtures: session paths under tmp_path, a permissive umask, hypothesis profiles."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("long" if os.environ.get("JSONLTAPE_LONG") else "ci")

#: Long sweeps (more crash images, more kills) when JSONLTAPE_LONG=1.
LONG = bool(os.environ.get("JSONLTAPE_LONG"))


def _samples() -> Path:
    """The real session files of other agents (read-only): $JSONLTAPE_SAMPLES, else
    ``shared/samples`` beside the checkout (CI clones the repository next to ``shared/``)."""
    env = os.environ.get("JSONLTAPE_SAMPLES")
    if env:
        return Path(env).expanduser().absolute()
    return Path(__file__).resolve().parents[2] / "shared" / "samples"


SAMPLES = _samples()


@pytest.fixture
def tape_path(tmp_path: Path) -> Path:
    """Where a test's session file goes (inside a fresh 0700 directory)."""
    d = tmp_path / "sessions"
    d.mkdir(mode=0o700)
    return d / "s.jsonl"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keep every test away from the real user's data directory."""
    monkeypatch.setenv("JSONLTAPE_HOME", str(tmp_path / "home"))
    yield


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(old)


# A throwaway PostgreSQL server for the PostgreSQL engine's tests (skips without the server,
# fails under CI): see tests/_pg.py.
from tests._pg import pg_db, pg_server  # noqa: E402, F401
