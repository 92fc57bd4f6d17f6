"""The verbatim source lines an imported event keeps (``data.import.raw``, spec Appendix B.1):
a line ``N`` or a run ``N-M`` of consecutive lines joined with ``\\n``, always one run for
consecutive lines, and read back line by line exactly as they were, whatever was edited in."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape.events import MAX_INT
from jsonltape.interop import FileReport, import_file, import_paths, kept_lines
from jsonltape.interop._raw import run_of, runs

from ._importers import FIXTURES, age, bodies, cli, copy_tree, kept_whole
from .conftest import SAMPLES
from .test_interop_text_follow import _BLOCK, _FIRST

_TEXT = st.text(st.characters(blacklist_characters="\n"), max_size=8)
#: Numbers as a hand-edited key may spell them: past the 4,300 digits ``int`` converts, past
#: the largest line number (MAX_INT), zero, leading zeros, digits ``int`` refuses.
_NUMBER = st.one_of(
    st.integers(0, 2**60).map(str),
    st.integers(4290, 4310).map(lambda k: "1" * k),
    st.sampled_from([str(MAX_INT), str(MAX_INT + 1), "9" * 16, "1" * 17, "007", "\u00b2"]),
)
_KEY = st.one_of(st.text(max_size=6), _NUMBER, st.tuples(_NUMBER, _NUMBER).map("-".join))
_VALUE = st.one_of(st.lists(_TEXT, min_size=1, max_size=4).map("\n".join), st.integers(), st.none())


def test_one_line_is_its_number_and_several_are_a_run() -> None:
    assert run_of(7, ["only"]) == ("7", "only")
    assert run_of(7, ["a", "", "c\r"]) == ("7-9", "a\n\nc\r")


def test_consecutive_lines_are_one_run_however_they_were_taken() -> None:
    raw = {"5": "a", "6-8": "b\nc\nd", "9": "e", "11": "f", "13": "g", "14-15": "h\ni"}
    assert runs(raw) == {"5-9": "a\nb\nc\nd\ne", "11": "f", "13-15": "g\nh\ni"}
    assert runs({}) == {} and runs({"3": "x"}) == {"3": "x"}


def test_a_line_holding_a_newline_is_never_part_of_a_run() -> None:
    raw = {"1": "a", "2": "b\nc", "3": "d", "4": "e"}
    assert runs(raw) == {"1": "a", "2": "b\nc", "3-4": "d\ne"}
    assert list(kept_lines(runs(raw))) == [(1, "a"), (2, "b\nc"), (3, "d"), (4, "e")]


@given(st.lists(st.tuples(st.integers(1, 3), st.lists(_TEXT, min_size=1, max_size=4))))
def test_runs_read_back_as_the_lines_they_were_given(pieces: list[tuple[int, list[str]]]) -> None:
    raw: dict[str, str] = {}
    lines: list[tuple[int, str]] = []
    n = 1
    for gap, texts in pieces:  # gap 1: right after the line before
        n += gap - 1
        key, value = run_of(n, texts)
        raw[key] = value
        lines += list(enumerate(texts, n))
        n += len(texts)
    merged = runs(raw)
    assert list(kept_lines(merged)) == lines == list(kept_lines(raw))
    keys = [tuple(map(int, k.split("-"))) for k in merged]
    assert all(b[0] > a[-1] + 1 for a, b in itertools.pairwise(keys))  # none touch


def test_what_is_not_a_line_or_a_whole_run_keeps_nothing() -> None:
    raw = {
        "²": "superscript two is a digit to str.isdigit, not to int",
        "0": "no line 0",
        "007": "not how a line is written",
        "5-3": "backwards",
        "6-6": "a run of one",
        "7-9": "two\nlines, not three",
        "10-11": "a\nb",
        "12": 12,
        " 13": "space",
        "14": "kept",
    }
    assert list(kept_lines(raw)) == [(10, "a"), (11, "b"), (14, "kept")]
    assert list(kept_lines(None)) == [] and list(kept_lines(["1", "x"])) == []


def _imported_history(tmp_path: Path, text: str) -> tuple[Path, FileReport]:
    """An Aider history holding ``text``, finished long ago, and its import's report."""
    repo = tmp_path / "repo"
    repo.mkdir()
    src = repo / ".aider.chat.history.md"
    src.write_text(text)
    os.utime(src, (1e9, 1e9))
    report = import_file("aider", src, tmp_path / "root")
    assert report.status == "imported", report.error
    return src, report


