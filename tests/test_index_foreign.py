"""Foreign trees (Claude Code, Codex, pi) indexed in place, read-only, through the importer's
mapping: real sample files, the real engine and real SQLite."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.search import search
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.foreign import (
    ForeignIngestor,
    engine_for,
    member_path,
    parse_source,
    split_member,
)
from jsonltape_daemon.ingest.ingestor import Ingestor

from jsonltape.interop import foreign
from jsonltape.interop._engine import session_id_for

from .conftest import SAMPLES
from .test_index_helpers import dump, fts_ok

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")

SOURCE_OF = {
    "claude-code-v1.0.108-japanese.jsonl": "claude-code",
    "claude-code-v1.0.98-init.jsonl": "claude-code",
    "codex-0.104-rollout-complete.jsonl": "codex",
    "codex-0.104-rollout-unfinished-turn.jsonl": "codex",
}
CODEX_NAME = "rollout-2026-02-23T19-34-00-019c8bfe-ed40-7a21-b57f-6447436c5881.jsonl"


def tree(tmp_path: Path, source: str, names: list[str] | None = None) -> Path:
    """Copies of the samples of one source (Codex files get rollout names, as on disk)."""
    root = tmp_path / source
    root.mkdir(parents=True)
    for name, src in SOURCE_OF.items():
        if src == source and (names is None or name in names):
            dest = CODEX_NAME.replace("019c", name[-10:-6]) if source == "codex" else name
            shutil.copyfile(SAMPLES / name, root / dest)
    if source == "pi" and names is None:
        shutil.copyfile(SAMPLES / "pi-v1-legacy-large-session.jsonl", root / "pi-legacy.jsonl")
    return root


def rebuild(root: Path, source: str) -> dict[str, Any]:
    store = SqliteStore(":memory:")
    try:
        ForeignIngestor(store, root, source).rescan()
        return dump(store.con)
    finally:
        store.close()


def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            out[os.path.join(dirpath, n)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "index.db")
    yield s
    s.close()


def test_claude_code_tree_is_searchable_with_sidechains_and_japanese(
    tmp_path: Path, store: SqliteStore
) -> None:
    root = tree(tmp_path, "claude-code")
    before = listing(root)
    engine = ForeignIngestor(store, root, "claude-code")
    stats = engine.rescan()
    engine.build_substrings()
    assert stats.errors == 0
    japanese = root / "claude-code-v1.0.108-japanese.jsonl"
    ids = {r[0]: r[1] for r in store.con.execute("SELECT path, id FROM sessions")}
    expected = {}
    for name in ("claude-code-v1.0.108-japanese.jsonl", "claude-code-v1.0.98-init.jsonl"):
        main = session_id_for("claude-code", root / name)
        for sid, _ in foreign.scan("claude-code", root / name, raw=False):
            path = str(root / name) if sid == main else member_path(str(root / name), sid)
            expected[path] = sid
    assert ids == expected and len(ids) == 4  # two sidechains of the Japanese file
    # Every message the mapping gives is there, with its text and status.
    for path, sid in expected.items():
        real, _member = split_member(path)
        want: dict[int, tuple[str | None, str]] = {}
        for m in foreign.messages("claude-code", real):
            if m.session == sid:
                text = m.text if m.text is not None else want[m.seq][0]
                want[m.seq] = (text, m.status)
        got = dict(
            (seq, (text, status))  # a foreign session's texts are kept: message_texts
            for seq, text, status in store.con.execute(
                "SELECT seq, t.text, status FROM messages JOIN sessions USING (sid) "
                "JOIN message_texts t USING (tkey) WHERE path = ?",
                (path,),
            )
        )
        assert got == want, path
    hits = search(store.con, "最新の状態にアップデート")
    assert hits and all(h.path.startswith(str(japanese)) for h in hits)
    assert any("アップデート" in h.snippet for h in hits)
    assert search(store.con, "プロジェクト構造の修正")
    assert engine.rescan().transactions == 0  # nothing changed: nothing added
    assert dump(store.con) == rebuild(root, "claude-code")
    fts_ok(store.con)
    assert listing(root) == before  # nothing written in the source tree


@pytest.mark.parametrize("source", ["codex", "pi"])
def test_codex_and_pi_trees_index_like_the_mapping(
    tmp_path: Path, store: SqliteStore, source: str
) -> None:
    root = tree(tmp_path, source)
    (root / "notes.txt").write_text("not a session")
    (root / "other.jsonl").write_text('{"not": "a session of this source"}\n')
    before = listing(root)
    engine = ForeignIngestor(store, root, source)
    engine.rescan()
    for path, sid, events in store.con.execute("SELECT path, id, events FROM sessions"):
        assert events == sum(1 for s, _ in foreign.scan(source, path, raw=False) if s == sid)
    statuses = dict(store.con.execute("SELECT path, status FROM files"))
    if source == "codex":
        assert len(statuses) == 2 and set(statuses.values()) == {"indexed"}  # rollout-* only
        states = {r[0] for r in store.con.execute("SELECT state FROM sessions")}
        assert states == {"clean", "open-turn"}  # the unfinished turn stays open
        assert search(store.con, "search_workflows")
    else:
        assert statuses[str(root / "other.jsonl")] == "foreign"
        assert search(store.con, "theme.md")
    assert engine.rescan().transactions == 0
    assert dump(store.con) == rebuild(root, source)
    assert listing(root) == before


@pytest.mark.parametrize(
    "name,every",
    [("claude-code-v1.0.108-japanese.jsonl", 5), ("codex-0.104-rollout-complete.jsonl", 4)],
)
def test_a_growing_source_converges_and_mostly_only_appends(
    tmp_path: Path, name: str, every: int
) -> None:
    source = SOURCE_OF[name]
    lines = (SAMPLES / name).read_bytes().splitlines(keepends=True)
    appended_only = 0
    for cut in range(1, len(lines), every):
        root = tmp_path / f"cut{cut}"
        root.mkdir()
        path = root / (CODEX_NAME if source == "codex" else name)
        path.write_bytes(b"".join(lines[:cut]))
        store = SqliteStore(":memory:")
        try:
            engine = ForeignIngestor(store, root, source)
            engine.rescan()
            events = store.con.execute("SELECT count(*) FROM events").fetchone()[0]
            with open(path, "ab") as f:
                f.write(b"".join(lines[cut:]))
            again = engine.rescan()
            assert dump(store.con) == rebuild(root, source), f"cut after line {cut}"
            fts_ok(store.con)
            total = store.con.execute("SELECT count(*) FROM events").fetchone()[0]
            if cut == 1 and source == "codex":
                # only session_meta: no message yet, so the header is provisional (spec B.1)
                # and the first message replaces the session once
                assert again.sessions_removed == again.sessions_added == 1
            elif again.reingested == 0:
                appended_only += 1
                assert again.events == total - events  # only the new rows were added
        finally:
            store.close()
    assert appended_only > 0


def test_torn_last_line_waits_then_truncate_rewrite_and_delete_converge(
    tmp_path: Path, store: SqliteStore
) -> None:
    root = tree(tmp_path, "claude-code", ["claude-code-v1.0.98-init.jsonl"])
    path = root / "claude-code-v1.0.98-init.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    engine = ForeignIngestor(store, root, "claude-code")
    # A last line still being written is left for later.
    path.write_bytes(b"".join(lines[:20]) + lines[20][: len(lines[20]) // 2])
    engine.rescan()
    state, error, n = store.con.execute("SELECT state, error, events FROM sessions").fetchone()
    assert state == "torn-tail" and "source line 21" in error
    cut = foreign.scan_file("claude-code", path, raw=False)
    assert n == sum(1 for _ in cut.events()) and cut.report.torn is not None
    path.write_bytes(data)  # the writer finished the line and went on
    engine.rescan()
    assert store.con.execute("SELECT state FROM sessions").fetchone()[0] != "torn-tail"
    assert dump(store.con) == rebuild(root, "claude-code")
    # Truncated to fewer lines.
    path.write_bytes(b"".join(lines[:10]))
    assert engine.rescan().reingested == 1
    assert dump(store.con) == rebuild(root, "claude-code")
    # Rewritten in place with the same size (text changed, not appended).
    swapped = data.replace(b"Claude", b"Clawed")
    assert len(swapped) == len(data) and swapped != data
    path.write_bytes(swapped)
    engine.rescan()
    assert dump(store.con) == rebuild(root, "claude-code")
    path.write_bytes(data)
    os.utime(path, ns=(1, 1))  # replaced by an older copy, same size
    engine.rescan()
    assert dump(store.con) == rebuild(root, "claude-code")
    # Deleted: its session goes, and so do the members of a file with sidechains.
    japanese = root / "claude-code-v1.0.108-japanese.jsonl"
    shutil.copyfile(SAMPLES / japanese.name, japanese)
    engine.rescan()
    assert store.con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 4
    japanese.unlink()
    engine.sync_paths([str(japanese)])  # a watcher hint about the real file
    assert store.con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    path.unlink()
    engine.rescan()
    assert store.con.execute("SELECT count(*) FROM files").fetchone()[0] == 0
    assert dump(store.con) == rebuild(root, "claude-code")
    fts_ok(store.con)


def test_sidechains_appear_and_vanish_with_their_file(tmp_path: Path, store: SqliteStore) -> None:
    name = "claude-code-v1.0.108-japanese.jsonl"
    root = tree(tmp_path, "claude-code", [name])
    path = root / name
    lines = (SAMPLES / name).read_bytes().splitlines(keepends=True)
    engine = ForeignIngestor(store, root, "claude-code")
    path.write_bytes(lines[0])
    engine.rescan()
    path.write_bytes(b"".join(lines))  # sidechains start in later lines
    engine.rescan()
    assert store.con.execute("SELECT count(*) FROM sessions").fetchone()[0] == 3
    assert dump(store.con) == rebuild(root, "claude-code")
    path.write_bytes(b"".join(lines[:3]))  # cut back before them
    engine.rescan()
    assert dump(store.con) == rebuild(root, "claude-code")


def test_parse_source() -> None:
    assert parse_source("codex:/x/y") == ("codex", "/x/y")
    assert parse_source("pi:~/s")[1] == os.path.expanduser("~/s")
    for bad in ("/x/y", "nope:/x", "codex:"):
        with pytest.raises(ValueError):
            parse_source(bad)


def test_engine_for_a_recorded_root(tmp_path: Path) -> None:
    store = SqliteStore(":memory:")
    try:
        native = engine_for(store, str(tmp_path))
        assert type(native) is Ingestor
        codex = engine_for(store, f"codex:{tmp_path}")
        assert isinstance(codex, ForeignIngestor) and codex.kind.source == "codex"
        assert codex.root == str(tmp_path)
    finally:
        store.close()


def test_cli_sync_source_mirrors_a_foreign_tree_read_only(tmp_path: Path) -> None:
    import subprocess
    import sys

    cc = tmp_path / "claude"
    cc.mkdir()
    shutil.copy(SAMPLES / "claude-code-v1.0.108-japanese.jsonl", cc)
    (tmp_path / "root").mkdir()
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in cc.iterdir())

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jsonltape", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    idx = str(tmp_path / "index.db")
    first = run("sync", str(tmp_path / "root"), "--index", idx, "--source", f"claude-code:{cc}")
    assert first.returncode == 0, first.stderr
    hit = run("search", "最新の状態", "--index", idx, "--json")
    assert hit.returncode == 0 and "最新の状態" in hit.stdout
    again = run(
        "sync", str(tmp_path / "root"), "--index", idx, "--source", f"claude-code:{cc}", "--json"
    )
    assert json.loads(again.stdout)["events"] == 0
    rebuilt = run("index", "rebuild", "--index", idx)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "最新の状態" in run("search", "最新の状態", "--index", idx, "--json").stdout
    bad = run("sync", str(tmp_path / "root"), "--index", idx, "--source", "nope:/x")
    assert bad.returncode == 2 and "KIND:PATH" in bad.stderr
    after = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in cc.iterdir())
    assert after == before  # nothing written in the source tree
