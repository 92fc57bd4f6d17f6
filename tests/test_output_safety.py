"""What an agent wrote never drives the terminal: `search`, `sessions` and `show` print text,
titles and paths from sessions with every control, escape sequence and bidi override made
visible or dropped, and a snippet's highlight marks are only ever the index's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import jsonltape

#: Colours, a window-title change, a bell, fake highlight marks, a right-to-left override.
EVIL = "look \x1b[31mRED\x1b[0m \x1b]0;pwned\x07 and \x02fake\x03 marks NotFoundError \u202eevil"
RAW = [b"\x1b", b"\x07", b"\x02", b"\x03", "\u202e".encode()]


#: A session file name with a clear-screen sequence in it.
NAME = "a\x1b[2Jb.jsonl"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("evil")
    path = root / NAME
    with jsonltape.open(path, create=True, title="title \x1b]0;owned\x07 \u202ex") as tape:
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "content": EVIL}]}
        tape.append("user/message", {"message": message})
    index = root.parent / f"{root.name}.db"
    _run("sync", str(root), "--index", str(index))
    return index


def _run(*args: str) -> bytes:
    r = subprocess.run(
        [sys.executable, "-m", "jsonltape", *args],
        capture_output=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["search", "NotFoundError"],
        ["search", "fake"],
        ["search", "pwned"],
        ["sessions"],
        ["show"],
    ],
    ids=lambda a: " ".join(a),
)
def test_no_control_or_bidi_character_reaches_the_terminal(index: Path, args: list[str]) -> None:
    if args == ["show"]:
        args = ["show", str(index.with_suffix("") / NAME)]
    out = _run(*args, "--index", str(index))
    assert out.strip()
    for raw in RAW:
        assert raw not in out, (raw, out)


def test_a_mark_in_the_text_is_shown_escaped_not_as_a_highlight(index: Path) -> None:
    out = _run("search", "NotFoundError", "--index", str(index)).decode()
    assert "[NotFoundError]" in out  # the index's mark, as brackets off a terminal
    assert "[fake]" not in out and "\\x02fake\\x03" in out
    assert "\\u202eevil" in out  # the override is visible, and reorders nothing


def test_a_path_and_a_title_are_escaped_exactly_not_dropped(index: Path) -> None:
    out = _run("sessions", "--index", str(index)).decode()
    assert "a\\x1b[2Jb.jsonl" in out  # the name as it is, readable
    assert "title \\x1b]0;owned\\x07 \\u202ex" in out


@pytest.fixture(scope="module")
def evil_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sessions root and a session whose names hold a title-setting sequence and a bell."""
    root = tmp_path_factory.mktemp("r") / "root\x1b]0;x\x07"
    root.mkdir()
    with jsonltape.open(root / NAME, create=True) as tape:
        message = {"id": "m1", "role": "user", "parts": [{"type": "text", "content": EVIL}]}
        tape.append("user/message", {"message": message})
    return root


@pytest.mark.parametrize(
    "args",
    [["verify"], ["repair"], ["info"], ["sync"], ["index", "status"]],
    ids=lambda a: " ".join(a),
)
def test_every_command_shows_a_hostile_path_escaped(evil_root: Path, args: list[str]) -> None:
    index = str(evil_root.parent / "i.db")
    if args[0] == "index":
        _run("sync", str(evil_root), "--index", index)
        out = _run(*args, "--index", index)
    elif args == ["sync"]:
        out = _run("sync", str(evil_root), "--index", index)
    else:
        out = _run(*args, str(evil_root / NAME))
    assert out.strip()
    for raw in RAW:
        assert raw not in out, (raw, out)


def test_joiners_of_emoji_and_persian_stay_while_controls_and_overrides_are_escaped() -> None:
    from jsonltape._display import shown

    family, persian = "👨\u200d👩\u200d👧", "می\u200cخواهم"  # ZWJ, ZWNJ: part of the writing
    assert shown(f"{family} {persian}") == f"{family} {persian}"
    got = shown("a\u202eb\u2066c\x1bd\x9be\u2028f\x7f")
    assert got == "a\\u202eb\\u2066c\\x1bd\\x9be\\u2028f\\x7f"
    assert shown("one\ttwo\nthree", newlines=True) == "one\ttwo\nthree"
    assert shown("x\x1b]0;t\x07y\x1b[1mz", sequences=True) == "xyz"


def test_every_kind_of_space_and_new_characters_stay_text() -> None:
    from jsonltape._display import shown

    text = "prix\xa0: 10\u202f€ 東京\u3000タワー 🫨 \ue000"  # NBSP, NNBSP, ideographic, U15, PUA
    assert shown(text) == text


def test_invisible_format_characters_that_hide_text_are_escaped() -> None:
    from jsonltape._display import shown

    tags = "".join(chr(0xE0000 + ord(c)) for c in "ignore")  # invisible "ignore"
    assert shown("ok" + tags) == "ok" + "".join(f"\\U{0xE0000 + ord(c):08x}" for c in "ignore")
    assert shown("z\u200bw\u2060x\ufeff") == "z\\u200bw\\u2060x\\ufeff"


def test_an_unterminated_sequence_hides_nothing_after_it() -> None:
    from jsonltape._display import shown
    from jsonltape.cli._search_tui import clean

    assert shown("second \x1b] hidden", sequences=True) == "second \\x1b] hidden"
    kept = clean("line one\nsecond \x1b] hidden\nthird line", keep_newlines=True)
    assert kept == "line one\nsecond \\x1b] hidden\nthird line"
