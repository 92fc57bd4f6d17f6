"""How many messages a word is in, and which words of a query rank its matches.

The full-text tables' rowid is a key in time order (``messages.tkey``), so FTS5 reads a
query's matches newest first and a query can stop after the ones it needs. Ranking is what
would still read every match: ``bm25`` counts, for each phrase of its expression, every message
that contains it. So a search ranks by the query's *informative* words only — those in at most
:func:`common_limit` messages, whose counts are cheap — and among its :data:`RANKED` newest
matches; a word in more messages (``the``, ``error`` in a big archive) only filters, as a stop
word does, and a query without an informative word lists its matches newest first.

Document counts come from the word index's own vocabulary (``fts5vocab``), never from a scan.
Query words are folded the way the ``unicode61 remove_diacritics 2`` tokenizer folds text
(lower case, combining marks removed, split at everything that is not a letter or a digit).
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata

from .schema import TKEY_SPAN

__all__ = ["COMMON_MIN", "COMMON_SHARE", "RANKED", "common_limit", "doc_freq", "tokens"]

#: A query ranks at most its newest this many matches.
RANKED = 1000
#: A word in more messages than both of these only filters.
COMMON_MIN = 20_000
COMMON_SHARE = 0.05
#: A prefix that stands for more vocabulary terms than this is taken as common.
_PREFIX_TERMS = 2000
_TOKEN = re.compile(r"[^\W_]+")
_VOCAB = "temp.jt_vocab"


def tokens(text: str) -> list[str]:
    """The words unicode61 (diacritics removed) makes of ``text``."""
    folded = "".join(
        c for c in unicodedata.normalize("NFD", text.lower()) if not unicodedata.combining(c)
    )
    return _TOKEN.findall(folded)


def _vocab(con: sqlite3.Connection) -> None:
    # a temp table: read-only connections can make one (the temp schema is the connection's)
    con.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB} USING fts5vocab(main, 'messages_fts', 'row')"
    )


def doc_freq(con: sqlite3.Connection, text: str, prefix: bool) -> int:
    """At most how many messages hold the term (a phrase: its rarest word; ``prefix``: its
    last word as a prefix, summed over the words it stands for)."""
    words = tokens(text)
    if not words:
        return 0
    _vocab(con)
    counts = []
    for n, w in enumerate(words):
        if prefix and n == len(words) - 1:
            rows = con.execute(
                f"SELECT doc FROM {_VOCAB} WHERE term >= ? AND term < ? LIMIT ?",
                (w, w + "\U0010ffff", _PREFIX_TERMS + 1),
            ).fetchall()
            counts.append(1 << 62 if len(rows) > _PREFIX_TERMS else sum(r[0] for r in rows))
        else:
            r = con.execute(f"SELECT doc FROM {_VOCAB} WHERE term = ?", (w,)).fetchone()
            counts.append(int(r[0]) if r else 0)
    return min(counts)


def common_limit(con: sqlite3.Connection) -> int:
    """The document count above which a word is common."""
    r = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    total = int(r[0]) if r else 0
    return max(COMMON_MIN, int(total * COMMON_SHARE))


def time_range(since: int | None, until: int | None) -> tuple[int | None, int | None]:
    """The full-text rowid range of messages with ``since <= time < until``."""
    lo = since * TKEY_SPAN if since is not None else None
    hi = until * TKEY_SPAN if until is not None else None
    return lo, hi
