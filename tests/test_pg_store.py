"""The PostgreSQL engine's write side (jsonltape_daemon/engines/postgres/store.py) on a real
server: a tree pushed through the shared ingest engine equals the same tree in the SQLite
index, changes to files are reconciled the same way, re-sent rows add nothing, one writer per
origin, and row-level security holds a writer role to its own origin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.postgres._rows import clean
from jsonltape_daemon.engines.postgres.store import IndexUnreachableError, PgStore
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.errors import EngineMissingError, IndexBusyError, IndexStateError
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.ingest.rows import FileRow, SessionRow

import jsonltape

from ._pg import PgServer
from .conftest import LONG
from .helpers import golden
from .strategies import Refused, SurfaceModel, operation
from .test_index_helpers import dump, raw_append, rebuild, session, user_data

S = pg_schema.SCHEMA
REPO = Path(__file__).resolve().parents[1]


def pg_dump(url: str, origin: str) -> dict[str, Any]:
    """Everything of one origin that a rebuild must reproduce, in ``test_index_helpers.dump``'s
    shape (keyed by path, the texts included), read as the superuser, in one snapshot: a
    daemon may push meanwhile (each query in a snapshot of its own saw a session's messages
    but not the session, added between the two)."""
    with psycopg.connect(url) as con:
        con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ

        def q(sql: str) -> list[tuple[Any, ...]]:
            return con.execute(sql, (origin,)).fetchall()

        path_of = dict(q(f"SELECT sid, path FROM {S}.sessions WHERE origin = %s"))
        # (numeric dev/ino and boolean columns compare equal to SQLite's integers)
        files = {
            r[0]: r[1:]
            for r in q(
                'SELECT path, status, error, dev, ino, size, mtime_ns, "offset", last_seq, '
                f"last_crc, sid IS NULL FROM {S}.files WHERE origin = %s"
            )
        }
        sessions = {
            r[0]: r[1:]
            for r in q(
                "SELECT path, id, header_crc, title, cwd, agent, created, updated, parent, "
                f"parent_seq, events, messages, state, error, open_turn, closed FROM {S}.sessions "
                "WHERE origin = %s"
            )
        }
        events = sorted(
            (path_of[r[0]], *r[1:])
            for r in q(
                f'SELECT sid, seq, type, time, "offset", size, crc FROM {S}.events '
                "WHERE origin = %s"
            )
        )
        messages = sorted(
            (
                path_of[r[0]],
                *r[1:8],
                msgspec.json.encode(r[8]).decode() if r[8] else None,
                r[9],
                int(r[10]),
            )
            for r in q(
                "SELECT sid, seq, type, role, time, status, anchor, call_id, calls, text, "
                f"truncated FROM {S}.messages WHERE origin = %s"
            )
        )
        calls = sorted(
            (path_of[r[0]], *r[1:])
            for r in q(f"SELECT sid, call_id, seq FROM {S}.tool_calls WHERE origin = %s")
        )
        usage = {  # the columns of the SQLite tables, in their order (booleans as integers)
            table: sorted(
                (path_of[r[0]], *(int(v) if isinstance(v, bool) else v for v in r[1:]))
                for r in q(f"SELECT {cols} FROM {S}.{table} WHERE origin = %s")
            )
            for table, cols in (
                ("usage", "sid, seq, rkey, time, model, input, output, cache_5m, cache_1h, "
                 "cache_read, reasoning, tier, fast, counted"),
                ("usage_slots", "sid, slot, model, tier, fast, responses, input, output, "
                 "cache_5m, cache_1h, cache_read, reasoning"),
                ("usage_sessions", "sid, name, alias, up"),
            )
        }  # fmt: skip
    return {
        "files": files,
        "sessions": sessions,
        "events": events,
        "messages": messages,
        "tool_calls": calls,
        **usage,
    }


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal dumps, failing on the first differing file or session (readable diffs)."""
    for part in ("files", "sessions"):
        for key in sorted(set(got[part]) | set(want[part])):
            assert got[part].get(key) == want[part].get(key), (part, key)
    for part in ("events", "messages", "tool_calls"):
        assert set(got[part]) ^ set(want[part]) == set(), part
        assert len(got[part]) == len(want[part]), part  # no duplicate
    assert got == want


