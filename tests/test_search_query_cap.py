"""How long a query may be: at most ``MAX_QUERY_WORDS`` words (``search/language.py``), the same
rule on both engines (issue 29, item 12).

Each engine had a limit of its own: PostgreSQL failed from 1,664 words ("target lists can have
at most 1664 entries": it counted each word in a column of one statement) where SQLite answered
20,000, and SQLite failed from about 1,000 CJK terms beside another term ("Expression tree is
too large"). Now every query up to the cap is answered, by both engines alike, whatever its
kinds of terms (words, identifiers, phrases, CJK, punctuation), and a longer one is refused by
both with the same one line, before any index is read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.postgres import search as pg_search
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.search import search
from jsonltape_daemon.search.language import MAX_QUERY_WORDS, Filters, parse_query, query_size
from jsonltape_daemon.search.rank import COMMON_MIN

import jsonltape
from jsonltape.errors import InvalidArgumentError

from ._pg import PgServer
from ._pg_load import push
from ._search_cases import T0, cli_search, event, index_tree

N = MAX_QUERY_WORDS


def _cjk(i: int) -> str:
    """The ``i``-th of distinct CJK pairs (one word each: a run of letters)."""
    return chr(0x4E00 + 2 * i) + chr(0x4E01 + 2 * i)


def _ident(i: int) -> str:
    """The ``i``-th of distinct identifiers, of two words each that no other has (PostgreSQL
    keeps only a word's first 256 places in a text, so a phrase after them is not found)."""
    return f"a{i}_b{i}"


#: Queries of exactly N words, of every kind of term, all found in the one message below.
AT_CAP = {
    "words": " ".join(f"w{i}" for i in range(N)),
    "identifiers": " ".join(_ident(i) for i in range(N // 2)),  # two words each
    "phrases": " ".join(f'"w{i} w{i + 1}"' for i in range(0, N, 2)),
    "one phrase": '"' + " ".join(f"w{i}" for i in range(N)) + '"',
    "prefixes": " ".join(f"w{i}*" for i in range(N)),
    "cjk": " ".join(_cjk(i) for i in range(N)),
    "a word and cjk": "w0 " + " ".join(_cjk(i) for i in range(N - 1)),
    "mixed": " ".join(
        [f"w{i}" for i in range(N // 4)]
        + [_ident(i) for i in range(N // 8)]
        + [_cjk(i) for i in range(N // 4)]
        + ["->"] * (N // 4)
    ),
}
#: Queries past the cap: one word more, a phrase one word longer, and far more.
PAST_CAP = {
    "words": " ".join(f"w{i}" for i in range(N + 1)),
    "one phrase": '"' + " ".join(f"w{i}" for i in range(N + 1)) + '"',
    "identifiers": " ".join(_ident(i) for i in range(N // 2 + 1)),
    "20,000 words": " ".join(f"w{i}" for i in range(20_000)),
    "20,000 cjk": " ".join(_cjk(i % 4000) for i in range(20_000)),
    "one term": "a²" * (N + 1),  # ² is not a letter: N + 1 words, as PostgreSQL cuts it
}
#: The one message every query at the cap finds, and another that none does.
ALL = " ".join(
    [f"w{i}" for i in range(N + 1)]
    + [_ident(i) for i in range(N // 2 + 1)]
    + [_cjk(i) for i in range(N)]
    + ["a -> b"]
)


def test_the_queries_are_at_and_past_the_cap() -> None:
    for q in AT_CAP.values():
        assert query_size(parse_query(q)) == N, q[:40]
    for q in PAST_CAP.values():
        assert query_size(parse_query(q)) > N, q[:40]
    assert query_size(parse_query('"x_1 ->" -> 東京 ééé')) == 5


@pytest.fixture(scope="module")
def indexes(
    tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer
) -> Iterator[tuple[Path, str]]:
    """The corpus in SQLite and the same files pushed to PostgreSQL."""
    base = tmp_path_factory.mktemp("cap")
    root = base / "root"
    root.mkdir(mode=0o700)
    with jsonltape.open(root / "a.jsonl", create=True, durability="manual") as tape:
        tape.append_batch([event("user", ALL, 0, T0), event("user", "w1 w2 a3_b3", 1, T0 + 1000)])
    index = base / "index.db"
    index_tree(root, index)
    name = pg_server.unique("cap")
    url = pg_server.create_database(name)
    push(root, url, "laptop")
    try:
        yield index, url
    finally:
        pg_server.drop_database(name)


@pytest.fixture(scope="module")
def lite(indexes: tuple[Path, str]) -> Iterator[sqlite3.Connection]:
    con = connect(indexes[0], readonly=True)
    try:
        yield con
    finally:
        con.close()


@pytest.fixture(scope="module")
def pg(indexes: tuple[Path, str]) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(indexes[1]) as con:
        yield con


@pytest.mark.parametrize("kind", list(AT_CAP))
def test_a_query_at_the_cap_is_answered_alike_by_both_engines(
    lite: sqlite3.Connection, pg: psycopg.Connection[Any], kind: str
) -> None:
    q = AT_CAP[kind]
    got = [(h.path, h.seq, h.match) for h in search(lite, q, Filters())]
    assert [seq for _p, seq, _m in got] == [1], kind  # ALL: seq 1 (0 is the header)
    assert [(h.path, h.seq, h.match) for h in pg_search.search(pg, q, Filters())] == got


@pytest.mark.parametrize("kind", list(PAST_CAP))
def test_a_query_past_the_cap_is_refused_alike_by_both_engines_before_reading(
    lite: sqlite3.Connection, pg: psycopg.Connection[Any], kind: str
) -> None:
    q = PAST_CAP[kind]
    statements: list[str] = []
    lite.set_trace_callback(statements.append)
    try:
        with pytest.raises(InvalidArgumentError) as on_sqlite:
            search(lite, q, Filters())
    finally:
        lite.set_trace_callback(None)
    assert statements == []  # nothing read
    with pytest.raises(InvalidArgumentError) as on_pg:
        pg_search.search(pg, q, Filters())
    assert str(on_sqlite.value) == str(on_pg.value)
    assert on_sqlite.value.field == "query"
    assert f"a search takes at most {N:,}" in str(on_pg.value)
    # --phrase terms count too: the cap's query, and one more word
    with pytest.raises(InvalidArgumentError):
        search(lite, AT_CAP["words"], Filters(), phrases=["one more"])
    with pytest.raises(InvalidArgumentError):
        pg_search.search(pg, AT_CAP["words"], Filters(), phrases=["one more"])


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_command_line_says_so_in_one_line(indexes: tuple[Path, str], engine: str) -> None:
    target = str(indexes[0]) if engine == "sqlite" else indexes[1]
    out = cli_search(Path(target) if engine == "sqlite" else target, PAST_CAP["words"])  # type: ignore[arg-type]
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"jsonltape: error: query: it has {N + 1:,} words; a search takes at most {N:,}\n"
    )
    ok = cli_search(Path(target) if engine == "sqlite" else target, AT_CAP["mixed"])  # type: ignore[arg-type]
    assert ok.returncode == 0 and ok.stdout.count("a.jsonl:1") == 1, ok.stderr


#: One word to the cap (``é`` is a letter), 1,700 to a server whose letters are ASCII only.
_ONE_WORD = "é".join(f"w{i}" for i in range(1700))


@pytest.fixture
def c_ctype_db(pg_server: PgServer) -> Iterator[str]:
    """A database whose letters are ASCII only (``LC_CTYPE 'C'``, as some servers are set up)
    with more than ``COMMON_MIN`` messages (past it each word of a query is counted in the
    newest messages), one of them :data:`_ONE_WORD`."""
    from psycopg import sql

    name = pg_server.unique("cctype")
    with pg_server.connect() as con:
        con.execute(
            sql.SQL(
                "CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' LC_CTYPE 'C' LC_COLLATE 'C'"
            ).format(sql.Identifier(name))
        )
    url = pg_server.url(name)
    n = COMMON_MIN + 1000
    with psycopg.connect(url) as con:
        pg_schema.migrate(con)
        s = pg_schema.SCHEMA
        con.execute(f"INSERT INTO {s}.origins (origin) VALUES ('m')")
        con.execute(
            f"INSERT INTO {s}.sessions (origin, sid, id, path, header_crc, created, updated, "
            f"events, messages, state, closed) VALUES ('m', 1, 'sid', '/s.jsonl', 'c', 0, 0, "
            f"{n}, {n}, 'clean', false)"
        )
        con.execute(
            f"INSERT INTO {s}.messages (origin, sid, seq, type, role, time, status, text, "
            "truncated) SELECT 'm', 1, i, 'user/message', 'user', 1000000 + i, 'current', "
            "CASE WHEN i = 7 THEN %s ELSE 'message ' || i END, false "
            f"FROM generate_series(0, {n - 1}) i",
            (_ONE_WORD,),
        )
        con.commit()
        con.execute(f"ANALYZE {s}.messages")
        con.commit()
    try:
        yield url
    finally:
        pg_server.drop_database(name)


def test_a_term_postgresql_cuts_into_more_words_than_a_statement_has_columns(
    c_ctype_db: str,
) -> None:
    # Each of its 1,700 words on this server is counted in the newest messages: as rows of one
    # array, not as 1,700 columns of one statement.
    assert query_size(parse_query(_ONE_WORD)) == 1
    with psycopg.connect(c_ctype_db) as con:
        assert [h.seq for h in pg_search.search(con, _ONE_WORD, Filters())] == [7]
