"""Helpers for the index tests (build sessions, dump an index, rebuild one, check the
full-text tables), and the tests that show these oracles can fail: a helper that sees no
difference would make every test built on it pass whatever the index holds."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonltape_daemon.engines.sqlite.keys import RUN_MIN
from jsonltape_daemon.engines.sqlite.schema import tkey_base
from jsonltape_daemon.engines.sqlite.search import trigram_expr
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.search.rank import tokens
from jsonltape_daemon.text.cjk import grams
from jsonltape_daemon.text.idents import idents

import jsonltape
from jsonltape import _framing
from jsonltape.errors import CorruptError, SurfaceError
from jsonltape.events import SURFACE_TYPES
from jsonltape.fold import SurfaceFold


def session(path: Path, texts: list[str], **kw: Any) -> str:
    """A closed session with one user/assistant turn per text; returns the session id."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with jsonltape.open(path, create=True, **kw) as tape:
        for text in texts:
            with tape.turn():
                tape.user(text)
                tape.assistant(f"answer to {text}")
        return tape.session_id


def raw_append(path: Path, items: list[tuple[str, dict[str, Any]]], **extra: Any) -> None:
    """Append framed events behind the writer's back (what a crashed writer leaves).

    ``extra`` envelope members (surface, sources) go on the last item."""
    seq = sum(1 for _ in jsonltape.read(path))
    out = b""
    for i, (type_, data) in enumerate(items):
        obj: dict[str, Any] = {"seq": seq, "type": type_, "time": 1_800_000_000_000 + seq}
        obj["data"] = data
        if type_ in SURFACE_TYPES:
            obj["surface"] = "append"
        if i == len(items) - 1:
            obj.update(extra)
        out += _framing.frame(msgspec.json.encode(obj))
        seq += 1
    with open(path, "ab") as f:
        f.write(out)


def user_data(text: str) -> dict[str, Any]:
    return {
        "message": {"id": text[:8], "role": "user", "parts": [{"type": "text", "content": text}]}
    }


def dump(con: sqlite3.Connection) -> dict[str, Any]:
    """Everything in an index that a rebuild must reproduce, keyed by path instead of sid."""
    path_of = dict(con.execute("SELECT sid, path FROM sessions"))
    files = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT path, status, error, dev, ino, size, mtime_ns, offset, last_seq, last_crc, "
            "sid IS NULL FROM files"
        )
    }
    sessions = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT path, id, header_crc, title, cwd, agent, created, updated, parent, "
            "parent_seq, events, messages, state, error, open_turn, closed FROM sessions"
        )
    }
    events = sorted(
        (path_of[r[0]], *r[1:])
        for r in con.execute("SELECT sid, seq, type, time, offset, size, crc FROM events")
    )
    rows = con.execute(
        "SELECT sid, seq, type, role, time, status, anchor, call_id, calls, tkey, truncated "
        "FROM messages"
    ).fetchall()
    with Texts(con) as texts:  # the text as a search reads it back (file or message_texts)
        got = texts.get(r[9] for r in rows)
    messages = sorted((path_of[r[0]], *r[1:9], got[r[9]], r[10]) for r in rows)
    calls = sorted(
        (path_of[r[0]], *r[1:]) for r in con.execute("SELECT sid, call_id, seq FROM tool_calls")
    )
    return {
        "files": files,
        "sessions": sessions,
        "events": events,
        "messages": messages,
        "tool_calls": calls,
        **usage_dump(con, path_of),
    }


def usage_dump(con: sqlite3.Connection, path_of: dict[int, str]) -> dict[str, Any]:
    """The usage tables (schema 12) keyed by path: which row of a key is counted, the slots."""
    return {
        "usage": sorted((path_of[r[0]], *r[1:]) for r in con.execute("SELECT * FROM usage")),
        "usage_slots": sorted(
            (path_of[r[0]], *r[1:]) for r in con.execute("SELECT * FROM usage_slots")
        ),
        "usage_sessions": sorted(
            (path_of[r[0]], *r[1:]) for r in con.execute("SELECT * FROM usage_sessions")
        ),
    }


def rebuild(root: Path) -> dict[str, Any]:
    store = SqliteStore(":memory:")
    try:
        Ingestor(store, root).rescan()
        return dump(store.con)
    finally:
        store.close()


def runs_ok(con: sqlite3.Connection) -> list[tuple[int, int]]:
    """The runs of taken keys (``keys.py``), checked: disjoint and apart, each long enough,
    every key in them taken (a message has it, or it is dead)."""
    runs = sorted(con.execute("SELECT lo, hi FROM key_runs"))
    taken = {
        r[0] for r in con.execute("SELECT tkey FROM messages UNION SELECT tkey FROM dead_keys")
    }
    for n, (lo, hi) in enumerate(runs):
        assert hi - lo + 1 >= RUN_MIN, (lo, hi)
        assert n == 0 or runs[n - 1][1] + 1 < lo, (runs[n - 1], lo)  # touching: one run
        assert all(k in taken for k in range(lo, hi + 1)), (lo, hi)
    return runs


