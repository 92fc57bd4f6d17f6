"""Search over the PostgreSQL team index (jsonltape_daemon/engines/postgres/search.py) on a
real server: the SQLite golden queries give the same hits on the same corpus, filters (origin too),
hostile input is data, a reader role searches and cannot write, and a very common word is
answered from the newest messages, not from all of its matches."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.postgres import search as pg_search
from jsonltape_daemon.engines.postgres import sessions as pg_sessions
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import Filters, Hit, search
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.engines.sqlite.transcripts import resolve_session, sessions, window
from jsonltape_daemon.ingest.ingestor import Ingestor

import tests.test_search as golden
from tests._pg import PgServer
from tests._pg_load import push
from tests.test_index_helpers import session
from tests.test_search import indexed, literal_index  # noqa: F401  (fixtures)

S = pg_schema.SCHEMA

#: The SQLite golden set (tests/test_search.py), read from its parametrize marks.
GOLDEN = [args[0] for args in golden.test_golden_queries.pytestmark[0].args[1]]
LITERAL = [args[0] for args in golden.test_fts_syntax_is_literal_text.pytestmark[0].args[1]]
#: More queries of that file, and queries that mix the kinds of terms.
MORE = [
    '"missing is config"',
    "naive tokyo",
    "naive approach",
    "reply",
    "widget",
    "Error(path",
    "北京の雨",
    "雨 reply",
    "NotFound config",
    "the",
    "parse_user*",
    "FileNotFound*",
    "tok*",
    "a",
    "東京 晴れ",
    "ｘ",
]
HOSTILE = [
    "'); DROP TABLE messages; --",
    "'; DROP TABLE jsonltape.messages; --",
    "NEAR(",
    '"unbalanced',
    "*",
    "**",
    "-x",
    "x -y",
    "\\",
    "a\\b",
    "\\'",
    "nul\x00byte",
    "\x00",
    "a:* & b",
    "!x | y",
    "'x' <-> 'y'",
    "%",
    "_",
    "100%",
    "([{",
    "$1 $$ ;",
    "a'b",
]


@pytest.fixture
def golden_pg(indexed: tuple[Path, Path], pg_db: str) -> tuple[Path, str]:  # noqa: F811
    """The golden corpus in SQLite (``indexed``) and the same files pushed to PostgreSQL."""
    push(indexed[0], pg_db, "laptop")
    return indexed[1], pg_db


@pytest.fixture
def pg(golden_pg: tuple[Path, str]) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(golden_pg[1]) as con:
        yield con


@pytest.fixture
def lite(golden_pg: tuple[Path, str]) -> Iterator[sqlite3.Connection]:
    con = connect(golden_pg[0], readonly=True)
    try:
        yield con
    finally:
        con.close()


def _key(h: Hit) -> tuple[str, str, int]:
    return (h.match, h.path, h.seq)


def assert_same(sqlite_hits: list[Hit], pg_hits: list[pg_search.PgHit]) -> None:
    """The same hits, in the same order class: the same kind, file and seq at each place,
    except that hits of one kind in the same second may come in another order, and ranked
    word hits of unequal scores may too (ts_rank is not bm25: the module docs)."""
    assert sorted(map(_key, sqlite_hits)) == sorted(map(_key, pg_hits))
    assert [h.match for h in sqlite_hits] == [h.match for h in pg_hits]
    assert [h.snippet for h in sorted(sqlite_hits, key=_key)] == [
        h.snippet for h in sorted(pg_hits, key=_key)
    ]
    for a, b in zip(sqlite_hits, pg_hits, strict=True):
        if a.match != "word" or a.score == 0.0:  # not ranked: newest first, by second
            assert a.time // 1000 == b.time // 1000


@pytest.mark.parametrize("query", GOLDEN + MORE)
def test_golden_queries_give_the_same_hits_on_postgresql(
    lite: sqlite3.Connection, pg: psycopg.Connection[Any], query: str
) -> None:
    expected = search(lite, query, Filters(), limit=50)
    got = pg_search.search(pg, query, Filters(), limit=50)
    assert expected or query in MORE, query
    assert_same(expected, got)
    assert all(h.origin == "laptop" for h in got)


@pytest.mark.parametrize("query", GOLDEN)
def test_golden_top_hit_is_the_same(
    lite: sqlite3.Connection, pg: psycopg.Connection[Any], query: str
) -> None:
    expected = search(lite, query, Filters(), limit=1)
    got = pg_search.search(pg, query, Filters(), limit=1)
    assert [(_key(h), h.snippet) for h in expected] == [(_key(h), h.snippet) for h in got]


@pytest.mark.parametrize("query", LITERAL)
def test_fts_syntax_is_literal_text_on_postgresql(
    literal_index: Path,  # noqa: F811
    pg_db: str,
    query: str,
) -> None:
    push(literal_index.parent / "root", pg_db, "laptop")
    con = connect(literal_index, readonly=True)
    try:
        expected = search(con, query, Filters(), limit=100)
    finally:
        con.close()
    with psycopg.connect(pg_db) as pg:
        assert_same(expected, pg_search.search(pg, query, Filters(), limit=100))


@pytest.mark.parametrize(
    "filters",
    [
        Filters(roles=("assistant",)),
        Filters(roles=("user",)),
        Filters(path="*/a/*"),
        Filters(path="b.jsonl"),
        Filters(path="*/[ab]/?.jsonl"),
        Filters(path="*/[^a]/*"),
        Filters(types=("assistant/*",)),
        Filters(types=("user/messag?",)),
        Filters(since=4_000_000_000_000),
        Filters(until=1),
        Filters(all=True),
        Filters(session="b.jsonl"),
    ],
    ids=repr,
)
@pytest.mark.parametrize("query", ["reply", "widget", "NotFound", "雨", "->", "naive"])
def test_filters_give_the_same_hits_on_postgresql(
    golden_pg: tuple[Path, str],
    lite: sqlite3.Connection,
    pg: psycopg.Connection[Any],
    filters: Filters,
    query: str,
) -> None:
    if filters.session:  # a path filter needs the absolute path; an id works as itself
        filters = Filters(session=str(_root(golden_pg) / "b" / "b.jsonl"))
    assert_same(search(lite, query, filters, 50), pg_search.search(pg, query, filters, 50))


def _root(golden_pg: tuple[Path, str]) -> Path:
    return golden_pg[0].parent / "root"


def test_session_filter_by_id_prefix(lite: sqlite3.Connection, pg: psycopg.Connection[Any]) -> None:
    ids = [s.session for s in sessions(lite)]
    sid = next(s.session for s in sessions(lite) if s.title == "title b")
    n = next(n for n in range(1, len(sid)) if [i for i in ids if i.startswith(sid[:n])] == [sid])
    for ref in (sid, sid[:n]):
        f = Filters(session=ref)
        got = pg_search.search(pg, "reply", f, 50)
        assert got and {h.session for h in got} == {sid}
        assert_same(search(lite, "reply", f, 50), got)
    assert pg_search.search(pg, "reply", Filters(session="no-such-session"), 50) == []


def test_origin_filter_keeps_each_machine_apart(indexed: tuple[Path, Path], pg_db: str) -> None:  # noqa: F811
    push(indexed[0], pg_db, "laptop")
    push(indexed[0], pg_db, "ci-runner")  # the same files pushed by a second machine
    with psycopg.connect(pg_db) as pg:
        both = pg_search.search(pg, "NotFound", Filters(), 50)
        assert sorted(h.origin for h in both) == ["ci-runner", "laptop"]
        assert {h.path for h in both} == {both[0].path}
        ci = pg_search.search(pg, "NotFound", Filters(), 50, origins=["ci-runner"])
        assert [h.origin for h in ci] == ["ci-runner"]
        assert pg_search.search(pg, "NotFound", Filters(), 50, origins=["nobody"]) == []
        listed = pg_sessions.sessions(pg, origins=["laptop"])
        assert len(listed) == 2 and {s.origin for s in listed} == {"laptop"}
        assert len(pg_sessions.sessions(pg)) == 4
        path = str(indexed[0] / "b" / "b.jsonl")
        assert len(pg_sessions.resolve_session(pg, path)) == 2
        [(key, info)] = pg_sessions.resolve_session(pg, path, origins=["ci-runner"])
        assert key[0] == "ci-runner" and info.origin == "ci-runner"
        with_path = Filters(path="*/b/*")
        assert {h.origin for h in pg_search.search(pg, "reply", with_path, 50)} == {
            "ci-runner",
            "laptop",
        }
        only = pg_search.search(pg, "reply", with_path, 50, origins=["laptop"])
        assert only and {h.origin for h in only} == {"laptop"}


def test_sessions_and_show_match_sqlite(
    golden_pg: tuple[Path, str], lite: sqlite3.Connection, pg: psycopg.Connection[Any]
) -> None:
    fields = ("session", "path", "title", "created", "updated", "events", "messages", "state")

    def row(info: Any) -> tuple[object, ...]:
        return tuple(getattr(info, f) for f in fields)

    assert [row(s) for s in pg_sessions.sessions(pg)] == [row(s) for s in sessions(lite)]
    assert [row(s) for s in pg_sessions.sessions(pg, limit=1, path="*/b/*")] == [
        row(s) for s in sessions(lite, limit=1, path="*/b/*")
    ]
    path = str(_root(golden_pg) / "b" / "b.jsonl")
    [(sid, _)] = resolve_session(lite, path)
    [(key, info)] = pg_sessions.resolve_session(pg, path)
    assert info.origin == "laptop"
    for last, before in ((2, None), (3, 5), (100, None)):
        want = window(lite, sid, last=last, before=before)
        got = pg_sessions.window(pg, key, last=last, before=before)
        assert got == want and got.messages
    assert [k for k, _ in pg_sessions.resolve_session(pg, info.session)] == [key]
    assert len(pg_sessions.resolve_session(pg, info.session[:1])) == 2  # both ids start so


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_input_is_data(
    lite: sqlite3.Connection, pg: psycopg.Connection[Any], query: str
) -> None:
    got = pg_search.search(pg, query, Filters(session=query, path=query, types=(query,)), 20)
    assert got == []  # no session is named like that: nothing, and no error
    got = pg_search.search(pg, query, Filters(), 20, phrases=[query], origins=[query])
    assert got == []
    expected = search(lite, query.replace("\x00", "\ufffd"), Filters(), 20)
    assert_same(expected, pg_search.search(pg, query, Filters(), 20))
    row = pg.execute(f"SELECT count(*) FROM {S}.messages").fetchone()
    assert row is not None and row[0] > 0  # nothing was dropped


def test_a_literal_tsquery_operator_is_found_as_text(pg_db: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    session(root / "ops.jsonl", ["x <-> y and a:* & b | !c, it's O'Brien's \\path"])
    session(root / "decoy.jsonl", ["x y a b c"])
    index = tmp_path / "i.db"
    store = SqliteStore(index)
    Ingestor(store, root).rescan()
    store.close()
    push(root, pg_db, "laptop")
    con = connect(index, readonly=True)
    with psycopg.connect(pg_db) as pg:
        for query in ("<->", "a:*", "O'Brien's", "'s", "\\path", '"x <-> y"', "& b"):
            assert_same(search(con, query, Filters(), 20), pg_search.search(pg, query))
        assert {Path(h.path).stem for h in pg_search.search(pg, "O'Brien's")} == {"ops"}
    con.close()


def test_a_reader_role_searches_and_cannot_write(
    pg_server: PgServer, golden_pg: tuple[Path, str]
) -> None:
    url = golden_pg[1]
    roles = pg_schema.Roles(pg_server.unique("team"))
    pg_schema.init(url, roles)
    reader = pg_server.unique("alice")
    pg_server.create_role(reader, "s3cret pw")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(pg_schema.grant_reader_sql(reader, roles))
    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    assert isinstance(dbname, str)
    with psycopg.connect(pg_server.url(dbname, reader, "s3cret pw")) as con:
        hits = pg_search.search(con, "NotFound")
        assert hits and hits[0].snippet.startswith("raise File\x02NotFound\x03Error")
        assert pg_sessions.sessions(con) and pg_search.search(con, "雨")
        con.rollback()
        for sql in (
            f"DELETE FROM {S}.messages",
            f"UPDATE {S}.messages SET text = 'x'",
            f"INSERT INTO {S}.origins (origin) VALUES ('evil')",
            f"TRUNCATE {S}.messages",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(sql)
            con.rollback()


# -- a very common word at 50k messages --------------------------------------------------

BIG = 50_000


@pytest.fixture(scope="module")
def big_db(pg_server: PgServer) -> Iterator[str]:
    """50k messages (one session), every one with "the"; "needle" only in the oldest one,
    "tenth" in every tenth, "twentieth" in every twentieth, "edges" in the oldest 5000 and
    the newest 50; and an older session of 10 messages."""
    name = pg_server.unique("big")
    url = pg_server.create_database(name)
    with psycopg.connect(url) as con:
        pg_schema.migrate(con)
        con.execute(f"INSERT INTO {S}.origins (origin) VALUES ('m')")
        con.execute(
            f"INSERT INTO {S}.sessions (origin, sid, id, path, header_crc, created, updated, "
            f"events, messages, state, closed) VALUES ('m', 1, 'sid', '/s.jsonl', 'c', 0, 0, "
            f"{BIG}, {BIG}, 'clean', false)"
        )
        con.execute(
            f"INSERT INTO {S}.messages (origin, sid, seq, type, role, time, status, text, "
            "truncated) SELECT 'm', 1, i, 'user/message', 'user', 1000000 + i * 10, 'current', "
            "'the message number ' || i || CASE WHEN i = 0 THEN ' needle' ELSE '' END "
            "|| CASE WHEN i % 10 = 0 THEN ' tenth' ELSE '' END "
            "|| CASE WHEN i % 20 = 0 THEN ' twentieth' ELSE '' END "
            f"|| CASE WHEN i < 5000 OR i >= {BIG - 50} THEN ' edges' ELSE '' END, false "
            f"FROM generate_series(0, {BIG - 1}) i"
        )
        con.execute(  # a small old session, found by a session filter
            f"INSERT INTO {S}.sessions (origin, sid, id, path, header_crc, created, updated, "
            "events, messages, state, closed) VALUES ('m', 2, 'small', '/small.jsonl', 'c', 0, "
            "0, 10, 10, 'clean', false)"
        )
        con.execute(
            f"INSERT INTO {S}.messages (origin, sid, seq, type, role, time, status, text, "
            "truncated) SELECT 'm', 2, i, 'user/message', 'user', i, 'current', "
            "'the small one ' || i, false FROM generate_series(0, 9) i"
        )
        con.commit()
        con.execute(f"ANALYZE {S}.messages")  # as autovacuum would, after such a load
        con.commit()
    try:
        yield url
    finally:
        pg_server.drop_database(name)


def _rows_read(con: psycopg.Connection[Any], dbname: str, run: Any) -> tuple[Any, int]:
    """Run ``run()``; return its result and the rows it read from ``messages`` (heap
    tuples read by scans and fetched through indexes, from the server's statistics)."""

    def count() -> int:
        with psycopg.connect(con.info.dsn, autocommit=True) as other:
            other.execute("SELECT pg_stat_clear_snapshot()")
            row = other.execute(
                # messages is partitioned by origin: the rows are read from its partitions
                "SELECT coalesce(sum(seq_tup_read), 0) + coalesce(sum(idx_tup_fetch), 0) "
                "FROM pg_stat_user_tables "
                "WHERE relid IN (SELECT relid FROM pg_partition_tree(%s::regclass))",
                (f"{S}.messages",),
            ).fetchone()
            assert row is not None
            return int(row[0])

    con.execute("SELECT pg_stat_force_next_flush()")
    con.commit()
    before = count()
    out = run()
    con.execute("SELECT pg_stat_force_next_flush()")
    con.commit()
    con.execute("SELECT 1")
    con.commit()
    return out, count() - before


def test_a_very_common_word_is_answered_from_the_newest_messages(big_db: str) -> None:
    with psycopg.connect(big_db) as con:
        dbname = con.info.dbname
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "the", limit=20))
        assert [h.seq for h in hits] == list(range(BIG - 1, BIG - 21, -1))
        assert read < 5 * pg_search.SAMPLE, read  # not the 50k matches
        # ranked among the newest RANKED: "message" and "the" are common, "tenth" is not
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "the tenth"))
        assert all(h.seq % 10 == 0 and h.seq >= BIG - 10 * 1000 for h in hits)  # newest 1000
        assert hits == sorted(hits, key=lambda h: (-h.score, -h.seq))  # newer among equals
        assert len(hits) == 20 and hits[0].seq == BIG - 70  # the newest of the shortest texts
        assert read < 5 * pg_search.SAMPLE + 10 * 1000, read
        # a rare word is read from its matches, not by walking back 50k messages
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "needle"))
        assert [h.seq for h in hits] == [0]
        assert read < 2 * pg_search.SAMPLE + 10, read  # two passes' samples
        # the newest matches first (a time window), or all of them when it holds too few
        # (ranked: the shortest texts first, newer first among equals)
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "twentieth"))
        assert all(h.seq % 20 == 0 for h in hits) and hits[0].seq == BIG - 60
        assert hits == sorted(hits, key=lambda h: (-h.score, -h.seq)) and len(hits) == 20
        assert read < 2 * pg_search.SAMPLE + 2500, read
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "edges"))
        assert all(h.seq >= BIG - 50 and h.seq % 10 for h in hits) and len(hits) == 20
        assert hits == sorted(hits, key=lambda h: (-h.score, -h.seq))
        assert read < 2 * pg_search.SAMPLE + 2 * 5050, read
        # a small session is read by itself, a big one newest first
        small = Filters(session="small")
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "the", small))
        assert [h.seq for h in hits] == list(range(9, -1, -1))
        assert read < pg_search.SAMPLE + 100, read
        big = Filters(session="sid")
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "the", big))
        assert [h.seq for h in hits] == list(range(BIG - 1, BIG - 21, -1))
        assert read < 5 * pg_search.SAMPLE, read


