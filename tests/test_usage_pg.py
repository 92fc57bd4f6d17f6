"""Usage on a PostgreSQL team index: four machines push their trees; every report of one origin
equals the report of that machine's own SQLite index, the team's report is their sum by
origin, and a response two machines both hold (a session file kept in git, checked out on
both) is counted once, in the first origin by name."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonltape_daemon.engines.postgres.store import PgStore
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import PgTarget, SqliteTarget

from jsonltape.usage import report

from .test_usage_model import World

ORIGINS = ("ci", "desk", "laptop", "tower")
KINDS = ("daily", "monthly", "session", "blocks")


def _lines(r: Any) -> list[Any]:
    """A report's lines as plain data, without what names the index or the origin."""
    out = []
    for line in msgspec.to_builtins(r.lines):
        if line.get("session"):
            line["session"].pop("origin")
        for sub in line.get("subsessions") or ():
            sub["session"].pop("origin")
        out.append(line)
    return out


def _report(target: Any, kind: str, **kw: Any) -> Any:
    reader = open_reader(target)
    try:
        return report(reader, kind, timezone="Asia/Kolkata", now_ms=0, **kw)  # type: ignore[arg-type]
    finally:
        reader.close()


@pytest.fixture
def team(tmp_path: Path, pg_db: str) -> dict[str, Path]:
    """Four machines' trees pushed to ``pg_db`` (and each in its own SQLite index); the desk
    and the laptop both hold a copy of one session file."""
    indexes = {}
    shared: Path | None = None
    for n, origin in enumerate(ORIGINS):
        root = tmp_path / origin / "root"
        root.mkdir(parents=True, mode=0o700)
        world = World(root, random.Random(1000 + n))
        world.tag = origin
        for _ in range(4):
            world.add_responses(world.new_session(), 4)
        if origin == "desk":
            shared = next(iter(world.sessions.values())).path
        if origin == "laptop":
            assert shared is not None
            (root / "git").mkdir(mode=0o700)
            shutil.copyfile(shared, root / "git" / "shared.jsonl")
        index = tmp_path / origin / "index.db"
        for store in (SqliteStore(index), PgStore(pg_db, origin)):
            try:
                Mirror(store, str(root)).rescan()
            finally:
                store.close()
        indexes[origin] = index
    return indexes


def test_each_origins_reports_equal_its_own_index_and_the_team_counts_a_copy_once(
    team: dict[str, Path], pg_db: str
) -> None:
    pg = PgTarget(pg_db)
    for origin, index in team.items():
        for kind in KINDS:
            mine = _report(pg, kind, origins=[origin])
            local = _report(SqliteTarget(index), kind)
            if origin == "laptop" and kind in ("daily", "monthly", "blocks"):
                continue  # the shared file's responses count under the desk (checked below)
            assert _lines(mine) == _lines(local), (origin, kind)
    by_origin = _report(pg, "monthly", by=["origin"])
    totals: dict[str, int] = {}
    for line in by_origin.lines:
        totals[line.by["origin"]] = totals.get(line.by["origin"], 0) + line.responses
    local_totals = {o: _report(SqliteTarget(i), "monthly").total.responses for o, i in team.items()}
    shared = local_totals["laptop"] - totals["laptop"]
    assert shared > 0  # the laptop's copy of the desk's session is not counted again
    assert totals == {**local_totals, "laptop": local_totals["laptop"] - shared}
    everything = _report(pg, "daily")
    assert everything.total.responses == sum(local_totals.values()) - shared
    assert _report(pg, "blocks").total.responses == everything.total.responses
    # a team report of the laptop alone counts its copy: no earlier origin is in the report
    assert _report(pg, "daily", origins=["laptop"]).total.responses == local_totals["laptop"]


def test_the_sums_of_a_page_of_sessions_are_their_rows_of_the_whole_report(
    team: dict[str, Path], pg_db: str
) -> None:
    """``usage_by_session(..., keys)`` (the viewer's tokens column, a page at a time) gives
    the rows the whole query gives those sessions: on each machine's SQLite index and on the
    team index, where the laptop's copy of the desk's session stays counted once."""
    for target in [*(SqliteTarget(i) for i in team.values()), PgTarget(pg_db)]:
        reader = open_reader(target)
        try:
            whole = sorted(map(tuple, reader.usage_by_session(None, None, ())))
            keys = sorted({r[0] for r in whole})
            page = keys[::2]
            got = sorted(map(tuple, reader.usage_by_session(None, None, (), page)))
            assert got == [r for r in whole if r[0] in page] and got, target
            assert list(reader.usage_by_session(None, None, (), [])) == []
        finally:
            reader.close()
