"""The vendored gitleaks rules and the Go-to-Python translation they go through: where they come
from (version, commit, licence), that every kept rule compiles and finds its own true positives
and none of its false positives (the literal examples of gitleaks' rule generators), that the
anchors recorded beside each rule are the ones the refresh script derives, that the translator
keeps Go's meaning where the two dialects differ, and that the screen finds every keyword,
alone or overlapping another.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jsonltape.interop import _secret_rules, _secret_scan
from jsonltape.interop._needles import Needles
from jsonltape.interop._re2 import Untranslatable, translate
from jsonltape.interop._secret_scan import View, find, rules
from jsonltape.interop._secret_screen import kinds_of, screen

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
DATA = json.loads((ROOT / "jsonltape" / "interop" / "_gitleaks.json").read_text())
EXAMPLES = json.loads((ROOT / "tests" / "fixtures" / "gitleaks_examples.json").read_text())


def test_the_vendored_rules_name_their_version_commit_and_licence() -> None:
    assert DATA["source"] == "https://github.com/gitleaks/gitleaks"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", DATA["version"])
    assert re.fullmatch(r"[0-9a-f]{40}", DATA["commit"])
    assert EXAMPLES["commit"] == DATA["commit"]
    licence = (ROOT / "jsonltape" / "interop" / "_gitleaks_LICENSE.txt").read_text()
    assert "MIT License" in licence and "Copyright (c) 2019 Zachary Rice" in licence
    assert DATA["version"] in licence and DATA["commit"] in licence
    pyproject = (ROOT / "pyproject.toml").read_text()
    for name in ('"interop/_gitleaks.json"', '"interop/_gitleaks_LICENSE.txt"'):
        assert name in pyproject, name
    assert _secret_rules.gitleaks().version == DATA["version"]


def test_every_kept_rule_compiles_and_every_left_out_one_says_why() -> None:
    assert len(DATA["rules"]) >= 200
    for rule in DATA["rules"]:
        re.compile(translate(rule["regex"]), re.ASCII)
        for allow in rule.get("allowlists", []):
            for pattern in allow.get("regexes", []):
                re.compile(translate(pattern), re.ASCII)
    for pattern in DATA["allowlist"]["regexes"]:
        re.compile(translate(pattern), re.ASCII)
    for left in DATA["left_out"]:
        assert left["why"], left
    kinds = [r.kind for r in rules()]
    assert len(kinds) == len(set(kinds)), "two rules of one kind"


@pytest.mark.parametrize("rule_id", sorted(EXAMPLES["rules"]))
def test_each_rule_finds_its_true_positives_and_none_of_its_false_positives(rule_id: str) -> None:
    examples = EXAMPLES["rules"][rule_id]
    for text in examples["tp"]:
        assert any(f.rule.kind == rule_id for f in find(text, [rule_id])), text
    for text in examples["fp"]:
        assert not any(f.rule.kind == rule_id for f in find(text, [rule_id])), text


def test_the_recorded_anchors_are_the_ones_the_refresh_script_derives() -> None:
    script = load_script(ROOT / "scripts" / "refresh_gitleaks.py", "refresh_gitleaks")
    for rule in DATA["rules"]:
        assert rule["anchors"] == script.anchors(translate(rule["regex"])), rule["id"]


def test_the_example_extractor_reads_go_literals_and_skips_built_ones() -> None:
    script = load_script(ROOT / "scripts" / "refresh_gitleaks.py", "refresh_gitleaks")
    go = (
        'package rules\n\nfunc X() *config.Rule {\n\tr := config.Rule{RuleID: "x-rule"}\n'
        '\ttps := utils.GenerateSampleSecrets("x", "abc")\n'
        '\ttps = append(tps,\n\t\t"lit\\tone", // gitleaks:allow\n'
        '\t\t`raw "two"`,\n\t\t"joined" + secrets.NewSecret(`[a-z]{3}`),\n\t)\n'
        '\tfps := []string{\n\t\t"fp\\x41",\n\t\tf("call"),\n\t}\n'
        "\treturn utils.Validate(r, tps, fps)\n}\n"
    )
    assert script.examples({"x.go": go}) == {
        "x-rule": {"tp": ["lit\tone", 'raw "two"'], "fp": ["fpA"]}
    }


# -- Go's meaning in Python ----------------------------------------------------------------------

SEMANTICS = [
    # (Go pattern, text, what Go matches, or None)
    (r"p8e-(?i)[a-z0-9]{4}", "p8e-AbCd", "p8e-AbCd"),  # a flag in the middle: the rest only
    (r"P8E-(?i)[a-z]{2}", "p8e-ab", None),
    (r"(?:a(?i)b|c)", "C", "C"),  # ...and every later alternative of its group
    (r"(?:a(?i)b|c)", "aB", "aB"),
    (r"(?:a(?i)b|c)x", "CX", None),  # not past the group
    (r"ab$", "ab\n", None),  # Go's $ is the end of the text
    (r"ab\z", "ab\n", None),
    (r"(?m)ab$", "ab\ncd", "ab"),
    (r"a\sb", "a\x0bb", None),  # Go's \s has no vertical tab
    (r"a\Sb", "a\x0bb", "a\x0bb"),
    (r"a[\s\S]b", "a\x0bb", "a\x0bb"),
    (r"[[:alnum:]]{3}", "-x9Z-", "x9Z"),
    (r"a{,2}", "a{,2}", "a{,2}"),  # not a repeat in Go
    (r"[a-z|]+", "ab|cd", "ab|cd"),
    (r"[\w--]+", "a--b", "a--b"),
    (r"[\x41-\x43]+", "xABCD", "ABC"),  # a range between escapes stays a range
    (r"[+--]+", "a+,-b", "+,-"),
    (r"\bkey\b", "monkey key", "key"),
    (r"(?i)k", "\u212a", None),  # ASCII folding only (the view's NFKC gives "K")
]


@pytest.mark.parametrize(("go", "text", "want"), SEMANTICS)
def test_the_translation_keeps_gos_meaning(go: str, text: str, want: str | None) -> None:
    m = re.compile(translate(go), re.ASCII).search(text)
    assert (m.group(0) if m else None) == want


@pytest.mark.parametrize(
    "go", [r"\p{Greek}", r"\Qa.b\E", r"(?U)a+", r"(a)\1", r"\x{41}", "(?<=a)b"]
)
def test_what_the_translator_does_not_know_is_refused(go: str) -> None:
    with pytest.raises(Untranslatable):
        translate(go)


# -- the screen and the view ---------------------------------------------------------------------


def _keywords() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for rule in rules():
        for k in rule.keywords:
            found.setdefault(k, set()).add(rule.kind)
    return found


def test_the_screen_finds_every_keyword_alone_or_overlapping_another() -> None:
    keywords = _keywords()
    names = sorted(keywords)
    for a in names:
        text = f"x {a.upper()} y".encode()
        assert keywords[a] <= kinds_of(screen(text)), a
        for b in names:
            for at in range(-len(b) + 1, len(a) + 1):  # b starts `at` characters after a
                lo, hi = max(0, at), min(len(a), at + len(b))
                if lo < hi and a[lo:hi] != b[lo - at : hi - at]:
                    continue
                start = min(0, at)
                chars = [" "] * (max(len(a), at + len(b)) - start)
                for i, c in enumerate(a):
                    chars[i - start] = c
                for i, c in enumerate(b):
                    chars[at + i - start] = c
                text = f"xx {''.join(chars)} xx".encode()
                assert keywords[a] | keywords[b] <= kinds_of(screen(text)), text


def test_a_line_with_an_escape_or_non_ascii_text_is_marked_for_its_view() -> None:
    assert kinds_of(screen(b'{"v": "plain"}')) == frozenset()
    assert "view" in kinds_of(screen(b'{"v": "a\\\\"}'))  # a backslash in the string
    assert "view" in kinds_of(screen('{"v": "ｓｋ"}'.encode()))
    assert "*" in kinds_of(screen(b'{"v": "\\u00e9"}'))


def test_every_format_character_of_this_python_is_removed_in_a_view() -> None:
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    cf = [c for c in every if unicodedata.category(c) == "Cf"]
    assert all(_secret_scan._INVISIBLE.match(c) for c in cf)
    text = "ab" + "".join(cf) + "cd"
    assert View(text).text == "abcd"


@pytest.mark.parametrize(
    ("source", "seen"),
    [
        ('{\\"k\\": \\"v\\"}', '{"k": "v"}'),
        ("ｓｋ＿ｌｉｖｅ", "sk_live"),
        ("a\u200bb\u2060c", "abc"),
        ("\\u0041\\n", "A\n"),
        ("ﬀ", "ff"),
    ],
)
def test_a_view_reads_what_a_reader_sees_and_maps_back_to_the_source(
    source: str, seen: str
) -> None:
    view = View(source)
    assert view.text == seen
    assert view.span(0, len(seen)) == (0, len(source))


_NEEDLE_ALPHABET = "abkxy_-.:0"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(_NEEDLE_ALPHABET, min_size=1, max_size=6), min_size=1, max_size=30, unique=True
    ),
    st.lists(st.text(_NEEDLE_ALPHABET, max_size=12), max_size=60),
    st.booleans(),
)
def test_needles_finds_every_occurrence_of_every_needle(
    needles: list[str], pieces: list[str], raw: bool
) -> None:
    # Texts short and long (searched needle by needle, or lead by lead), needles planted.
    text = "".join(p + needles[i % len(needles)] for i, p in enumerate(pieces))
    want = {
        (i, n) for n, k in enumerate(needles) for i in range(len(text)) if text.startswith(k, i)
    }
    found = Needles(needles, b"" if raw else "")
    got = set(found.find(text.encode() if raw else text))  # type: ignore[arg-type]
    assert got == want
