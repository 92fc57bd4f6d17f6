"""A prefix is read as the words it begins, from the word list (``words.py``): the list is the
word index's vocabulary after every way of building it, and a search through it finds exactly
what FTS5's own prefix query finds."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from jsonltape_daemon.engines.sqlite import common, search, words
from jsonltape_daemon.engines.sqlite.schema import SCHEMA_VERSION, connect
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.search import rank

import jsonltape

from ._search_cases import cli_search, event, index_tree
from .test_index_helpers import fts_ok
from .test_search_topk import VOCAB, _text

T0 = 1_780_000_000_000


def _session(path: Path, texts: list[str], t0: int = T0) -> None:
    with jsonltape.open(path, create=True, durability="manual") as tape:
        tape.append_batch(
            [
                event("user" if n % 2 == 0 else "assistant", text, n, t0 + n * 1000)
                for n, text in enumerate(texts)
            ]
        )


def _vocab(con: sqlite3.Connection) -> dict[str, int]:
    con.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.t_vocab USING fts5vocab(main, messages_fts, 'row')"
    )
    return dict(con.execute("SELECT term, doc FROM temp.t_vocab"))


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(11)
    root = tmp_path_factory.mktemp("words") / "sessions"
    root.mkdir()
    for s in range(6):
        _session(root / f"s{s}.jsonl", [_text(rng) for _ in range(60)], T0 + s * 86_400_000)
    out = root.parent / "index.db"
    index_tree(root, out, helper_from=0)  # the helper builds the word index and its list
    return out


def _hits(con: sqlite3.Connection, q: str, f: Filters, sort: str) -> list[object]:
    return [
        (h.session, h.seq, h.score, h.match)
        for h in search.search(con, q, f, 20, sort=sort)  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize(
    ("sort", "most", "common_min"),
    [("relevance", 512, None), ("recent", 512, None), ("recent", 1, 5), ("relevance", 1, 5)],
)
def test_a_prefix_read_through_the_word_list_finds_what_fts5s_prefix_query_finds(
    index: Path, monkeypatch: pytest.MonkeyPatch, sort: str, most: int, common_min: int | None
) -> None:
    """With at most ``most`` words expanded; past them a common prefix is checked on the
    texts (``common_min``: the limits lowered so that many prefixes are common)."""
    monkeypatch.setattr(words, "MAX_WORDS", most)
    if common_min is not None:
        monkeypatch.setattr(rank, "COMMON_MIN", common_min)
        monkeypatch.setattr(rank, "COMMON_SHARE", 0.01)
    con = connect(index, readonly=True)
    rng = random.Random(f"{sort}{most}")
    expanded = broad = 0
    try:
        assert dict(con.execute("SELECT term, docs FROM words")) == _vocab(con)
        for _ in range(80):
            word = rng.choice(VOCAB)
            pre = word[: rng.randint(1, 4)].lower()
            q = rng.choice([f"{pre}*", f"{pre}* {rng.choice(VOCAB)}", f"ret* {pre}*"])
            f = rng.choice([Filters(), Filters(roles=("user",)), Filters(path="*/s[13].jsonl")])
            found = words.expansion(con, pre)
            expanded += found is not None and found[0] is not None
            broad += found is not None and found[0] is None
            got = _hits(con, q, f, sort)
            with monkeypatch.context() as m:  # no list: FTS5's prefix query
                m.setattr(search, "expansion", lambda con, prefix: None)
                want = _hits(con, q, f, sort)
            assert got == want, (q, f)
    finally:
        con.close()
    assert expanded > 10 and (broad > 10 if most < 10 else broad == 0)


def test_a_prefix_counts_its_words_messages_summed(tmp_path: Path) -> None:
    """``retry`` and ``return`` in the same two messages: four by the list's count, two
    messages; with a limit of three the prefix is common (it only filters)."""
    root = tmp_path / "r"
    root.mkdir()
    _session(root / "a.jsonl", ["retry return", "retry return", "other words"])
    index = tmp_path / "i.db"
    index_tree(root, index)
    con = connect(index, readonly=True)
    try:
        assert words.expansion(con, "ret") == (["retry", "return"], 4)
        assert common.is_common(con, "ret", True, 3)
        assert not common.is_common(con, "ret", True, 4)
        assert not common.is_common(con, "retr", True, 3)  # retry alone: 2
    finally:
        con.close()


def test_a_prefix_that_begins_no_word_finds_no_word_but_still_a_substring(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _session(root / "a.jsonl", ["see the_zqx_handler", "nothing here"])
    index = tmp_path / "i.db"
    index_tree(root, index)
    con = connect(index, readonly=True)
    try:
        assert words.expansion(con, "zqx") == (["zqx"], 1)
        assert words.expansion(con, "nopex") == ([], 0)
        # zqx is a word of the text (the_zqx_handler: the, zqx, handler): found as one
        assert [h.match for h in search.search(con, "zqx*")] == ["word"]
        assert search.search(con, "nopex*") == []
        assert [h.match for h in search.search(con, "zqx_h")] == ["substring"]
    finally:
        con.close()
    out = cli_search(index, "nopex*")
    assert out.returncode == 0 and out.stdout == "" and "no matches" in out.stderr


def test_the_word_list_follows_later_syncs_optimize_and_the_migration(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    _session(root / "a.jsonl", ["café naïve first", "second words"])
    index = tmp_path / "i.db"
    store = SqliteStore(index)
    engine = Ingestor(store, root)
    try:
        engine.rescan()
        fts_ok(store.con)  # the word list is the vocabulary (fts_ok checks it)
        for n in range(3):  # later syncs add to it
            _session(root / f"later{n}.jsonl", [f"later{n} cafe migration", "second"], T0 + n)
            engine.rescan()
            fts_ok(store.con)
        (root / "later1.jsonl").unlink()  # a dead session: its words stay counted
        engine.rescan()
        fts_ok(store.con)
        assert store.con.execute("SELECT docs FROM words WHERE term = 'cafe'").fetchone() == (4,)
        store.optimize()  # rebuilt from the files: counted again without the dead
        fts_ok(store.con)
        assert store.con.execute("SELECT docs FROM words WHERE term = 'cafe'").fetchone() == (3,)
    finally:
        store.close()
    con = sqlite3.connect(index, isolation_level=None)
    want = _vocab(con)
    con.execute("DROP TABLE words")  # back to schema 7
    con.execute("DELETE FROM migrations WHERE version >= 8")
    con.execute("PRAGMA user_version = 7")
    con.close()
    ro = connect(index, readonly=True)  # a reader of schema 7: FTS5's prefix query
    try:
        assert words.expansion(ro, "caf") is None
        assert [h.seq for h in search.search(ro, "caf*")]
    finally:
        ro.close()
    store = SqliteStore(index)  # the writer migrates
    try:
        assert store.con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert dict(store.con.execute("SELECT term, docs FROM words")) == want
    finally:
        store.close()


def test_query_folding_of_a_prefix_matches_the_list(tmp_path: Path) -> None:
    """Upper case folds to the list's lower case; a prefix outside ASCII letters and digits
    is left to FTS5 (its folding is the tokenizer's)."""
    root = tmp_path / "r"
    root.mkdir()
    _session(root / "a.jsonl", ["Migration Café"])
    index = tmp_path / "i.db"
    index_tree(root, index)
    con = connect(index, readonly=True)
    try:
        assert words.expansion(con, "MIGR") == (["migration"], 1)
        assert words.expansion(con, "Caf") == (["cafe"], 1)
        assert words.expansion(con, "Café") is None
        assert len(search.search(con, "Café*")) == 1 == len(search.search(con, "CAF*"))
        assert rank.tokens("Café") == ["cafe"]
    finally:
        con.close()