def test_until_reads_from_its_bound_not_from_the_newest_message(big_db: str) -> None:
    # seq i has time 1000000 + 10 i: until the 1000th message, since the 900th
    until, since = 1_000_000 + 10 * 1000, 1_000_000 + 10 * 900
    with psycopg.connect(big_db) as con:
        dbname = con.info.dbname
        for q in ("the", "the message"):  # common words: walked from until back
            hits, read = _rows_read(
                con, dbname, lambda q=q: pg_search.search(con, q, Filters(until=until))
            )
            assert sorted(h.seq for h in hits) == list(range(980, 1000)), q
            assert read < 5 * pg_search.SAMPLE, (q, read)  # not the 49k newer messages
        window = Filters(since=since, until=until)
        hits, read = _rows_read(con, dbname, lambda: pg_search.search(con, "the", window))
        assert sorted(h.seq for h in hits) == list(range(980, 1000))
        assert read < 5 * pg_search.SAMPLE, read


def test_a_ranked_phrase_gives_the_best_of_its_newest_matches(big_db: str) -> None:
    # "tenth twentieth" is in every twentieth message (2,500), "twentieth" too: the GIN
    # index is given the phrase's rarest word, the phrase checked on what it reads, the
    # newest 1000 ranked (at 1M messages this lets the planner AND the time index, see
    # benchmarks/bench_pg_search.py; at 50k it fetches every match all the same).
    with psycopg.connect(big_db) as con:
        hits = pg_search.search(con, '"tenth twentieth"')
        assert all(h.seq % 20 == 0 and h.seq >= BIG - 20 * 1000 for h in hits)  # newest 1000
        assert hits == sorted(hits, key=lambda h: (-h.score, -h.seq)) and len(hits) == 20
        assert hits[0].seq == BIG - 60  # the newest of the shortest texts
        # the phrase, not its rarest word: "twentieth edges" is not in "... edges twentieth"
        hits = pg_search.search(con, '"twentieth edges"', limit=300)
        assert {h.seq for h in hits} == {i for i in range(0, 5000, 20)} | {BIG - 40, BIG - 20}


