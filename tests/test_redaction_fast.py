"""The fast secret finder of :mod:`jsonltape.interop.redaction` finds exactly what the plain
patterns find: each pattern tried only where a needle puts a possible start gives the matches
``pattern.finditer`` gives, and :func:`mask_text` masks as ``pattern.sub`` of each pattern in
turn masks, over random texts built from the patterns' own pieces (keywords in every case,
separators, values, key prefixes, URLs, the characters that case folding treats specially).
The table of positive and negative cases (tests/test_redaction_table.py) runs through it too.
"""

from __future__ import annotations

import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from jsonltape.interop import redaction
from jsonltape.interop.redaction import (
    _PATTERNS,
    _RULES,
    _UNFOLDED,
    Secret,
    _masked,
    _matches,
    _starts,
    find_secrets,
    mask_text,
)

from .test_redaction_table import NEGATIVE, POSITIVE

_KEYWORDS = [
    *("password", "passwd", "passphrase", "pwd", "pass", "secret", "token", "credential"),
    *("credentials", "key", "apikey", "api_key", "api-key", "access_key", "accesskey"),
    *("access-key", "private_key", "privatekey", "private-key", "authorization", "bearer"),
    *("basic", "Authorization: Bearer ", "Bearer ", "sort_key", "primary_key", "bypass"),
]
_NAMES = ["DB_", "POSTGRES_", "my-", "x.", "STRIPE_", "SMTP_", "export ", "--", "PG", "_", ""]
_SEPARATORS = [
    *("=", ":", " = ", ": ", "\t:\t", '"', "'", '": "', "='", " ", "\n", ",", ";", "&", ")"),
    *("}", "]", "\\", '\\"', "$", "<", "{", "%", "(", "["),
]
_VALUES = [
    *("hunter2pass", "correcthorse", "Zebra", "str", "Optional[str]", "getpass()", "null"),
    *("[REDACTED:x]", "abc123def456", "we need it", "8f14e45fceea167a", "{{ v }}", "$X"),
]
_TOKENS = [
    "sk-ant-" + "a1B2" * 6,
    "sk-proj-abc123def456ghi789jkl",
    "sk-" + "x" * 25,
    "AKIA" + "ABCDEFGH12345678",
    "ASIA" + "Q" * 16,
    "ghp_" + "a1" * 16,
    "github_pat_" + "A_1" * 8,
    "xoxb-1234567890-abc",
    "xapp-1-abcdefghijk",
    "AIza" + "b" * 35,
    "eyJhbGci.eyJzdWIi.sig_-",
    "abc123def456",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----MIIE+/=\\n",
    "-----END RSA PRIVATE KEY-----",
    "MIIEabc+/=",
]
_URLS = [
    *("redis://", "https://", "postgres://app", "x+y.z-w://", "://", "://u:", "@", "@host"),
    *(":5432/x", "[::1]", ":pa/ss@w:rd", "db.internal", "/path?a=b", "a" * 70),
]
#: The characters case folding treats specially (see redaction.py), and others around them.
_ODD = [*_UNFOLDED, "\u212a", "\u0130", "é", "😀", "\u00df", "Σ", "ς", "ﬀ"]
_CHARS = "aZkKsS0_-.:=/@'\"\\ \t\n" + "".join(_ODD)

_cased_keyword = st.sampled_from(_KEYWORDS).flatmap(
    lambda k: st.sampled_from([k, k.upper(), k.title(), k.swapcase()])
)
#: NAME + keyword + separator + value, and scheme://user:password@host/...: the shapes the
#: assignment and URL patterns look for, with their parts drawn (so also near misses).
_assignment = st.tuples(
    st.sampled_from(_NAMES), _cased_keyword, st.sampled_from(_SEPARATORS), st.sampled_from(_VALUES)
).map("".join)
_url = st.tuples(
    st.sampled_from(["redis", "https", "x+y.z-w", "postgres", "", "9a"]),
    st.sampled_from(["://", "://", ":/", ":\\/"]),
    st.sampled_from(["", "app", "u.ser", "a b"]),
    st.sampled_from([":", ":", ""]),
    st.sampled_from(["pw", "pa/ss@w:rd", "p@ss", "[REDACTED:x]", "s3cr/et", "x" * 260]),
    st.sampled_from(["@", "@", ""]),
    st.sampled_from(["db.internal", "[::1]", "cache", "h%20", ""]),
    st.sampled_from([":5432/x", "", "/", " ", "?a=b", "#f", ")", '"', "@x"]),
).map("".join)
_bearer = st.tuples(
    st.sampled_from(["Authorization", "authorization", "AUTHORIZATION", "x-authorization"]),
    st.sampled_from([": ", "=", " : '", ":"]),
    st.sampled_from(["Bearer ", "basic ", "Token\t", "bearer", "none "]),
    st.sampled_from(["abc123def456", "dXNlcjpwYXNz1==", "short1", "lettersonly", "a.b~c/d+1"]),
).map("".join)

