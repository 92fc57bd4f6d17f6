"""The core commands: new, append, cat, info, verify, repair — output, exit codes, errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import jsonltape
from jsonltape.cli import cli

from .helpers import golden, raw_lines


def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess: what a user's shell sees."""
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_new_prints_id_and_creates_owner_only_file(tape_path: Path) -> None:
    r = run("new", str(tape_path), "--id", "sess-1", "--title", "T", "--meta", '{"k": 1}')
    assert r.returncode == 0, r.stderr
    assert r.stdout == "sess-1\n"
    h = jsonltape.header(tape_path)
    assert (h.id, h.title, h.meta) == ("sess-1", "T", {"k": 1})
    assert tape_path.stat().st_mode & 0o777 == 0o600


def test_append_from_stdin_is_all_or_nothing_and_prints_seqs(tape_path: Path) -> None:
    run("new", str(tape_path))
    good = '{"type":"turn/start"}\n{"type":"x.cli/n","data":{"n":1},"key":"k","ignorable":true}\n'
    r = run("append", str(tape_path), "-", input=good)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "2"]
    size = tape_path.stat().st_size
    bad = (
        '{"type":"x.cli/n","data":{"n":2},"ignorable":true}\n'
        '{"type":"x.cli/n","data":{"n":NaN},"ignorable":true}\n'
    )
    r = run("append", str(tape_path), "-", input=bad)
    assert r.returncode == 2
    assert r.stderr.startswith("jsonltape: error: <stdin>: line 2")
    assert "Traceback" not in r.stderr
    assert tape_path.stat().st_size == size
    # a retry with the same key prints the existing seq and writes nothing
    r = run(
        "append",
        str(tape_path),
        *("--type", "x.cli/n", "--data", '{"n":1}', "--key", "k", "--ignorable"),
    )
    assert r.stdout == "2\n"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--type", "user/message", "--data", "{not json"], "'--data': not valid JSON"),
        (
            [
                "--type",
                "user/message",
                "--data",
                '{"message":{"id":"m","role":"robot","parts":[]}}',
            ],
            "$.data.message.role",
        ),
        (["--type", "Not A Type"], "namespaced"),
        (["--data", "{}"], "--type is required"),
    ],
)
def test_append_bad_input_is_one_line_and_writes_nothing(
    tape_path: Path, args: list[str], fragment: str
) -> None:
    run("new", str(tape_path))
    size = tape_path.stat().st_size
    r = run("append", str(tape_path), *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert fragment in r.stderr
    assert tape_path.stat().st_size == size


def test_missing_file_and_foreign_file_are_clear_errors(tmp_path: Path) -> None:
    r = run("cat", str(tmp_path / "nope.jsonl"))
    assert r.returncode == 2 and "no such session file" in r.stderr
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"type":"user","message":"hi"}\n')
    for cmd in ("cat", "info", "verify", "repair"):
        r = run(cmd, str(foreign))
        assert r.returncode == 2, (cmd, r.stderr)
        assert "not a jsonltape session" in r.stderr
        assert "Traceback" not in r.stderr
    assert foreign.read_text() == '{"type":"user","message":"hi"}\n'