@pytest.mark.parametrize("query", ["reply", "naive", "NotFound", "雨", "->", "reply the"])
def test_sort_recent_gives_the_same_hits_newest_first(
    lite: sqlite3.Connection, pg: psycopg.Connection[Any], query: str
) -> None:
    expected = search(lite, query, Filters(), 50, sort="recent")
    got = pg_search.search(pg, query, Filters(), 50, sort="recent")
    assert_same(expected, got)
    assert all(h.score == 0.0 for h in got)
    assert [h.time for h in got if h.match == "word"] == sorted(
        (h.time for h in got if h.match == "word"), reverse=True
    )


def test_phrases_with_repeated_and_folded_words(pg_db: str, tmp_path: Path) -> None:
    root = tmp_path / "root"
    session(root / "rep.jsonl", ["a b a c, then Crème brûlée: the_end"])
    session(root / "other.jsonl", ["a c b a, creme and brulee apart; the end"])
    index = tmp_path / "i.db"
    store = SqliteStore(index)
    Ingestor(store, root).rescan()
    store.close()
    push(root, pg_db, "laptop")
    con = connect(index, readonly=True)
    with psycopg.connect(pg_db) as pg:
        for query in ('"a b a"', '"b a c"', '"creme brulee"', '"CRÈME BRÛ"*', '"the end"',
                      "the_end", '"a c"', "brul*", '"c then crème"'):  # fmt: skip
            expected = search(con, query, Filters(), 20)
            assert_same(expected, pg_search.search(pg, query))
        assert {Path(h.path).stem for h in pg_search.search(pg, '"a b a"')} == {"rep"}
        assert {Path(h.path).stem for h in pg_search.search(pg, '"creme brulee"')} == {"rep"}
    con.close()


