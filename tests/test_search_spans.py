"""A filtered search reads its matches a span of keys at a time (``filters.key_spans``); the
spans only save reading, they never change a result.

Each test holds the spans' search to the same search reading every key (one open span), on
sessions far apart in time whose filters give several spans, with the number of spans capped
low and high and the ranked window small enough that a span boundary cuts it.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite import filters as spans_mod
from jsonltape_daemon.engines.sqlite import search
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.search import rank

import jsonltape

from ._search_cases import cli_search, event, index_tree
from .test_search_topk import _query, _text

T0 = 1_780_000_000_000
DAY = 86_400_000


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[int, str]]:
    """Twelve sessions a day apart, ``a…`` and ``b…`` taking turns; texts by (day, seq)."""
    rng = random.Random(7)
    root = tmp_path_factory.mktemp("spans") / "sessions"
    root.mkdir()
    ids: list[str] = []
    texts: dict[int, str] = {}
    for day in range(12):
        name = f"{'ab'[day % 2]}{day // 2:02d}.jsonl"
        with jsonltape.open(root / name, create=True, durability="manual") as tape:
            ids.append(tape.session_id)
            items = []
            t = T0 + day * DAY
            for n in range(40):
                t += 0 if rng.random() < 0.3 else rng.randint(1, 60_000)
                role = "user" if n % 2 == 0 else "assistant"
                text = _text(rng)
                if rng.random() < 0.2:  # CJK and punctuation, served by other tables and scans
                    text += " " + rng.choice(["東京都の天気", "数据库", "a -> b", "京"])
                texts[day * 1000 + n] = text
                items.append(event(role, text, n, t))
            tape.append_batch(items)
    index = root.parent / "index.db"
    index_tree(root, index)
    return index, ids, texts


@pytest.fixture
def con(corpus: tuple[Path, list[str], dict[int, str]]) -> Iterator[sqlite3.Connection]:
    """A reader of the corpus's index."""
    ro = connect(corpus[0], readonly=True)
    yield ro
    ro.close()


