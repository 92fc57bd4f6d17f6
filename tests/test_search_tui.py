"""``jsonltape search -i`` through a real pseudo-terminal: type, read the screen, Enter, quit.

The screen is read with a small terminal model (cursor moves, erases, text) fed by what the
application writes, since prompt_toolkit redraws only what changed: the bytes alone do not say
what is on the screen.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import jsonltape

ROWS, COLS = 30, 100
SESSIONS = {
    "alpha": ["the zanzibar harbour migration plan", "ok, the plan for zanzibar"],
    "beta": ["zanzibar quokka sighting near the lighthouse", "quokkas are friendly"],
    "gamma": ["nothing to see \x1b]0;pwned\x07\x1b[31mred zebracorn\x1b[0m here", "fine"],
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tui")
    root = tmp / "root"
    for name, (question, answer) in SESSIONS.items():
        with jsonltape.open(root / f"{name}.jsonl", create=True, title=f"title {name}") as t:
            with t.turn():
                t.user(f"before the hit in {name}")
                t.assistant(f"context line of {name}")
            with t.turn():
                t.user(question)
                t.assistant(answer)
    db = tmp / "index.db"
    subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(root), "--index", str(db)],
        check=True,
        capture_output=True,
        env={**os.environ, "JSONLTAPE_HOME": str(tmp / "home")},
    )
    return db


class Screen:
    """Enough of a VT100 for prompt_toolkit's output: CUP, relative moves, EL, ED, text."""

    _SEQ = re.compile(
        r"\x1b\[([?>]?)([0-9;]*)([A-Za-z@])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[^\[\]]"
    )

    def __init__(self) -> None:
        self.cells = [[" "] * COLS for _ in range(ROWS)]
        self.row = self.col = 0
        self.raw = b""
        self._rest = ""

    def feed(self, data: bytes) -> None:
        self.raw += data
        chars = self._rest + data.decode("utf-8", "replace")
        self._rest = ""
        i = 0
        while i < len(chars):
            c = chars[i]
            if c == "\x1b":
                m = self._SEQ.match(chars, i)
                if m is None:  # cut in the middle: the rest comes with the next read
                    self._rest = chars[i:]
                    break
                self._csi(m)
                i = m.end()
                continue
            if c == "\r":
                self.col = 0
            elif c == "\n":
                self.row = min(ROWS - 1, self.row + 1)
            elif c == "\b":
                self.col = max(0, self.col - 1)
            elif c >= " ":
                if self.col < COLS:
                    self.cells[self.row][self.col] = c
                self.col += 1
            i += 1

    def _csi(self, m: re.Match[str]) -> None:
        if m.group(3) is None or m.group(1):
            return
        args = [int(a) if a else 0 for a in m.group(2).split(";")]
        n = max(1, args[0])
        op = m.group(3)
        if op == "H":
            self.row = min(ROWS - 1, max(1, args[0]) - 1)
            self.col = min(COLS - 1, max(1, args[1] if len(args) > 1 else 1) - 1)
        elif op == "A":
            self.row = max(0, self.row - n)
        elif op == "B":
            self.row = min(ROWS - 1, self.row + n)
        elif op == "C":
            self.col = min(COLS - 1, self.col + n)
        elif op == "D":
            self.col = max(0, self.col - n)
        elif op == "K":
            self.cells[self.row][self.col :] = [" "] * (COLS - self.col)
        elif op == "J":
            if args[0] == 2:
                self.cells = [[" "] * COLS for _ in range(ROWS)]
            else:
                self.cells[self.row][self.col :] = [" "] * (COLS - self.col)
                for r in range(self.row + 1, ROWS):
                    self.cells[r] = [" "] * COLS

    def text(self) -> str:
        return "\n".join("".join(r).rstrip() for r in self.cells)