def test_an_aider_reply_is_kept_as_one_run_and_the_history_rebuilds_byte_for_byte(
    tmp_path: Path,
) -> None:
    reply = [
        f"line {i} of the reply\r" if i % 7 == 0 else f"line {i} of the reply" for i in range(40)
    ]
    text = "\n".join(
        ["# aider chat started at 2024-05-01 09:00:00", "", "#### fix it", "", *reply, "",
         "> Tokens: 1.2k sent, 80 received. Cost: $0.01 message, $0.02 session.", ""]
    )  # fmt: skip
    src, report = _imported_history(tmp_path, text)
    lines: dict[int, str] = {}
    replies: list[list[str]] = []
    for session in report.sessions:
        for e in jsonltape.read(session):
            for n, t in kept_whole((e.data.get("import") or {}).get("raw")):
                assert n not in lines
                lines[n] = t
            if e.type == "assistant/message":
                replies.append(list(e.data["import"]["raw"]))
    # the reply's 40 lines and the blank after them, then its usage line (a revision)
    assert replies == [["5-45"], ["46"]]
    assert "".join(lines[n] + "\n" for n in sorted(lines)).encode() == src.read_bytes()


def test_a_session_edited_to_hold_odd_keys_is_still_read_for_a_rewrite(tmp_path: Path) -> None:
    from jsonltape.interop._state import State

    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.append(
            "x/note",
            {"import": {"raw": {"²": "not a line", "3-4": "c\nd", "5": "e"}}},
            ignorable=True,
        )
    assert State(path, raws=True).raws == {3: "c", 4: "d", 5: "e"}


@settings(max_examples=300)
@given(st.dictionaries(_KEY, _VALUE, max_size=6))
def test_any_hand_edited_raw_reads_without_error_as_the_lines_each_key_holds_whole(
    raw: dict[str, Any],
) -> None:
    got = list(kept_lines(raw))
    each = [list(kept_lines({k: v})) for k, v in raw.items()]
    assert got == [x for lines in each for x in lines]
    for (key, text), lines in zip(raw.items(), each, strict=True):
        if not lines:
            continue
        numbers = [n for n, _ in lines]
        assert numbers == list(range(numbers[0], numbers[0] + len(lines)))
        assert numbers[0] >= 1 and numbers[-1] <= MAX_INT
        assert key == (str(numbers[0]) if len(lines) == 1 else f"{numbers[0]}-{numbers[-1]}")
        assert "\n".join(t for _, t in lines) == text


def test_a_line_number_int_refuses_or_past_the_largest_keeps_nothing() -> None:
    raw = {
        "1" * 4301: "more digits than int converts",
        "2-" + "1" * 5000: "a\nb",
        str(MAX_INT + 1): "past the largest line number",
        f"{MAX_INT - 1}-{MAX_INT + 1}": "a\nb\nc",
        f"{MAX_INT - 1}-{MAX_INT}": "last\nlines",
        "3": "kept",
    }
    assert list(kept_lines(raw)) == [(MAX_INT - 1, "last"), (MAX_INT, "lines"), (3, "kept")]


def test_a_rewritten_source_continues_from_a_session_edited_to_hold_keys_int_refuses(
    tmp_path: Path,
) -> None:
    """The import of a source rewritten in place reads every line the session keeps: a key a
    hand edit put there that is not a line (its digits too many for ``int``) keeps nothing, and
    the import goes on (it was a traceback)."""
    sessions = copy_tree(FIXTURES / "continue" / "built-from-writer" / ".continue" / "sessions",
                         tmp_path / "sessions")  # fmt: skip
    src = sessions / "b7e1c2d3-0000-4000-8000-00000000c0de.json"
    root = tmp_path / "root"
    first = cli("import", "--from", "continue", str(src), "-o", str(root))
    assert first.returncode == 0, first.stderr
    (session,) = (root / "continue").glob("*.jsonl")
    with jsonltape.open(session) as tape:
        edited = {"1" * 5000: "x", "2-" + "9" * 4400: "a\nb", "\u00b2": "y"}
        tape.append("x/note", {"import": {"raw": edited}}, ignorable=True)
    doc = json.loads(src.read_text(encoding="utf-8"))
    doc["history"] = doc["history"][:7]  # Continue saved the session cut back
    src.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    age([src], 7000)
    again = cli("import", "--from", "continue", str(src), "-o", str(root))
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    fresh = import_file("continue", src, tmp_path / "fresh")
    assert bodies(session) == bodies(fresh.sessions[0])


_ODD_LINE = st.text(
    st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=6
)


