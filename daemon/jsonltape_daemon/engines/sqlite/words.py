"""The word list: every word of the word index, with the number of messages it was added for.

A prefix query (``conf*``) is FTS5's slowest: each query that uses it first merges the doclist
of every word the prefix begins into one, whatever rowid range the query reads (5M messages:
``co*`` 390 ms, ``c*`` 3.3 s, for its first 20 matches as for all of them). The word list
turns a prefix into the words it begins (``con*``: 145 of them), read as an OR of words, which
FTS5 reads lazily, newest first, like any word (3 ms). It also counts a prefix's messages for
the ranking rule (``rank.py``) without reading them: the sum of its words' counts.

The list is FTS5's own vocabulary (``fts5vocab``, in the tokenizer's folded form), taken whole
when the word index is built at once (a first sync, a rebuild, ``index optimize``, the
migration to schema 8) and, for the texts a later sync adds, from a scratch FTS5 table with the
same tokenizer, so both fold alike. It only grows: like the word index, which keeps the words
of deleted messages (their keys are in ``dead_keys``), it counts every text it was given. It
is complete while the word index is (``meta.fts`` is ``live``); :func:`expansion` says nothing
otherwise, and the search falls back to FTS5's prefix query.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

__all__ = ["MAX_WORDS", "TOKENIZE", "WORDS_TABLE", "add", "expansion", "refresh"]

#: The word index's tokenizer (``schema.FTS_WORDS``).
TOKENIZE = "unicode61 remove_diacritics 2"
WORDS_TABLE = (
    "CREATE TABLE IF NOT EXISTS words (term TEXT PRIMARY KEY, docs INTEGER NOT NULL) WITHOUT ROWID"
)
#: The most words a prefix is expanded into: an OR of n words costs FTS5 about 20 us a word to
#: start (5M messages: 145 words 3 ms, 1,483 words 32 ms). A prefix that begins more is
#: checked on the texts when it is common (``search.py``), else read by FTS5's prefix query.
MAX_WORDS = 512

_VOCAB = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.words_vocab USING fts5vocab(main, messages_fts, 'row')"
)
_SCRATCH = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.words_new USING fts5(text, content='', "
    f"tokenize='{TOKENIZE}', detail='none', columnsize=0)"
)
_SCRATCH_VOCAB = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.words_new_vocab "
    "USING fts5vocab(temp, words_new, 'row')"
)


def refresh(con: sqlite3.Connection) -> None:
    """Take the list whole from the word index (in the caller's transaction, on the
    connection that built the index: FTS5 keeps what it read of an index per connection, and
    one whose tables were copied in under it would list the words it had before)."""
    con.execute(_VOCAB)
    con.execute("DELETE FROM words")
    con.execute("INSERT INTO words (term, docs) SELECT term, doc FROM temp.words_vocab")


def add(con: sqlite3.Connection, texts: Iterable[str]) -> None:
    """Count the words of texts the word index is taking (in the caller's transaction)."""
    con.execute(_SCRATCH)
    con.execute(_SCRATCH_VOCAB)
    con.executemany("INSERT INTO temp.words_new (rowid, text) VALUES (?, ?)", enumerate(texts, 1))
    con.execute(
        "INSERT INTO words (term, docs) SELECT term, doc FROM temp.words_new_vocab WHERE true "
        "ON CONFLICT (term) DO UPDATE SET docs = docs + excluded.docs"
    )
    con.execute("INSERT INTO temp.words_new (words_new) VALUES ('delete-all')")


def expansion(con: sqlite3.Connection, prefix: str) -> tuple[list[str] | None, int] | None:
    """The words ``prefix`` begins (None past :data:`MAX_WORDS` of them) and the sum of
    their counts, or None when the list cannot tell: an index before schema 8, a word index
    still being built, or a prefix that is not one ASCII word (the list is searched by the
    prefix folded as FTS5 folds it: lower case, for ASCII letters and digits alone)."""
    low = prefix.lower()
    if not (low.isascii() and low.isalnum()):
        return None
    span = (low, low + "\U0010ffff")
    try:
        live = con.execute("SELECT value FROM meta WHERE key = 'fts'").fetchone()
        n, docs = con.execute(
            "SELECT count(*), total(docs) FROM words WHERE term >= ? AND term < ?", span
        ).fetchone()
    except sqlite3.OperationalError:  # no such table: an older schema
        return None
    if live == ("stale",):
        return None
    if n > MAX_WORDS:
        return None, int(docs)
    rows = con.execute("SELECT term FROM words WHERE term >= ? AND term < ?", span).fetchall()
    return [r[0] for r in rows], int(docs)
