"""`jsonltape import` and `jsonltape export` as a user's shell sees them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jsonltape
from jsonltape.interop import foreign, import_file

from .conftest import SAMPLES

FIXTURES = Path(__file__).parent / "fixtures" / "interop"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def tree(tmp_path: Path) -> Path:
    """A ~/.claude/projects-like tree: two projects, one session each, finished."""
    projects = tmp_path / "projects"
    old = time.time() - 7200
    for project, name in (
        ("-path-to-Demo", "claude-code-v1.0.98-init.jsonl"),
        ("-path-to-Demo-ja", "claude-code-v1.0.108-japanese.jsonl"),
    ):
        d = projects / project
        d.mkdir(parents=True)
        shutil.copyfile(SAMPLES / name, d / name)
        os.utime(d / name, (old, old))
    return projects


def test_import_a_tree_then_again_adds_nothing(tmp_path: Path) -> None:
    projects = tree(tmp_path)
    root = tmp_path / "root"
    r = run("import", "--from", "claude-code", str(projects), "-o", str(root))
    assert r.returncode == 0, r.stderr
    written = r.stdout.split()
    assert len(written) == 4  # two sessions and the two sidechains of the Japanese one
    assert all(Path(p).parent == root / "claude-code" for p in written)
    assert all(Path(p).stat().st_mode & 0o777 == 0o600 for p in written)
    assert (root / "claude-code").stat().st_mode & 0o777 == 0o700
    assert "importing 2 claude-code files" in r.stderr  # the progress bar's label on stderr
    assert "2 files, 2 imported; 4 sessions created" in r.stderr
    sizes = {p: Path(p).stat().st_size for p in written}
    again = run("import", "--from", "claude-code", str(projects), "-o", str(root), "--json")
    assert again.returncode == 0, again.stderr
    reports = [json.loads(line) for line in again.stdout.splitlines()]
    assert [rep["status"] for rep in reports] == ["unchanged", "unchanged"]
    assert {p: Path(p).stat().st_size for p in written} == sizes
    quiet = run("import", "--from", "claude-code", str(projects), "-o", str(root))
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == ""  # nothing changed, so no path is printed
    assert "import: 2 files, 2 unchanged; 0 sessions created, 0 events appended" in quiet.stderr


def test_import_defaults_to_the_jsonltape_root(tmp_path: Path) -> None:
    src = tmp_path / "s" / "rollout.jsonl"
    src.parent.mkdir()
    shutil.copyfile(SAMPLES / "codex-0.104-rollout-complete.jsonl", src)
    root = tmp_path / "default-root"
    r = run("import", "--from", "codex", str(src), env={"JSONLTAPE_ROOT": str(root)})
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).parent == root / "codex"


def test_import_errors_are_one_line_exit_2_and_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    pi = SAMPLES / "pi-v1-legacy-large-session.jsonl"
    r = run("import", "--from", "codex", str(pi), "-o", str(root))
    assert r.returncode == 2
    assert r.stderr.startswith(f"jsonltape: error: {pi}: line 1, byte 0: ")
    assert "use --from pi" in r.stderr and "Traceback" not in r.stderr
    assert not root.exists()
    r = run("import", "--from", "pi", str(tmp_path / "missing"), "-o", str(root))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "missing: no such file or directory" in r.stderr
    r = run("import", "--from", "aider", str(pi))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_import_reports_torn_and_malformed_lines_on_stderr(tmp_path: Path) -> None:
    data = (SAMPLES / "claude-code-v1.0.98-init.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    src = tmp_path / "s.jsonl"
    src.write_bytes(b"".join(lines[:3]) + b"not json at all\n" + lines[3][:40])
    r = run("import", "--from", "claude-code", str(src), "-o", str(tmp_path / "root"))
    assert r.returncode == 0, r.stderr
    assert f"{src}: line 4: malformed JSON" in r.stderr and "(kept raw)" in r.stderr
    assert f"{src}: line 5: incomplete last line (40 bytes" in r.stderr


def test_export_writes_an_owner_only_file_and_reports_redactions(tmp_path: Path) -> None:
    src = tmp_path / "s" / "rewind.jsonl"
    src.parent.mkdir()
    shutil.copyfile(FIXTURES / "claude-rewind-compact.jsonl", src)
    session = import_file("claude-code", src, tmp_path / "root", settle=0).sessions[0]
    out = tmp_path / "share.html"
    r = run("export", session, "--format", "html", "-o", str(out), "--redact", "tools")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert out.stat().st_mode & 0o777 == 0o600
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "ALTER TABLE" not in text
    assert "jsonltape: hidden: 3 tool arguments, 3 tool results, 1 file ledger" in r.stderr
    r = run("export", session, "--format", "openai", "--redact", "secrets")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"] == "claude-sonnet-4-5"
    assert "redacted secrets: none found" in r.stderr


def test_export_of_a_torn_session_says_so_and_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user("hello")
    with open(path, "ab") as f:
        f.write(b'{"seq":3,"type":"user/mess')
    r = run("export", str(path), "--format", "markdown")
    assert r.returncode == 0, r.stderr
    assert "hello" in r.stdout
    assert r.stderr.startswith(f"jsonltape: note: {path}: torn tail at line 4")
    r = run("export", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_foreign_scan_yields_exactly_what_import_writes(tmp_path: Path) -> None:
    src = SAMPLES / "claude-code-v1.0.108-japanese.jsonl"
    copy = tmp_path / src.name
    shutil.copyfile(src, copy)
    report = import_file("claude-code", copy, tmp_path / "root", settle=None)
    written = {}
    for session in report.sessions:
        evs = [e for e in jsonltape.read(session) if e.type not in ("session/flush", "import/sync")]
        written[jsonltape.header(session).id] = evs
    scanned: dict[str, list[jsonltape.Event]] = {}
    for sid, event in foreign.scan("claude-code", copy):
        scanned.setdefault(sid, []).append(event)
    assert scanned.keys() == written.keys()
    for sid, evs in written.items():
        got = scanned[sid]
        assert [e.seq for e in got] == list(range(len(got)))  # header 0, then dense
        assert [(e.type, e.key, e.surface, e.sources) for e in got[1:]] == [
            (e.type, e.key, e.surface, e.sources) for e in evs[1:]
        ]
        assert [e.data for e in got[1:]] == [e.data for e in evs[1:]]
        assert got[0].data["title"] == evs[0].data["title"]
    main = jsonltape.header(report.sessions[0]).id
    msgs = [m for m in foreign.messages("claude-code", copy) if m.session == main]
    assert [m.status for m in msgs] == ["current"] * len(msgs) == ["current"] * 25
    last = msgs[-1]
    assert last.role == "assistant" and last.source_ids == ("e9bd5ce8-d37d-49a1-868c-8281d0d0a32b",)
    assert "CLAUDE.mdファイルを最新の状態にアップデートしました" in (last.text or "")
    assert last.time == 1757238866499  # 2025-09-07T09:54:26.499Z, the source's own time