def fts_ok(con: sqlite3.Connection) -> None:
    """Every full-text table agrees with the messages and their texts (raises otherwise):
    each message is found by its own words, CJK grams and code-like tokens under its key, the
    substring index covers exactly the messages up to its cursor, and the key runs hold only
    taken keys (:func:`runs_ok`, from schema 9)."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'key_runs'").fetchone():
        runs_ok(con)
    for table in ("messages_fts", "messages_cjk", "messages_trigram"):
        con.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")
    upto = int(con.execute("SELECT value FROM meta WHERE key = 'substrings'").fetchone()[0])
    live = con.execute("SELECT value FROM meta WHERE key = 'fts'").fetchone()[0] == "live"
    rows = con.execute("SELECT id, tkey, time FROM messages").fetchall()
    with Texts(con) as reader:
        texts = reader.get(k for _i, k, _t in rows)

    def found(table: str, match: str, key: int) -> bool:
        return (
            con.execute(
                f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND rowid = ?", (match, key)
            ).fetchone()
            is not None
        )

    for i, k, t in rows:
        assert k >= tkey_base(t), (i, k, t)  # every full-text rowid is a time-ordered key
        text = texts[k]
        assert text is not None, i
        # (ASCII words: the query folding of rank.tokens removes more marks than unicode61)
        if live and (words := [w for w in tokens(text) if w.isascii()]):
            assert found("messages_fts", " ".join(f'"{w}"' for w in words), k), (i, text)
        if (g := grams(text)) is not None:
            assert found("messages_cjk", " ".join(f'"{x}"' for x in g.split()), k), (i, text)
        if len(ids := idents(text)) >= 3:
            assert found("messages_trigram", trigram_expr(ids), k) == (i <= upto), (i, ids)
    if live:  # the word list is the word index's vocabulary, counts and all (words.py)
        con.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.ok_vocab "
            "USING fts5vocab(main, messages_fts, 'row')"
        )
        vocab = dict(con.execute("SELECT term, doc FROM temp.ok_vocab"))
        assert dict(con.execute("SELECT term, docs FROM words")) == vocab


def fold_statuses(path: Path) -> dict[int, str]:
    """What jsonltape.fold.SurfaceFold says about each message event of a file (the oracle)."""
    fold = SurfaceFold()
    status: dict[int, str] = {}
    try:
        for event in jsonltape.read(path):
            try:
                changes = fold.apply(event)
            except SurfaceError:
                if event.type in SURFACE_TYPES:
                    status[event.seq] = "rejected"
                continue
            if event.type in SURFACE_TYPES and not changes:
                status[event.seq] = "current"  # pragma: no cover - apply always reports it
            status.update(changes)
    except CorruptError:
        pass
    return status


# -- the oracles can fail ---------------------------------------------------------------------


def _indexed(tmp_path: Path, texts: list[str]) -> tuple[Path, SqliteStore]:
    root = tmp_path / "root"
    session(root / "a.jsonl", texts)
    store = SqliteStore(tmp_path / "i.db")
    engine = Ingestor(store, root)
    engine.rescan()
    engine.build_substrings()
    return root, store


def test_dump_equals_a_rebuild_and_sees_a_changed_message(tmp_path: Path) -> None:
    root, store = _indexed(tmp_path, ["hello index", "second turn"])
    try:
        assert dump(store.con) == rebuild(root)
        store.con.execute("UPDATE messages SET truncated = 1 WHERE seq = 2")
        assert dump(store.con) != rebuild(root)
    finally:
        store.close()


def test_fts_ok_passes_a_fresh_index_and_catches_tables_out_of_step(tmp_path: Path) -> None:
    _root, store = _indexed(tmp_path, ["東京の天気", "FileNotFoundError here"])
    try:
        fts_ok(store.con)
        # a message's key changes behind the full-text tables' back
        store.con.execute(
            "UPDATE messages SET tkey = tkey + 64000000 WHERE id = (SELECT min(id) FROM messages)"
        )
        with pytest.raises((sqlite3.DatabaseError, AssertionError)):
            fts_ok(store.con)
    finally:
        store.close()


def test_raw_append_continues_the_seqs_with_good_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session(path, ["one"])
    before = sum(1 for _ in jsonltape.read(path))
    raw_append(path, [("user/message", user_data("two")), ("user/message", user_data("three"))])
    events = list(jsonltape.read(path))
    assert [e.seq for e in events] == list(range(before + 2))
    assert [e.data["message"]["parts"][0]["content"] for e in events[-2:]] == ["two", "three"]
    assert jsonltape.verify(path).state == "clean"


def test_fold_statuses_marks_a_replaced_message_superseded(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session(path, [])
    with jsonltape.open(path) as tape:
        old = tape.user("first wording")
        new = tape.append(
            "user/message",
            user_data("second wording"),
            surface={"op": "replace", "start": old.seq, "end": old.seq},
            sources=[old.seq],
        )
    statuses = fold_statuses(path)
    assert statuses[new.seq] == "current"
    assert statuses[old.seq] != "current"


def test_runs_ok_passes_a_burst_and_catches_a_run_over_a_free_key(tmp_path: Path) -> None:
    root = tmp_path / "root"
    path = root / "a.jsonl"
    session(path, ["one"])
    raw_append(path, [("user/message", user_data(f"burst {n}")) for n in range(200)])
    store = SqliteStore(tmp_path / "i.db")
    try:
        Ingestor(store, root).rescan()
        [(lo, _hi)] = runs_ok(store.con)  # raw_append's times: 200 messages in one second
        store.con.execute("UPDATE key_runs SET hi = hi + 1 WHERE lo = ?", (lo,))
        with pytest.raises(AssertionError):
            runs_ok(store.con)
    finally:
        store.close()
