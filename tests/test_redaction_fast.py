"""The fast finder of :mod:`jsonltape.interop._secret_scan` finds exactly what each rule's regex
finds: a rule tried only where its anchors allow a match to start (``str.find`` of its
literals, a lazy identifier run back from them) gives the matches ``pattern.finditer`` gives,
over every rule and random texts built from the rules' own pieces (their anchors and keywords in
every case, identifier runs, separators, token-like runs, gitleaks' examples cut in pieces, the
characters that case folding treats specially), and over the table of cases and gitleaks'
examples whole.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from jsonltape.interop._secret_mask import kinds_in
from jsonltape.interop._secret_scan import (
    ANY,
    Span,
    find,
    lowered,
    matches,
    merged,
    rules,
    spans,
    views,
)

from .secret_cases import NEGATIVE, POSITIVE
from .test_redaction_table import full_width

EXAMPLES = json.loads((Path(__file__).parent / "fixtures" / "gitleaks_examples.json").read_text())[
    "rules"
]
_RULES = rules()
_TEXTS = [t for e in EXAMPLES.values() for t in e["tp"] + e["fp"]]
_TEXTS += [t for t, _, _ in POSITIVE] + NEGATIVE

_WORDS = sorted(
    {a.text for r in _RULES for a in r.anchors or ()} | {k for r in _RULES for k in r.keywords}
)
_SEPARATORS = [
    *("=", ":", " = ", ": ", "\t:\t", '"', "'", '": "', "='", " ", "\n", ",", ";", "&", ")"),
    *("}", "]", "\\", '\\"', "$", "<", "{", "%", "(", "[", "://", "@", ".", "-", "_", "|", "~"),
    *("=>", ":=", "||", "?=", "\\n", "`"),
]
_ODD = ["\u0130", "\u0131", "\u017f", "\u212a", "é", "😀", "\u00df", "ﬀ", "\u200b", "ｓ"]
_cased = st.sampled_from(_WORDS).flatmap(
    lambda w: st.sampled_from([w, w.upper(), w.title(), w.swapcase()])
)
_run = st.tuples(
    st.sampled_from([string.ascii_letters + string.digits, string.hexdigits, "ABCDEFGHIJ234567"]),
    st.integers(1, 120),
    st.randoms(use_true_random=False),
).map(lambda t: "".join(t[2].choice(t[0]) for _ in range(t[1])))
_cut = st.sampled_from(_TEXTS).flatmap(
    lambda t: st.tuples(st.integers(0, len(t)), st.integers(0, len(t))).map(
        lambda ab: t[min(ab) : max(ab)]
    )
)
_piece = st.one_of(
    _cased,
    _cased,
    st.sampled_from(_SEPARATORS),
    _run,
    _cut,
    st.sampled_from(_ODD),
    st.sampled_from(["api_key", "my_token", "db.password", "x-auth", "sort_key", "primary_key"]),
    st.text(alphabet="aZkKsS0_-.:=/@'\"\\ \t\n", max_size=6),
)
texts = st.lists(_piece, max_size=40).map("".join)


def _found(rule_matches: object) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    return [(m.span(), m.groups()) for m in rule_matches]  # type: ignore[attr-defined]


@settings(max_examples=100, deadline=None)
@given(texts)
def test_each_rule_matches_where_its_regex_matches(text: str) -> None:
    low = lowered(text)
    for rule in _RULES:
        got = _found(matches(rule, text, low))
        assert got == _found(rule.regex.finditer(text)), (rule.kind, text)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(_RULES), st.lists(_piece, max_size=30))
def test_one_rule_over_texts_of_its_own_pieces(rule: object, pieces: list[str]) -> None:
    own = [a.text for a in getattr(rule, "anchors", None) or ()] + list(
        getattr(rule, "keywords", ())
    )
    text = "".join(p if i % 3 else (own[i % len(own)] if own else p) for i, p in enumerate(pieces))
    low = lowered(text)
    got = _found(matches(rule, text, low))  # type: ignore[arg-type]
    assert got == _found(rule.regex.finditer(text))  # type: ignore[attr-defined]


def test_the_table_and_gitleaks_examples_match_as_the_regexes_do() -> None:
    table = [t for t, _, _ in POSITIVE] + NEGATIVE
    for rule in _RULES:
        own = EXAMPLES.get(rule.kind, {"tp": [], "fp": []})
        for text in [*own["tp"], *own["fp"], *table]:
            for variant in (text, f"{text.upper()}\n{text}"):
                got = _found(matches(rule, variant, lowered(variant)))
                assert got == _found(rule.regex.finditer(variant)), (rule.kind, variant)


# -- the screen and the views' rules: what they leave out finds nothing -----------------------

_ESCAPES = ['\\"', "\\\\", "\\n", "\\t", "\\/", "\\u0041", "\\u00e9", "\\uff53", "\\u200b", "/"]
_table = st.sampled_from([t for t, _, _ in POSITIVE] + NEGATIVE)
_mixed = st.lists(
    st.one_of(
        _piece,
        _table,
        _table.map(lambda t: json.dumps(t)[1:-1]),  # JSON-escaped
        _table.map(lambda t: json.dumps(json.dumps(t))[1:-1]),  # twice
        _table.map(lambda t: full_width(json.dumps(t)[1:-1])),  # escaped, then full-width
        st.sampled_from(_ESCAPES),
    ),
    max_size=12,
).map("".join)


def _every_rule(text: str) -> list[tuple[int, int, str]]:
    """Every rule over the text as written and over each view: what the screen and the views'
    narrowed rules must find too."""
    found = [Span(f.start, f.end, f.rule) for f in find(text, ANY)]
    for view in views(text):
        for f in find(view.text, ANY):
            a, b = view.span(f.start, f.end)
            if a < b:
                found.append(Span(a, b, f.rule))
    return [(s.start, s.end, s.rule.kind) for s in merged(found)]


@settings(max_examples=400, deadline=None)
@given(_mixed)
def test_the_screened_rules_find_what_every_rule_finds(text: str) -> None:
    got = [(s.start, s.end, s.rule.kind) for s in spans(text, kinds_in(text) or ())]
    assert got == _every_rule(text), text
