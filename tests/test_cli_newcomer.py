"""The rough edges a new user hits, each through the real command line (a subprocess): usage
errors in one line, values the writer must refuse, `info` in words, a fresh install's `sync`,
and an index directory a umask of 000 made world-writable."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest

import jsonltape
from jsonltape._time import format_ms
from jsonltape.cli import cli


def run(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        input=stdin,
        env={**os.environ, **(env or {})},
    )


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("jsonltape: error: "), proc.stderr
    return lines[0]


def _leaves() -> list[list[str]]:
    out: list[list[str]] = []

    def walk(group: click.Group, prefix: list[str]) -> None:
        for name in group.list_commands(click.Context(group)):
            cmd = group.get_command(click.Context(group), name)
            if isinstance(cmd, click.Group):
                walk(cmd, [*prefix, name])
            else:
                out.append([*prefix, name])

    walk(cli, [])
    return out


# -- usage errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("command", _leaves(), ids=" ".join)
def test_a_usage_error_is_one_line_with_a_pointer_to_help(command: list[str]) -> None:
    proc = run(*command, "--no-such-option")
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert line == (
        f"jsonltape: error: no such option '--no-such-option' "
        f"(see 'jsonltape {' '.join(command)} --help')"
    )


def test_top_level_usage_errors_are_one_line() -> None:
    for args, what in (
        (["--bogus"], "no such option '--bogus'"),
        (["nosuch"], "no such command 'nosuch'"),
        (["index", "nosuch"], "no such command 'nosuch'"),
        (["cat"], "missing argument 'PATH'"),
        (["cat", "s.jsonl", "--from", "x"], "invalid value for '--from'"),
    ):
        proc = run(*args)
        assert proc.returncode == 2, args
        assert one_error_line(proc).startswith(f"jsonltape: error: {what}"), args


def test_a_bare_group_still_shows_its_help() -> None:
    proc = run("daemon")
    assert "Commands:" in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


def test_control_characters_in_an_error_are_escaped(tmp_path: Path) -> None:
    proc = run("cat", "a\nb\x1b[31m.jsonl", cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "a\\nb\\x1b[31m.jsonl" in line


# -- what append refuses ----------------------------------------------------------------------


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    assert run("new", str(path)).returncode == 0
    return path


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--wait", "nan"], "invalid value for '--wait': 'nan' is not a finite number"),
        (["--wait", "inf"], "invalid value for '--wait': 'inf' is not a finite number"),
        (["--wait", "-1"], "invalid value for '--wait': '-1' is not a finite number"),
        (["--data", "null"], "invalid value for '--data': must be a JSON object {...}, not null"),
        (["--data", "[1]"], "must be a JSON object {...}, not an array"),
        (["--data", "5"], "must be a JSON object {...}, not a number"),
        (["--data", '"x"'], "must be a JSON object {...}, not a string"),
        (["--data", "{"], "invalid value for '--data': not valid JSON"),
    ],
)
def test_append_refuses_values_that_are_not_what_they_claim(
    tape: Path, args: list[str], says: str
) -> None:
    before = tape.read_bytes()
    proc = run("append", str(tape), "--type", "user/note", *args)
    assert proc.returncode == 2
    assert says in one_error_line(proc)
    assert tape.read_bytes() == before


def test_append_refuses_data_null_on_stdin_too(tape: Path) -> None:
    before = tape.read_bytes()
    proc = run(
        "append", str(tape), "-", stdin='{"type":"user/note"}\n{"type":"user/note","data":null}\n'
    )
    assert proc.returncode == 2
    assert one_error_line(proc) == (
        "jsonltape: error: <stdin>: line 2: $.data: data must be a JSON object"
    )
    assert tape.read_bytes() == before


def test_an_unknown_type_is_refused_unless_ignorable_and_the_error_says_how(tape: Path) -> None:
    proc = run("append", str(tape), "--type", "x-foo/bar")
    assert proc.returncode == 2
    assert "--ignorable" in one_error_line(proc)
    assert run("messages", str(tape)).returncode == 0  # nothing was written
    ok = run("append", str(tape), "--type", "x-foo/bar", "--ignorable")
    assert ok.returncode == 0, ok.stderr
    assert run("messages", str(tape)).returncode == 0  # readers skip it


def test_seqs_and_counts_are_bounded_by_the_format(tape: Path) -> None:
    for args in (["cat", str(tape), "--from", "-1"], ["messages", str(tape), "--at", str(2**70)]):
        proc = run(*args)
        assert proc.returncode == 2, args
        assert "invalid value for" in one_error_line(proc)


# -- info in words ----------------------------------------------------------------------------


def test_info_shows_local_times_and_explains_an_open_turn_left_on_purpose(tape: Path) -> None:
    with jsonltape.open(tape) as t:  # a script that opens a turn and exits cleanly
        t.append("turn/start", {})
    out = run("info", str(tape))
    assert out.returncode == 0, out.stderr
    header = jsonltape.read(tape).__next__()
    assert f"created:      {format_ms(header.time, utc=False)}" in out.stdout
    assert str(header.time) not in out.stdout  # no raw epoch milliseconds
    assert "open turn, on purpose: the turn started at seq 1 has no end" in out.stdout
    assert "closed the session cleanly" in out.stdout
    assert "0600 (owner only)" in out.stdout
    raw = run("info", str(tape), "--json")
    assert f'"created":{header.time}' in raw.stdout and '"open_turn":1' in raw.stdout


def test_info_says_when_a_turn_was_left_open_by_a_crash(tmp_path: Path) -> None:
    from jsonltape import _framing

    path = tmp_path / "crashed.jsonl"
    assert run("new", str(path)).returncode == 0
    # a writer killed after writing turn/start: no close marker follows
    with open(path, "ab") as f:
        f.write(_framing.frame(b'{"seq":1,"type":"turn/start","time":1800000000000,"data":{}}'))
    out = run("info", str(path))
    assert out.returncode == 0, out.stderr
    assert "open turn: the turn started at seq 1 never ended" in out.stdout
    assert "jsonltape repair" in out.stdout


def test_info_flags_a_file_others_can_read(tape: Path) -> None:
    os.chmod(tape, 0o644)
    out = run("info", str(tape))
    assert "0644: readable by group or others" in out.stdout


# -- a fresh install ----------------------------------------------------------------------------


def test_a_bare_sync_on_a_fresh_install_creates_the_default_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc = run("sync", env={"JSONLTAPE_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert "0 sessions indexed" in proc.stdout
    root = home / "sessions"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_a_root_the_user_names_is_not_created(tmp_path: Path) -> None:
    named = tmp_path / "typo"
    proc = run("sync", str(named), env={"JSONLTAPE_HOME": str(tmp_path / "home")})
    assert proc.returncode == 2
    assert one_error_line(proc) == f"jsonltape: error: {named}: no such directory"
    assert not named.exists()
    via_env = run("sync", env={"JSONLTAPE_HOME": str(tmp_path / "h"), "JSONLTAPE_ROOT": str(named)})
    assert via_env.returncode == 2 and not named.exists()
    for command in (["daemon", "run"], ["daemon", "start"]):
        proc = run(*command, str(named), env={"JSONLTAPE_HOME": str(tmp_path / "home")})
        assert proc.returncode == 2, command
        assert one_error_line(proc) == f"jsonltape: error: {named}: no such directory"
    assert not named.exists()


def test_a_world_writable_data_dir_is_tightened_and_another_dir_refused(tmp_path: Path) -> None:
    """With umask 000 a data directory made by hand (or another tool) is 0777."""
    home = tmp_path / "home"
    other = tmp_path / "shared-dir"
    old = os.umask(0)
    try:
        home.mkdir(mode=0o777)
        (home / "sessions").mkdir(mode=0o777)
        other.mkdir(mode=0o777)
        proc = run("sync", env={"JSONLTAPE_HOME": str(home)})
        assert proc.returncode == 0, proc.stderr
        assert stat.S_IMODE(home.stat().st_mode) == 0o700  # ours: tightened
        index = home / "index.db"
        assert stat.S_IMODE(index.stat().st_mode) == 0o600
        refused = run("sync", "--index", str(other / "i.db"), env={"JSONLTAPE_HOME": str(home)})
    finally:
        os.umask(old)
    assert refused.returncode == 2
    line = one_error_line(refused)
    assert f"{other}: directory is writable by group or others (mode 0777)" in line
    assert stat.S_IMODE(other.stat().st_mode) == 0o777  # not ours: left as it is
    assert not (other / "i.db").exists()
