"""The index reader's viewer functions (``list_sessions``, ``facets``, ``statuses``) on both
engines, checked against what the files say: every filter, every sort in both orders, pages
that cover every session once, counts, statuses equal to the fold's; on PostgreSQL, a role
granted one origin sees nothing of another's, through the reader and through ``serve``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonltape_daemon.search.language import SESSION_SORTS, SessionQuery
from jsonltape_daemon.search.reader import Reader, open_reader
from jsonltape_daemon.target import parse

import jsonltape
from tests._pg import PgServer, dbname_of
from tests.web.server import Serve

pytestmark = pytest.mark.timeout(240)

AGENTS = ["claude-code", "codex", "pi", None]
CWDS = ["/work/a", "/work/b", None]


def _tree(root: Path, prefix: str, n: int = 13) -> list[Path]:
    """``n`` sessions of mixed agents, projects, sizes and titles, one forked from another,
    one revised and retracted (statuses)."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        path = root / f"{prefix}{i:02d}.jsonl"
        title = None if i % 5 == 4 else f"{prefix} title {chr(ord('a') + (i * 7) % 13)} 100%_x"
        with (
            jsonltape.open(
                path, create=True, title=title, agent=AGENTS[i % 4], cwd=CWDS[i % 3]
            ) as tape,
            tape.turn(),
        ):
            for k in range(i % 4 + 1):
                tape.user(f"question {k} of {prefix}{i}")
                tape.assistant(f"answer {k}")
        out.append(path)
    wrong = jsonltape.read(out[3])
    last = [e for e in wrong if e.type == "assistant/message"][-1].seq
    revised = jsonltape.revise(out[3], last, "a better answer")
    jsonltape.retract(out[3], revised[-1].seq)
    jsonltape.fork(out[2], at=3, out=root / f"{prefix}-fork.jsonl", title=f"{prefix} fork")
    return [*out, root / f"{prefix}-fork.jsonl"]


def _cli(*args: str, home: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JSONLTAPE_", "PG"))}
    env["JSONLTAPE_HOME"] = str(home)
    r = subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=home,
    )
    assert r.returncode == 0, r.stderr


def _rows(reader: Reader) -> list[Any]:
    return [i for i in reader.sessions()]


def _sort_key(info: Any, column: str) -> Any:
    return (info.title or "") if column == "title" else getattr(info, column)


def check_reader(reader: Reader, paths: list[Path], origin: str | None = None) -> None:
    everything = _rows(reader)
    if origin is not None:
        everything = [i for i in everything if getattr(i, "origin", None) == origin]
    want = {str(p) for p in paths}
    assert {i.path for i in everything} >= want
    base = SessionQuery(origin=origin, limit=1000)

    # every sort, both orders: the order of the column, each session once
    for column in SESSION_SORTS:
        for desc in (True, False):
            q = SessionQuery(origin=origin, sort=column, descending=desc, limit=1000)  # type: ignore[arg-type]
            page = reader.list_sessions(q)
            keys = [_sort_key(s.info, column) for s in page.sessions]
            assert keys == sorted(keys, reverse=desc), (column, desc)
            assert page.total == len(everything) == len(page.sessions)

    # pages of 4 cover the list exactly once, in order
    whole = reader.list_sessions(base).sessions
    seen = []
    for offset in range(0, len(whole) + 4, 4):
        part = reader.list_sessions(SessionQuery(origin=origin, offset=offset, limit=4))
        assert part.total == len(whole)
        seen += [s.info.path for s in part.sessions]
    assert seen == [s.info.path for s in whole]

    # each filter is exactly the sessions whose field has the value
    for field, values in (("agent", AGENTS), ("cwd", CWDS)):
        for v in values:
            if v is None:
                continue
            got = reader.list_sessions(SessionQuery(origin=origin, limit=1000, **{field: v}))
            expect = {i.path for i in everything if getattr(i, field) == v}
            assert {s.info.path for s in got.sessions} == expect and got.total == len(expect)
    parent = jsonltape.header(paths[2]).id
    forks = reader.list_sessions(SessionQuery(origin=origin, parent=parent))
    assert [s.info.path for s in forks.sessions] == [str(paths[-1])]

    # text: a case-insensitive substring of title or id; LIKE's own characters are literal
    for text in ("TITLE A", "100%_x", "%", "_", paths[1].stem[:3], jsonltape.header(paths[4]).id):
        got = reader.list_sessions(SessionQuery(origin=origin, text=text, limit=1000))
        expect = {
            i.path
            for i in everything
            if text.lower() in (i.title or "").lower() or text.lower() in i.session.lower()
        }
        assert {s.info.path for s in got.sessions} == expect, text

    # facets: every value with its number of sessions (of every origin the role may read)
    facets = reader.facets()
    for field in ("agent", "cwd"):
        counts: dict[str, int] = {}
        for i in _rows(reader):
            if getattr(i, field) is not None:
                counts[getattr(i, field)] = counts.get(getattr(i, field), 0) + 1
        assert dict(facets[field]) == counts, field

    # statuses: the fold's, for every message of a revised and retracted session
    listed = {s.info.path: s for s in whole}
    target = listed[str(paths[3])]
    versions = jsonltape.messages(paths[3], all_versions=True)["messages"]
    expect_status = {m["seq"]: m.get("status", "current") for m in versions}
    got_status = reader.statuses(target.key, 0, 10_000)
    assert got_status == expect_status
    assert "retracted" in got_status.values() and "superseded" in got_status.values()
    lo, hi = 3, 7
    assert reader.statuses(target.key, lo, hi) == {
        s: v for s, v in expect_status.items() if lo <= s < hi
    }