class Tui:
    """``jsonltape search -i`` on a pty of ROWS x COLS, with TERM=xterm."""

    def __init__(self, *args: str) -> None:
        self.fd, child = os.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**os.environ, "TERM": "xterm", "COLUMNS": str(COLS), "LINES": str(ROWS)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jsonltape", "search", "-i", *args],
            stdin=child,
            stdout=child,
            stderr=child,
            env=env,
            start_new_session=True,
        )
        os.close(child)
        self.screen = Screen()

    def _pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the pty
                data = b""
            if data:
                self.screen.feed(data)
            else:
                time.sleep(0.01)

    def wait_for(self, *needles: str, timeout: float = 5.0, gone: bool = False) -> str:
        """Pump output until every needle is on (or, with ``gone``, off) the screen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen.text()
            if all((needle in screen) != gone for needle in needles):
                return screen
            self._pump(0.05)
        state = "still" if gone else "not all"
        raise AssertionError(f"{needles!r} {state} on screen:\n{screen}")

    def type(self, text: str) -> None:
        for ch in text:
            os.write(self.fd, ch.encode())
            self._pump(0.02)

    def key(self, seq: bytes) -> None:
        os.write(self.fd, seq)

    def exit_code(self, timeout: float = 5.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._pump(0.05)
        return self.proc.wait(timeout=1)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.fd)


@pytest.fixture
def tui(index: Path) -> Iterator[Tui]:
    t = Tui("--index", str(index))
    yield t
    t.close()


DOWN, ENTER, ESC, CTRL_C = b"\x1b[B", b"\r", b"\x1b", b"\x03"


def test_typing_narrows_hits_enter_opens_transcript_escape_back_ctrl_c_quits(tui: Tui) -> None:
    tui.wait_for("type to search")
    tui.type("zanzibar")
    tui.wait_for("3 hits", "quokka sighting", "harbour migration", "ok, the plan")
    tui.type(" quok")  # a prefix of the last word narrows to one session
    screen = tui.wait_for("harbour migration", "ok, the plan", gone=True)
    assert "quokka sighting" in screen and "1 hit " in screen
    tui.key(DOWN)  # one hit: the selection stays on it
    tui.key(ENTER)
    screen = tui.wait_for("quokkas are friendly")  # the message after the hit
    assert "before the hit in beta" in screen and "▶ #" in screen
    assert "title beta" in screen
    tui.key(ESC)
    screen = tui.wait_for("quokkas are friendly", gone=True)
    assert "search: zanzibar quok" in screen
    tui.key(CTRL_C)
    assert tui.exit_code() == 0


def test_down_selects_the_second_hit_and_q_goes_back(tui: Tui) -> None:
    tui.type("zanzibar")
    screen = tui.wait_for("3 hits", "quokka sighting", "harbour migration", "ok, the plan")
    lines = screen.splitlines()
    second = next(i for i, line in enumerate(lines) if "title " in line and i > 3)
    name = re.search(r"title (\w+)", lines[second])
    assert name is not None
    tui.key(DOWN)
    tui.key(ENTER)
    tui.wait_for(f"before the hit in {name.group(1)}")
    tui.key(b"q")
    tui.wait_for("3 hits")
    tui.key(ESC)  # Escape on the results quits
    assert tui.exit_code() == 0


def test_control_characters_in_the_index_are_not_written_to_the_terminal(tui: Tui) -> None:
    tui.type("zebracorn")
    tui.wait_for("1 hit ", "nothing to see red zebracorn here")  # the sequences removed
    assert b"\x1b[31mred" not in tui.screen.raw and b"\x07" not in tui.screen.raw
    tui.key(ENTER)
    tui.wait_for("before the hit in gamma")
    assert b"\x1b]0;pwned" not in tui.screen.raw and b"\x07" not in tui.screen.raw
    tui.key(CTRL_C)
    assert tui.exit_code() == 0


#: A file name and a title with a window-title (OSC) and a clear-screen (CSI) sequence.
EVIL_NAME = "e\x1b]0;path\x07\x1b[2Jf.jsonl"
EVIL_TITLE = "t\x1b]0;owned\x07\x1b[1mbold\x9b2J"


@pytest.fixture(scope="module")
def evil_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tui-evil")
    with jsonltape.open(tmp / "root" / EVIL_NAME, create=True, title=EVIL_TITLE) as tape:
        tape.user("where is the walrusfinder")
        tape.assistant("in the \x1b[31mred\x1b[0m box")
    db = tmp / "index.db"
    subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(tmp / "root"), "--index", str(db)],
        check=True,
        capture_output=True,
        env={**os.environ, "JSONLTAPE_HOME": str(tmp / "home")},
    )
    return db


def test_a_title_and_a_path_are_shown_escaped_exactly_not_with_their_sequences_dropped(
    evil_index: Path,
) -> None:
    shown_title = "t\\x1b]0;owned\\x07\\x1b[1mbold\\x9b2J"
    t = Tui("--index", str(evil_index))
    try:
        t.type("walrusfinder")
        t.wait_for("1 hit ", shown_title)  # the results line: the title as it is, readable
        t.key(ENTER)
        screen = t.wait_for("in the red box")  # a message text loses its colours
        assert shown_title in screen
        assert "e\\x1b]0;path\\x07\\x1b[2Jf.jsonl" in screen  # the path names the file
        assert b"\x1b]0;" not in t.screen.raw and b"\x07" not in t.screen.raw
        assert "\x9b".encode() not in t.screen.raw
        t.key(CTRL_C)
        assert t.exit_code() == 0
    finally:
        t.close()


def test_filters_apply_to_the_interactive_search(index: Path) -> None:
    t = Tui("--index", str(index), "--role", "assistant", "zanzibar")
    try:
        screen = t.wait_for("1 hit ", "ok, the plan for")  # the initial QUERY runs at once
        assert "quokka" not in screen and "harbour" not in screen
        t.key(CTRL_C)
        assert t.exit_code() == 0
    finally:
        t.close()


def test_a_missing_index_is_one_error_line_before_the_screen_is_taken(tmp_path: Path) -> None:
    t = Tui("--index", str(tmp_path / "none.db"))
    try:
        assert t.exit_code() == 2
        out = t.screen.raw.decode()
        assert out.startswith("jsonltape: error: ") and out.count("\n") == 1
        assert "\x1b" not in out  # the terminal was never switched to the full screen
    finally:
        t.close()


def test_interactive_with_json_is_a_usage_error(index: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jsonltape", "search", "-i", "--json", "--index", str(index)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "--json" in out.stderr and "Traceback" not in out.stderr


def test_interactive_without_a_terminal_is_one_error_line(index: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "jsonltape", "search", "-i", "zanzibar", "--index", str(index)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and "terminal" in out.stderr


def test_plain_search_does_not_load_prompt_toolkit(index: Path) -> None:
    code = (
        "import sys; from jsonltape.cli import main; sys.argv = ['jsonltape', 'search', "
        f"'zanzibar', '--index', {str(index)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "assert not any(m.startswith('prompt_toolkit') for m in sys.modules), 'loaded'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "zanzibar" in out.stdout


def test_a_newer_query_interrupts_a_slow_one_and_only_the_latest_is_delivered(index: Path) -> None:
    from jsonltape_daemon.target import SqliteTarget

    from jsonltape.cli._search_tui import _Worker

    delivered: list[object] = []
    done = threading.Event()

    def deliver(_gen: int, result: object) -> None:
        delivered.append(result)
        done.set()

    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    worker = _Worker(SqliteTarget(index), deliver)
    worker.start()
    try:
        started = time.monotonic()
        worker.submit(lambda r: r.con.execute(slow).fetchone())  # type: ignore[attr-defined]
        time.sleep(0.2)  # let it start running: it never ends by itself
        worker.submit(lambda r: r.con.execute("SELECT count(*) FROM sessions").fetchone())  # type: ignore[attr-defined]
        assert done.wait(5)
        assert delivered == [(3,)]
        assert time.monotonic() - started < 3
    finally:
        worker.stop()
        worker.join(5)
    assert not worker.is_alive()


def test_clean_drops_escape_sequences_and_shows_other_controls_escaped() -> None:
    from jsonltape.cli._search_tui import clean

    got = clean("a\x1b[31mred\x1b[0m\x1b]0;title\x07b\x00\x7f\x9b\u202e")
    assert got == "aredb\\x00\\x7f\\x9b\\u202e"  # visible, none of them raw
    assert clean("one\ttwo\r\nthree") == "one    two three"
    assert clean("one\nthree", keep_newlines=True) == "one\nthree"


def test_the_interactive_search_runs_on_a_postgresql_team_index(index: Path, pg_db: str) -> None:
    root = index.parent / "root"
    env = {**os.environ, "JSONLTAPE_HOME": str(index.parent / "home")}
    subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(root), "--index", pg_db, "--origin", "lab"],
        check=True,
        capture_output=True,
        env=env,
    )
    t = Tui("--index", pg_db)
    try:
        t.type("zanzibar")
        t.wait_for("3 hits", "quokka sighting", "harbour migration", timeout=10)
        t.type(" quok")
        t.wait_for("harbour migration", gone=True, timeout=10)
        t.key(ENTER)
        screen = t.wait_for("quokkas are friendly", timeout=10)
        assert "before the hit in beta" in screen
        t.key(CTRL_C)
        assert t.exit_code() == 0
    finally:
        t.close()