def test_a_fifo_or_a_directory_is_refused_at_once_by_name(tmp_path: Path) -> None:
    # A FIFO would block a plain open until some writer came along; a directory opens fine
    # read-only and used to fail at the first read with "Is a directory" and exit 1.
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for cmd in ("cat", "info", "verify", "messages", "export"):
        r = run(cmd, str(fifo))  # run() times out after 60 s instead of hanging
        assert r.returncode == 2, (cmd, r.stderr)
        assert r.stderr == f"jsonltape: error: {fifo}: not a regular file\n"
    r = run("verify", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == f"jsonltape: error: {tmp_path}: is a directory, not a session file\n"


def test_a_socket_is_refused_by_name_and_verify_goes_on(tape_path: Path, tmp_path: Path) -> None:
    golden(tape_path, turns=1)
    sock_path = tmp_path / "s.sock.jsonl"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        r = run("verify", str(sock_path), str(tape_path))
    assert r.returncode == 2
    assert r.stderr == f"jsonltape: error: {sock_path}: not a regular file\n"
    assert f"{tape_path}: clean" in r.stdout  # the next file was still verified


def test_a_reader_that_leaves_early_gets_no_error_line(tape_path: Path) -> None:
    golden(tape_path, turns=200)  # more than a pipe buffer of output
    cat = subprocess.Popen(
        [sys.executable, "-m", "jsonltape", "cat", str(tape_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert cat.stdout is not None and cat.stderr is not None
    assert cat.stdout.read(10)
    cat.stdout.close()  # what `| head -c 10` does
    assert cat.wait(timeout=60) != 0
    with cat.stderr:
        assert cat.stderr.read() == b""


def test_cat_prints_raw_committed_lines_with_filters(tape_path: Path) -> None:
    golden(tape_path, turns=2)
    runner = CliRunner()
    r = runner.invoke(cli, ["cat", str(tape_path)], catch_exceptions=False)
    assert r.stdout_bytes == tape_path.read_bytes()
    r = runner.invoke(cli, ["cat", str(tape_path), "--type", "turn/*", "--from", "3"])
    types = [json.loads(x)["type"] for x in r.stdout.splitlines()]
    seqs = [json.loads(x)["seq"] for x in r.stdout.splitlines()]
    assert set(types) == {"turn/start", "turn/end"} and min(seqs) >= 3


def test_verify_exit_codes_and_json(tape_path: Path, tmp_path: Path) -> None:
    golden(tape_path, turns=3)
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(tape_path.read_bytes() + b'{"seq":')
    corrupt = tmp_path / "corrupt.jsonl"
    lines = raw_lines(tape_path)
    corrupt.write_bytes(b"".join(lines[:3] + lines[4:]))
    for p in (torn, corrupt):
        p.chmod(0o600)
    assert run("verify", str(tape_path)).returncode == 0
    r = run("verify", str(torn), "--json")
    assert r.returncode == 1
    obj = json.loads(r.stdout)
    assert obj["state"] == "torn-tail" and obj["offset"] == tape_path.stat().st_size
    assert {"path", "state", "events", "last_checkpoint_seq", "line", "offset"} <= set(obj)
    r = run("verify", str(tape_path), str(corrupt), str(torn), "--json")
    assert r.returncode == 3
    states = [json.loads(x)["state"] for x in r.stdout.splitlines()]
    assert states == ["clean", "corrupt", "torn-tail"]
    r = run("verify", str(corrupt))
    assert "corrupt, 3 events at line 4" in r.stdout


def test_repair_cuts_torn_tail_into_sidecar_and_refuses_corrupt(
    tape_path: Path, tmp_path: Path
) -> None:
    golden(tape_path, turns=2)
    good = tape_path.read_bytes()
    tape_path.write_bytes(good + b'{"seq":99,"ty')
    r = run("repair", str(tape_path), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["state_before"] == "torn-tail" and result["cut_bytes"] == 13
    assert Path(result["sidecar"]).read_bytes() == b'{"seq":99,"ty'
    assert Path(result["sidecar"]).stat().st_mode & 0o777 == 0o600
    assert tape_path.read_bytes() == good
    r = run("repair", str(tape_path))
    assert r.returncode == 0 and "nothing to repair" in r.stdout
    lines = raw_lines(tape_path)
    tape_path.write_bytes(b"".join(lines[:2] + lines[3:]))
    r = run("repair", str(tape_path))
    assert r.returncode == 3 and "--force" in r.stderr
    r = run("repair", str(tape_path), "--force")
    assert r.returncode == 0 and run("verify", str(tape_path)).returncode == 0


def test_second_writer_gets_exit_4(tape_path: Path) -> None:
    with jsonltape.open(tape_path, create=True):
        r = run("append", str(tape_path), "--type", "x.cli/n")
        assert r.returncode == 4
        assert "another writer" in r.stderr
        r = run("repair", str(tape_path))
        assert r.returncode == 4


def test_info_reads_header_and_tail(tape_path: Path) -> None:
    golden(tape_path, turns=2)
    r = run("info", str(tape_path), "--json")
    obj = json.loads(r.stdout)
    assert obj["id"] == "golden" and obj["tail_state"] == "clean" and obj["open_turn"] is None
    assert obj["events"] == len(raw_lines(tape_path))


def test_every_command_has_help() -> None:
    runner = CliRunner()
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        r = runner.invoke(cli, [name, "--help"])
        assert r.exit_code == 0, name
        assert len(r.output) > 80, name