def test_the_viewer_functions_on_sqlite(tmp_path: Path) -> None:
    paths = _tree(tmp_path / "sessions", "s")
    index = tmp_path / "index.db"
    _cli("sync", str(tmp_path / "sessions"), "--index", str(index), home=tmp_path)
    reader = open_reader(parse(index))
    try:
        check_reader(reader, paths)
        assert reader.list_sessions(SessionQuery(origin="anyone")).total == 0
        with pytest.raises(ValueError):
            reader.list_sessions(SessionQuery(sort="path; DROP TABLE sessions"))  # type: ignore[arg-type]
    finally:
        reader.close()


@pytest.fixture
def team(pg_server: PgServer, pg_db: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A team index with two origins' sessions, a role granted only the first (a machine's
    writer role: row-level security shows it its own rows) and a reader role."""
    prefix = pg_server.unique("web")
    _cli("index", "init", "--index", pg_db, "--prefix", prefix, home=tmp_path)
    a = _tree(tmp_path / "a", "a")
    b = _tree(tmp_path / "b", "b", n=5)
    _cli("sync", str(tmp_path / "a"), "--index", pg_db, "--origin", "alice@a", home=tmp_path)
    _cli("sync", str(tmp_path / "b"), "--index", pg_db, "--origin", "bob@b", home=tmp_path)
    mine, reader = pg_server.unique("alice"), pg_server.unique("reader")
    pg_server.create_role(mine, "pw-a")
    pg_server.create_role(reader, "pw-r")
    _cli(
        "index",
        "grant",
        "--index",
        pg_db,
        "--prefix",
        prefix,
        "--writer",
        mine,
        "--origin",
        "alice@a",
        home=tmp_path,
    )
    _cli("index", "grant", "--index", pg_db, "--prefix", prefix, "--reader", reader, home=tmp_path)
    db = dbname_of(pg_db)
    yield {
        "a": a,
        "b": b,
        "super": pg_db,
        "mine": pg_server.url(db, mine, "pw-a"),
        "reader": pg_server.url(db, reader, "pw-r"),
        "home": tmp_path,
    }


def test_the_viewer_functions_on_postgresql(team: dict[str, Any]) -> None:
    reader = open_reader(parse(team["reader"]))
    try:
        check_reader(reader, team["a"], origin="alice@a")
        check_reader(reader, team["b"], origin="bob@b")
        facets = dict(reader.facets()["origin"])
        assert facets == {"alice@a": len(team["a"]), "bob@b": len(team["b"])}
        assert reader.list_sessions(SessionQuery()).total == len(team["a"]) + len(team["b"])
    finally:
        reader.close()


def test_a_role_granted_one_origin_sees_nothing_of_another(team: dict[str, Any]) -> None:
    reader = open_reader(parse(team["mine"]))
    try:
        page = reader.list_sessions(SessionQuery(limit=1000))
        assert {s.info.origin for s in page.sessions} == {"alice@a"}
        assert page.total == len(team["a"])
        assert reader.list_sessions(SessionQuery(origin="bob@b")).total == 0
        assert [v for v, _ in reader.facets()["origin"]] == ["alice@a"]
        theirs = jsonltape.header(team["b"][0]).id
        assert reader.resolve(theirs) == []
    finally:
        reader.close()


def test_serve_over_a_team_index_shows_a_role_only_what_it_may_read(team: dict[str, Any]) -> None:
    """The viewer connects with the person's own role: the sessions page, search, facets
    and a transcript address of another origin's session show nothing of it."""
    theirs = jsonltape.header(team["b"][0]).id
    ours = jsonltape.header(team["a"][0]).id
    for who, sees_b in (("mine", False), ("reader", True)):
        s = Serve("--index", team[who], home=team["home"] / who)
        try:
            with httpx.Client(base_url=s.url) as c:
                listing = c.get("/", params={"q": ""}).text
                assert (theirs in listing) is sees_b and ours in listing
                assert ("bob@b" in listing) is sees_b
                found = c.get("/search", params={"q": "question"}).text
                assert ("b00" in found or "bob@b" in found) is sees_b
                page = c.get(f"/s/{theirs}")
                assert (page.status_code == 200) is sees_b, page.status_code
                assert "pw-" not in listing + found + page.text  # the password never shows
        finally:
            code, out, err = s.stop()
            assert code == 0, err
            assert "pw-a" not in out + err and "pw-r" not in out + err
