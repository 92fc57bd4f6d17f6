"""The rest of the CLI's human lines follow the one display rule too: `todo`, `fork`, `import`,
`export` and the `git` commands show names, paths, record types and texts from sessions (or
their sources) with every control, escape sequence and bidi override escaped, never raw."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import jsonltape

from .helpers import read_terminal

#: Colours, a window-title change, a bell, fake highlight marks, a right-to-left override.
EVIL = "look \x1b[31mRED\x1b[0m \x1b]0;pwned\x07 and \x02fake\x03 marks \u202eevil"
RAW = [b"\x1b", b"\x07", b"\x02", b"\x03", "\u202e".encode()]
#: A folder name that sets the terminal's title.
DIR = "d\x1b]0;x\x07"
#: ``DIR`` as it is shown.
DIR_SHOWN = "d\\x1b]0;x\\x07"


def _run(
    *args: str, cwd: Path | None = None, ok: bool = True
) -> subprocess.CompletedProcess[bytes]:
    r = subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "NO_COLOR": "1"},
    )
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def _assert_safe(*outputs: bytes) -> None:
    for out in outputs:
        for raw in RAW:
            assert raw not in out, (raw, out)


def _message(mid: str, text: str) -> dict[str, object]:
    return {"message": {"id": mid, "role": "user", "parts": [{"type": "text", "content": text}]}}


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A session in a folder whose name sets the title, with a hostile todo item."""
    folder = tmp_path / DIR
    folder.mkdir()
    path = folder / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.append("user/message", _message("m1", "hi"))
        tape.append("todo/write", {"todos": [{"content": EVIL, "status": "pending"}]})
    return path


def test_todo_shows_an_item_escaped(session: Path) -> None:
    r = _run("todo", str(session))
    _assert_safe(r.stdout, r.stderr)
    assert "[ ] look \\x1b[31mRED" in r.stdout.decode()
    assert "\\x02fake\\x03 marks \\u202eevil" in r.stdout.decode()


def test_fork_prints_its_path_escaped(session: Path) -> None:
    r = _run("fork", str(session), "--at", "1")
    _assert_safe(r.stdout, r.stderr)
    assert f"{DIR_SHOWN}/" in r.stdout.decode()
    assert _run("fork", str(session), "--at", "1", "--json").stdout.startswith(b"{")


def test_export_notes_show_a_torn_session_path_escaped(session: Path) -> None:
    with open(session, "ab") as f:
        f.write(b'{"seq":3,"type":"user/mes')  # a torn tail: export says so on stderr
    r = _run("export", str(session), "--format", "json")
    _assert_safe(r.stderr)
    err = r.stderr.decode()
    assert "torn tail" in err and DIR_SHOWN in err


def _claude_source(tmp_path: Path) -> Path:
    """A Claude Code session under a hostile folder and file name, with a record of a type
    no importer knows (its name holds a title change) and a line that is not JSON."""
    folder = tmp_path / DIR
    folder.mkdir(exist_ok=True)
    source = folder / "s\u202e.jsonl"
    source.write_text(
        '{"type":"user","sessionId":"sid1","uuid":"u1","timestamp":"2026-01-01T00:00:00Z",'
        '"message":{"role":"user","content":"hi"}}\n'
        '{"type":"weird\\u001b]0;y\\u0007","sessionId":"sid1","uuid":"u2",'
        '"timestamp":"2026-01-01T00:00:01Z"}\n'
        "not json\n",
        encoding="utf-8",
    )
    return source


def _clean_source(tmp_path: Path) -> Path:
    """A Claude Code session every line of which is understood (nothing to warn about)."""
    source = tmp_path / "clean.jsonl"
    source.write_text(
        '{"type":"user","sessionId":"sid2","uuid":"u1","timestamp":"2026-01-01T00:00:00Z",'
        '"message":{"role":"user","content":"hi"}}\n',
        encoding="utf-8",
    )
    return source


def test_import_diagnostics_show_source_paths_and_record_types_escaped(tmp_path: Path) -> None:
    source = _claude_source(tmp_path)
    r = _run("import", "--from", "claude-code", str(source), "-o", str(tmp_path / "out"))
    _assert_safe(r.stdout, r.stderr)
    err = r.stderr.decode()
    assert f"{DIR_SHOWN}/s\\u202e.jsonl: line 3: malformed JSON" in err
    assert "weird\\x1b]0;y\\x07" in err  # the unknown type in the summary


def test_import_prints_the_sessions_it_wrote_escaped(tmp_path: Path) -> None:
    source = _clean_source(tmp_path)
    root = tmp_path / f"out{DIR}"
    r = _run("import", "--from", "claude-code", str(source), "-o", str(root))
    _assert_safe(r.stdout, r.stderr)
    assert f"out{DIR_SHOWN}/claude-code/" in r.stdout.decode()


