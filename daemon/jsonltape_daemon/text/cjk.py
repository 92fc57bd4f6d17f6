"""Short CJK queries served from an index: character unigrams and bigrams of CJK runs.

SQLite's ``unicode61`` tokenizer takes a whole run of CJK characters for one token, and the
``trigram`` tokenizer cannot match fewer than three characters, so a one- or two-character
Japanese, Chinese or Korean query would need a scan. The ``messages_cjk`` table indexes, per
message, every distinct CJK character and every distinct pair of adjacent CJK characters (one
column; a unigram and a bigram are different tokens), with the ``ascii`` tokenizer (non-ASCII
characters are token characters, nothing is folded) and ``detail='none'`` (no positions):

* one character ``雨``: ``"雨"`` -- exactly the messages that contain it;
* two or more ``東京都``: ``"東京" "京都"`` -- every bigram of the term, the candidates;
  the text decides (``search.py``), as for the trigram table.

A term then matches exactly the messages whose text contains it, as ``text LIKE '%term%'``
would (both are exact for these characters); a test holds the two to the same result.
"""

from __future__ import annotations

import functools
import re

__all__ = ["CJK_CHARS", "grams", "is_cjk", "is_cjk_term", "match_expr"]

#: The characters treated as CJK, here and when queries are classified (U+3000, the ideographic
#: space, is whitespace and never part of a term).
CJK_CHARS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fff"  # CJK and Kangxi radicals, ideographic description characters
    "\u3001-\u303f"  # CJK symbols and punctuation
    "\u3040-\u33ff"  # Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Kanbun, ...
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7ff"  # Hangul syllables, Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\ufe30-\ufe4f"  # CJK compatibility forms
    "\uff00-\uffef"  # halfwidth and fullwidth forms
    "\U0001b000-\U0001b2ff"  # Kana supplement and extensions
    "\U00020000-\U0003134f"  # CJK Unified Ideographs Extensions B-G, compatibility supplement
)


# Compiled on first use, not at import: the two patterns over these ranges take 3-5 ms to
# compile, which every `jsonltape search` paid at start-up (benchmarks/README.md, issue 11).
@functools.cache
def _run() -> re.Pattern[str]:
    return re.compile(f"[{CJK_CHARS}]+")


@functools.cache
def _only() -> re.Pattern[str]:
    return re.compile(f"[{CJK_CHARS}]+\\Z")


def is_cjk(c: str) -> bool:
    return is_cjk_term(c)


def is_cjk_term(text: str) -> bool:
    """True when every character of ``text`` is CJK (the index serves such terms)."""
    # No CJK character is ASCII: an ASCII query never compiles the pattern.
    return not text.isascii() and _only().match(text) is not None


def grams(text: str) -> str | None:
    """The ``messages_cjk`` value of a message text, or None when it has no CJK."""
    if text.isascii():
        return None
    runs = _run().findall(text)
    if not runs:
        return None
    out = dict.fromkeys("".join(runs))
    for run in runs:
        out.update(dict.fromkeys(run[i : i + 2] for i in range(len(run) - 1)))
    return " ".join(out)


def match_expr(term: str) -> str:
    """The ``messages_cjk`` MATCH expression for a CJK-only term (see the module docs)."""
    if len(term) == 1:
        return f'"{term}"'
    return " ".join(dict.fromkeys(f'"{term[i : i + 2]}"' for i in range(len(term) - 1)))
