"""The commit guard with the real ``git`` binary: ``jsonltape git pre-commit`` run by a real
pre-commit hook, ``git check`` on files and on staged blobs.

Secrets are assembled at run time from harmless pieces, so no real-looking key is in this
repository's source. HOME and git's global config point into the test's temporary directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import jsonltape
from jsonltape._framing import frame
from jsonltape.git._check import ALLOW_FILE, check_paths, check_staged

from .helpers import one_turn
from .secret_cases import AWS_ID, OPENAI_PLAIN
from .secret_cases import GITHUB as GITHUB_TOKEN
from .test_git_install import git, jt

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")

#: An AWS access key id, an OpenAI key and a GitHub token, built at run time (secret_cases) so
#: the source holds none.
AWS, OPENAI, GITHUB = AWS_ID, OPENAI_PLAIN, GITHUB_TOKEN
SECRETS = {"aws-access-token": AWS, "openai-key": OPENAI, "github-pat": GITHUB}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh repository with session attributes and a pre-commit hook running the guard; the
    user's own git configuration is never read (HOME and the global config are temporary)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.name", "Test")
    git(root, "config", "user.email", "test@example.invalid")
    (root / ".gitattributes").write_text("sessions/*.jsonl merge=jsonltape diff=jsonltape\n")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nexec '{sys.executable}' -m jsonltape git pre-commit\n")
    hook.chmod(0o755)
    (root / "sessions").mkdir()
    git(root, "add", ".gitattributes")
    git(root, "commit", "-q", "-m", "attributes")
    monkeypatch.chdir(root)
    yield root


def session(path: Path, turns: int = 2, *, secret: str | None = None, sid: str = "s") -> Path:
    with jsonltape.open(path, create=True, session_id=sid) as tape:
        for i in range(turns):
            one_turn(tape, f"message {i}", with_tool=True)
            tape.flush()
        if secret is not None:
            with tape.turn():
                call = tape.assistant(tool_calls=[{"name": "Bash", "arguments": {"cmd": "env"}}])
                cid = call.data["message"]["parts"][0]["id"]
                tape.tool_call("Bash", {"cmd": "env"}, call_id=cid)
                tape.tool_result(cid, f"HOME=/home/me\nCREDS {secret}\n")
            tape.flush()
    return path


def append_turn(path: Path, text: str = "later") -> None:
    with jsonltape.open(path) as tape:
        one_turn(tape, text)
        tape.flush()


def commit(root: Path, *paths: str, message: str = "sessions") -> subprocess.CompletedProcess[str]:
    git(root, "add", "--", *paths)
    return git(root, "commit", "-q", "-m", message, check=False)


def refused(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, "the commit went through"
    assert "commit refused" in done.stderr, done.stderr
    return done.stderr


# -- what the hook refuses --------------------------------------------------------------------


def test_a_clean_session_commits(repo: Path) -> None:
    session(repo / "sessions" / "a.jsonl")
    done = commit(repo, "sessions/a.jsonl")
    assert done.returncode == 0, done.stderr
    assert check_staged(repo) == []


def test_a_torn_tail_is_refused_and_passes_after_repair(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    with path.open("ab") as f:
        f.write(b'{"seq":99,"type":"user/mess')
    err = refused(commit(repo, "sessions/a.jsonl"))
    assert "sessions/a.jsonl: torn tail at line" in err
    assert "a writer may be mid-write: wait for it to close, or run `jsonltape repair`" in err
    assert jt(repo, "repair", str(path)).returncode == 0
    assert commit(repo, "sessions/a.jsonl").returncode == 0


def test_a_corrupt_line_is_refused(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    data = bytearray(path.read_bytes())
    at = data.index(b"message 0")
    data[at] = ord("M")  # the CRC of that line no longer matches; checkpoints follow it
    path.write_bytes(bytes(data))
    err = refused(commit(repo, "sessions/a.jsonl"))
    assert "sessions/a.jsonl: corrupt at line 3" in err
    assert "crc mismatch" in err


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_a_key_in_a_tool_result_is_refused_without_showing_it(repo: Path, kind: str) -> None:
    secret = SECRETS[kind]
    session(repo / "sessions" / "a.jsonl", secret=secret)
    err = refused(commit(repo, "sessions/a.jsonl"))
    line = next(x for x in err.splitlines() if "a secret" in x)
    assert f"({kind} rule, fingerprint {kind}:" in line
    assert "line 21 (seq 20)" in line  # the tool result of the third turn
    assert ") in $.data.message.parts[0].response (commit a masked copy" in line
    assert "jsonltape redact" in err
    # Neither the secret nor any 8-character piece of it is printed.
    pieces = {secret[i : i + 8] for i in range(len(secret) - 7)}
    assert not any(p in err for p in pieces), err


def test_the_redacted_copy_commits_where_the_original_is_refused(repo: Path) -> None:
    src = session(repo / "sessions" / "a.jsonl", secret=AWS)
    refused(commit(repo, "sessions/a.jsonl"))
    git(repo, "rm", "-q", "--cached", "sessions/a.jsonl")
    dst = repo / "sessions" / "a.redacted.jsonl"
    done = jt(repo, "redact", str(src), "-o", str(dst))
    assert done.returncode == 0, done.stderr
    assert commit(repo, "sessions/a.redacted.jsonl").returncode == 0
    assert AWS not in git(repo, "show", "HEAD:sessions/a.redacted.jsonl").stdout


def test_a_fingerprint_in_the_allow_file_or_git_config_accepts_that_secret_only(
    repo: Path,
) -> None:
    session(repo / "sessions" / "a.jsonl", secret=AWS)
    err = refused(commit(repo, "sessions/a.jsonl"))
    fp = err.split("fingerprint ", 1)[1].split(")", 1)[0]
    (repo / ALLOW_FILE).write_text(f"# a test fixture key, not a secret\n{fp}  # ok\n")
    assert check_staged(repo) == []
    (repo / ALLOW_FILE).unlink()
    assert [p.kind for p in check_staged(repo)] == ["secret"]
    git(repo, "config", "--add", "jsonltape.allowSecret", fp)
    assert check_staged(repo) == []
    # Another secret in another session is still refused.
    session(repo / "sessions" / "b.jsonl", secret=GITHUB, sid="b")
    git(repo, "add", "sessions/b.jsonl")
    assert [(p.path, p.kind) for p in check_staged(repo)] == [("sessions/b.jsonl", "secret")]


def test_allow_secrets_accepts_every_secret_but_not_damage(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl", secret=OPENAI)
    git(repo, "add", "sessions/a.jsonl")
    assert jt(repo, "git", "pre-commit").returncode == 1
    assert jt(repo, "git", "pre-commit", "--allow-secrets").returncode == 0
    with path.open("ab") as f:
        f.write(b"{")
    git(repo, "add", "sessions/a.jsonl")
    done = jt(repo, "git", "pre-commit", "--allow-secrets")
    assert done.returncode == 1
    assert "torn tail" in done.stderr
    assert "secret" not in done.stderr


def test_a_rewritten_line_is_refused_with_its_seq(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    assert commit(repo, "sessions/a.jsonl").returncode == 0
    lines = path.read_bytes().splitlines(keepends=True)
    # Line 3 (seq 2) rewritten as a valid line: new text, a CRC that matches.
    lines[2] = lines[2].replace(b"message 0", b"massage 0")
    lines[2] = frame(lines[2][:-19] + b"}")
    path.write_bytes(b"".join(lines))
    assert jt(repo, "verify", str(path)).returncode == 0  # the file itself is fine
    err = refused(commit(repo, "sessions/a.jsonl"))
    assert "rewritten history: line 3 (seq 2, byte" in err
    assert "differs from HEAD's version" in err


def test_deleted_lines_are_refused(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl", turns=3)
    assert commit(repo, "sessions/a.jsonl").returncode == 0
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:10]))  # a cut at a line boundary: a valid shorter file
    err = refused(commit(repo, "sessions/a.jsonl"))
    assert "rewritten history: HEAD's lines from line 11 (seq 10, byte" in err
    assert "are gone" in err


def test_an_appended_session_is_checked_from_heads_end_only(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl", secret=AWS)
    git(repo, "add", "sessions/a.jsonl")
    git(repo, "commit", "-q", "--no-verify", "-m", "committed past the guard")
    append_turn(path)
    # HEAD's secret is in the history already; only the appended turn is new, and clean.
    assert commit(repo, "sessions/a.jsonl").returncode == 0
    with jsonltape.open(path) as tape:
        tape.user(f"again {GITHUB}")
        tape.flush()
    err = refused(commit(repo, "sessions/a.jsonl"))
    assert "github-pat" in err
    assert "aws-access-token" not in err


def test_the_seq_must_continue_after_heads_last_line(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    assert commit(repo, "sessions/a.jsonl").returncode == 0
    last = path.read_bytes().splitlines(keepends=True)[-1]
    path.write_bytes(path.read_bytes() + last)  # the last line again: seq repeats
    err = refused(commit(repo, "sessions/a.jsonl"))
    assert "where" in err and "was expected" in err


def test_only_the_staged_blob_counts_not_the_work_tree(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    git(repo, "add", "sessions/a.jsonl")
    clean = path.read_bytes()
    path.write_bytes(clean + b'{"torn')  # dirty work tree, clean index
    assert jt(repo, "git", "pre-commit").returncode == 0
    git(repo, "add", "sessions/a.jsonl")
    path.write_bytes(clean)  # clean work tree, dirty index
    done = jt(repo, "git", "pre-commit")
    assert done.returncode == 1
    assert "torn tail" in done.stderr


def test_a_jsonl_without_the_attribute_is_checked_when_it_is_a_session(repo: Path) -> None:
    (repo / "logs").mkdir()
    path = session(repo / "logs" / "a.jsonl")
    with path.open("ab") as f:
        f.write(b"{")
    (repo / "logs" / "other.jsonl").write_text('{"not": "a session"}\n{"torn')
    (repo / "notes.txt").write_text("sk-this-is-not-a-session-file-" + "1" * 20)
    git(repo, "add", "logs", "notes.txt")
    assert [(p.path, p.kind) for p in check_staged(repo)] == [
        ("logs/a.jsonl", "no-merge-attribute"),  # a note, not a refusal
        ("logs/a.jsonl", "torn"),
    ]
    assert [p.refuses for p in check_staged(repo)] == [False, True]


def test_a_session_file_that_is_no_session_is_refused(repo: Path) -> None:
    (repo / "sessions" / "x.jsonl").write_text("hello\n")
    git(repo, "add", "sessions/x.jsonl")
    problems = check_staged(repo)
    assert [p.kind for p in problems] == ["not-a-session"]


def test_a_renamed_session_is_compared_with_the_file_it_came_from(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl", turns=3)
    assert commit(repo, "sessions/a.jsonl").returncode == 0
    git(repo, "mv", "sessions/a.jsonl", "sessions/b.jsonl")
    moved = repo / "sessions" / "b.jsonl"
    moved.write_bytes(b"".join(moved.read_bytes().splitlines(keepends=True)[:-3]))
    git(repo, "add", "sessions/b.jsonl")
    assert [(p.path, p.kind) for p in check_staged(repo)] == [("sessions/b.jsonl", "rewritten")]
    assert not path.exists()


def test_a_repaired_head_version_is_not_a_rewrite(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    with path.open("ab") as f:
        f.write(b'{"seq":')
    git(repo, "add", "sessions/a.jsonl")
    git(repo, "commit", "-q", "--no-verify", "-m", "a torn tail got in")
    assert jt(repo, "repair", str(path)).returncode == 0
    assert commit(repo, "sessions/a.jsonl").returncode == 0


# -- git check --------------------------------------------------------------------------------


def test_check_reports_work_tree_files_and_exits_1(repo: Path, tmp_path: Path) -> None:
    good = session(tmp_path / "good.jsonl", sid="g")  # outside any repository
    bad = session(tmp_path / "bad.jsonl", secret=OPENAI, sid="b")
    done = jt(tmp_path, "git", "check", str(good))
    assert done.returncode == 0, done.stderr
    done = jt(tmp_path, "git", "check", str(good), str(bad))
    assert done.returncode == 1
    assert "bad.jsonl: line 21 (seq 20): a secret (openai-key rule" in done.stderr
    assert OPENAI not in done.stderr
    assert [p.kind for p in check_paths([bad], allow_secrets=True)] == []


def test_check_compares_a_tracked_file_with_head(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl", turns=3)
    assert commit(repo, "sessions/a.jsonl").returncode == 0
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-2]))
    assert [p.kind for p in check_paths([path])] == ["rewritten"]


def test_check_staged_reads_the_index(repo: Path) -> None:
    path = session(repo / "sessions" / "a.jsonl")
    git(repo, "add", "sessions/a.jsonl")
    with path.open("ab") as f:
        f.write(b"{")
    assert jt(repo, "git", "check", "--staged", "sessions/a.jsonl").returncode == 0
    done = jt(repo, "git", "check", "sessions/a.jsonl")
    assert done.returncode == 1
    assert "torn tail" in done.stderr
    done = jt(repo, "git", "check", "--staged", "sessions/none.jsonl")
    assert done.returncode == 1
    assert "not in the index" in done.stderr


def test_pre_commit_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    outside = tmp_path / "plain"
    outside.mkdir()
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "jsonltape", "git", "pre-commit"],
        cwd=outside,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert "not inside a git work tree" in done.stderr


# -- sessions git would merge as text ---------------------------------------------------------


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("jsonltape: warning:")]


def test_sessions_outside_the_pattern_are_named_once_with_the_install_that_covers_them(
    repo: Path,
) -> None:
    for rel in ("logs/a.jsonl", "logs/b.jsonl", "top.jsonl", "odd dir/[x].jsonl"):
        (repo / rel).parent.mkdir(exist_ok=True)
        session(repo / rel, turns=1, sid=rel.replace("/", "-").replace(" ", "-")[:8] or "t")
    (repo / "logs" / "data.jsonl").write_text('{"not": "a session"}\n')
    (repo / ".gitattributes").write_text(
        "sessions/*.jsonl merge=jsonltape diff=jsonltape\nlogs/b.jsonl diff=jsonltape\n"
    )
    session(repo / "sessions" / "marked.jsonl", turns=1, sid="m")
    git(repo, "add", ".")
    done = jt(repo, "git", "pre-commit")
    assert done.returncode == 0, done.stderr  # said, not refused
    [warning] = _warnings(done.stderr)
    assert done.stderr.strip() == warning
    # diff=jsonltape alone is no merge driver: logs/b.jsonl is named too.
    assert "logs/a.jsonl and 3 more staged session files have no merge=jsonltape attribute" in (
        warning
    )
    assert "marked.jsonl" not in warning and "data.jsonl" not in warning
    assert "a conflict on every divergent append" in warning
    command = warning.split("run `", 1)[1].split("`", 1)[0]
    assert command.startswith("jsonltape git install --pattern ")
    # The command it names, run as it is, covers them all: the next run says nothing.
    words = shlex.split(command)
    assert jt(repo, *words[1:]).returncode == 0
    git(repo, "add", ".gitattributes")
    done = jt(repo, "git", "pre-commit")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert git(repo, "check-attr", "merge", "--", "odd dir/[x].jsonl").stdout.endswith(
        "merge: jsonltape\n"
    )
    # logs/ also holds a JSONL file that is no session: the files are named, not the folder.
    assert "--pattern /logs/a.jsonl --pattern /logs/b.jsonl" in command
    assert git(repo, "check-attr", "merge", "--", "logs/data.jsonl").stdout.endswith(
        "merge: unspecified\n"
    )


def test_check_and_check_staged_name_an_unmarked_session_once(repo: Path) -> None:
    (repo / "logs").mkdir()
    session(repo / "logs" / "a.jsonl", turns=1)
    session(repo / "logs" / "b.jsonl", turns=1, sid="b")
    git(repo, "add", "logs")
    for args in (["git", "check"], ["git", "check", "--staged"]):
        done = jt(repo, *args, "logs/a.jsonl", "logs/b.jsonl")
        assert done.returncode == 0, done.stderr
        [warning] = _warnings(done.stderr)
        assert "logs/a.jsonl and 1 more" in warning and "--pattern /logs/\\*.jsonl" not in warning
        assert "--pattern '/logs/*.jsonl'" in warning
    done = jt(repo, "git", "check", "sessions/../.gitattributes")
    assert _warnings(done.stderr) == []  # not a session: refused as such, no note
    outside = session(repo.parent / "out.jsonl", turns=1, sid="o")
    assert jt(repo, "git", "check", str(outside)).stderr == ""  # no repository: no attributes


def test_git_status_names_tracked_sessions_git_merges_as_text(repo: Path) -> None:
    assert jt(repo, "git", "install").returncode == 0
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "installed")
    done = jt(repo, "git", "status")
    assert "configured  session files outside the patterns: every tracked session file" in (
        done.stdout
    ), done.stdout
    session(repo / "a.jsonl", turns=1)
    (repo / "b.jsonl").symlink_to("/dev/zero")  # tracked as a link: never read
    git(repo, "add", "a.jsonl", "b.jsonl")
    done = jt(repo, "git", "status")
    assert done.returncode == 1
    line = next(x for x in done.stdout.splitlines() if "outside the patterns" in x)
    assert line.startswith("missing     session files outside the patterns: a.jsonl has no")
    # The top folder also tracks b.jsonl, which is no session: the file is named, not *.jsonl.
    assert line.endswith("run `jsonltape git install --pattern /a.jsonl`")
    assert jt(repo, "git", "install", "--pattern", "/a.jsonl").returncode == 0
    assert "configured  session files outside" in jt(repo, "git", "status").stdout


def test_a_secret_split_across_chunks_is_refused_when_its_last_part_is_committed(
    repo: Path,
) -> None:
    path = repo / "sessions" / "a.jsonl"
    with jsonltape.open(path, create=True, session_id="c") as tape:
        one_turn(tape, "streaming")
        tape.append("turn/start", {})
        tape.append("assistant/chunk", {"delta": "the token is "}, ignorable=True)
        tape.append("assistant/chunk", {"delta": GITHUB[:22]}, ignorable=True)
        tape.flush()
    # Neither chunk holds a secret on its own: the first commit goes through.
    assert commit(repo, "sessions/a.jsonl").returncode == 0, "a part alone was refused"
    with jsonltape.open(path) as tape:
        tape.append("assistant/chunk", {"delta": GITHUB[22:] + ", keep it"}, ignorable=True)
        tape.flush()
    err = refused(commit(repo, "sessions/a.jsonl"))
    line = next(x for x in err.splitlines() if "a secret" in x)
    assert "split across 2 assistant/chunk events: a secret (github-pat rule" in line
    assert "lines 8-11 (seqs 7-10)" in line  # the two chunks it spans, a checkpoint between
    pieces = {GITHUB[i : i + 8] for i in range(len(GITHUB) - 7)}
    assert not any(p in err for p in pieces), err
    # The masked copy of the file passes.
    git(repo, "restore", "--staged", "sessions/a.jsonl")
    dst = repo / "sessions" / "b.jsonl"
    assert jt(repo, "redact", str(path), "-o", str(dst)).returncode == 0
    assert commit(repo, "sessions/b.jsonl").returncode == 0
