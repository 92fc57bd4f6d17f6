"""Snippets of a hit, cut from its text (read back from the session file).

Each query term is marked where it matches: a word term (or a phrase of words) where the word
index matched it -- whole words, folded like the ``unicode61 remove_diacritics 2`` tokenizer
folds them (``naive`` marks ``naïve``), a ``prefix*`` to the end of its word -- else as a
substring, case folded. The snippet is the text around the first mark, on one line, shown as
a terminal may show it (``jsonltape._display``: whole terminal sequences dropped, any other
control or bidi character escaped, ``\x1b``), so a ``MARK_OPEN`` in a snippet is always a
mark.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Protocol

from jsonltape._index_api import shown
from jsonltape_daemon.search.rank import tokens

__all__ = ["MARK_CLOSE", "MARK_OPEN", "snippet"]

#: Highlight markers inside snippets; the CLI turns them into brackets or terminal styles.
MARK_OPEN = "\x02"
MARK_CLOSE = "\x03"
_CONTEXT = 48
_HEAD = 4096
_SPACE = re.compile(r"\s+")


class _Term(Protocol):
    text: str
    prefix: bool

    @property
    def wordy(self) -> bool: ...


class _Folds(dict[int, str]):
    """``str.translate`` table: a character to its lower case without diacritics, always one
    character, so that positions in the folded text are positions in the text. A letter whose
    lower case is longer (``İ`` -> ``i̇``) folds through its base letter (``İ`` -> ``I`` ->
    ``i``), one whose bare form is longer stays itself; case folding that stays one character
    applies too (a final ``ς`` is ``σ``, as ``ΟΔΟΣ`` lowers to ``οδοσ`` letter by letter)."""

    def __missing__(self, code: int) -> str:
        c = chr(code)
        low = c.lower()
        for base in (low, c):
            bare = "".join(
                x for x in unicodedata.normalize("NFD", base) if not unicodedata.combining(x)
            ).lower()
            if len(bare) == 1:
                self[code] = out = _casefold(bare)
                return out
        self[code] = out = _casefold(low if len(low) == 1 else c)
        return out


def _casefold(c: str) -> str:
    folded = c.casefold()
    return folded if len(folded) == 1 else c


_FOLDS = _Folds()


def _fold(text: str) -> str:
    """``text`` case- and diacritic-folded, character for character (the same length)."""
    return text.lower() if text.isascii() else text.translate(_FOLDS)


def _spans(text: str, folded: str, term: _Term) -> list[tuple[int, int]]:
    if term.wordy:
        words = [_fold(w) for w in tokens(term.text)]  # folded as the text is
        if words:
            pattern = r"(?<![^\W_])" + r"[\W_]+".join(map(re.escape, words))
            pattern += r"[^\W_]*" if term.prefix else r"(?![^\W_])"
            found = [m.span() for m in re.finditer(pattern, folded)]
            if found:
                return found
    needle = _fold(term.text)
    out = []
    at = folded.find(needle)
    while at >= 0 and needle:
        out.append((at, at + len(needle)))
        at = folded.find(needle, at + len(needle))
    return out


def snippet(text: str, terms: Sequence[_Term]) -> str:
    """Up to ``_CONTEXT`` characters either side of the first term found in ``text``, every
    term found there marked, on one line."""
    spans: list[tuple[int, int]] = []
    if len(text) > _HEAD:  # a long text: its first terms are most often near its start
        cut = text.rfind(" ", 0, _HEAD)
        head = text[: cut if cut > 0 else _HEAD]
        spans = sorted(s for t in terms for s in _spans(head, _fold(head), t))
    if not spans:
        folded = _fold(text)
        spans = sorted(s for t in terms for s in _spans(text, folded, t))
    if not spans:
        return _one_line(text[: 2 * _CONTEXT]).strip()
    first = spans[0][0]
    lo = max(0, first - _CONTEXT)
    hi = min(len(text), max(first + _CONTEXT, spans[0][1]))
    out = []
    pos = lo
    for i, j in spans:
        if i < pos or i >= hi:
            continue
        out += [_one_line(text[pos:i]), MARK_OPEN, _one_line(text[i:j]), MARK_CLOSE]
        pos = j
    out.append(_one_line(text[pos:hi]) if pos < hi else "")
    more = "…" if max(hi, pos) < len(text) else ""
    return (("…" if lo > 0 else "") + "".join(out) + more).strip()


def _one_line(text: str) -> str:
    """A piece of the snippet: :func:`shown` (terminal sequences dropped first), then white
    space runs as one space."""
    return _SPACE.sub(" ", shown(text.replace("\r", " "), newlines=True, sequences=True))
