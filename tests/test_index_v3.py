"""Schema 3: the index keeps no copy of the message texts, and substrings are found only
inside code-like tokens (issue 16).

Texts are read back from the session files (a line whose crc no longer matches gives none);
the contentless full-text tables are never deleted from, so the keys of deleted messages are
kept in ``dead_keys`` and never given again until ``optimize`` rebuilds the tables.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite import search
from jsonltape_daemon.engines.sqlite.schema import (
    _M001,
    _M002,
    SCHEMA_VERSION,
    _statements,
    connect,
)
from jsonltape_daemon.engines.sqlite.search import Filters
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.text import idents
from jsonltape_daemon.text.idents import contains, tokens

import jsonltape

from .helpers import drop_session_bounds
from .test_index_helpers import fts_ok

T0 = 1_780_000_000_000


def _messages(path: Path, texts: list[str], time: int = T0) -> str:
    """A session whose user messages all have the same time (one second: one key range)."""
    with jsonltape.open(path, create=True, durability="manual") as tape:
        tape.append_batch(
            {
                "type": "user/message",
                "surface": "append",
                "time": time,
                "data": {
                    "message": {
                        "id": f"m{n}",
                        "role": "user",
                        "parts": [{"type": "text", "content": text}],
                    }
                },
            }
            for n, text in enumerate(texts)
        )
        return tape.session_id


def _sync(root: Path, index: Path) -> SqliteStore:
    store = SqliteStore(index)
    engine = Ingestor(store, root)
    engine.rescan()
    engine.build_substrings()
    return store


def _found(con: sqlite3.Connection, query: str, **kw: Any) -> list[tuple[int, str]]:
    return [(h.seq, h.match) for h in search.search(con, query, Filters(**kw), 100)]


def test_the_index_keeps_no_text_and_a_snippet_is_cut_from_the_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _messages(root / "a.jsonl", ["the migration of FileNotFoundError handling", "other"])
    store = _sync(root, tmp_path / "index.db")
    try:
        cols = {r[1] for r in store.con.execute("PRAGMA table_info(messages)")}
        assert "text" not in cols
        assert store.con.execute("SELECT count(*) FROM message_texts").fetchone()[0] == 0
        (hit,) = search.search(store.con, "migration")
        plain = hit.snippet.replace(search.MARK_OPEN, "").replace(search.MARK_CLOSE, "")
        assert plain == "the migration of FileNotFoundError handling"
        assert "\x02migration\x03" in hit.snippet
    finally:
        store.close()


def test_a_file_edited_under_the_index_gives_no_snippet_and_no_false_substring_hit(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    path = root / "a.jsonl"
    _messages(path, ["the migration of FileNotFoundError handling"])
    store = _sync(root, tmp_path / "index.db")
    try:
        assert _found(store.con, "NotFound") == [(1, "substring")]
        # Same length, another text: the line's crc no longer matches (not resynced yet).
        data = path.read_bytes()
        path.write_bytes(data.replace(b"FileNotFoundError", b"FileNotFoundErrox"))
        (hit,) = search.search(store.con, "migration")  # the word index still has it
        assert hit.snippet == "" and hit.match == "word"
        assert _found(store.con, "NotFound") == []  # the text decides; there is none
        assert search.window(store.con, 1, last=5, before=None).messages[0].text == ""
    finally:
        store.close()


def test_keys_of_a_dropped_session_are_never_given_again(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    path = root / "a.jsonl"
    # 64 messages in one second take every slot of that second's key range.
    _messages(path, [f"zebra {n}" for n in range(64)])
    store = _sync(root, tmp_path / "index.db")
    try:
        old = {r[0] for r in store.con.execute("SELECT tkey FROM messages")}
        assert len(_found(store.con, "zebra")) == 64
        path.unlink()
        _messages(path, [f"yak {n}" for n in range(64)])  # another session, the same second
        Ingestor(store, root).rescan()
        new = {r[0] for r in store.con.execute("SELECT tkey FROM messages")}
        dead = {r[0] for r in store.con.execute("SELECT tkey FROM dead_keys")}
        assert dead == old and not new & old
        assert _found(store.con, "zebra") == []  # the old texts' index entries lead nowhere
        assert len(_found(store.con, "yak")) == 64
    finally:
        store.close()


def test_optimize_empties_dead_keys_and_leaves_the_results_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _messages(root / "a.jsonl", ["FileNotFoundError in 東京都", "the migration of users"])
    _messages(root / "b.jsonl", ["dropped soon: migration", "lru_cache 東京"], T0 + 5000)
    store = _sync(root, tmp_path / "index.db")
    queries = ["migration", "NotFound", "東京", "users", "lru_cach", "migr*", "->"]
    try:
        (root / "b.jsonl").unlink()
        Ingestor(store, root).rescan()
        assert store.con.execute("SELECT count(*) FROM dead_keys").fetchone()[0] == 2
        before = {q: _found(store.con, q) for q in queries}
        store.optimize()
        assert store.con.execute("SELECT count(*) FROM dead_keys").fetchone()[0] == 0
        assert {q: _found(store.con, q) for q in queries} == before
        assert before["migration"] == [(2, "word")] and before["lru_cach"] == []
        fts_ok(store.con)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("NotFound", {1}),  # inside an identifier
        ("ound", {1}),
        ("Fou", {1}),
        ("lru_cach", {2}),  # inside a dotted name
        ("models.p", {3}),  # a path
        ("found", {1, 4}),  # a plain word: whole (and inside the identifier)
        ("fou*", {1, 4}),  # and by prefix
        ("oun", {1}),  # but a substring of a plain word is not found there
        ("igratio", set()),
    ],
)
def test_substrings_are_found_inside_identifiers_only(
    tmp_path: Path, query: str, found: set[int]
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _messages(
        root / "a.jsonl",
        [
            "raise FileNotFoundError here",
            "use functools.lru_cache please",
            "see src/app/models.py",
            "nothing was found in the migration",
        ],
    )
    store = _sync(root, tmp_path / "index.db")
    try:
        assert {seq for seq, _m in _found(store.con, query)} == found
    finally:
        store.close()


def test_the_code_like_rule() -> None:
    text = (
        "raise FileNotFoundError(path) at src/a.py: use functools.lru_cache, __init__, utf8, "
        "HTTPServer and dry-run. Plain words, ERROR, Naïve, 42 and 3 are not."
    )
    assert tokens(text) == [
        "FileNotFoundError(path)",
        "src/a.py:",
        "functools.lru_cache,",
        "__init__,",
        "utf8,",
        "HTTPServer",
        "dry-run.",
    ]
    assert tokens('{"a":"' + "x" * 80 + '","snake_case":1}') == ["snake_case"]


def _rule(text: str) -> list[str]:
    """The code-like rule as ``idents.py`` states it, without its shortcuts."""
    out: dict[str, None] = {}
    for word in text.split():
        for t in [word] if len(word) <= 64 else re.findall(r"[\w./\\:-]+", word):
            if idents._FEATURE.search(t):
                out[t] = None
    return list(out)


@given(st.lists(st.text(alphabet="aBé_.-/:1(, \n", max_size=200), max_size=4))
def test_tokens_follow_the_rule_whatever_words_were_seen_before(texts: list[str]) -> None:
    for text in texts + texts[::-1]:  # the second time, the words are known
        assert tokens(text) == _rule(text)


def test_the_known_words_of_tokens_stay_bounded() -> None:
    tokens(" ".join(f"w{i}" for i in range(idents._VERDICT_MAX + 10)))
    assert 0 < len(idents._VERDICT) <= idents._VERDICT_MAX
    assert tokens("w1 plain aB") == ["w1", "aB"]


def test_a_version_2_index_is_emptied_and_filled_again_by_the_next_sync(tmp_path: Path) -> None:
    index = tmp_path / "index.db"
    con = sqlite3.connect(index)
    for step in (_M001, _M002):
        for statement in _statements(step):
            con.execute(statement)
    con.execute(
        "INSERT INTO files (path, status, offset) VALUES ('/gone/old.jsonl', 'indexed', 10)"
    )
    con.execute("INSERT INTO meta (key, value) VALUES ('roots', '[\"/x\"]')")
    con.execute("PRAGMA user_version = 2")
    con.commit()
    con.close()
    root = tmp_path / "sessions"
    root.mkdir()
    _messages(root / "a.jsonl", ["the migration fails in FileNotFoundError"])
    store = SqliteStore(index)
    try:
        assert store.files() == {}  # the old rows are gone, the settings stay
        assert store.roots() == ["/x"]
        Ingestor(store, root).rescan()
    finally:
        store.close()
    con = connect(index, readonly=True)
    try:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert [h.seq for h in search.search(con, "migration")] == [1]
        assert [h.seq for h in search.search(con, "NotFound")] == [1]  # scanned meanwhile
        assert "text" not in {r[1] for r in con.execute("PRAGMA table_info(messages)")}
        assert con.execute("SELECT count(*) FROM dead_keys").fetchone()[0] == 0
    finally:
        con.close()


@given(
    st.text(alphabet="aB_.-/: xY1\n(é", max_size=160),
    st.text(alphabet="aB_.-/:xY1(é", min_size=1, max_size=4),
)
def test_the_search_check_looks_only_inside_code_like_tokens(text: str, needle: str) -> None:
    """The fast check (only the tokens around each occurrence) equals the rule's tokens."""
    needle = needle.lower()
    assert contains(text, needle) == any(needle in t.lower() for t in tokens(text))


