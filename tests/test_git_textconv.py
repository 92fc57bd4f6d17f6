"""``jsonltape git textconv``: sessions as transcripts in ``git diff``, ``git log -p`` and
``git show`` (the real ``git`` binary, ``diff.jsonltape.textconv`` set in a temporary
repository), one line per event, stable, escaped, and never failing on a damaged file."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import jsonltape
from jsonltape.git._merge import Merged, merge_files
from jsonltape.git._textconv import TEXT_WIDTH, textconv

from .helpers import one_turn
from .test_git_check import git, jt, repo

__all__ = ["repo"]  # the fixture, imported

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")


def conv(path: Path) -> list[str]:
    out = io.BytesIO()
    textconv(path, out)
    return out.getvalue().decode().splitlines()


def session(path: Path, turns: int = 2) -> Path:
    with jsonltape.open(path, create=True, session_id="t", title="fix the parser") as tape:
        for i in range(turns):
            one_turn(tape, f"message {i}", with_tool=True)
            tape.flush()
    return path


def events(path: Path) -> int:
    return len(path.read_bytes().splitlines())


@pytest.fixture
def diff_repo(repo: Path) -> Path:
    git(repo, "config", "diff.jsonltape.textconv", f"'{sys.executable}' -m jsonltape git textconv")
    return repo


@needs_git
def test_git_diff_log_and_show_print_transcript_text_not_crcs(diff_repo: Path) -> None:
    path = session(diff_repo / "sessions" / "a.jsonl")
    git(diff_repo, "add", "sessions/a.jsonl")
    git(diff_repo, "commit", "-q", "-m", "first")
    with jsonltape.open(path) as tape:
        one_turn(tape, "please rename the helper")
        tape.flush()
    diff = git(diff_repo, "diff", "sessions/a.jsonl").stdout
    assert "user: please rename the helper" in diff
    assert "+    18  " in diff  # seq 18, the new user message, as an added line
    assert '"crc":' not in diff
    git(diff_repo, "commit", "-q", "-am", "second")
    log = git(diff_repo, "log", "-p", "sessions/a.jsonl").stdout
    assert "assistant: reply to please rename the helper" in log
    assert "session/start: session t; title fix the parser" in log
    assert '"crc":' not in log
    show = git(diff_repo, "show", "HEAD").stdout
    assert "user: please rename the helper" in show
    assert '"crc":' not in show


@needs_git
def test_diff_stat_counts_events(diff_repo: Path) -> None:
    path = session(diff_repo / "sessions" / "a.jsonl")
    git(diff_repo, "add", "sessions/a.jsonl")
    git(diff_repo, "commit", "-q", "-m", "first")
    before = events(path)
    with jsonltape.open(path) as tape:
        one_turn(tape, "one more")  # turn/start, user, assistant, turn/end
        tape.flush()  # and its checkpoint
    stat = git(diff_repo, "diff", "--numstat", "sessions/a.jsonl").stdout.split()
    assert stat[:2] == [str(events(path) - before), "0"] == ["5", "0"]


def test_one_line_per_event_and_the_same_output_every_run(tmp_path: Path) -> None:
    path = session(tmp_path / "a.jsonl", turns=3)
    first = conv(path)
    assert len(first) == events(path)
    assert conv(path) == first
    assert [int(line.split()[0]) for line in first] == list(range(len(first)))
    assert all("Z  " in line for line in first)  # UTC, never local time
    assert not any('"crc"' in line or "offset" in line for line in first)
    shown = {line.split("Z  ", 1)[1].split(" ", 1)[0] for line in first}
    assert {"session/start:", "user:", "assistant:", "tool", "checkpoint"} <= shown
    assert any('tool/call Read {"path":"a.py"}' in line for line in first)
    assert any("[call Read " in line for line in first)


def test_newlines_control_characters_and_terminal_escapes_are_shown_escaped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user("line one\nline two\ttab \x1b[31mred\x1b[0m \u202egnirts\x07 \x9b2J")
    line = conv(path)[1]
    assert "line one⏎line two\\ttab \\x1b[31mred\\x1b[0m \\u202egnirts\\x07 \\x9b2J" in line
    assert not any(ch in line for ch in "\x1b\x07\x9b\u202e\n\t")


def test_long_text_is_cut_with_an_ellipsis_at_the_documented_width(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.user("x" * 5000)
        tape.user("y" * TEXT_WIDTH)
    long, exact = conv(path)[1:3]
    assert long.endswith("user: " + "x" * (TEXT_WIDTH - 1) + "…")
    assert exact.endswith("user: " + "y" * TEXT_WIDTH)


@pytest.mark.parametrize(
    ("damage", "expect"),
    [("torn", "! torn tail at line 15, byte"), ("corrupt", "! corrupt at line 3, byte")],
)
def test_a_damaged_file_prints_its_good_lines_and_one_line_and_exits_0(
    tmp_path: Path, damage: str, expect: str
) -> None:
    path = session(tmp_path / "a.jsonl")
    data = path.read_bytes()
    if damage == "torn":
        cut = data.splitlines(keepends=True)
        data = b"".join(cut[:14]) + cut[14][:30]
    else:
        data = data.replace(b"message 0", b"Message 0", 1)
    path.write_bytes(data)
    done = jt(tmp_path, "git", "textconv", str(path))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith(expect), lines[-1]
    assert len(lines) == (15 if damage == "torn" else 3)
    assert sum(line.startswith("!") for line in lines) == 1


def test_a_file_that_is_no_session_is_shown_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n\x1b[2Jplain\n')
    done = jt(tmp_path, "git", "textconv", str(path))
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        done.stdout.splitlines()[0],
        '{"a": 1}',
        "\\x1b[2Jplain",
    ]
    assert done.stdout.startswith("! not a jsonltape session: ")


def _peak(path: Path) -> tuple[int, int]:
    sink = _Counting()
    tracemalloc.start()
    try:
        textconv(path, sink)
        return sink.lines, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_big_session_streams_in_flat_memory(tmp_path: Path) -> None:
    peaks = []
    for n in (1500, 6000):
        path = tmp_path / f"big{n}.jsonl"
        with jsonltape.open(path, create=True, durability="manual") as tape:
            for i in range(n):
                tape.user(f"message {i} " + "z" * 1500)
                if i % 100 == 99:
                    tape.flush()  # a checkpoint every 100 events, as turns make them
        lines, peak = _peak(path)
        assert lines == events(path)
        peaks.append(peak)
    # Four times the file (9 MB), not four times the memory: a few chunks either way.
    assert peaks[1] < peaks[0] * 1.5 + 500_000, peaks
    assert peaks[1] < 8_000_000, peaks


class _Counting(io.RawIOBase):
    def __init__(self) -> None:
        self.lines = 0

    def write(self, b: object) -> int:
        data = bytes(b)  # type: ignore[call-overload]
        self.lines += data.count(b"\n")
        return len(data)


def test_textconv_through_the_command_prints_what_the_library_prints(tmp_path: Path) -> None:
    path = session(tmp_path / "a.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "jsonltape", "git", "textconv", str(path)],
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "LANG": "C", "LC_ALL": "C"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode("utf-8").splitlines() == conv(path)


def _merged(tmp_path: Path, their_text: str) -> tuple[Path, Path]:
    """A session continued in two places and merged: the merged file and their version."""
    base = session(tmp_path / "base.jsonl", turns=1)
    ours, theirs = tmp_path / "ours.jsonl", tmp_path / "theirs.jsonl"
    ours.write_bytes(base.read_bytes())
    theirs.write_bytes(base.read_bytes())
    for path, text in ((ours, "ours"), (theirs, their_text)):
        with jsonltape.open(path) as tape:
            one_turn(tape, text, with_tool=True)
    got = merge_files(base, ours, theirs, source="main")
    assert isinstance(got, Merged) and got.outcome == "branch"
    out = tmp_path / "merged.jsonl"
    out.write_bytes(got.result)
    return out, theirs


def test_recorded_events_of_a_merge_are_shown_as_the_events_they_record(tmp_path: Path) -> None:
    merged, theirs = _merged(tmp_path, "their question")
    shown = conv(merged)
    assert len(shown) == events(merged)  # still one line per line
    assert not any('"origin"' in x or '{"branch"' in x for x in shown)
    start = next(x for x in shown if "  branch/start " in x)
    assert start.endswith(", 7 recorded from main")  # their turn: 7 events, checkpoints aside
    receipt = int(start.split()[0])
    recorded = [x for x in shown if f"  [branch {receipt}, seq " in x]
    assert len(recorded) == 7
    # Each recorded line shows as their own transcript shows that line, its time included,
    # marked with its branch and its seq there (the seq column is the record's own).
    their_lines = {int(x.split()[0]): x.split(None, 1)[1] for x in conv(theirs)}
    for line in recorded:
        seq = int(line.split(f"[branch {receipt}, seq ", 1)[1].split("]", 1)[0])
        mark = f"Z  [branch {receipt}, seq {seq}] "
        assert line.split(None, 1)[1] == their_lines[seq].replace("Z  ", mark, 1)
    assert any(x.endswith("] user: their question") for x in recorded)


def test_a_recorded_events_text_is_escaped_like_any_other(tmp_path: Path) -> None:
    merged, _theirs = _merged(tmp_path, "red \x1b[31mtext\x1b[0m\nnext \u202e \x9b2J")
    line = next(x for x in conv(merged) if "] user: red" in x)
    assert line.endswith("] user: red \\x1b[31mtext\\x1b[0m⏎next \\u202e \\x9b2J")
    assert not any(ch in line for ch in "\x1b\x9b\u202e\n")