def placement(url: str, origin: str) -> tuple[int, int, bool]:
    """(messages in the origin's own partition, in the shared one, search indexes built)."""
    with psycopg.connect(url) as con:
        row = con.execute(f"SELECT {S}.origin_partition(%s)", (origin,)).fetchone()
        assert row is not None
        part = f"{S}.{row[0]}"
        own = 0
        if con.execute("SELECT to_regclass(%s)", (part,)).fetchone() != (None,):
            found = con.execute(f'SELECT count(*) FROM {S}."{row[0]}"').fetchone()
            own = int(found[0]) if found else 0
        shared = con.execute(
            f"SELECT count(*) FROM {S}.messages_shared WHERE origin = %s", (origin,)
        ).fetchone()
        indexed = con.execute(f"SELECT {S}.origin_indexed(%s)", (origin,)).fetchone()
    return own, int(shared[0]) if shared else 0, bool(indexed and indexed[0])


def push(url: str, origin: str, root: Path) -> None:
    with PgStore(url, origin) as store:
        Mirror(store, str(root)).rescan()


def tree(root: Path) -> None:
    """Sessions with tool calls, revisions, a retract, CJK and code-like text, a torn tail."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    golden(root / "a" / "golden.jsonl", turns=7)
    session(root / "b" / "cjk.jsonl", ["東京都の天気", "FileNotFoundError in src/a.py", "naïve"])
    with jsonltape.open(root / "b" / "rev.jsonl", create=True, title="revised") as tape:
        first = tape.user("first wording")
        tape.append(
            "user/message",
            user_data("second wording"),
            surface={"op": "replace", "start": first.seq, "end": first.seq},
            sources=[first.seq],
        )
        other = tape.user("to be retracted")
        tape.append(
            "surface/retract", {}, surface={"op": "retract", "start": other.seq, "end": other.seq}
        )
    session(root / "c" / "torn.jsonl", ["complete"])
    with open(root / "c" / "torn.jsonl", "ab") as f:
        f.write(b'{"seq":99,"type":"user/mess')
    (root / "c" / "junk.jsonl").write_text("not a session\n")


def test_a_tree_pushed_into_postgresql_equals_the_same_tree_in_sqlite(
    tmp_path: Path, pg_db: str
) -> None:
    root = tmp_path / "root"
    tree(root)
    push(pg_db, "laptop", root)
    got, want = pg_dump(pg_db, "laptop"), rebuild(root)
    assert want["messages"] and want["tool_calls"]
    assert {m[5] for m in want["messages"]} >= {"current", "superseded", "retracted"}
    assert_same(got, want)
    with psycopg.connect(pg_db) as con:
        # the search columns were filled by the pusher: they find what the texts hold
        for where, needle in [("cjk @> '{東京,京都}'", "東京都"), ("idents LIKE %s", "NotFound")]:
            found, holding = con.execute(
                f"SELECT count(*) FILTER (WHERE {where}), count(*) FILTER (WHERE strpos(text, %s) "
                f"> 0) FROM {S}.messages",
                ([] if "%s" not in where else ["%NotFound%"]) + [needle],
            ).fetchone()
            assert found == holding == 2, where


@pytest.mark.parametrize("change", ["append", "rename", "truncate_repair", "replace", "delete"])
def test_file_changes_are_reconciled_as_in_sqlite(tmp_path: Path, pg_db: str, change: str) -> None:
    root = tmp_path / "root"
    tree(root)
    local = SqliteStore(tmp_path / "index.db")
    pg = PgStore(pg_db, "laptop")
    try:
        for store in (local, pg):
            Mirror(store, str(root)).rescan()
        g = root / "a" / "golden.jsonl"
        if change == "append":
            with jsonltape.open(g) as tape:
                tape.user("appended later")
        elif change == "rename":
            os.rename(g, root / "b" / "moved.jsonl")
        elif change == "truncate_repair":
            with open(root / "c" / "torn.jsonl", "ab") as f:
                f.write(b'ssage"}\n')  # the torn line is completed badly: then repaired
            jsonltape.repair(root / "c" / "torn.jsonl")
            data = g.read_bytes()
            g.write_bytes(data[: data.index(b"\n", len(data) // 2) + 1])
        elif change == "replace":
            tmp = root / "a" / ".swap"
            shutil.copyfile(root / "b" / "cjk.jsonl", tmp)
            os.replace(tmp, g)
        else:
            g.unlink()
        for store in (local, pg):
            Mirror(store, str(root)).rescan()
        assert_same(pg_dump(pg_db, "laptop"), dump(local.con))
        assert_same(dump(local.con), rebuild(root))
    finally:
        local.close()
        pg.close()


def test_rows_sent_again_add_nothing(tmp_path: Path, pg_db: str) -> None:
    root = tmp_path / "root"
    tree(root)
    push(pg_db, "laptop", root)
    before = pg_dump(pg_db, "laptop")
    with PgStore(pg_db, "laptop") as store:
        sid = store.session_at(str(root / "a" / "golden.jsonl"))
        assert sid is not None
        with psycopg.connect(pg_db) as con:
            events = con.execute(
                f'SELECT sid, seq, type, time, "offset", size, crc FROM {S}.events '
                "WHERE origin = 'laptop' AND sid = %s",
                (sid.sid,),
            ).fetchall()
        # what a pusher cut off before it learnt of its commit would send again
        store.begin()
        store.add_events(events)
        assert store.line_marks(sid.sid)  # flushed mid-transaction: no conflict either
        store.add_events(events)
        store.commit()
    assert pg_dump(pg_db, "laptop") == before


def test_two_origins_never_touch_each_other(tmp_path: Path, pg_db: str) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a)
    tree(b)
    shutil.copytree(a, b, dirs_exist_ok=True)  # the very same paths and sessions on both
    push(pg_db, "m1", a)
    push(pg_db, "m2", b)
    (a / "a" / "golden.jsonl").unlink()
    push(pg_db, "m1", a)
    assert_same(pg_dump(pg_db, "m1"), rebuild(a))
    assert_same(pg_dump(pg_db, "m2"), rebuild(b))
    with PgStore(pg_db, "m1") as store:
        status = {s.origin: s for s in store.status()}
        assert set(status) == {"m1", "m2"}
        assert status["m2"].sessions == store.session_count() + 1
        assert status["m1"] == store.counts()
        assert status["m1"].roots == (str(a),)
        lag = status["m1"].lag()
        assert lag is not None and 0 <= lag < 60
        store.drop_origin()
        assert store.session_count() == 0 and store.roots() == [str(a)]
    assert pg_dump(pg_db, "m1")["events"] == []
    assert_same(pg_dump(pg_db, "m2"), rebuild(b))


def test_one_writer_per_origin(tmp_path: Path, pg_db: str) -> None:
    first = PgStore(pg_db, "laptop")
    try:
        with pytest.raises(IndexBusyError, match="another writer is pushing origin 'laptop'"):
            PgStore(pg_db, "laptop")
        with pytest.raises(IndexBusyError):
            PgStore(pg_db, "laptop", lock_timeout=0.3)
        PgStore(pg_db, "desktop").close()  # another origin is another lock
    finally:
        first.close()
    PgStore(pg_db, "laptop").close()  # released on close


def test_a_lost_connection_is_one_error_without_the_password(
    tmp_path: Path, pg_server: PgServer
) -> None:
    role = pg_server.unique("pw")
    pg_server.create_role(role, "s3cr3t-pw")
    name = pg_server.unique("db")
    pg_server.create_database(name, owner=role)
    url = pg_server.url(name, role, "s3cr3t-pw")
    try:
        store = PgStore(url, "laptop")
        pg_server.terminate_backends(name)
        with pytest.raises(IndexUnreachableError) as got:
            store.files()
        assert "s3cr3t-pw" not in str(got.value) and "unreachable" in str(got.value)
        assert store.files() == {}  # the next call connects again
        store.begin()
        store.put_file(FileRow(path="/a.jsonl", status="pending"))
        pg_server.terminate_backends(name)
        with pytest.raises(IndexUnreachableError):
            store.commit()  # registry rows are sent with the batch, at the latest at commit
        # never half a transaction on a new connection: not until it is rolled back
        store.put_file(FileRow(path="/c.jsonl", status="pending"))
        with pytest.raises(IndexUnreachableError, match="lost in a transaction"):
            store.commit()
        with pytest.raises(IndexUnreachableError, match="lost in a transaction"):
            store.delete_file("/c.jsonl")
        store.rollback()
        assert store.files() == {}
        store.close()
        bad = url.replace("s3cr3t-pw", "wrong-pw")
        with pytest.raises(IndexUnreachableError) as got:
            PgStore(bad, "laptop")
        assert "wrong-pw" not in str(got.value)
        gone = pg_server.url(name, role, "s3cr3t-pw").replace(str(pg_server.root), "/nonexistent")
        with pytest.raises(IndexUnreachableError, match="unreachable"):
            PgStore(gone, "laptop")
    finally:
        pg_server.drop_database(name)


def test_without_psycopg_a_postgresql_store_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from jsonltape_daemon.engines.postgres.store import PgStore\n"
        "from jsonltape_daemon.errors import EngineMissingError\n"
        "try:\n    PgStore('postgresql:///x', 'o')\n"
        "except EngineMissingError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'jsonltape[postgres]'" in out.stdout
    assert EngineMissingError.code == "engine-missing"


# -- roles and row-level security ------------------------------------------------------------


def _team(pg_server: PgServer) -> tuple[str, str, str]:
    """A team database after ``index init``; a writer role granted origin m1; its URL."""
    name = pg_server.unique("team")
    admin = pg_server.create_database(name)
    pg_schema.init(admin)
    writer = pg_server.unique("w")
    pg_server.create_role(writer, "w-pw")
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(pg_schema.grant_writer_sql(writer, "m1").encode())
    return name, admin, pg_server.url(name, writer, "w-pw")


def test_a_writer_role_pushes_its_own_origin_and_no_other(
    tmp_path: Path, pg_server: PgServer
) -> None:
    name, admin, writer = _team(pg_server)
    try:
        a, b = tmp_path / "a", tmp_path / "b"
        tree(a)
        tree(b)
        push(admin, "m2", b)  # another machine's rows, pushed by the owner
        push(writer, "m1", a)
        (a / "b" / "rev.jsonl").unlink()
        push(writer, "m1", a)  # reconciles (deletes) its own rows under the policies
        assert_same(pg_dump(admin, "m1"), rebuild(a))
        assert_same(pg_dump(admin, "m2"), rebuild(b))
        # the writer's first push had a partition of its own made and indexed for it
        own, shared, indexed = placement(admin, "m1")
        assert own == len(pg_dump(admin, "m1")["messages"]) > 0 and shared == 0 and indexed
        with pytest.raises(IndexStateError, match="may not push origin 'm2'"):
            PgStore(writer, "m2")
        with PgStore(writer, "m1") as store:
            assert [s.origin for s in store.status()] == ["m1"]  # sees only its own
        with psycopg.connect(writer, autocommit=True) as con:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(
                    f"INSERT INTO {S}.files (origin, path, status) VALUES ('m2', '/x', 'pending')"
                )
            for call in ("start_bulk('m2')", "index_origin('m2')"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not push"):
                    con.execute(f"SELECT {S}.{call}")
            n = con.execute(f"DELETE FROM {S}.sessions WHERE origin = 'm2'").rowcount
            assert n == 0
            assert con.execute(
                f"SELECT count(*) FROM {S}.events WHERE origin = 'm2'"
            ).fetchone() == (0,)
        assert_same(pg_dump(admin, "m2"), rebuild(b))
        reader = pg_server.unique("r")
        pg_server.create_role(reader, "r-pw")
        with psycopg.connect(admin, autocommit=True) as con:
            con.execute(pg_schema.grant_reader_sql(reader).encode())
        with psycopg.connect(pg_server.url(name, reader, "r-pw")) as con:
            seen = {st.origin: st.events for st in pg_schema.origin_status(con)}
        assert seen == {o: len(pg_dump(admin, o)["events"]) for o in ("m1", "m2")}
    finally:
        pg_server.drop_database(name)


def test_a_role_that_cannot_create_the_schema_is_told_to_run_index_init(
    pg_server: PgServer,
) -> None:
    name = pg_server.unique("bare")
    pg_server.create_database(name)
    role = pg_server.unique("nobody")
    pg_server.create_role(role, "n-pw")
    try:
        with pytest.raises(IndexStateError, match="run `jsonltape index init"):
            PgStore(pg_server.url(name, role, "n-pw"), "m1")
    finally:
        pg_server.drop_database(name)


def test_text_postgresql_cannot_hold_is_stored_replaced_not_refused(
    tmp_path: Path, pg_db: str
) -> None:
    root = tmp_path / "root"
    session(root / "nul.jsonl", ["a \x00 byte", "fine"], title="t\x00itle")
    push(pg_db, "laptop", root)
    with psycopg.connect(pg_db) as con:
        texts = {r[0] for r in con.execute(f"SELECT text FROM {S}.messages").fetchall()}
        title = con.execute(f"SELECT title FROM {S}.sessions").fetchone()
    assert "a \ufffd byte" in texts and "fine" in texts
    assert title == ("t\ufffditle",)


@settings(
    max_examples=40 if LONG else 12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    # no shrinking: each step of it would push again into a real server (minutes)
    phases=(Phase.explicit, Phase.generate),
)
@given(data=st.data())
def test_surface_look_ups_over_rows_not_yet_sent_agree_with_sqlite(
    tmp_path: Path, pg_db: str, data: st.DataObject
) -> None:
    # Revisions, compactions, prunes, retractions and refused operations (written past the
    # writer) look up rows added moments before in the same transaction: the PostgreSQL store
    # holds those back (no flush per look-up) and must answer as SQLite does. A sync halfway
    # mixes stored rows with held-back ones.
    n = next(_examples)
    root = tmp_path / f"t{n}"
    path = root / "s.jsonl"
    root.mkdir(mode=0o700)
    with jsonltape.open(path, create=True):
        pass
    model = SurfaceModel()
    local = SqliteStore(tmp_path / f"index{n}.db")
    pg = PgStore(pg_db, f"o{n}")
    try:
        for _sync in range(2):
            for _ in range(data.draw(st.integers(1, 25), label="ops")):
                seq = sum(1 for _ in jsonltape.read(path))
                op = data.draw(operation(model, seq), label="op")
                trial = SurfaceModel(list(model.nodes), dict(model.status), dict(model.types))
                trial.compaction = set(model.compaction)
                try:
                    for k, item in enumerate(op.items):
                        trial.apply(seq + k, item)
                    model = trial
                except Refused:
                    pass
                last = op.items[-1]
                extra = {k: last[k] for k in ("surface", "sources") if k in last}
                raw_append(path, [(i["type"], i["data"]) for i in op.items], **extra)
            for store in (local, pg):
                Mirror(store, str(root)).rescan()
            got, want = pg_dump(pg_db, f"o{n}"), dump(local.con)
            # (a NUL in a text is stored replaced: see the test of text PostgreSQL cannot hold)
            want["messages"] = sorted((*m[:9], clean(m[9]), *m[10:]) for m in want["messages"])
            assert_same(got, want)
        assert {m[5] for m in want["messages"]} <= {
            "current",
            "superseded",
            "compacted",
            "retracted",
            "rejected",
        }
    finally:
        local.close()
        pg.close()


_examples = iter(range(10**9))


def test_session_and_registry_rows_not_yet_sent_read_back_as_written(pg_db: str) -> None:
    # put_session and put_file are held until the batch is sent: every read in between must
    # see them, with the texts as PostgreSQL stores them, and a dropped session unlinks them.
    with PgStore(pg_db, "laptop") as store:
        store.begin()
        sess = SessionRow(id="s1", path="/r/a.jsonl", header_crc="c1", created=1, updated=1)
        sid = store.add_session(sess)
        sess.title, sess.events = "t\x00itle", 5
        store.put_session(sess)
        sess.events = 6  # changed after the put: not what was written
        reg = FileRow(path="/r/a.jsonl", status="indexed", sid=sid, offset=10, last_seq=4)
        store.put_file(reg)
        assert not store.is_empty()
        for got in (store.session(sid), store.session_at("/r/a.jsonl")):
            assert got is not None and (got.title, got.events) == ("t\ufffditle", 5)
        assert [s.sid for s in store.sessions_with("s1", "c1")] == [sid]
        assert store.file("/r/a.jsonl") == reg
        assert store.files(under="/r") == {"/r/a.jsonl": reg}
        assert store.files(under="/other") == {}
        store.drop_session(sid)
        assert store.session(sid) is None and store.sessions_with("s1", "c1") == []
        found = store.file("/r/a.jsonl")
        assert found is not None and found.sid is None
        store.commit()
        assert store.file("/r/a.jsonl") == FileRow(
            path="/r/a.jsonl", status="indexed", offset=10, last_seq=4
        )


def test_a_first_push_fills_a_partition_of_its_own_indexed_once_at_the_end(
    tmp_path: Path, pg_db: str
) -> None:
    tree(tmp_path / "t")
    push(pg_db, "m1", tmp_path / "t")
    own, shared, indexed = placement(pg_db, "m1")
    assert own == len(pg_dump(pg_db, "m1")["messages"]) > 0 and shared == 0 and indexed
    with psycopg.connect(pg_db) as con:
        con.execute("SET enable_seqscan = off")
        part = con.execute(f"SELECT {S}.origin_partition('m1')").fetchone()
        assert part is not None
        options = con.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", (f'{S}."{part[0]}"',)
        ).fetchone()
        assert options == (None,)  # autovacuum, off during the load, is on again
        for where, index in (
            (f"words @@ to_tsquery('{S}.words', 'wording')", "words"),
            ("idents LIKE '%NotFound%'", "idents"),
            ("cjk @> '{東京}'", "cjk"),
        ):
            plan = con.execute(f"EXPLAIN SELECT seq FROM {S}.messages WHERE {where}").fetchall()
            assert f"{part[0]}_{index}" in " ".join(r[0] for r in plan)
        plan = con.execute(f"EXPLAIN SELECT seq FROM {S}.messages WHERE origin = 'm1'").fetchall()
        assert "messages_shared" not in " ".join(r[0] for r in plan)  # one origin: pruned


def test_an_interrupted_first_push_is_searchable_and_indexed_by_the_next_sync(
    tmp_path: Path, pg_db: str
) -> None:
    root = tmp_path / "t"
    tree(root)
    with PgStore(pg_db, "m1") as store:
        store.start_bulk()  # as a first push does; the process then dies before the indexes
        Mirror(store, str(root)).rescan()
        assert not store.fts_live
    own, _, indexed = placement(pg_db, "m1")
    assert own > 0 and not indexed
    with psycopg.connect(pg_db) as con:  # committed rows are found meanwhile (by a scan)
        found = con.execute(
            f"SELECT count(*) FROM {S}.messages WHERE words @@ to_tsquery('{S}.words', 'wording')"
        ).fetchone()
    assert found is not None and found[0] > 0
    push(pg_db, "m1", root)
    assert placement(pg_db, "m1") == (own, 0, True)
    assert_same(pg_dump(pg_db, "m1"), rebuild(root))


def test_a_rebuilt_origin_reloads_its_partition_without_indexes_then_builds_them(
    tmp_path: Path, pg_db: str
) -> None:
    root = tmp_path / "t"
    tree(root)
    push(pg_db, "m1", root)
    before = placement(pg_db, "m1")
    with PgStore(pg_db, "m1") as store:
        store.drop_origin()
        store.start_bulk()
        assert not store.fts_live  # the emptied partition's indexes were dropped
        store.abort_bulk()
    push(pg_db, "m1", root)
    assert placement(pg_db, "m1") == before
    assert_same(pg_dump(pg_db, "m1"), rebuild(root))