GLOBS = [
    ("*/a/*", "/x/a/b.jsonl"),
    ("*/a/*", "/x/ab/b.jsonl"),
    ("*.jsonl", "/x/a.jsonl"),
    ("*.jsonl", "/x/ajsonl"),
    ("/x/?.jsonl", "/x/a.jsonl"),
    ("/x/?.jsonl", "/x/ab.jsonl"),
    ("*[ab].jsonl", "/x/b.jsonl"),
    ("*[^ab].jsonl", "/x/b.jsonl"),
    ("*[^ab].jsonl", "/x/c.jsonl"),
    ("*[a-c]*", "/x/b"),
    ("*[]]*", "/x/]"),
    ("*(x|y)+*", "/(x|y)+"),
    ("*(x|y)+*", "/x"),
    ("*\\d*", "/a\\d"),
    ("*\\d*", "/a1"),
    ("*[*", "/a[b"),
    ("*$^.*", "/$^.x"),
    ("*{1,2}*", "/a{1,2}"),
    ("A*", "a"),
    ("*é*", "/café"),
]


def test_glob_regex_matches_what_sqlite_glob_matches(pg_db: str) -> None:
    lite = sqlite3.connect(":memory:")
    with psycopg.connect(pg_db) as pg:
        for glob, text in GLOBS:
            want = bool(lite.execute("SELECT ? GLOB ?", (text, glob)).fetchone()[0])
            regex = pg_search.glob_regex(glob)
            if regex is None:  # SQLite matches nothing with it either
                assert not want, (glob, text)
                continue
            row = pg.execute("SELECT %s ~ %s", (text, regex)).fetchone()
            assert row is not None and row[0] == want, (glob, text)
    lite.close()