_piece = st.one_of(
    _assignment,
    _url,
    _bearer,
    _cased_keyword,
    st.sampled_from(_NAMES),
    st.sampled_from(_SEPARATORS),
    st.sampled_from(_VALUES),
    st.sampled_from(_TOKENS),
    st.sampled_from(_URLS),
    st.sampled_from(_ODD),
    st.text(alphabet=_CHARS, max_size=6),
)
texts = st.lists(_piece, max_size=40).map("".join)


def _plain(kind: str) -> re.Pattern[str]:
    return dict(_PATTERNS)[kind]


def _found(ms: object) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    return [(m.span(), m.groups()) for m in ms]  # type: ignore[attr-defined]


def plain_mask(text: str) -> tuple[str, list[Secret]]:
    """What masking was before the fast finder: ``re.sub`` of each pattern in turn."""
    found: list[Secret] = []
    for kind, pattern in _PATTERNS:

        def sub(m: re.Match[str], kind: str = kind) -> str:
            out = _masked(kind, m)
            if out is None:
                return m.group(0)
            found.append(Secret(kind, m.group(0)))
            return out

        text = pattern.sub(sub, text)
    return text, found


@settings(max_examples=800, deadline=None)
@given(texts)
def test_each_pattern_matches_where_the_plain_regex_matches(text: str) -> None:
    for rule in _RULES:
        assert _found(_matches(rule, text, _starts(rule, text, [None]))) == _found(
            _plain(rule.kind).finditer(text)
        )


@settings(max_examples=800, deadline=None)
@given(texts)
def test_masking_equals_each_plain_pattern_in_turn(text: str) -> None:
    found: list[Secret] = []
    masked = mask_text(text, found)
    assert (masked, found) == plain_mask(text)
    assert list(find_secrets(text)) == found


def test_the_table_masks_as_the_plain_patterns_do() -> None:
    for text in [p[0] for p in POSITIVE] + NEGATIVE:
        for variant in (text, text.upper(), text.lower(), f"x\n{text}\ny", f"{text} {text}"):
            found: list[Secret] = []
            assert (mask_text(variant, found), found) == plain_mask(variant), variant


def test_ascii_text_takes_the_fast_path_and_code_without_a_needle_offers_no_start() -> None:
    code = "def step(state, token_list):\n    return state.advance(1)  # ok\n" * 200
    for rule in _RULES:
        assert _starts(rule, code, [None]) == [], rule.kind
    line = "    sort_key = created_at\n"
    assignment = next(r for r in _RULES if r.kind == "assignment")
    assert _starts(assignment, code + line, [None]) == [
        len(code) + 9 - b for b in (8, 7, 6, 4, 3, 0)
    ]


def test_only_the_listed_characters_defeat_finding_needles_in_the_lowered_text() -> None:
    # The case-insensitive rules find their needles in text.lower(); that is complete when
    # every character the regex equates with a needle letter lowers to that letter, and every
    # character lowers to one. The exceptions, over every code point, are _UNFOLDED.
    spelt = [n + (rx.pattern if rx else "") for r in _RULES if r.folded for n, _, rx in r.needles]
    letters = sorted({c for text in spelt for c in text if c.isalpha()})
    assert all(c.isascii() and c.islower() for c in letters)
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000)
    equal = re.compile("(?i)[" + "".join(letters) + "]")
    odd = {m.group(0) for m in equal.finditer(every) if m.group(0).lower() not in letters}
    odd |= {c for c in every if len(c.lower()) != 1}
    assert odd == set(_UNFOLDED)
    assert redaction.ANY == "*"
