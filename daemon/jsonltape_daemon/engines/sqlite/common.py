"""The SQLite index's side of the ranking rule (``search/rank.py``): how many messages it holds
and whether a word is in more of them than the limit, read from the word index."""

from __future__ import annotations

import sqlite3

import jsonltape_daemon.search.rank as rank
from jsonltape_daemon.engines.sqlite.words import expansion

__all__ = ["common_limit", "is_common"]


def is_common(con: sqlite3.Connection, text: str, prefix: bool, common: int) -> bool:
    """True when the term is in more than its limit of messages (``common`` for a word, at
    most :data:`~rank.COMMON_MIN` for a phrase: :func:`~rank.term_limit`), as far as the rule
    tells: a phrase is as rare as its rarest word (``prefix``: the last one as a prefix), so it
    is common when each of its words is. A word is common when its ``cap + 1``-th match
    exists: FTS5 steps over the first ``cap`` matches (nothing is counted or handed back for
    them) and the first word within ``cap`` ends the test (each test reads up to ``cap``
    entries of a doclist). A prefix counts the messages of each word it begins, summed, from
    the word list where it tells (``words.py``): FTS5 would merge every one of their doclists
    to step over the first ``cap`` matches."""
    words = rank.tokens(text)
    cap = rank.term_limit(common, len(words))
    for n, w in enumerate(words):
        last = prefix and n == len(words) - 1
        if last and (found := expansion(con, w)) is not None:
            if found[1] <= cap:  # a prefix: its words' counts summed (words.py)
                return False
            continue
        pattern = '"' + w + '"' + ("*" if last else "")
        beyond = con.execute(
            "SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT 1 OFFSET ?",
            (pattern, cap),
        ).fetchone()
        if beyond is None:
            return False
    return bool(words)


def common_limit(con: sqlite3.Connection) -> int:
    """The document count above which a word is common."""
    r = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    total = int(r[0]) if r else 0
    return max(rank.COMMON_MIN, int(total * rank.COMMON_SHARE))  # read when called: tests set them
