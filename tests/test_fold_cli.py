"""The fold commands: output, exit codes, and nothing written when a request is bad."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import jsonltape
from jsonltape import _framing
from jsonltape.cli import cli


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


@pytest.fixture
def session(tape_path: Path) -> Path:
    with jsonltape.open(tape_path, create=True, session_id="S") as tape:
        tape.append("request/header", {"model": "m", "system": "sys"})
        tape.append("todo/write", {"todos": [{"content": "ship", "status": "in_progress"}]})
        tape.user("read a.py")  # 3
        tape.assistant(tool_calls=[{"id": "c1", "name": "Read", "arguments": {"path": "a.py"}}])
        tape.tool_result("c1", "print(1)")  # 5
        tape.assistant("it prints 1")  # 6
    return tape_path


def test_messages_prints_each_format_as_json(session: Path) -> None:
    for fmt in ("neutral", "openai", "anthropic"):
        r = invoke("messages", session, "--format", fmt)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout) == jsonltape.fold.messages(session, format=fmt)  # type: ignore[arg-type]


def test_messages_at_and_all_versions(session: Path) -> None:
    r = invoke("messages", session, "--at", "3")
    assert [m["seq"] for m in json.loads(r.stdout)["messages"]] == [3]
    invoke("retract", session, "6")
    out = json.loads(invoke("messages", session, "--all-versions").stdout)["messages"]
    assert [(m["seq"], m["status"]) for m in out][-1] == (6, "retracted")
    r = invoke("messages", session, "--all-versions", "--format", "openai")
    assert r.exit_code == 2 and "neutral" in r.stderr


def test_compact_reads_the_summary_from_a_file(session: Path, tmp_path: Path) -> None:
    summary = tmp_path / "summary.txt"
    summary.write_text("we read a.py")
    r = invoke("compact", session, "--summary", f"@{summary}", "--through", "6", "--json")
    assert r.exit_code == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["shadowed"] == [3, 4, 5, 6] and result["ledger"] == {"read": ["a.py"]}
    texts = [
        m["message"]["parts"][0]["content"] for m in jsonltape.fold.messages(session)["messages"]
    ]
    assert texts == ["we read a.py"]


def test_compact_summary_from_stdin(session: Path) -> None:
    r = invoke("compact", session, "--summary", "@-", "--through", "3", input="from stdin")
    assert r.exit_code == 0 and r.stdout == "compacted 1 message (seqs 3..3) into seq 10\n"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["compact", "{p}", "--summary", "", "--through", "6"], "empty summary"),
        (["compact", "{p}", "--summary", "x", "--through", "99"], "past the end"),
        (["compact", "{p}", "--summary", "@/nonexistent", "--through", "6"], "cannot read"),
        (["retract", "{p}", "5"], "unanswered"),
        (["retract", "{p}", "6", "--to", "3"], "comes after end"),
        (["prune", "{p}", "3"], "not a tool/result"),
        (["handoff", "{p}", "--summary", "x", "--state", "{bad"], "not valid JSON"),
        (["fork", "{p}", "--at", "500"], "no seq 500"),
        (["messages", "{p}", "--parent", "nonsense"], "ID=PATH"),
    ],
)
def test_bad_requests_exit_2_with_one_line_and_write_nothing(
    session: Path, args: list[str], fragment: str
) -> None:
    before = session.read_bytes()
    listing = sorted(session.parent.iterdir())
    r = invoke(*[a.replace("{p}", str(session)) for a in args])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("jsonltape: error: ") and fragment in r.stderr
    assert r.stderr.count("\n") == 1
    assert session.read_bytes() == before
    assert sorted(session.parent.iterdir()) == listing


def test_prune_retract_and_handoff_report_what_they_wrote(session: Path) -> None:
    assert invoke("prune", session, "5").stdout.startswith("pruned seq 5: stub is seq ")
    assert invoke("retract", session, "6", "--reason", "wrong").stdout.startswith("retracted by")
    r = invoke("handoff", session, "--summary", "phase 2", "--state", '{"n": 1}')
    assert r.exit_code == 0 and "context starts at seq" in r.stdout
    assert len(jsonltape.fold.messages(session)["messages"]) == 1


def test_fork_merge_discard(session: Path) -> None:
    fork_path = session.with_name("f.jsonl")
    r = invoke("fork", session, "--at", "6", "-o", fork_path, "--id", "F")
    assert r.exit_code == 0 and r.stdout == f"{fork_path}\n"
    with jsonltape.open(fork_path) as tape:
        tape.assistant("from the fork")
    assert invoke("merge", session, fork_path).stdout == "merged 1 message; receipt seq 9\n"
    again = invoke("merge", session, fork_path)
    assert again.stdout.startswith("already merged") and again.exit_code == 0
    r = invoke("discard", session, fork_path)
    assert r.exit_code == 2 and "was merged" in r.stderr
    other = session.with_name("g.jsonl")
    invoke("fork", session, "--at", "3", "-o", other)
    assert invoke("discard", session, other, "--reason", "no").stdout.startswith("discarded")
    assert invoke("discard", session, other).stdout.startswith("already discarded")


def test_todo_prints_the_latest_list(session: Path) -> None:
    assert invoke("todo", session).stdout == "[~] ship\n"
    assert json.loads(invoke("todo", session, "--json").stdout)[0]["status"] == "in_progress"
    assert invoke("todo", session, "--at", "1").stderr == "no todos\n"


def test_unknown_required_type_exits_2_naming_the_line(session: Path) -> None:
    # the writer refuses such a type (spec §8.7.1), so it comes from another writer's line
    seq = sum(1 for _ in jsonltape.read(session))
    line = b'{"seq":%d,"type":"x.ext/secret","time":1800000000000,"data":{}}' % seq
    with open(session, "ab") as f:
        f.write(_framing.frame(line))
    r = invoke("messages", session)
    assert r.exit_code == 2 and f"line {seq + 1}" in r.stderr and "x.ext/secret" in r.stderr


def test_the_installed_command_runs_the_fold_commands(session: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "jsonltape", "messages", str(session), "--format", "openai"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["messages"][0] == {"role": "system", "content": "sys"}
