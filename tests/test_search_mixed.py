"""A query whose terms match in different ways -- one as a word of the message, another only
inside one of its identifiers (``NotFound prompt`` for "the prompt raised FileNotFoundError")
-- finds that message: every term is a word of the message or inside one of its code-like
tokens. Checked against a brute force over the texts, on both engines' rule."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from jsonltape_daemon import api
from jsonltape_daemon.engines.sqlite.search import Filters, parse_query
from jsonltape_daemon.search.rank import tokens
from jsonltape_daemon.target import SqliteTarget
from jsonltape_daemon.text.idents import contains

import jsonltape

WORDS = ["prompt", "migration", "retry", "the", "cache", "users", "deploy"]
IDENTS = ["FileNotFoundError", "functools.lru_cache", "retry_count", "src/app/models.py"]


def _matches(text: str, query: str) -> bool:
    """The rule: every term is a word of the text or inside one of its code-like tokens."""
    words = tokens(text)
    for t in parse_query(query):
        folded = tokens(t.text)
        as_word = any(words[i : i + len(folded)] == folded for i in range(len(words)))
        if not as_word and not contains(text, t.text.lower()):
            return False
    return True


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteTarget, list[str]]:
    rng = random.Random(7)
    root = tmp_path_factory.mktemp("mixed") / "sessions"
    root.mkdir()
    texts: list[str] = []
    for s in range(3):
        with jsonltape.open(root / f"s{s}.jsonl", create=True, durability="manual") as tape:
            for _ in range(60):
                parts = rng.sample(WORDS, rng.randint(1, 3)) + rng.sample(IDENTS, rng.randint(0, 2))
                rng.shuffle(parts)
                text = " ".join(parts)
                texts.append(text)
                tape.user(text)
    target = SqliteTarget(root.parent / "index.db")
    api.sync(target, str(root))
    return target, texts


@pytest.mark.parametrize(
    "query",
    [
        "NotFound prompt",
        "prompt NotFound",
        "lru_cach deploy",
        "retry NotFound",  # retry: a word, and inside retry_count
        "models.py users migration",
        "Fou ache",  # both only inside identifiers
        "NotFound the",  # a very common word with a substring
        "NotFound zzz",  # one term nowhere: nothing
    ],
)
def test_every_message_where_each_term_is_a_word_or_inside_an_identifier_is_found(
    index: tuple[SqliteTarget, list[str]], query: str
) -> None:
    target, texts = index
    want = sum(_matches(t, query) for t in texts)
    hits = api.open_reader(target).search(query, Filters(), limit=1000)
    got = [h.snippet for h in hits]
    assert len(hits) == want, (query, want, got[:5])
    assert len({(h.session, h.seq) for h in hits}) == len(hits)  # no message twice


def test_the_mixed_matches_come_newest_first_after_the_word_matches(
    index: tuple[SqliteTarget, list[str]],
) -> None:
    target, _texts = index
    hits = api.open_reader(target).search("NotFound prompt", Filters(), limit=1000)
    assert hits and all(h.match == "substring" for h in hits)
    times = [(h.time, h.seq) for h in hits]
    assert times == sorted(times, reverse=True)
    few = api.open_reader(target).search("NotFound prompt", Filters(), limit=3)
    assert [(h.session, h.seq) for h in few] == [(h.session, h.seq) for h in hits[:3]]


def test_a_mixed_query_honours_the_filters(
    index: tuple[SqliteTarget, list[str]], tmp_path: Path
) -> None:
    target, _texts = index
    every = api.open_reader(target).search("NotFound prompt", Filters(), limit=1000)
    one = every[0].session
    only = api.open_reader(target).search("NotFound prompt", Filters(session=one), limit=1000)
    assert only and {h.session for h in only} == {one}
    assert len(only) == sum(h.session == one for h in every)
    assert (
        api.open_reader(target).search("NotFound prompt", Filters(roles=("assistant",)), 10) == []
    )
