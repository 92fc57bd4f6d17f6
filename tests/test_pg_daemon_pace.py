"""The daemon's pace with a PostgreSQL team index beside the local one: a path that only the
push held back (its own engines, its own pace) still reaches the team index, through the real
loop and a real server, equal to a rebuild; the local index, never held, too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.ingest.foreign import ForeignIngestor
from jsonltape_daemon.ingest.pace import Pace
from jsonltape_daemon.service.daemon import Config, Daemon
from jsonltape_daemon.service.remote import Remote

from .conftest import SAMPLES
from .test_daemon import _Running, wait_for
from .test_index_foreign import rebuild
from .test_index_foreign_pace import append_slowly, index_dump
from .test_pg_store import pg_dump

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
NAME = "claude-code-v1.0.108-japanese.jsonl"


def test_a_path_only_the_push_held_back_reaches_the_team_index(
    tmp_path: Path, pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    held: list[dict[str, float]] = []
    monkeypatch.setattr(Pace, "floor", float("inf"))  # the local index: never held back
    real_step, real_held = Remote.step, Remote.take_held

    def step(self: Remote, *a: Any, **k: Any) -> Any:
        out = real_step(self, *a, **k)
        for e in self.mirror.engines if self.mirror is not None else ():
            if isinstance(e, ForeignIngestor):  # the push: held 40 times each sync's time
                e.pace.floor, e.pace.factor = 0.0, 40.0
        return out

    def take_held(self: Remote) -> dict[str, float]:
        out = real_held(self)
        held.append(out)
        return out

    monkeypatch.setattr(Remote, "step", step)
    monkeypatch.setattr(Remote, "take_held", take_held)
    lines = (SAMPLES / NAME).read_bytes().splitlines(keepends=True)
    root = tmp_path / "claude"
    root.mkdir()
    path = root / NAME
    path.write_bytes(b"".join(lines[: len(lines) // 2]))
    sessions = tmp_path / "sessions"
    sessions.mkdir(mode=0o700)
    cfg = Config(
        sessions,
        tmp_path / "i.db",
        rescan_interval=3600,
        debounce=0.02,
        sources=(("claude-code", str(root)),),
        remote=pg_db,
        origin="laptop",
    )
    with _Running(Daemon(cfg, log=lambda _m: None)):
        append_slowly(path, lines[len(lines) // 2 :])
        want = rebuild(root, "claude-code")
        wait_for(lambda: index_dump(cfg.index) == want, timeout=60)
        wait_for(lambda: pg_dump(pg_db, "laptop") == want, timeout=120)
    assert any(str(path) in h for h in held)  # the push did hold it back
