"""How many messages a word is in, and which words of a query rank its matches.

The full-text tables' rowid is a key in time order (``messages.tkey``), so FTS5 reads a
query's matches newest first and a query can stop after the ones it needs. Ranking is what
would still read every match: ``bm25`` counts, for each phrase of its expression, every message
that contains it. So a search ranks by the query's *informative* words only — those in at most
``max(COMMON_MIN, COMMON_SHARE × messages)`` messages (``engines/sqlite/common.py`` tells),
whose counts are cheap — and among its :data:`RANKED` newest matches; a word in more messages
(``the``, ``error`` in a big archive) only filters, as a stop word does, and a query without
an informative word lists its matches newest first. A phrase (a term of several words) counts
as informative only while its rarest word is in at most :data:`COMMON_MIN` messages whatever
the archive's size (:func:`term_limit`): bm25 checks the positions of every match of a phrase
over the whole table, 120k of them for ``"most recent call last"`` at 5M events (60 ms), so a
common phrase filters too.

Whether a word is common is read from the word index by asking for its match one past the
limit (FTS5 keeps no count per word: its vocabulary table would read the whole doclist of
``the``; ``engines/sqlite/common.py``). A prefix of ASCII letters and digits counts the
messages of each word it begins, summed, from the index's word list
(``engines/sqlite/words.py``): asking FTS5 would merge the doclists of all those words.
Query words are folded the way the ``unicode61 remove_diacritics 2`` tokenizer folds text
(lower case, combining diacritics removed, split at everything else that is not a letter or a
digit, other marks included).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "COMMON_MIN",
    "COMMON_SHARE",
    "RANKED",
    "term_limit",
    "tokens",
]

#: A query ranks at most its newest this many matches.
RANKED = 1000
#: A word in more messages than both of these only filters.
COMMON_MIN = 20_000
COMMON_SHARE = 0.05
_TOKEN = re.compile(r"[^\W_]+")


#: The blocks of combining diacritics, which ``remove_diacritics`` drops (other marks are not
#: token characters to unicode61: they end a word).
_DIACRITICS = (
    (0x0300, 0x036F),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
)


def tokens(text: str) -> list[str]:
    """The words unicode61 (diacritics removed) makes of ``text``: combining diacritics are
    dropped (``café`` is ``cafe``); other marks, such as the vowel signs of Devanagari,
    separate words as they do in unicode61 (``नमस्ते`` is ``नमस`` and ``त``)."""
    low = text.lower()
    if low.isascii():
        return _TOKEN.findall(low)
    out = []
    for c in unicodedata.normalize("NFD", low):
        if unicodedata.category(c)[0] == "M":
            o = ord(c)
            if not any(lo <= o <= hi for lo, hi in _DIACRITICS):
                out.append(" ")
            continue
        out.append(c)
    return _TOKEN.findall("".join(out))


def term_limit(common: int, words: int) -> int:
    """The document count above which a term of ``words`` words is common: ``common`` for a
    word, at most :data:`COMMON_MIN` for a phrase (module docs)."""
    return common if words < 2 else min(common, COMMON_MIN)