@settings(max_examples=60, deadline=None)
@given(
    lines=st.tuples(
        _FIRST, st.lists(st.one_of(_BLOCK, st.lists(_ODD_LINE, max_size=4)), max_size=10)
    ),
    cuts=st.lists(st.integers(1, 80), max_size=3),
)
def test_a_growing_aider_history_rebuilds_byte_for_byte_from_its_sessions(
    tmp_path_factory: pytest.TempPathFactory, lines: tuple[str, list[list[str]]], cuts: list[int]
) -> None:
    """Imported as it grew (a first import part-way, a reply or a block of Aider's output cut
    by it, later ones from there), whatever its lines hold (``\\r``, U+2028, U+0085, NUL, any
    text): every line kept once, by events whose raw is as an import writes it, and the history
    rebuilds byte for byte."""
    first, blocks = lines
    text = "\n".join([first, *(x for b in blocks for x in b)]) + "\n"
    data = text.encode()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    repo = tmp_path_factory.mktemp("aider")
    history = repo / ".aider.chat.history.md"
    root = repo / "root"
    for k, cut in enumerate(sorted({min(c, len(ends)) for c in cuts}) + [len(ends)]):
        history.write_bytes(data[: ends[cut - 1]])
        os.utime(history, ns=((k + 1) * 10**9, (k + 1) * 10**9))
        for r in import_paths("aider", [history], root, settle=None if cut < len(ends) else 0):
            assert r.status in ("imported", "unchanged"), r.error
    kept: dict[int, str] = {}
    for session in sorted(root.rglob("*.jsonl")):
        for e in jsonltape.read(session):
            for n, t in kept_whole((e.data.get("import") or {}).get("raw")):
                assert n not in kept, f"line {n} carried twice"
                kept[n] = t
    assert "".join(kept[n] + "\n" for n in sorted(kept)).encode() == data


def test_a_redacted_copy_keeps_every_line_of_a_run_a_secret_spans(tmp_path: Path) -> None:
    from jsonltape.interop._redact_copy import redact_copy

    from .secret_cases import PEM, PEM_LINES

    reply = ["Here is the key you asked for:", *PEM.split("\n"), "Keep it safe."]
    text = "\n".join(
        ["# aider chat started at 2024-05-01 09:00:00", "", "#### show me the key", "", *reply, ""]
    )
    _src, report = _imported_history(tmp_path, text)
    (session,) = report.sessions
    copy = tmp_path / "shared.jsonl"
    redact_copy(session, copy)
    lines = {
        n: t
        for e in jsonltape.read(copy)
        for n, t in kept_lines((e.data.get("import") or {}).get("raw"))
    }
    assert sorted(lines) == list(range(1, text.count("\n") + 1))  # every line, none dropped
    for n, original in enumerate(text.split("\n")[:-1], 1):
        if any(secret in original for secret in PEM_LINES):
            assert lines[n] == "[REDACTED:private-key]", (n, lines[n])
        elif "PRIVATE KEY" not in original:
            assert lines[n] == original


def test_a_line_not_valid_utf8_is_the_one_kept_with_replacement_and_reported(
    tmp_path: Path,
) -> None:
    lines = (SAMPLES / "claude-code-v1.0.98-init.jsonl").read_bytes().splitlines(keepends=True)
    lines.insert(3, b'{"type":"user","x":"caf\xff"}\n')
    src = tmp_path / "src" / "a.jsonl"
    src.parent.mkdir()
    src.write_bytes(b"".join(lines))
    os.utime(src, (1e9, 1e9))
    report = import_file("claude-code", src, tmp_path / "root")
    assert report.status == "imported" and report.problems == [(4, "invalid UTF-8 at byte 23")]
    kept: dict[int, str] = {}
    for e in jsonltape.read(report.sessions[0]):
        for n, t in kept_lines((e.data.get("import") or {}).get("raw")):
            kept[n] = t
            if n == 4:
                assert (e.type, e.data["kind"], e.data["error"]) == (
                    "import/raw",
                    "malformed",
                    "invalid UTF-8 at byte 23",
                )
    assert sorted(kept) == list(range(1, len(lines) + 1))
    for n, line in enumerate(lines, 1):  # every other line byte for byte, this one replaced
        want = line[:-1].decode("utf-8", "replace")
        assert kept[n] == want and (n == 4) == (kept[n].encode() != line[:-1])


def test_a_number_from_text_is_only_ascii_digits_as_many_as_asked() -> None:
    from jsonltape._limits import ascii_int

    assert ascii_int("0") == 0 and ascii_int("9" * 16) == 10**16 - 1
    assert ascii_int("1" * 14, digits=14) == int("1" * 14)
    for text in ("", "²", "1²", "١٢", "+1", "-1", " 1", "1.0", "9" * 17, "1" * 4301, None, 12):
        assert ascii_int(text) is None, text
    assert ascii_int("1" * 15, digits=14) is None
