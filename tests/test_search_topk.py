"""Top results without ranking every match (issue 16): the plans equal a brute-force ranking.

The documented rule (daemon/jsonltape_daemon/search/rank.py, `jsonltape search --help`): the word
matches of a query, under its filters, are ranked among their newest ``RANKED`` (by the
time-ordered key) by bm25 of the query's informative words — those in at most
``max(COMMON_MIN, COMMON_SHARE × messages)`` messages — newer first among equals; a query
without an informative word lists its matches newest first; substring matches follow, newest
first: messages where every term is inside a code-like token (jsonltape_daemon/text/idents.py)
of the text -- or, in a query of several such terms, is a word of the message. The oracle
below computes that from whole match sets (FTS5 ``MATCH`` without any ordering, limit or
range, and Python over the texts the test wrote), over a corpus small enough to brute-force,
with the thresholds lowered so that every branch (common words, ranked subsets, equal scores,
many messages in one millisecond) happens.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite import search
from jsonltape_daemon.engines.sqlite.schema import _M001, TKEY_SPAN, _statements, connect, tkey_base
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.search import rank
from jsonltape_daemon.text import idents

import jsonltape

VOCAB = [
    "the", "a", "error", "migration", "café", "naïve", "index", "FileNotFoundError", "retry",
    "functools.lru_cache", "src/app/models.py", "HTTPServer", "retry_count", "found",
    "schema", "column", "users", "timeout", "cache", "handler", "fixture", "rollback", "null",
    "default", "deploy", "queue", "worker", "lock", "flush", "commit", "branch", "merge",
]  # fmt: skip
T0 = 1_780_000_000_000


def _text(rng: random.Random) -> str:
    n = rng.randint(1, 12)
    # Zipf-like: the first words are in most messages
    return " ".join(VOCAB[min(int(rng.paretovariate(1.0)) - 1, len(VOCAB) - 1)] for _ in range(n))


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[sqlite3.Connection, list[str], dict[tuple[str, int], str]]:
    rng = random.Random(16)
    texts: dict[tuple[str, int], str] = {}
    root = tmp_path_factory.mktemp("topk") / "sessions"
    root.mkdir()
    ids = []
    for s in range(6):
        path = root / f"s{s}.jsonl"
        with jsonltape.open(path, create=True, durability="manual") as tape:
            ids.append(tape.session_id)
            items = []
            written = []
            t = T0 + s * 1000
            for n in range(70):
                # bursts of messages in one millisecond: equal times, keys told apart
                t += 0 if rng.random() < 0.3 else rng.randint(1, 5000)
                role = "user" if n % 2 == 0 else "assistant"
                written.append(_text(rng))
                items.append(
                    {
                        "type": f"{role}/message",
                        "surface": "append",
                        "time": t,
                        "data": {
                            "message": {
                                "id": f"m{n}",
                                "role": role,
                                "parts": [{"type": "text", "content": written[-1]}],
                            }
                        },
                    }
                )
            for event, text in zip(tape.append_batch(items), written, strict=True):
                texts[(tape.session_id, event.seq)] = text
    index = root.parent / "index.db"
    store = SqliteStore(index)
    Ingestor(store, root).rescan()
    while store.substrings_pending():
        store.begin()
        store.build_substrings(100)
        store.commit()
    store.close()
    return connect(index, readonly=True), ids, texts


Corpus = tuple[sqlite3.Connection, list[str], dict[tuple[str, int], str]]


def _allowed(con: sqlite3.Connection, filters: Filters) -> dict[int, tuple[str, int]]:
    where, params = search.filter_sql(filters)
    return {
        r[0]: (r[1], r[2])
        for r in con.execute(
            f"SELECT m.tkey, s.id, m.seq FROM messages m JOIN sessions s ON s.sid = m.sid "
            f"WHERE {where}",
            params,
        )
    }


def _substring_oracle(
    con: sqlite3.Connection,
    texts: dict[tuple[str, int], str],
    query: str,
    filters: Filters,
    limit: int,
    words: list[tuple[str, int]],
) -> list[tuple[str, int]]:
    """The substring hits after the word hits: every term (all are words of three or more
    characters here) inside one code-like token of the text, case folded; newest first."""
    terms = search.parse_query(query)
    if not any(len(t.text) >= 3 for t in terms):
        return []
    allowed = _allowed(con, filters)

    def inside(text: str, needle: str) -> bool:
        if len(needle) < 3:
            return needle in text.lower()
        return any(needle in tok.lower() for tok in idents.tokens(text))

    # With several such terms, each may also be a word of the message ("TPSe error").
    mixed = sum(t.trigram_ok for t in terms) > 1

    def term_in(text: str, t: search.Term) -> bool:
        if inside(text, t.text.lower()):
            return True
        if not (mixed and t.trigram_ok):
            return False
        have, want = rank.tokens(text), rank.tokens(t.text)
        n = len(want)
        return any(
            have[i : i + n - 1] == want[:-1]
            and (have[i + n - 1].startswith(want[-1]) if t.prefix else have[i + n - 1] == want[-1])
            for i in range(len(have) - n + 1)
        )

    out = [
        allowed[k]
        for k in sorted(allowed, reverse=True)
        if allowed[k] not in words and all(term_in(texts[allowed[k]], t) for t in terms)
    ]
    return out[: limit - len(words)]


def _oracle(
    con: sqlite3.Connection, query: str, filters: Filters, limit: int
) -> list[tuple[str, int]]:
    terms = search.parse_query(query)
    words = [t for t in terms if t.wordy]
    match = " ".join(search._fts_string(t) for t in words)
    every = {
        r[0]
        for r in con.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (match,))
    }
    allowed = _allowed(con, filters)
    matches = sorted((k for k in every if k in allowed), reverse=True)[: max(search.RANKED, limit)]
    total = con.execute("SELECT count(*) FROM messages").fetchone()[0]
    common = max(rank.COMMON_MIN, int(total * rank.COMMON_SHARE))

    con.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.oracle_vocab "
        "USING fts5vocab(main, messages_fts, 'row')"
    )
    vocab = con.execute("SELECT term, doc FROM temp.oracle_vocab").fetchall()

    def df(t: search.Term) -> int:
        # at most: the rarest of its words (as the vocabulary counts them); a prefix of ASCII
        # letters and digits: the counts of the words it begins, summed
        counts = []
        for n, w in enumerate(rank.tokens(t.text)):
            last = t.prefix and n == len(rank.tokens(t.text)) - 1
            begun = [d for term, d in vocab if term.startswith(w)]
            if last and w.isascii() and w.isalnum():
                counts.append(sum(begun))
                continue
            pat = f'"{w}"' + ("*" if last else "")
            counts.append(
                con.execute(
                    "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (pat,)
                ).fetchone()[0]
            )
        return min(counts) if counts else 0

    # a phrase informs only while its rarest word is in at most COMMON_MIN messages
    informative = [t for t in words if df(t) <= rank.term_limit(common, len(rank.tokens(t.text)))]
    if informative:
        expr = " ".join(search._fts_string(t) for t in informative)
        score = dict(
            con.execute(
                "SELECT rowid, bm25(messages_fts) FROM messages_fts WHERE messages_fts MATCH ?",
                (expr,),
            ).fetchall()
        )
        matches.sort(key=lambda k: (score[k], -k))
    return [allowed[k] for k in matches[:limit]]


def _query(rng: random.Random, texts: dict[tuple[str, int], str]) -> str:
    kind = rng.random()
    if kind < 0.15:  # a phrase taken from a message
        words = rng.choice(list(texts.values())).split()
        i = rng.randrange(len(words))
        return '"' + " ".join(words[i : i + 2]) + '"'
    if kind < 0.25:
        return rng.choice(VOCAB)[:3].lower() + "*"
    if kind < 0.55:  # pieces of words and identifiers, 3 to 6 characters
        out = []
        for word in rng.sample(VOCAB, rng.choice([1, 1, 2])):
            n = rng.randint(3, 6)
            i = rng.randrange(max(1, len(word) - n + 1))
            out.append(word[i : i + n])
        return " ".join(out)
    return " ".join(rng.sample(VOCAB, rng.choice([1, 1, 2, 3])))


@pytest.mark.parametrize("thresholds", [(5, 0.05, 12), (40, 0.2, 25), (10**6, 0.5, 1000)])
def test_top_k_of_the_plans_equals_a_brute_force_ranking_under_the_documented_rule(
    corpus: Corpus,
    monkeypatch: pytest.MonkeyPatch,
    thresholds: tuple[int, float, int],
) -> None:
    con, ids, texts = corpus
    common_min, share, ranked = thresholds
    monkeypatch.setattr(rank, "COMMON_MIN", common_min)
    monkeypatch.setattr(rank, "COMMON_SHARE", share)
    monkeypatch.setattr(search, "RANKED", ranked)
    rng = random.Random(hash(thresholds) & 0xFFFF)
    times = [r[0] for r in con.execute("SELECT time FROM messages ORDER BY time")]
    checked = substrings = 0
    for _ in range(150):
        query = _query(rng, texts)
        f = rng.random()
        filters = Filters(
            roles=("user",) if f < 0.2 else (),
            session=rng.choice(ids) if 0.2 <= f < 0.4 else None,
            since=rng.choice(times) if 0.4 <= f < 0.6 else None,
            path=rng.choice(["*/s1.jsonl", "*/s[24].jsonl", "*/none.jsonl"])
            if 0.6 <= f < 0.7
            else None,
            # until, alone or with since (its bound: the index's key spill)
            until=rng.choice(times) + rng.choice([0, 1]) if 0.7 <= f < 0.8 else None,
            # types, some that no message has, alone or with a role none of them has
            types=(rng.choice(["user/*", "assistant/message", "tool/*", "x/none"]),)
            if 0.8 <= f < 0.9
            else (),
        )
        if 0.7 <= f < 0.75:
            filters.since = rng.choice([t for t in times if t < (filters.until or 0)] or [None])
        if 0.85 <= f < 0.9:
            filters.roles = ("assistant",)
        limit = rng.choice([1, 5, 20])
        hits = search.search(con, query, filters, limit)
        got = [(h.session, h.seq) for h in hits if h.match == "word"]
        want = _oracle(con, query, filters, limit)
        assert got == want[: len(got)], (query, filters)
        # the word pass fills the limit when it can: hits of other passes only come after
        assert len(got) == len(want) or len(got) == limit, (query, filters)
        assert [h.match for h in hits[: len(got)]] == ["word"] * len(got)
        rest = [(h.session, h.seq) for h in hits[len(got) :]]
        assert all(h.match == "substring" for h in hits[len(got) :]), (query, filters)
        assert rest == _substring_oracle(con, texts, query, filters, limit, got), (query, filters)
        checked += bool(want)
        substrings += bool(rest)
    assert checked > 50
    assert substrings >= 5


def test_sort_recent_lists_every_word_match_newest_first(corpus: Corpus) -> None:
    con, _ids, _texts = corpus
    hits = search.search(con, "error", Filters(), 30, sort="recent")
    keys = [
        con.execute(
            "SELECT m.tkey FROM messages m JOIN sessions s ON s.sid = m.sid "
            "WHERE s.id = ? AND m.seq = ?",
            (h.session, h.seq),
        ).fetchone()[0]
        for h in hits
    ]
    assert keys == sorted(keys, reverse=True) and len(keys) == 30
    newest = [
        r[0]
        for r in con.execute(
            "SELECT m.tkey FROM messages_fts f JOIN messages m ON m.tkey = f.rowid "
            "WHERE messages_fts MATCH 'error' AND m.status = 'current' ORDER BY m.time DESC, "
            "m.tkey DESC LIMIT 30"
        )
    ]
    assert keys == newest


def test_messages_of_one_millisecond_get_distinct_keys_in_time_order(corpus: Corpus) -> None:
    con, _ids, _texts = corpus
    rows = con.execute("SELECT time, tkey FROM messages").fetchall()
    assert len({k for _t, k in rows}) == len(rows)
    assert all(k >= tkey_base(t) for t, k in rows)
    # in time order, to the second
    by_key = [t // 1000 for t, _k in sorted(rows, key=lambda r: r[1])]
    assert by_key == sorted(by_key) or _spilled(rows)
    same = con.execute(
        "SELECT count(*) FROM (SELECT time FROM messages GROUP BY time HAVING count(*) > 1)"
    ).fetchone()[0]
    assert same > 5  # the corpus has bursts: the counter path ran


def _spilled(rows: list[tuple[int, int]]) -> bool:
    """Some second holds more messages than it has slots (then keys run into the next)."""
    per: dict[int, int] = {}
    for t, _k in rows:
        per[t // 1000] = per.get(t // 1000, 0) + 1
    return max(per.values()) > TKEY_SPAN


def test_a_version_1_index_is_emptied_and_filled_again_by_the_next_sync(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    con = sqlite3.connect(index)
    for statement in _statements(_M001):
        con.execute(statement)
    con.execute(
        "INSERT INTO files (path, status, offset) VALUES ('/gone/old.jsonl', 'indexed', 10)"
    )
    con.execute("INSERT INTO meta (key, value) VALUES ('roots', '[\"/x\"]')")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    root = tmp_path / "sessions"
    root.mkdir()
    with jsonltape.open(root / "a.jsonl", create=True) as tape:
        tape.user("the migration fails")
    store = SqliteStore(index)
    try:
        assert store.files() == {}  # the old rows are gone, the settings stay
        assert store.roots() == ["/x"]
        Ingestor(store, root).rescan()
    finally:
        store.close()
    con = connect(index, readonly=True)
    try:
        hits = search.search(con, "migration")
        assert [h.seq for h in hits] == [1]
        cols = {r[1] for r in con.execute("PRAGMA table_info(messages)")}
        assert "tkey" in cols
    finally:
        con.close()


def test_a_substring_is_found_only_where_its_trigrams_are_adjacent(tmp_path: Path) -> None:
    """The trigram table keeps no positions: its matches are candidates, the text decides."""
    root = tmp_path / "sessions"
    root.mkdir()
    with jsonltape.open(root / "a.jsonl", create=True) as tape:
        tape.user("raise FileNotFoundError here")  # holds NotFou
        tape.user("not fou nd at all: tFo Fou2 NotF otFo")  # every trigram of NotFou, apart
        tape.user("ÜBERGRÖSSE_LIMIT im Log")  # case folded beyond ASCII
    store = SqliteStore(tmp_path / "index.db")
    try:
        Ingestor(store, root).rescan()  # a first load: the substring index comes after
        for built in (False, True):
            if built:
                while store.substrings_pending():
                    store.begin()
                    store.build_substrings(100)
                    store.commit()
            con = connect(tmp_path / "index.db", readonly=True)
            try:
                assert search.substrings_upto(con) is (None if built else 0)
                assert [h.seq for h in search.search(con, "NotFou")] == [1], built
                assert [h.seq for h in search.search(con, "übergrö")] == [3], built
                assert [h.seq for h in search.search(con, "otFo Fou")] == [2, 1], built
            finally:
                con.close()
    finally:
        store.close()