def _hits(con: sqlite3.Connection, q: str, f: Filters, limit: int, sort: str) -> list[object]:
    return [
        (h.session, h.seq, h.score, h.match)
        for h in search.search(con, q, f, limit, sort=sort)  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(
    ("most", "ranked", "common"),
    [(64, 1000, False), (2, 4, False), (1, 7, False), (3, 1000, True), (64, 5, True)],
)
def test_a_search_over_spans_gives_what_reading_every_key_gives(
    corpus: tuple[Path, list[str], dict[int, str]],
    con: sqlite3.Connection,
    monkeypatch: pytest.MonkeyPatch,
    most: int,
    ranked: int,
    common: bool,
) -> None:
    _index, ids, texts = corpus
    monkeypatch.setattr(spans_mod, "SPANS", most)
    monkeypatch.setattr(spans_mod, "GAP_MESSAGES", 0)  # a day's gap is worth a span here
    monkeypatch.setattr(search, "RANKED", ranked)
    if common:  # the frequent words are common: ranked by the others, read in a second pass
        monkeypatch.setattr(rank, "COMMON_MIN", 5)
        monkeypatch.setattr(rank, "COMMON_SHARE", 0.05)
    rng = random.Random(most * 1000 + ranked + common)
    real = search.key_spans
    several = 0
    for _ in range(120):
        q = (
            rng.choice(
                ["東京", "京", "数据库", "->", "b", "天気 the", "ret* ound", "cach* Found", "mig*"]
            )
            if rng.random() < 0.15
            else _query(rng, {(0, k): t for k, t in texts.items()})
        )
        f = Filters(
            path=rng.choice(["*/a*.jsonl", "*/b0[0-2].jsonl", "*/[ab]00.jsonl", None]),
            session=rng.choice([None, None, rng.choice(ids)]),
            since=rng.choice([None, None, T0 + rng.randrange(12) * DAY]),
            until=rng.choice([None, None, T0 + rng.randrange(12) * DAY]),
            roles=rng.choice([(), (), ("user",)]),
            types=rng.choice([(), (), ("assistant/*",)]),
            all=rng.random() < 0.1,
        )
        limit, sort = rng.choice([1, 3, 20]), rng.choice(["relevance", "recent"])
        several += len(real(con, f)) > 1
        got = _hits(con, q, f, limit, sort)
        with monkeypatch.context() as m:  # every key: one open span
            m.setattr(search, "key_spans", lambda c, f: [(None, None)])
            want = _hits(con, q, f, limit, sort)
        assert got == want, (q, f.path, f.session, f.since, f.until, f.roles, f.types, limit)
    assert several > 10 if most > 1 else several == 0  # the filters gave several spans


def test_the_spans_of_a_path_filter_are_its_sessions_apart(
    con: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 480 messages in 12 days: a day between two sessions holds 40, too few to skip
    (one,) = search.key_spans(con, Filters(path="*/a*.jsonl"))
    monkeypatch.setattr(spans_mod, "GAP_MESSAGES", 40)
    assert len(search.key_spans(con, Filters(path="*/a*.jsonl"))) == 6
    monkeypatch.setattr(spans_mod, "GAP_MESSAGES", 0)
    got = search.key_spans(con, Filters(path="*/a*.jsonl"))
    bounds = con.execute(
        "SELECT key_lo, key_hi + 1 FROM sessions WHERE path GLOB '*/a*.jsonl' ORDER BY key_lo DESC"
    ).fetchall()
    assert got == bounds and len(got) == 6  # a day apart: six spans, newest first
    assert (got[-1][0], got[0][1]) == one
    assert search.key_spans(con, Filters(path="*/none.jsonl")) == []
    # since and until cut the spans
    cut = search.key_spans(con, Filters(path="*/a*.jsonl", since=T0 + 5 * DAY))
    assert len(cut) == 3


@given(
    st.lists(st.tuples(st.integers(0, 200), st.integers(1, 30)), min_size=1, max_size=40),
    st.integers(1, 8),
    st.integers(0, 20),
)
def test_joined_spans_cover_every_span_apart_and_in_order(
    raw: list[tuple[int, int]], most: int, gap: int
) -> None:
    spans = [(a, a + n) for a, n in raw]
    out = spans_mod._joined(spans, most, gap)
    assert 1 <= len(out) <= most
    flat = [(a, b) for a, b in out if a is not None and b is not None]
    assert flat == out and flat == sorted(flat)
    assert all(b + gap < c for (_a, b), (c, _d) in itertools.pairwise(flat))  # apart
    assert all(any(a <= x and y <= b for a, b in flat) for x, y in spans)  # covered
    # each joined span starts and ends where some span does: no key outside them all is added
    # at the ends
    assert all(a in {x for x, _ in spans} and b in {y for _, y in spans} for a, b in flat)


def test_a_filter_naming_more_sessions_than_are_bounded_reads_every_key(
    con: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = _hits(con, "the", Filters(path="*/a*.jsonl"), 50, "recent")
    monkeypatch.setattr(spans_mod, "SPAN_SESSIONS", 5)  # the filter names 6
    assert search.key_spans(con, Filters(path="*/a*.jsonl")) == [(None, None)]
    since = T0 + 6 * DAY
    assert search.key_spans(con, Filters(path="*/a*.jsonl", since=since))[0][1] is None
    assert _hits(con, "the", Filters(path="*/a*.jsonl"), 50, "recent") == want


def test_a_session_or_path_filter_on_an_index_without_messages_matches_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "s"
    root.mkdir()
    index = tmp_path / "index.db"
    index_tree(root, index)  # no session at all
    with jsonltape.open(root / "a.jsonl", create=True, durability="manual") as tape:
        tape.append("turn/start", {})  # a session without a message
        sid = tape.session_id
    for _ in range(2):
        con = connect(index, readonly=True)
        try:
            for f in (Filters(path="*/a.jsonl"), Filters(session=sid), Filters(path="*/x")):
                assert search.key_spans(con, f) == []
                assert search.search(con, "the", f) == []
        finally:
            con.close()
        index_tree(root, index)  # now with the session
    out = cli_search(index, "the", "--path", "*/a.jsonl")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "no matches\n")
