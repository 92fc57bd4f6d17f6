"""A foreign file that is costly to map and keeps growing is mapped again only so often
(``ingest/pace.py``): what a sync holds back is synced at its time, never lost, and the rows
then equal a rebuild. Real sample files, the real engine, real SQLite; only the clock the pace
reads is scripted (a mapping's duration is what it paces by)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignFiles, ForeignIngestor
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.ingest.pace import Pace
from jsonltape_daemon.service.daemon import Config, Daemon
from jsonltape_daemon.service.watcher import Hints

from .conftest import SAMPLES
from .test_daemon import _Running, wait_for
from .test_index_foreign import rebuild
from .test_index_helpers import dump

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
NAME = "claude-code-v1.0.108-japanese.jsonl"


class Clock:
    """Monotonic seconds that move by ``step`` at every reading (a sync reads it twice)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.step = 0.0

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _half(tmp_path: Path) -> tuple[Path, Path, list[bytes]]:
    lines = (SAMPLES / NAME).read_bytes().splitlines(keepends=True)
    root = tmp_path / "claude"
    root.mkdir()
    path = root / NAME
    path.write_bytes(b"".join(lines[: len(lines) // 2]))
    return root, path, lines[len(lines) // 2 :]


def append_slowly(path: Path, lines: list[bytes]) -> None:
    """Append ``lines`` one at a time, as an agent writing a session does."""
    for line in lines:
        with open(path, "ab") as f:
            f.write(line)
        time.sleep(0.03)


def index_dump(index: Path) -> object:
    """What a running daemon's index holds (read through a reader's connection)."""
    con = connect(index, readonly=True)
    try:
        return dump(con)
    finally:
        con.close()


def _events(store: SqliteStore) -> int:
    return int(store.con.execute("SELECT count(*) FROM events").fetchone()[0])


class Grown(NamedTuple):
    engine: ForeignIngestor
    store: SqliteStore
    clock: Clock
    root: Path
    path: Path
    mapped_at: float  #: when the first mapping ended
    before: int  #: events indexed by it


@contextmanager
def _grown(tmp_path: Path, mapping_takes: float, *, paced: bool = True) -> Iterator[Grown]:
    """Half the sample indexed by a mapping that "took" ``mapping_takes`` seconds, then the
    other half appended, not synced yet."""
    root, path, rest = _half(tmp_path)
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, "claude-code", paced=paced)
        clock = Clock()
        engine.pace.clock = clock
        clock.step = mapping_takes
        engine.rescan()
        clock.step = 0.0
        with open(path, "ab") as f:
            f.write(b"".join(rest))
        yield Grown(engine, store, clock, root, path, clock.t, _events(store))
    finally:
        store.close()


def test_a_costly_growing_file_is_held_back_until_its_pace_then_synced_whole(
    tmp_path: Path,
) -> None:
    with _grown(tmp_path, 1.0) as g:  # the next mapping waits 4 s after it
        engine, path = g.engine, str(g.path)
        stats = engine.sync_paths([path])
        assert stats.files == 0 and _events(g.store) == g.before  # held back: nothing read
        held = engine.take_held()
        assert held == {path: g.mapped_at + Pace.factor * 1.0}
        assert engine.take_held() == {}  # said once
        g.clock.t = held[path] - 0.01
        engine.sync_paths([path])
        assert _events(g.store) == g.before and engine.take_held() == held  # not yet
        g.clock.t = held[path]
        engine.sync_paths([path])
        assert engine.take_held() == {}
        assert _events(g.store) > g.before
        assert dump(g.store.con) == rebuild(g.root, "claude-code")


def test_a_file_mapped_quickly_is_never_held_back(tmp_path: Path) -> None:
    with _grown(tmp_path, Pace.floor / 4) as g:  # well below the floor
        g.engine.sync_paths([str(g.path)])
        assert g.engine.take_held() == {}
        assert dump(g.store.con) == rebuild(g.root, "claude-code")


def test_an_engine_not_paced_syncs_every_path_it_is_given_whatever_its_cost(
    tmp_path: Path,
) -> None:
    # Only the daemon hints what a sync held back again: any other caller of sync_paths (a
    # test, a tool) lost what was held (a loaded machine made a 50 ms mapping, and tests
    # comparing a sync with a rebuild failed now and then).
    with _grown(tmp_path, 1.0, paced=False) as g:
        g.engine.sync_paths([str(g.path)])
        assert g.engine.take_held() == {}
        assert dump(g.store.con) == rebuild(g.root, "claude-code")
    store = SqliteStore(":memory:")
    try:
        mirror = Mirror(store, str(tmp_path / "none"), [("claude-code", str(g.root))])
        engine = mirror.engines[1]
        assert isinstance(engine, ForeignIngestor) and not engine.pace.on
    finally:
        store.close()


def test_a_held_path_becomes_a_hint_at_its_time_and_not_before() -> None:
    hints = Hints()
    stop = threading.Event()
    at = time.monotonic() + 0.3
    hints.later("/r/a.jsonl", at)
    assert hints.take(0.05, quiet=0.0, max_wait=0.0, stop=stop) == ([], False)
    paths, rescan = hints.take(5.0, quiet=0.0, max_wait=0.0, stop=stop)
    assert (paths, rescan) == (["/r/a.jsonl"], False) and time.monotonic() >= at
    hints.later("/r/a.jsonl", at + 10)
    hints.later("/r/a.jsonl", at)  # the earlier of two times wins
    assert hints.take(1.0, quiet=0.0, max_wait=0.0, stop=stop)[0] == ["/r/a.jsonl"]


def _held_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factor: float
) -> tuple[Path, Path, list[bytes], Config]:
    """Half the sample in a tree a daemon's config mirrors (no rescan while it runs), every
    sync of it held back for ``factor`` times its duration."""
    monkeypatch.setattr(Pace, "floor", 0.0)
    monkeypatch.setattr(Pace, "factor", factor)
    root, path, rest = _half(tmp_path)
    sessions = tmp_path / "sessions"
    sessions.mkdir(mode=0o700)
    cfg = Config(
        sessions, tmp_path / "i.db", rescan_interval=3600, sources=(("claude-code", str(root)),)
    )
    return root, path, rest, cfg


def test_the_daemon_syncs_what_it_held_back_while_the_file_grew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every mapping holds the file back for 40 times its duration: most of the appends below
    # come while it is held, and the last must still reach the index, through the real loop.
    root, path, rest, cfg = _held_daemon(tmp_path, monkeypatch, 40.0)
    with _Running(Daemon(cfg, log=lambda _m: None)):
        append_slowly(path, rest)
        want = rebuild(root, "claude-code")
        wait_for(lambda: index_dump(cfg.index) == want, timeout=60)


def test_a_file_growing_during_its_sync_is_mapped_once_for_it_and_its_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Japanese sample has two sidechains (members): an agent appending while they are
    # synced made each of them map the whole file again (three mappings a sync).
    root, path, rest = _half(tmp_path)
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, "claude-code")
        engine.rescan()
        with open(path, "ab") as f:
            f.write(b"".join(rest[: len(rest) // 2]))
        maps = [0]
        real_map, real_member = ForeignFiles._map, ForeignIngestor._sync_member
        late = iter(rest[len(rest) // 2 :])

        def counted(self: ForeignFiles, *a: Any, **k: Any) -> Any:
            maps[0] += 1
            return real_map(self, *a, **k)

        def growing(self: ForeignIngestor, *a: Any, **k: Any) -> None:
            with open(path, "ab") as f:  # the agent writes on
                f.write(next(late, b""))
            real_member(self, *a, **k)

        monkeypatch.setattr(ForeignFiles, "_map", counted)
        monkeypatch.setattr(ForeignIngestor, "_sync_member", growing)
        engine.sync_paths([str(path)])
        members = store.con.execute("SELECT count(*) FROM files WHERE path LIKE ?", (f"{path}#%",))
        assert members.fetchone()[0] >= 2
        assert maps[0] == 1  # the file and its members: one mapping
        monkeypatch.setattr(ForeignIngestor, "_sync_member", real_member)
        with open(path, "ab") as f:
            f.write(b"".join(late))
        engine.sync_paths([str(path)])  # what came during the sync, members included
        assert dump(store.con) == rebuild(root, "claude-code")
    finally:
        store.close()


NOT_CLAUDE = [
    b'{"foo": 1}\n' * 40,  # JSON, but no Claude Code line: the mapping fails (FormatError)
    b'{"type": "session_meta", "payload": {}}\n',  # another agent's file
]


@pytest.mark.parametrize("content", NOT_CLAUDE)
@pytest.mark.parametrize("how", ["in place", "new inode"])
def test_members_of_a_file_that_no_longer_maps_go_as_in_a_rebuild(
    tmp_path: Path, content: bytes, how: str
) -> None:
    # The file's mapping of the last sync is still the kind's: the members must not be synced
    # from it (their stale rows stayed searchable) nor be left as rows a rebuild has not.
    root = tmp_path / "claude"
    root.mkdir()
    path = root / NAME
    path.write_bytes((SAMPLES / NAME).read_bytes())
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, "claude-code")
        engine.rescan()
        assert store.con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 3
        if how == "in place":
            with open(path, "r+b") as f:
                f.truncate(0)
                f.write(content)
        else:
            new = root / "new.tmp"
            new.write_bytes(content)
            os.replace(new, path)
        engine.sync_paths([str(path)])
        assert dump(store.con) == rebuild(root, "claude-code")
        engine.rescan()
        assert dump(store.con) == rebuild(root, "claude-code")
        path.write_bytes((SAMPLES / NAME).read_bytes())  # and back: all three again
        engine.sync_paths([str(path)])
        assert dump(store.con) == rebuild(root, "claude-code")
    finally:
        store.close()


def test_held_paths_coming_back_keep_to_the_hints_capacity() -> None:
    # A held path that comes back when the hints are full asks for a rescan (which syncs it),
    # as a watcher's hint does: it does not grow the hints past their capacity.
    hints = Hints(capacity=2)
    stop = threading.Event()
    hints.add("/r/a.jsonl")
    hints.add("/r/b.jsonl")
    now = time.monotonic()
    hints.later("/r/c.jsonl", now - 1.0)
    hints.later("/r/d.jsonl", now - 1.0)
    paths, rescan = hints.take(1.0, quiet=0.0, max_wait=0.0, stop=stop)
    assert sorted(paths) == ["/r/a.jsonl", "/r/b.jsonl"] and rescan
    assert hints.overflows == 2


def test_what_a_stopped_daemon_held_back_is_synced_when_it_starts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Held for 1000 times each sync's time: the daemon is stopped with the file's last lines
    # held back (their hint only in its memory); the next daemon's first rescan syncs them.
    root, path, rest, cfg = _held_daemon(tmp_path, monkeypatch, 1000.0)
    held: list[str] = []
    real_hold = Daemon._hold

    def hold(self: Daemon, paths: dict[str, float]) -> None:
        held.extend(paths)
        real_hold(self, paths)

    monkeypatch.setattr(Daemon, "_hold", hold)
    want = rebuild(root, "claude-code")  # before the appends: the first daemon's index

    def index() -> dict[str, Any]:
        c = connect(cfg.index, readonly=True)
        try:
            return dump(c)
        finally:
            c.close()

    with _Running(Daemon(cfg, log=lambda _m: None)):
        wait_for(lambda: index() == want)
        for line in rest:
            with open(path, "ab") as f:
                f.write(line)
        wait_for(lambda: str(path) in held)
    want = rebuild(root, "claude-code")
    assert index() != want  # what it held back was not synced before it stopped
    with _Running(Daemon(cfg, log=lambda _m: None)):
        wait_for(lambda: index() == want, timeout=60)


def test_a_held_path_counts_as_pending_from_the_change_it_was_held_for() -> None:
    # `daemon status` reads pending and lag from the hints: a path held back for its pace is
    # behind the whole time, from the hint it was taken for, until it is taken again.
    hints = Hints()
    stop = threading.Event()
    hints.add("/r/a.jsonl")
    noted = time.monotonic()
    assert hints.take(1.0, quiet=0.0, max_wait=0.0, stop=stop)[0] == ["/r/a.jsonl"]
    hints.later("/r/a.jsonl", time.monotonic() + 0.4)  # the sync held it back
    assert (len(hints), hints.held()) == (1, 1)
    time.sleep(0.1)
    assert hints.oldest_age() >= time.monotonic() - noted - 0.01
    assert hints.take(5.0, quiet=0.0, max_wait=0.0, stop=stop)[0] == ["/r/a.jsonl"]
    hints.later("/r/a.jsonl", time.monotonic() + 0.2)  # held again: still as old
    assert hints.oldest_age() >= time.monotonic() - noted - 0.01
    assert hints.take(5.0, quiet=0.0, max_wait=0.0, stop=stop)[0] == ["/r/a.jsonl"]
    assert (len(hints), hints.held(), hints.oldest_age()) == (0, 0, 0.0)  # synced: caught up
