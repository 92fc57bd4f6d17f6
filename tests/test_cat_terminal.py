"""``cat`` and ``cat --follow`` on a terminal follow the display rule every other command does:
what could drive the terminal (C0 and C1 controls, DEL, bidi controls, line separators,
invisible format characters, a carriage return between members) is written as a ``\\u`` escape
or a space, and each line printed is still JSON equal to the stored one. Into a pipe, ``cat``
gives the stored bytes exactly.

The terminal is a real pseudo-terminal in raw mode (no ``\\n`` -> ``\\r\\n``), so what the test
reads is exactly what the command wrote.
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import tty
import unicodedata
import zlib
from pathlib import Path

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape._display import json_shown

from .helpers import read_terminal

CLI = [sys.executable, "-m", "jsonltape"]

#: Every class of code point that can move, recolour, retitle or reorder a terminal's text.
C0 = [chr(c) for c in range(0x20) if chr(c) not in "\t\n"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x61C)]
OTHER = ["\x7f", "\u2028", "\u2029", "\u200b", "\ufeff", "\U000e0041"]
DANGER = C0 + C1 + BIDI + OTHER
EVIL = "start " + " ".join(DANGER) + " \x1b]0;pwned\x07 \x9b31m red \x9d2;title\x9c end"


def _stored(path: Path) -> list[bytes]:
    """The stored lines (not ``splitlines``: a carriage return is inside a line)."""
    return path.read_bytes().split(b"\n")[:-1]


def _session(path: Path) -> None:
    """A session whose title, message text and a data key hold every dangerous class, and a
    line with a raw carriage return between two members (a valid line: JSON whitespace)."""
    with jsonltape.open(path, create=True, title=EVIL, durability="manual") as tape:
        tape.user(EVIL)
        tape.append("x-test/note", {EVIL: EVIL}, ignorable=True)
    lines = [line + b"\n" for line in _stored(path)]
    body = lines[1][: -len(b',"crc":"00000000"}\n')]
    body = body.replace(b',"type"', b',\r"type"', 1)
    lines[1] = body + b',"crc":"%08x"}\n' % zlib.crc32(body)
    path.write_bytes(b"".join(lines))
    assert jsonltape.verify(path).state in ("clean", "open-turn")


def _spawn(*args: str) -> tuple[subprocess.Popen[bytes], int]:
    """The command with stdout on a raw pseudo-terminal; returns it and the master end."""
    master, slave = pty.openpty()
    tty.setraw(slave)  # output exactly as written: no \n -> \r\n
    proc = subprocess.Popen(
        [*CLI, *args],
        stdout=slave,
        stderr=subprocess.PIPE,
        # as from a terminal: a SIGINT ignored by a background test run would stay ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    os.close(slave)
    return proc, master


def _assert_safe_and_equal(shown: bytes, stored: list[bytes]) -> None:
    text = shown.decode("utf-8")
    raw = sorted({c for c in text if c in DANGER})
    assert raw == [], [f"U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in raw]
    lines = text.split("\n")
    assert lines[-1] == ""  # whole lines only
    assert [json.loads(line) for line in lines[:-1]] == [json.loads(line) for line in stored]


def test_cat_on_a_terminal_escapes_every_dangerous_character_and_keeps_the_json(
    tape_path: Path,
) -> None:
    _session(tape_path)
    stored = _stored(tape_path)
    proc, master = _spawn("cat", str(tape_path))
    try:
        shown = read_terminal(master)
    finally:
        os.close(master)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and err == b"", err
    _assert_safe_and_equal(shown, stored)
    for c in ["\x9b", "\x9d", "\x7f", "\u202e", "\u2069", "\u2028"]:
        assert f"\\u{ord(c):04x}".encode() in shown  # visible, not dropped


def test_cat_into_a_pipe_gives_the_stored_bytes_exactly(tape_path: Path) -> None:
    _session(tape_path)
    r = subprocess.run([*CLI, "cat", str(tape_path)], capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stderr == b""
    assert r.stdout == tape_path.read_bytes()


APPENDER = r"""
import json, sys, jsonltape
with jsonltape.open(sys.argv[1], durability="manual") as tape:
    tape.user(json.loads(sys.argv[2]))
"""


def test_cat_follow_on_a_terminal_escapes_what_a_live_writer_appends(tape_path: Path) -> None:
    _session(tape_path)
    before = len(_stored(tape_path))
    proc, master = _spawn("cat", str(tape_path), "--follow")
    try:
        first = read_terminal(master, lambda out: out.count(b"\n") >= before)
        # a real writer, in its own process, appends while the follow waits
        subprocess.run(
            [sys.executable, "-c", APPENDER, str(tape_path), json.dumps(EVIL)], check=True
        )
        stored = _stored(tape_path)
        shown = first + read_terminal(master, lambda out: (first + out).count(b"\n") >= len(stored))
        proc.send_signal(signal.SIGINT)
        shown += read_terminal(master)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == b"", err
    _assert_safe_and_equal(shown, stored)
    assert len(stored) > before + 1  # the appended message and the writer's checkpoint


_events = msgspec.json.Encoder()


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text(max_size=8))
def test_a_stored_line_on_a_terminal_is_the_same_json_with_no_dangerous_character(
    text: str, key: str
) -> None:
    """What ``cat`` does to a line on a terminal, for any text a writer stores (surrogates
    aside: the writer refuses them)."""
    text = text.encode("utf-8", "replace").decode()
    key = key.encode("utf-8", "replace").decode()
    body = _events.encode({"v": 1, "seq": 3, "type": "x-t", "data": {key: text, "t": [text]}})
    body = body[:-1].replace(b',"type"', b',\r\t "type"')
    line = (body + b',"crc":"%08x"}' % zlib.crc32(body)).decode()
    out = json_shown(line)
    assert json.loads(out) == json.loads(line)
    assert not {c for c in out if c in DANGER or unicodedata.category(c) in ("Cc", "Zl", "Zp")} - {
        "\t"
    }
