"""One title for a session, however it is read (issue 13, defect 7).

A session's header is written once. An import writes it with its first batch, a read-only
scan (``sync --source``) just before the session's first event: both fix it at the same point
of the mapping (once the session has a message and a title, or a reply), so the same file gives
the same title, cwd and metadata either way, whatever the batch sizes. A title the source gives
later (a Claude Code rename, a pi ``session_info``, a Gemini CLI summary) is a ``session/title``
event (spec §8.4), which the fold and the index take as the latest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.interop import _engine, import_file
from jsonltape.interop.foreign import scan_file

from .conftest import SAMPLES

HERE = Path(__file__).parent / "fixtures"
FILES = [
    ("claude-code", HERE / "claude21" / "streamed-tool-results.jsonl"),
    ("claude-code", HERE / "interop" / "claude-rewind-compact.jsonl"),
    ("codex", HERE / "codex15" / "rollout-0154.jsonl"),
    ("codex", HERE / "interop" / "codex-compacted.jsonl"),
    ("pi", HERE / "interop" / "pi-v3-tree.jsonl"),  # a session_info name after the first message
    ("pi", HERE / "pi1" / "legacy-compaction-index.jsonl"),
    ("gemini-cli", HERE / "gemini" / "session-2026-03-02T10-00-4f1c2b9e.jsonl"),  # $set summary
    ("gemini-cli", HERE / "gemini" / "legacy" / "session-2026-03-02T10-00-5d2e8f1a.json"),
    ("claude-code", SAMPLES / "claude-code-v1.0.108-japanese.jsonl"),
    ("codex", SAMPLES / "codex-0.104-rollout-complete.jsonl"),
    ("pi", SAMPLES / "pi-v1-legacy-large-session.jsonl"),
]
IDS = [f"{s}:{p.name}" for s, p in FILES]


def _place(path: Path, tmp: Path) -> Path:
    name = (
        path.name
        if path.name.startswith("rollout-") or "codex" not in path.name
        else (f"rollout-{path.name}")
    )  # a tree of Codex sessions is searched for rollout-*.jsonl
    dst = tmp / "src" / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dst)
    t = time.time() - 7200
    os.utime(dst, (t, t))
    return dst


def _headers(path: Path) -> dict[str, dict[str, object]]:
    return {k: v for k, v in jsonltape.reader.header(path).__dict__.items() if k != "meta"}


@pytest.mark.parametrize(("source", "path"), FILES, ids=IDS)
def test_import_and_scan_write_the_same_header_whatever_the_batch_size(
    source: str, path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _place(path, tmp_path)
    scan = scan_file(source, src)
    scanned = {sid: e for sid, e in scan.events() if e.seq == 0}
    for chunk in (1, 3, _engine.CHUNK):
        monkeypatch.setattr(_engine, "CHUNK", chunk)
        report = import_file(source, src, tmp_path / f"root-{chunk}", settle=None)
        assert report.status == "imported", report.error
        for session in report.sessions:
            head = jsonltape.reader.header(session)
            mapped = scanned[head.id].data
            assert (head.title, head.cwd, head.agent, head.created) == (
                mapped.get("title"),
                mapped.get("cwd"),
                mapped.get("agent"),
                mapped["created"],
            ), (chunk, session)


@pytest.mark.parametrize(("source", "path"), FILES, ids=IDS)
def test_sessions_lists_one_title_for_an_import_and_its_source_indexed_in_place(
    source: str, path: Path, tmp_path: Path
) -> None:
    src = _place(path, tmp_path)
    env = {**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")}
    root = tmp_path / "sessions"

    def jt(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "jsonltape", *args], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    jt("import", "--from", source, str(src), "-o", str(root), "--settle", "0")
    jt("sync", str(root), "--index", str(tmp_path / "a.db"))
    empty = tmp_path / "empty"
    empty.mkdir()
    jt("sync", str(empty), "--index", str(tmp_path / "b.db"), "--source", f"{source}:{src.parent}")

    def titles(index: str) -> dict[str, str | None]:
        rows = [json.loads(x) for x in jt("sessions", "--index", index, "--json").splitlines()]
        return {r["session"]: r["title"] for r in rows}

    imported = titles(str(tmp_path / "a.db"))
    assert imported == titles(str(tmp_path / "b.db"))
    for session in root.rglob("*.jsonl"):
        assert imported[jsonltape.reader.header(session).id] == fold.title(session)


def test_a_title_given_after_the_first_reply_is_the_latest_title(tmp_path: Path) -> None:
    src = _place(HERE / "interop" / "pi-v3-tree.jsonl", tmp_path)
    session = Path(import_file("pi", src, tmp_path / "root", settle=0).sessions[0])
    titles = [e.data["title"] for e in jsonltape.read(session) if e.type == "session/title"]
    assert titles == ["README translations"]
    assert jsonltape.reader.header(session).title != fold.title(session) == "README translations"


def test_a_title_after_a_run_that_stopped_before_the_header_was_fixed_is_kept(
    tmp_path: Path,
) -> None:
    """A run that ends before a session has a title writes its header as it is then; a title
    the next run finds is a session/title, not lost (the replay fixes the header where the
    first run stopped)."""
    src = tmp_path / "chats" / "session-2026-03-09T10-00-0a1b2c3d.jsonl"
    src.parent.mkdir()
    meta = {
        "sessionId": "0a1b2c3d-0000-4000-8000-000000000001",
        "projectHash": "ab" * 32,
        "startTime": "2026-03-09T10:00:00.000Z",
        "lastUpdated": "2026-03-09T10:00:00.000Z",
    }
    image = {
        "id": "u-1",
        "timestamp": "2026-03-09T10:00:01.000Z",
        "type": "user",
        "content": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}],
    }
    src.write_text(json.dumps(meta) + "\n" + json.dumps(image) + "\n")  # fmt: skip
    root = tmp_path / "root"
    first = import_file("gemini-cli", src, root, settle=None)
    assert first.status == "imported", first.error
    session = Path(first.sessions[0])
    assert jsonltape.reader.header(session).title is None  # nothing to title it yet
    with open(src, "a") as f:
        f.write(json.dumps({"$set": {"summary": "Read the screenshot"}}) + "\n")
    again = import_file("gemini-cli", src, root, settle=None)
    assert again.status == "imported", again.error
    assert fold.title(session) == "Read the screenshot"


def test_a_sidechain_written_only_at_the_end_gets_its_import_marker(tmp_path: Path) -> None:
    """A sidechain whose header is never fixed (its first prompt holds only an image, and no
    reply follows) is created by the run's last write; it still ends with import/sync."""
    lines = (SAMPLES / "claude-code-v1.0.108-japanese.jsonl").read_text().splitlines()
    first = json.loads(lines[15])
    assert first["isSidechain"] and first["type"] == "user"  # line 16: a sidechain's prompt
    first["message"]["content"] = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
    ]
    src = tmp_path / "src" / "7d2c9a10-1b2c-4d3e-8f40-5a6b7c8d9e0f.jsonl"
    src.parent.mkdir()
    src.write_text("\n".join([*lines[:15], json.dumps(first)]) + "\n")
    report = import_file("claude-code", src, tmp_path / "root", settle=None)
    assert report.status == "imported", report.error
    assert len(report.sessions) == 2  # the main session and the sidechain
    for session in report.sessions:
        types = [e.type for e in jsonltape.read(session)]
        assert "import/sync" in types, session
    again = import_file("claude-code", src, tmp_path / "root", settle=None)
    assert again.status == "unchanged" and again.events == 0