def test_import_shows_a_skipped_path_escaped(tmp_path: Path) -> None:
    tree = tmp_path / DIR
    tree.mkdir()
    (tree / "rollout-1.jsonl.zst").write_bytes(b"\x28\xb5\x2f\xfd")  # skipped, said so
    r = _run("import", "--from", "codex", str(tree), "-o", str(tmp_path / "o"), ok=False)
    assert r.returncode == 2
    _assert_safe(r.stdout, r.stderr)
    assert f"skipped {tree}".replace(DIR, DIR_SHOWN) in r.stderr.decode()


def test_import_shows_the_error_of_each_failed_source_escaped(tmp_path: Path) -> None:
    good = _clean_source(tmp_path)
    bad = good.with_name(f"bad{DIR}.jsonl")
    bad.write_text('{"hello": 1}\n', encoding="utf-8")
    r = _run(
        "import", "--from", "claude-code", str(good), str(bad), "-o", str(tmp_path / "o"), ok=False
    )
    assert r.returncode == 2
    _assert_safe(r.stdout, r.stderr)
    assert f"jsonltape: error: {tmp_path}/bad{DIR_SHOWN}.jsonl: line 1" in r.stderr.decode()


# -- the git commands (these already escaped their lines: kept as regression tests) ----------


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_git_textconv_shows_a_hostile_text_and_title_escaped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, title=f"title {DIR}") as tape:
        tape.append("user/message", _message("m1", EVIL))
    r = _run("git", "textconv", str(path))
    _assert_safe(r.stdout, r.stderr)
    assert b"\\x02fake\\x03 marks \\u202eevil" in r.stdout


def test_init_and_git_status_show_a_hostile_repository_path_escaped(tmp_path: Path) -> None:
    repo = tmp_path / DIR
    repo.mkdir()
    _git("init", "-q", cwd=repo)
    r = _run("init", str(repo))
    _assert_safe(r.stdout, r.stderr)
    assert DIR_SHOWN in r.stdout.decode()
    status = _run("git", "status", str(repo))
    _assert_safe(status.stdout, status.stderr)


def test_git_check_and_merge_driver_show_a_hostile_file_name_escaped(session: Path) -> None:
    with open(session, "ab") as f:
        f.write(b'{"seq":3,"type":"user/mes')
    r = _run("git", "check", str(session), ok=False)
    assert r.returncode == 1
    _assert_safe(r.stdout, r.stderr)
    assert DIR_SHOWN in r.stderr.decode()
    other = session.with_name("other.jsonl")
    other.write_bytes(b"not a session\n")
    ours = session.with_name("ours.jsonl")
    ours.write_bytes(session.read_bytes())
    m = _run("git", "merge-driver", str(session), str(ours), str(other), f"{DIR}/s.jsonl", ok=False)
    assert m.returncode == 1
    _assert_safe(m.stdout, m.stderr)
    assert f"merge {DIR_SHOWN}/s.jsonl: conflict" in m.stderr.decode()


def _on_a_terminal(*args: str) -> bytes:
    """What the command writes to stdout when stdout is a terminal (a pseudo-terminal)."""
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jsonltape", *args],
            stdout=slave,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
        )
        os.close(slave)
        out = read_terminal(master)
        assert proc.wait(timeout=120) == 0
    finally:
        os.close(master)
    return out


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_a_transcript_exported_to_the_terminal_is_shown_escaped(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, title=f"title {DIR}") as tape:
        tape.append("user/message", _message("m1", EVIL))
    out = _on_a_terminal("export", str(path), "--format", fmt)
    _assert_safe(out)
    assert b"\\x02fake\\x03" in out and b"\\u202eevil" in out and b"title d\\x1b" in out
    piped = _run("export", str(path), "--format", fmt).stdout  # a pipe gets it byte for byte
    assert b"\x02fake\x03" in piped


#: What a JSON encoder leaves raw: a bidi override, a C1 CSI, DEL, an invisible tag character.
JSON_EVIL = "over \u202eride, c1 \x9b31m, del \x7f, tag \U000e0069 NotFoundError"
JSON_RAW = [c.encode() for c in "\u202e\x9b\x7f\U000e0069"]


def _json_values(out: bytes) -> list[Any]:
    import json

    text = out.decode().replace("\r\n", "\n")  # a terminal's line discipline adds the \r
    try:
        return [json.loads(text)]
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("command", ["messages", "info", "export", "search", "show"])
def test_json_on_a_terminal_is_the_same_value_with_nothing_raw(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True, title=JSON_EVIL) as tape:  # info and hits show it
        tape.append("user/message", _message("m1", JSON_EVIL))
    index = str(tmp_path / "i.db")
    _run("sync", str(tmp_path), "--index", index)
    args = {
        "messages": ["messages", str(path)],
        "info": ["info", str(path), "--json"],
        "export": ["export", str(path), "--format", "json"],
        "search": ["search", "NotFoundError", "--json", "--index", index],
        "show": ["show", str(path), "--json", "--index", index],
    }[command]
    shown = _on_a_terminal(*args)
    for raw in JSON_RAW:
        assert raw not in shown, (raw, shown)
    piped = _run(*args).stdout  # a pipe gets the encoder's bytes
    assert _json_values(shown) == _json_values(piped)
    assert all(raw in piped for raw in JSON_RAW)
