"""The phrase ranking rule at its boundary and NUL bytes in queries, on small indexes built
for the purpose."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from jsonltape_daemon import api
from jsonltape_daemon.engines.sqlite import search
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.search.rank import COMMON_MIN
from jsonltape_daemon.target import SqliteTarget

import jsonltape
from tests._search_cases import T0, event


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    root = tmp_path_factory.mktemp("small") / "root"
    root.mkdir()
    with jsonltape.open(root / "a.jsonl", create=True, durability="manual") as tape:
        tape.append(**event("user", "नमस्ते NotFoundError", 0, T0))
        tape.append(**event("user", "the migration raised FileNotFoundError", 1, T0 + 1000))
    index = root.parent / "index.db"
    api.sync(SqliteTarget(index), str(root))
    con = connect(index, readonly=True)
    try:
        yield con
    finally:
        con.close()


def test_a_word_the_word_index_finds_is_a_word_in_a_mixed_query(
    small: sqlite3.Connection,
) -> None:
    alone = [h.seq for h in search.search(small, "नमस")]
    assert alone  # the word index has it as a word
    assert [h.seq for h in search.search(small, "नमस NotFoundError")] == alone  # two words
    assert [h.seq for h in search.search(small, "नमस NotFound")] == alone  # mixed: lost


@pytest.mark.parametrize("query", ["nul\x00byte", "nul\x00byte NotFound", "NotFound a\x00"])
def test_a_nul_in_a_query_is_data(small: sqlite3.Connection, query: str) -> None:
    assert search.search(small, query) == []


# -- the phrase rule at its boundary ----------------------------------------------------------


@pytest.fixture(scope="module")
def phrase_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    """COMMON_MIN + 1 messages with "alpha beta", COMMON_MIN of them with "delta epsilon", a
    few with "gamma"; the message counter then set as at 10M messages (a word's limit 500k,
    far above a phrase's), which is all ``common_limit`` reads."""
    base = tmp_path_factory.mktemp("phrase")
    root = base / "root"
    root.mkdir()
    with jsonltape.open(root / "p.jsonl", create=True, durability="manual") as tape:
        tape.append_batch(
            event(
                "user",
                "alpha beta"
                + (" delta epsilon" if i < COMMON_MIN else "")
                + (" gamma" if i % 5000 == 0 else "")
                + (" x" * (i % 7)),
                i,
                T0 + i,
            )
            for i in range(COMMON_MIN + 1)
        )
    index = base / "index.db"
    api.sync(SqliteTarget(index), str(root))
    con = sqlite3.connect(index)
    con.execute("UPDATE sqlite_sequence SET seq = 10000000 WHERE name = 'messages'")
    con.commit()
    con.close()
    ro = connect(index, readonly=True)
    try:
        yield ro
    finally:
        ro.close()


def _ranked(hits: list[search.Hit]) -> bool:
    return any(h.score != 0.0 for h in hits)


def test_a_word_in_more_than_common_min_messages_still_ranks_in_a_big_archive(
    phrase_index: sqlite3.Connection,
) -> None:
    assert _ranked(search.search(phrase_index, "alpha", limit=5))


def test_a_phrase_whose_rarest_word_is_in_more_than_common_min_only_filters(
    phrase_index: sqlite3.Connection,
) -> None:
    hits = search.search(phrase_index, '"alpha beta"', limit=5)
    assert len(hits) == 5 and not _ranked(hits)
    assert [h.seq for h in hits] == sorted((h.seq for h in hits), reverse=True)  # newest first


def test_a_phrase_whose_rarest_word_is_in_exactly_common_min_ranks(
    phrase_index: sqlite3.Connection,
) -> None:
    assert _ranked(search.search(phrase_index, '"delta epsilon"', limit=5))


def test_a_phrase_with_a_rare_word_ranks(phrase_index: sqlite3.Connection) -> None:
    hits = search.search(phrase_index, '"epsilon gamma"', limit=10)
    assert len(hits) == 4 and _ranked(hits)
    assert not _ranked(search.search(phrase_index, '"epsilon gamma"', limit=10, sort="recent"))