def test_a_filtered_search_reads_its_filter_from_the_covering_index(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _messages(root / "a.jsonl", ["the migration fails", "the migration works"])
    index = tmp_path / "index.db"
    _sync(root, index).close()
    con = connect(index, readonly=True)
    try:
        plan = " ".join(
            str(r[3])
            for r in con.execute(
                "EXPLAIN QUERY PLAN SELECT f.rowid FROM messages_fts f JOIN messages m "
                "ON m.tkey = f.rowid WHERE messages_fts MATCH ? AND m.status = 'current' "
                "AND m.role IN ('user') ORDER BY f.rowid DESC",
                ('"migration"',),
            )
        )
        assert "COVERING INDEX messages_filter" in plan
        assert [h.role for h in search.search(con, "migration", search.Filters(roles=("user",)))]
    finally:
        con.close()


def test_a_search_reads_a_version_3_index_before_the_sync_that_migrates_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _messages(root / "a.jsonl", ["the migration fails in FileNotFoundError"])
    index = tmp_path / "index.db"
    _sync(root, index).close()
    con = sqlite3.connect(index)  # as an index written by the jsonltape before schema 4 left it
    con.execute("DROP INDEX messages_filter")
    con.execute("DROP TABLE message_kinds")  # and what step 5 added
    con.execute("DELETE FROM meta WHERE key = 'tkey_spill'")
    drop_session_bounds(con)  # and step 7's
    con.execute("DELETE FROM migrations WHERE version >= 4")
    con.execute("PRAGMA user_version = 3")
    con.commit()
    con.close()
    ro = connect(index, readonly=True)
    try:
        assert [h.seq for h in search.search(ro, "migration", search.Filters(roles=("user",)))]
        assert [h.seq for h in search.search(ro, "NotFound")] == [1]
    finally:
        ro.close()
    SqliteStore(index).close()  # the next writer migrates it
    ro = connect(index, readonly=True)
    try:
        assert ro.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {r[0] for r in ro.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "messages_filter" in names
    finally:
        ro.close()
