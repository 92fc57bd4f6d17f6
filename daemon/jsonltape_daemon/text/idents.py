"""Which tokens of a message are code-like: the only places a substring search looks.

A *token* is a run of characters between whitespace; one longer than 64 characters (minified
JSON, a long URL) counts as its runs of letters, digits and ``_ . / \\ : -``. A token is
*code-like* when it has one of:

* an underscore (``snake_case``, ``__init__``);
* one or more of ``. / \\ : -`` between two letters or digits (``functools.lru_cache``,
  ``src/a.py``, ``std::move``, ``dry-run``, ``1.2.3``);
* a lower-case letter followed by an upper-case one, or two upper-case letters followed by a
  lower-case one (``camelCase``, ``FileNotFoundError(path)``, ``HTTPServer``);
* a letter next to a digit (``utf8``, ``sha256``, ``v2``).

Plain words (``found``, ``ERROR``, ``Naïve``), numbers and punctuation are not code-like: they
are found as whole words or by ``prefix*`` from the word index, never as substrings. The
substring index (``messages_trigram``) holds each message's distinct code-like tokens joined by
spaces, and a search checks a substring term on those tokens of the message's text (case
folded), so what the index finds and what the check keeps follow this one rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["contains", "idents", "tokens"]

_LONG = 64
_TOKEN = re.compile(r"[\w./\\:-]+")
_FEATURE = re.compile(
    r"[a-z][A-Z]|[A-Z]{2}[a-z]|[A-Za-z][0-9]|[0-9][A-Za-z]|_|[^\W_][./\\:-]+[^\W_]"
)


#: Whether a word (up to ``_LONG`` characters) is code-like, for the words seen last: prose
#: repeats its words, so most are looked up instead of tested (2-4x faster on the bench
#: corpus). Emptied when full, which bounds it to about 10 MB.
_VERDICT: dict[str, bool] = {}
_VERDICT_MAX = 100_000


def _verdict(word: str) -> bool:
    # Most words of prose are letters in one case (or capitalized): no regex for those.
    if word.isalpha() and (word.islower() or word.isupper() or word.istitle()):
        return False
    return _FEATURE.search(word) is not None


def tokens(text: str) -> list[str]:
    """The distinct code-like tokens of ``text``, in order of first appearance."""
    out: dict[str, None] = {}
    verdict = _VERDICT
    feature = _FEATURE.search
    for word in text.split():
        v = verdict.get(word)
        if v is None:
            if len(word) > _LONG:
                for t in _TOKEN.findall(word):
                    if feature(t) is not None:
                        out[t] = None
                continue
            v = _verdict(word)
            if len(verdict) >= _VERDICT_MAX:
                verdict.clear()
            verdict[word] = v
        if v:
            out[word] = None
    return list(out)


def idents(text: str) -> str:
    """What the substring index holds for a message: its code-like tokens, space-joined."""
    return " ".join(tokens(text))


def contains(text: str, needle: str) -> bool:
    """True when ``needle`` (lower case) is inside one of the code-like tokens of ``text``,
    case folded (as ``needle in idents(text).lower()``; a needle with whitespace never is).
    Only the tokens around the needle's occurrences are looked at."""
    if not needle or any(c.isspace() for c in needle):
        return False
    low = text.lower()
    if len(low) != len(text):  # a letter whose lower case is longer (rare): positions differ
        return needle in idents(text).lower()
    at = low.find(needle)
    while at >= 0:
        end = at + len(needle)
        lo, hi = _around(text, at, end, str.isspace, _LONG + 1)
        if hi - lo <= _LONG:
            if _code_like(text[lo:hi]):
                return True
        elif _TOKEN.fullmatch(needle) is not None:  # a long token: its runs of token chars
            lo, hi = _around(text, at, end, _not_token_char, None)
            if _code_like(text[lo:hi]):
                return True
        at = low.find(needle, at + 1)
    return False


def _code_like(token: str) -> bool:
    return _FEATURE.search(token) is not None


def _not_token_char(c: str) -> bool:
    return _TOKEN.match(c) is None


def _around(
    text: str, start: int, end: int, stop: Callable[[str], bool], most: int | None
) -> tuple[int, int]:
    """The span around ``[start, end)`` up to the characters ``stop`` takes (or just past
    ``most`` characters in all, which is enough to tell a long token)."""
    lo, hi, n = start, end, len(text)
    while lo > 0 and not stop(text[lo - 1]):
        lo -= 1
        if most is not None and hi - lo > most:
            return lo, hi
    while hi < n and not stop(text[hi]):
        hi += 1
        if most is not None and hi - lo > most:
            return lo, hi
    return lo, hi
