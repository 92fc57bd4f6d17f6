"""The plans behind a search (issue 16): what each pass asks SQLite for, on a real index.

The results are pinned elsewhere (tests/test_search_topk.py against a brute-force ranking,
tests/test_search.py's golden queries); these tests pin the work: the rule that tells a common
word from an informative one, answered without counting every match, and passes that read only
what their filters need and hand back only the hits they keep.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from jsonltape_daemon.engines.sqlite import common
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters, search

import jsonltape

from ._search_cases import index_tree

#: word -> how many messages hold it: around the limits the tests ask about
COUNTS = {"alpha": 7, "beta": 8, "gamma": 9, "delta": 1}


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    root = tmp_path_factory.mktemp("plans") / "sessions"
    for s in range(2):
        with jsonltape.open(root / f"s{s}.jsonl", create=True, title=f"session {s}") as tape:
            for n in range(10):
                words = [w for w, c in COUNTS.items() if (n + 10 * s) % 10 < c and s == 0]
                tape.user(" ".join(["note", *words, f"migration{n}"]))
                tape.assistant(f"reply {n} about the migration")
    index = root.parent / "index.db"
    index_tree(root, index, helper_from=20_000)
    c = connect(index, readonly=True)
    yield c
    c.close()


def _count(con: sqlite3.Connection, pattern: str) -> int:
    return int(
        con.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (pattern,)
        ).fetchone()[0]
    )


def test_a_word_is_common_exactly_when_more_messages_than_the_limit_hold_it(
    con: sqlite3.Connection,
) -> None:
    for word, n in COUNTS.items():
        assert _count(con, f'"{word}"') == n
        for cap in (0, n - 1, n, n + 1, 100):
            assert common.is_common(con, word, False, cap) is (n > cap), (word, cap)


def test_a_phrase_is_as_rare_as_its_rarest_word_and_a_prefix_counts_every_word_it_starts(
    con: sqlite3.Connection,
) -> None:
    # "gamma alpha": gamma in 9, alpha in 7: common only when both are
    assert common.is_common(con, "gamma alpha", False, 6)
    assert not common.is_common(con, "gamma alpha", False, 7)
    assert not common.is_common(con, "alpha gamma", False, 8)
    migr = _count(con, '"migr"*')  # every message: migration0..9 (user), migration (replies)
    assert migr == 40
    assert common.is_common(con, "migr", True, migr - 1)
    assert not common.is_common(con, "migr", True, migr)
    assert not common.is_common(con, "migr", False, 0)  # the whole word "migr" is nowhere
    assert not common.is_common(con, "--", False, 0)  # no word at all: nothing to rank by


def _statements(con: sqlite3.Connection, query: str, filters: Filters, limit: int) -> list[str]:
    seen: list[str] = []
    con.set_trace_callback(seen.append)
    try:
        search(con, query, filters, limit)
    finally:
        con.set_trace_callback(None)
    return seen


def test_a_pass_joins_the_sessions_only_when_a_session_or_path_filter_reads_them(
    con: sqlite3.Connection,
) -> None:
    for filters in (Filters(), Filters(roles=("user",)), Filters(since=0)):
        passes = [s for s in _statements(con, "alpha", filters, 5) if "MATCH" in s]
        assert passes and not any("JOIN sessions" in s for s in passes), (filters, passes)
    sid = con.execute("SELECT id FROM sessions WHERE title = 'session 0'").fetchone()[0]
    for filters in (Filters(session=sid), Filters(path="*/s0.jsonl")):
        passes = [s for s in _statements(con, "alpha", filters, 5) if "messages_fts MATCH" in s]
        assert any("JOIN sessions" in s for s in passes), (filters, passes)
    # and the hits still carry their sessions
    hits = search(con, "alpha", Filters(roles=("user",)), 3)
    assert [h.title for h in hits] == ["session 0"] * 3


def test_the_ranked_pass_hands_back_only_the_hits_it_keeps(con: sqlite3.Connection) -> None:
    ranked = [s for s in _statements(con, "gamma", Filters(), 2) if "bm25" in s]
    assert len(ranked) == 1
    assert "ORDER BY score, k DESC LIMIT" in ranked[0], ranked
    hits = search(con, "gamma", Filters(), 2)
    assert len(hits) == 2 and hits[0].score >= hits[1].score
