"""Search golden queries and the read-side commands (search, sessions, show, index status).

A fixed corpus: diacritics, Japanese, identifiers inside identifiers, tiny queries, phrases,
filters, and queries that would be FTS syntax errors if they were passed through. Then the two
places where an index stands in for a scan: CJK terms (the bigram table must find exactly what
``LIKE`` finds) and the substring index while it is still being built (results unchanged).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters, notes, search
from jsonltape_daemon.engines.sqlite.store import MessageRow, SessionRow, SqliteStore
from jsonltape_daemon.ingest.ingestor import Ingestor

import jsonltape
from jsonltape.cli import cli

from .test_index_helpers import session

TEXTS = {
    "a": ["The naïve approach failed on the café migration", "東京都の天気は晴れです。明日は雨"],
    "b": [
        "raise FileNotFoundError(path) when the config is missing",
        "use parse_user_id_from_token here",
        "bd-q3fy is the ticket; go fix it",
        "then a -> b and 北京の雨",
    ],
}


@pytest.fixture
def indexed(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    for name, texts in TEXTS.items():
        with jsonltape.open(root / name / f"{name}.jsonl", create=True, title=f"title {name}") as t:
            for text in texts:
                with t.turn():
                    t.user(text)
                    t.assistant(f"reply: {text[:12]}")
    with jsonltape.open(root / "a" / "a.jsonl") as t:  # a revision: old text superseded
        ev = t.user("obsolete wording about the widget")
        t.append(
            "user/message",
            {"message": {"id": "r", "role": "user", "parts": [{"type": "text", "content": "new"}]}},
            surface={"op": "replace", "start": ev.seq, "end": ev.seq},
            sources=[ev.seq],
        )
    index = tmp_path / "index.db"
    store = SqliteStore(index)
    engine = Ingestor(store, root)
    assert engine.rescan().bulk
    assert store.substrings_pending()  # a bulk load leaves the substring index for later
    engine.build_substrings()
    assert not store.substrings_pending()
    store.close()
    return root, index


def q(index: Path, query: str, **kw: object) -> list[tuple[str, str]]:
    con = connect(index, readonly=True)
    try:
        return [(h.match, h.snippet) for h in search(con, query, Filters(**kw))]  # type: ignore[arg-type]
    finally:
        con.close()


@pytest.mark.parametrize(
    ("query", "kind", "needle"),
    [
        ("naive", "word", "\x02naïve\x03"),  # diacritics folded
        ("cafe migration", "word", "café"),
        ("NotFound", "substring", "File\x02NotFound\x03Error"),  # identifier inside identifier
        ("user_id", "word", "parse_\x02user_id\x03"),  # "_" splits words: a phrase
        ("ser_id_fr", "substring", "parse_u\x02ser_id_fr\x03om"),
        ("東京都", "substring", "\x02東京都\x03"),  # CJK, three characters
        ("天気", "substring", "\x02天気\x03"),  # CJK, two characters: the bigram table
        ("雨", "substring", "\x02雨\x03"),  # one character: its unigram
        ("晴れです。明日", "substring", "\x02晴れです。明日\x03"),  # across CJK punctuation
        ("->", "scan", "\x02->\x03"),  # neither a word nor CJK, two characters: a scan
        ('"config is missing"', "word", "\x02config is missing\x03"),  # phrase
        ("migr*", "word", "\x02migration\x03"),  # prefix
        ("bd-q3fy", "word", "\x02bd-q3fy\x03"),
        ("NotFound config", "substring", "File\x02NotFound\x03Error"),  # a word and a part
        ("ser_id here", "substring", "parse_u\x02ser_id\x03_from"),
    ],
)
def test_golden_queries(indexed: tuple[Path, Path], query: str, kind: str, needle: str) -> None:
    hits = q(indexed[1], query)
    assert hits, query
    assert hits[0][0] == kind
    assert needle in hits[0][1]


def test_phrase_order_matters_and_words_are_anded(indexed: tuple[Path, Path]) -> None:
    assert q(indexed[1], '"missing is config"') == []
    assert q(indexed[1], "naive tokyo") == []
    assert len(q(indexed[1], "naive approach")) == 1


#: One session per text: each FTS-syntax query below must find its literal text and no decoy
#: (a decoy is what the query would match if it were FTS syntax, or if its words were ORed).
LITERAL = {
    "near": "call NEAR(x y) in the query",
    "x-then-y": "x then y, with a gap between the two",
    "bool": "either this or that, and not both",
    "and-only": "this and that",
    "colon": "the col: prefix is for a column",
    "column": "a plain column of values",
    "star": "a literal * star",
    "caret": "the regex ^-+ here",
    "plain": "a line with no special text",
}


@pytest.fixture
def literal_index(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    for name, text in LITERAL.items():
        session(root / f"{name}.jsonl", [text])
    index = tmp_path / "literal.db"
    store = SqliteStore(index)
    Ingestor(store, root).rescan()
    store.close()
    return index


def found(index: Path, query: str) -> set[str]:
    """The sessions (file stems) with a hit for ``query``."""
    con = connect(index, readonly=True)
    try:
        return {Path(h.path).stem for h in search(con, query, Filters(), limit=100)}
    finally:
        con.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("NEAR(x y)", {"near"}),  # as FTS, NEAR(x y) would also match "x then y"
        ("AND OR NOT", {"bool"}),  # as FTS a syntax error; as words all three must be there
        ("NOT", {"bool"}),
        ("OR", {"bool", "colon"}),  # two letters: found inside words too ("col: ... for")
        ("col:", {"colon"}),  # as FTS a column filter (an error: there is no column "col")
        ('"*"', {"star"}),  # as FTS a bare prefix (everything); here a literal character
        ("*", set()),  # the prefix marker with no prefix: nothing to search for, not everything
        ("^-+", {"caret"}),
        ("(", {"near"}),
        ('"', set()),  # an empty phrase: nothing to search for
    ],
)
def test_fts_syntax_is_literal_text(literal_index: Path, query: str, expected: set[str]) -> None:
    assert found(literal_index, query) == expected


def test_a_phrase_matches_in_order_and_words_anywhere(tmp_path: Path) -> None:
    root = tmp_path / "root"
    session(root / "phrase.jsonl", ['the migration adds a NOT NULL column, she said "hi"'])
    session(root / "words.jsonl", ["NULL is not the migration's problem"])
    index = tmp_path / "i.db"
    assert run_sync(root, index).returncode == 0

    def sessions_found(*args: str) -> set[str]:
        r = run(index, "search", *args, "--json")
        assert r.returncode == 0, r.stderr
        return {Path(json.loads(line)["path"]).stem for line in r.stdout.splitlines()}

    assert sessions_found("migration", "NOT", "NULL") == {"phrase", "words"}  # ANDed words
    assert sessions_found('migration "NOT NULL"') == {"phrase"}  # the README's quoting
    assert sessions_found("migration", "--phrase", "NOT NULL") == {"phrase"}
    assert sessions_found("--phrase", "NOT NULL", "--phrase", "migration adds") == {"phrase"}
    assert sessions_found("--phrase", 'said "hi"') == {"phrase"}  # a quote inside a phrase
    assert sessions_found("--phrase", "NULL NOT") == set()
    nothing = run(index, "search", "--phrase", "  ")
    assert nothing.returncode == 2 and nothing.stderr.startswith("jsonltape: error: nothing")


def run_sync(root: Path, index: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(root), "--index", str(index)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_superseded_only_with_all(indexed: tuple[Path, Path]) -> None:
    assert q(indexed[1], "widget") == []
    assert len(q(indexed[1], "widget", all=True)) == 1


def test_filters(indexed: tuple[Path, Path]) -> None:
    index = indexed[1]
    assert len(q(index, "reply", roles=("assistant",))) == 6
    assert q(index, "reply", roles=("user",)) == []
    assert len(q(index, "reply", path="*/a/*")) == 2
    assert len(q(index, "reply", types=("assistant/*",))) == 6
    assert q(index, "reply", since=4_000_000_000_000) == []
    assert q(index, "reply", until=1) == []


def run(index: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", *args, "--index", str(index)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_search_command_json_and_human(indexed: tuple[Path, Path]) -> None:
    out = run(indexed[1], "search", "NotFound", "--json")
    assert out.returncode == 0, out.stderr
    hit = json.loads(out.stdout.splitlines()[0])
    assert {"session", "path", "seq", "time", "role", "snippet", "score"} <= set(hit)
    assert hit["snippet"].startswith("raise File[NotFound]Error")
    human = run(indexed[1], "search", "naive")
    assert "[naïve]" in human.stdout and "a.jsonl:2" in human.stdout
    bad = run(indexed[1], "search", "x", "--since", "someday")
    assert bad.returncode == 2 and bad.stderr.startswith("jsonltape: error: cannot read date")
    assert "Traceback" not in bad.stderr


def test_sessions_newest_activity_first(indexed: tuple[Path, Path]) -> None:
    out = run(indexed[1], "sessions", "--json")
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["title"] for r in rows] == ["title a", "title b"]  # a was appended to last
    assert rows[0]["messages"] == 6 and rows[0]["state"] == "clean"


def test_show_pages_backwards(indexed: tuple[Path, Path]) -> None:
    root, index = indexed
    out = run(index, "show", str(root / "b" / "b.jsonl"), "--last", "2", "--json")
    seqs = [json.loads(line)["seq"] for line in out.stdout.splitlines()]
    older = run(
        index,
        "show",
        str(root / "b" / "b.jsonl"),
        "--last",
        "2",
        "--before",
        str(seqs[0]),
        "--json",
    )
    assert [json.loads(line)["seq"] for line in older.stdout.splitlines()] < seqs
    human = run(index, "show", str(root / "b" / "b.jsonl"), "--last", "1")
    assert "older messages: jsonltape show" in human.stdout


def test_show_without_index_reads_the_file(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    out = run(tmp_path / "none.db", "show", str(indexed[0] / "a" / "a.jsonl"), "--last", "1")
    assert out.returncode == 0, out.stderr
    assert "new" in out.stdout and "reply" not in out.stdout


def test_newer_index_is_refused_clearly(indexed: tuple[Path, Path]) -> None:
    con = connect(indexed[1])
    con.execute("PRAGMA user_version = 99")
    con.close()
    out = run(indexed[1], "search", "naive")
    assert out.returncode == 2
    assert "written by a newer jsonltape" in out.stderr and "Traceback" not in out.stderr


def test_missing_index_message(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["sessions", "--index", str(tmp_path / "no.db")])
    assert out.exit_code == 2
    assert "no index here yet" in out.output


def test_index_status_and_rebuild(indexed: tuple[Path, Path], tmp_path: Path) -> None:
    root, index = indexed
    (root / "junk.jsonl").write_text("not a session\n")
    assert run(index, "sync", str(root)).returncode == 0
    status = json.loads(run(index, "index", "status", "--json").stdout)
    assert status["sessions"] == 2 and status["files"] == {"foreign": 1, "indexed": 2}
    assert status["problems"][0]["path"].endswith("junk.jsonl")
    before = q(index, "naive")
    rebuilt = run(index, "index", "rebuild")
    assert rebuilt.returncode == 0 and "2 sessions" in rebuilt.stdout
    assert q(index, "naive") == before


def test_import_jsonltape_pulls_in_neither_sqlite_nor_watchdog() -> None:
    code = (
        "import sys, jsonltape, jsonltape.cli; "
        "from jsonltape.cli import cli; "
        "assert 'sqlite3' not in sys.modules and 'watchdog' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


_TEXT = "東京都の天気は晴れです。明日雨北京ＡＢab -"
_TERM = "東京都の天気晴雨。Ａ"


@given(
    st.lists(st.text(alphabet=_TEXT, max_size=24), min_size=1, max_size=12),
    st.lists(st.text(alphabet=_TERM, min_size=1, max_size=4), min_size=1, max_size=2),
)
def test_cjk_terms_find_exactly_what_like_finds(texts: list[str], terms: list[str]) -> None:
    store = SqliteStore(":memory:")
    try:
        store.begin()
        sid = store.add_session(SessionRow(id="s", path="/s.jsonl", header_crc="x"))
        store.add_messages(
            [
                MessageRow(sid, i, "user/message", "user", i, "current", i, None, (), t, 0)
                for i, t in enumerate(texts)
            ]
        )
        store.commit()
        hits = search(store.con, " ".join(terms), Filters(), limit=1000)
        like = " AND ".join("t.text LIKE ?" for _ in terms)
        scan = {  # no such file: the store keeps the texts (message_texts)
            r[0]
            for r in store.con.execute(
                f"SELECT m.seq FROM messages m JOIN message_texts t USING (tkey) WHERE {like}",
                [f"%{t}%" for t in terms],
            )
        }
        assert (
            {h.seq for h in hits}
            == scan
            == {i for i, t in enumerate(texts) if all(x in t for x in terms)}
        )
        assert all(h.match == "substring" for h in hits)
    finally:
        store.close()


def test_results_stay_the_same_while_the_substring_index_is_built(tmp_path: Path) -> None:
    root = tmp_path / "root"
    with jsonltape.open(root / "s.jsonl", create=True) as t:
        for text in [*TEXTS["a"], *TEXTS["b"]] * 3:
            t.user(text)
    index = tmp_path / "index.db"
    store = SqliteStore(index)
    engine = Ingestor(store, root)
    engine.rescan()
    queries = ["NotFound", "ser_id_fr", "Error(path", "北京の雨", "naive", "->", "migration"]

    def results() -> dict[str, set[int]]:
        return {x: {h.seq for h in search(store.con, x, Filters(all=True), 100)} for x in queries}

    partial = results()
    assert any("substring index is still being built" in n for n in notes(store.con))
    assert partial["NotFound"] and partial["ser_id_fr"] and partial["Error(path"]
    store.begin()
    store.build_substrings(5)  # a third of the way
    store.commit()
    assert store.substrings_pending() and results() == partial
    engine.build_substrings()
    assert results() == partial and notes(store.con) == []
    kinds = {h.match for h in search(store.con, "NotFound", Filters(), 100)}
    assert kinds == {"substring"}
    store.close()


def test_a_first_sync_from_the_command_line_builds_everything(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for name, texts in TEXTS.items():
        with jsonltape.open(root / f"{name}.jsonl", create=True) as t:
            for text in texts:
                t.user(text)
    index = tmp_path / "fresh.db"
    out = subprocess.run(
        [sys.executable, "-m", "jsonltape", "sync", str(root), "--index", str(index), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    stats = json.loads(out.stdout)
    assert stats["bulk"] and stats["messages"] == 6 and stats["substrings"] == 6
    assert {"read", "rows", "insert", "words", "publish", "substrings"} <= set(stats["phases"])
    status = json.loads(run(index, "index", "status", "--json").stdout)
    assert status["substrings"] == {"indexed": 6, "messages": 6} and status["fts"] == "live"
    assert not (tmp_path / "fresh.db.build").exists()
