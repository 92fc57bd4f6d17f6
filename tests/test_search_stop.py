"""A search that no one wants any more stops: the reader's ``stop`` (search as you type drops
each keystroke's search for the next one's; the viewer's client leaves). On SQLite the search
asks ``stop`` every few thousand steps of SQLite's machine and ends at the next statement
after it says True; on PostgreSQL the server is asked to cancel the running statement. Either
way the search ends with ``SearchStoppedError`` (never partial hits), and the reader goes on
serving. Real indexes throughout: a SQLite file a sync wrote, a PostgreSQL server."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from jsonltape_daemon.errors import SearchStoppedError
from jsonltape_daemon.search.language import Filters, as_typed
from jsonltape_daemon.search.reader import STOP_STEPS, cancel_when, open_reader
from jsonltape_daemon.target import parse

import jsonltape

pytestmark = pytest.mark.timeout(120)


def many_texts(root: Path) -> Path:
    """An index of 3,000 messages under ``root``: a two-letter term no message holds is looked
    for in every text (a search long enough to be stopped)."""
    for s in range(30):
        with jsonltape.open(root / f"s{s:02d}.jsonl", create=True, durability="manual") as tape:
            for i in range(50):
                tape.user(f"question {s} {i} about the migration of table {i}")
                tape.assistant(f"answer {s} {i}: add a default to the column")
    subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "sync", str(root), "--index", str(root / "i.db")],
        check=True,
        capture_output=True,
        cwd=root,
    )
    return root / "i.db"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return many_texts(tmp_path_factory.mktemp("stop"))


class Asked:
    """A ``stop`` that says True from its ``after``-th question on, counting them."""

    def __init__(self, after: int) -> None:
        self.after, self.asked = after, 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked >= self.after


def test_a_search_stops_soon_after_stop_says_so_and_the_reader_goes_on(index: Path) -> None:
    reader = open_reader(parse(str(index)))
    try:
        everything = Asked(10**9)  # never: the whole search, to count how often it asks
        assert reader.search("qz", Filters(), 50, stop=everything) == []
        assert everything.asked > 20  # a scan of every text asks many times
        for after in (1, 2, 5, everything.asked // 2):
            stop = Asked(after)
            with pytest.raises(SearchStoppedError):
                reader.search("qz", Filters(), 50, stop=stop)
            # ended there (asked once more on the way out, to tell a stop from an error)
            assert after <= stop.asked <= after + 1
        # the same reader answers the next search, whole, and without a stop
        hits = reader.search("migration", Filters(), 5, stop=Asked(10**9))
        assert len(hits) == 5 and hits == reader.search("migration", Filters(), 5)
    finally:
        reader.close()


def test_a_search_asks_stop_from_its_first_statement(index: Path) -> None:
    """Asked before anything is read (a request that waited for a reader while its client
    left), and then every STOP_STEPS steps of SQLite's machine."""
    reader = open_reader(parse(str(index)))
    try:
        stop = Asked(1)
        with pytest.raises(SearchStoppedError):
            reader.search("migration", Filters(), 5, stop=stop)
        assert stop.asked == 1 and STOP_STEPS <= 10_000
    finally:
        reader.close()


def test_stop_from_another_thread_ends_a_running_search(index: Path) -> None:
    flag = threading.Event()
    asked = threading.Event()

    def stop() -> bool:
        asked.set()
        return flag.is_set()

    errors: list[BaseException] = []

    def search() -> None:
        reader = open_reader(parse(str(index)))  # a SQLite reader stays in its thread
        try:
            for _ in range(1000):  # a scan of every text, again and again, until stopped
                reader.search("qz", Filters(), 50, stop=stop)
        except BaseException as exc:
            errors.append(exc)
        finally:
            reader.close()

    t = threading.Thread(target=search)
    t.start()
    try:
        assert asked.wait(30)
        flag.set()
        t.join(60)
        assert not t.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], SearchStoppedError)
    finally:
        flag.set()
        t.join()


def test_postgresql_cancels_the_running_statement(pg_db: str) -> None:
    """``cancel_when`` on a real server: a statement that would sleep 30 s is cancelled
    once ``stop`` says so, and the connection serves the next one."""
    import psycopg

    con = psycopg.connect(pg_db, autocommit=True)
    try:
        later = time.monotonic() + 0.3
        with (
            pytest.raises(psycopg.errors.QueryCanceled),
            cancel_when(con, lambda: time.monotonic() > later),
        ):
            con.execute("SELECT pg_sleep(30)")
        assert con.execute("SELECT 1").fetchone() == (1,)
    finally:
        con.close()


def test_a_postgresql_search_stops_and_its_reader_goes_on(pg_db: str, tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    with jsonltape.open(root / "a.jsonl", create=True) as tape:
        tape.user("the migration of the users table")
    subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "sync", str(root), "--index", pg_db],
        check=True,
        capture_output=True,
        cwd=tmp_path,
        env={"JSONLTAPE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    reader = open_reader(parse(pg_db))
    try:
        with pytest.raises(SearchStoppedError):
            reader.search("migration", Filters(), 5, stop=lambda: True)
        hits = reader.search("migration", Filters(), 5, stop=lambda: False)
        assert [h.snippet for h in hits] == [
            h.snippet for h in reader.search("migration", Filters(), 5)
        ]
        assert len(hits) == 1
    finally:
        reader.close()


@pytest.mark.parametrize(
    ("typed", "query"),
    [
        ("", ""),
        ("m", "m*"),
        ("mi", "mi*"),
        ("migration", "migration*"),
        ("migration ", "migration "),
        ("migration e", "migration "),
        ("migration er", "migration "),
        ("migration err", "migration err*"),
        ("a\tbc", "a\t"),
        ("  ab", "  ab*"),
        ("prefix*", "prefix*"),
        ('"a phrase"', '"a phrase"'),
        ('"an open phr', '"an open phr'),
        ('"a phrase" e', '"a phrase" '),
        ('"a phrase" err', '"a phrase" err*'),
    ],
)
def test_a_query_as_typed_reads_its_last_word_as_a_prefix_once_it_has_three_characters(
    typed: str, query: str
) -> None:
    assert as_typed(typed) == query
