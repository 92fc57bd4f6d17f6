"""Snippets mark what matched: every term where it is in the text, folded as the word index
folds (case, diacritics), whatever else the text holds."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonltape_daemon.search.language import parse_query
from jsonltape_daemon.search.snippet import MARK_CLOSE, MARK_OPEN, _fold, snippet

_MARKED = re.compile(re.escape(MARK_OPEN) + "(.*?)" + re.escape(MARK_CLOSE))


def _marks(text: str, query: str) -> list[str]:
    return _MARKED.findall(snippet(text, parse_query(query)))


def test_a_letter_whose_lower_case_is_longer_keeps_case_folding_for_the_rest() -> None:
    # "İ".lower() is two characters; folding must not be dropped for the whole text
    assert _marks("İstanbul, then ISTANBUL again", "istanbul") == ["İstanbul", "ISTANBUL"]
    assert _marks("İ saw FileNotFoundError", "notfound") == ["NotFound"]


def test_diacritics_and_case_fold_together() -> None:
    assert _marks("Ünïcode and NAÏVE text", "naive") == ["NAÏVE"]
    assert _marks("ÅNGSTRÖM", "angstrom") == ["ÅNGSTRÖM"]


def test_the_fold_keeps_every_position() -> None:
    for text in ["İİİ", "ß straße ẞ", "ǅ ǈ ﬁ ﬀ", "Σίσυφος", "ﬃ İstanbul ŉ"]:
        assert len(_fold(text)) == len(text)


@settings(max_examples=300, deadline=None)
@given(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
)
def test_an_identifier_inside_any_text_is_marked_exactly(before: str, after: str) -> None:
    text = f"{before} FileNotFoundError {after}"
    marks = _marks(text, "NotFound")
    assert marks and all(_fold(m) == "notfound" for m in marks)
    assert len(_fold(text)) == len(text)


def test_a_greek_final_sigma_is_marked_whatever_the_case() -> None:
    assert _marks("Η ΟΔΟΣ είναι κλειστή", "οδος") == ["ΟΔΟΣ"]
    assert _marks("η οδος", "ΟΔΟΣ") == ["οδος"]


def test_a_dropped_colour_sequence_leaves_one_space() -> None:
    text = "x" * 60 + " \x1b]0;t\x07 needle here"
    assert "  " not in snippet(text, parse_query("needle"))


def test_a_sequence_start_without_its_end_hides_nothing() -> None:
    got = snippet("second \x1b] hidden instruction needle", parse_query("needle"))
    assert "hidden instruction" in got and "\\x1b]" in got
