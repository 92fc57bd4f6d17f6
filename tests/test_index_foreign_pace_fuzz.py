"""A Claude Code file with sidechains changed in any way at any moment of its sync (before it,
while its mapping reads it, between its own sync and its members'): one more sync, and a
rescan, make the index equal a rebuild. Hypothesis draws the sequences; the real sample, the
real engine, real SQLite; and what the daemon's pace holds back comes back by itself."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import ForeignIngestor

from jsonltape.interop import foreign as mapping

from .conftest import SAMPLES
from .test_index_foreign import rebuild
from .test_index_foreign_pace import Clock
from .test_index_helpers import dump

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
NAME = "claude-code-v1.0.108-japanese.jsonl"  # two sidechains, in lines 16-40
LINES = (SAMPLES / NAME).read_bytes().splitlines(keepends=True) if SAMPLES.is_dir() else []
N = len(LINES)

Change = tuple[str, int]
CHANGES = st.one_of(
    st.tuples(st.just("grow"), st.integers(1, 8)),  # the agent appends lines
    st.tuples(st.just("cut"), st.integers(0, N)),  # truncated in place to so many lines
    st.tuples(st.just("rewrite"), st.just(0)),  # same size, new text and mtime, same inode
    st.tuples(st.just("replace"), st.integers(1, N)),  # another inode put in its place
    st.tuples(st.just("delete"), st.just(0)),
    st.tuples(st.just("foreign"), st.just(0)),  # no longer a Claude Code file
)
WHEN = st.sampled_from(["before", "mapping", "member"])


class Disk:
    """The file as the agent (or a user) changes it; every change gets a later mtime."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tick = 1_700_000_000_000_000_000

    def lines(self) -> int:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return 0
        have = data.splitlines(keepends=True)
        return next((i for i, line in enumerate(have) if i >= N or line != LINES[i]), len(have))

    def apply(self, change: Change) -> None:
        what, n = change
        p = self.path
        if what == "delete":
            p.unlink(missing_ok=True)
            return
        if what == "grow":
            have = self.lines()
            with open(p, "ab") as f:
                f.write(b"".join(LINES[have : have + n]))
        elif what == "cut":
            with open(p, "r+b" if p.exists() else "wb") as f:
                f.truncate(0)
                f.write(b"".join(LINES[:n]))
        elif what == "rewrite":
            if not p.exists():
                return
            data = p.read_bytes()
            with open(p, "r+b") as f:
                f.write(data.replace(b"Claude", b"Clawed").replace("の".encode(), "は".encode()))
        elif what == "replace":
            new = p.with_name("new.tmp")
            new.write_bytes(b"".join(LINES[:n]))
            os.replace(new, p)
        elif what == "foreign":
            with open(p, "wb") as f:
                f.write(b'{"foo": 1}\n' * 3)
        self.tick += 1_000_000_000
        os.utime(p, ns=(self.tick, self.tick))


@contextmanager
def acting(monkeypatch: pytest.MonkeyPatch, when: str, act: Callable[[], None]) -> Iterator[None]:
    """Run ``act`` once at ``when`` of the next sync: as the mapping starts to read the file
    (after its fstat), or before the first member is synced."""
    done = [False]

    def once() -> None:
        if not done[0]:
            done[0] = True
            act()

    if when == "mapping":
        real_scan = mapping.scan_file

        def scan(*a: Any, **k: Any) -> Any:
            once()
            return real_scan(*a, **k)

        monkeypatch.setattr(mapping, "scan_file", scan)
    elif when == "member":
        real_member = ForeignIngestor._sync_member

        def member(self: ForeignIngestor, *a: Any, **k: Any) -> None:
            once()
            real_member(self, *a, **k)

        monkeypatch.setattr(ForeignIngestor, "_sync_member", member)
    else:
        act()
    try:
        yield
    finally:
        monkeypatch.undo()


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(st.tuples(CHANGES, WHEN), min_size=1, max_size=6), start=st.integers(0, N))
def test_a_file_with_sidechains_changed_at_any_moment_of_its_sync_ends_equal_to_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[Change, str]], start: int
) -> None:
    root = tmp_path_factory.mktemp("claude")
    path = root / NAME
    disk = Disk(path)
    disk.apply(("cut", start))
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, "claude-code")  # not paced: nothing held back
        engine.rescan()
        with pytest.MonkeyPatch.context() as mp:
            for change, when in steps:
                with acting(mp, when, lambda c=change: disk.apply(c)):  # type: ignore[misc]
                    engine.sync_paths([str(path)])
        engine.sync_paths([str(path)])  # the file stopped changing
        want = rebuild(root, "claude-code")
        assert dump(store.con) == want
        engine.rescan()
        assert dump(store.con) == want
    finally:
        store.close()


MOVES = st.one_of(
    CHANGES,
    st.tuples(st.just("rename"), st.just(0)),  # to the other name and back, with its hints
    st.tuples(st.just("none"), st.just(0)),  # only time passes
    st.tuples(st.just("rescan"), st.integers(0, 1)),  # a rescan (after an append, or not)
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(MOVES, st.sampled_from([0.0, 0.01, 0.2, 1.0]), st.sampled_from([0.0, 0.5, 5.0])),
        min_size=1,
        max_size=8,
    )
)
def test_what_the_pace_holds_back_comes_back_and_ends_equal_to_a_rebuild(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[Change, float, float]]
) -> None:
    # The daemon's part played by hand: the watcher's hints for what changed, and each path
    # a sync held back hinted again at its time (Hints.later). No rescan at the end: what is
    # held must come back by itself, whatever happened to the file (or a rescan) meanwhile.
    root = tmp_path_factory.mktemp("claude")
    names = [root / NAME, root / ("renamed-" + NAME)]
    disk = Disk(names[0])
    disk.apply(("cut", N // 2))
    store = SqliteStore(":memory:")
    try:
        engine = ForeignIngestor(store, root, "claude-code", paced=True)
        clock = Clock()
        engine.pace.clock = clock
        engine.rescan()
        later: dict[str, float] = {}

        def sync(hinted: set[str], takes: float) -> None:
            hinted |= {p for p, at in later.items() if at <= clock.t}
            for p in hinted:
                later.pop(p, None)
            clock.step = takes
            engine.sync_paths(sorted(hinted))
            clock.step = 0.0
            for p, at in engine.take_held().items():
                later[p] = min(at, later.get(p, at))

        for (what, n), takes, passes in steps:
            hinted = {str(disk.path)}
            if what == "rename":
                if disk.path.exists():
                    to = names[1] if disk.path == names[0] else names[0]
                    os.replace(disk.path, to)
                    hinted.add(str(to))
                    disk.path = to
            elif what == "rescan":
                if n:
                    disk.apply(("grow", 1))  # its hint comes with the rescan's, or after it
                clock.t += passes
                clock.step = takes
                engine.rescan()  # whatever is held: their hints still come back
                clock.step = 0.0
                continue
            elif what != "none":
                disk.apply((what, n))
            else:
                hinted = set()
            clock.t += passes
            sync(hinted, takes)
        while later:  # the held hints come back at their times, synced then
            clock.t = min(later.values())
            sync(set(), 1.0)
        assert dump(store.con) == rebuild(root, "claude-code")
    finally:
        store.close()
