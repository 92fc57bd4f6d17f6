"""Filling the PostgreSQL team index for the search tests and the benchmark.

:func:`push` is the real write side: the ingest engine over ``PgStore``, as a daemon pushes.
:func:`load` copies the rows of an index the real :class:`Ingestor` already built in SQLite
(the loader the search tests used before ``PgStore`` existed; the benchmark uses it to fill
PostgreSQL from the same SQLite index it measures): sessions, files, events and messages under
one ``origin``, each message's text read back from its session file (``texts.Texts``, which goes
through ``extract.message_fields`` as ingest does) with the search columns the pusher computes
(``idents.idents``, ``cjk.grams``). Sessions get new ``sid`` values from PostgreSQL's identity
(as a pusher's would); messages go in with ``COPY``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.sqlite.schema import connect
from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.text.cjk import grams
from jsonltape_daemon.text.idents import idents

__all__ = ["load", "pg_text", "push"]

S = pg_schema.SCHEMA
_SESSION_COLS = (
    "id, path, header_crc, title, cwd, agent, created, updated, parent, parent_seq, events, "
    "messages, state, error, open_turn, closed"
)
_BATCH = 5000


def pg_text(text: str) -> str:
    """A text as PostgreSQL can keep it (``text`` holds no NUL: U+FFFD stands in)."""
    return text.replace("\x00", "\ufffd")


def push(root: Path, url: str, origin: str) -> None:
    """Sync the sessions under ``root`` into ``url`` as ``origin`` (``PgStore``)."""
    from jsonltape_daemon.engines.postgres.store import PgStore
    from jsonltape_daemon.ingest.ingestor import Ingestor

    store = PgStore(url, origin)
    try:
        Ingestor(store, root).rescan()
    finally:
        store.close()


def load(index: Path, url: str, origin: str) -> int:
    """Copy the SQLite index ``index`` into the database ``url`` as ``origin`` (the schema is
    created when missing); return how many messages were copied."""
    src = connect(index, readonly=True)
    try:
        with psycopg.connect(url) as con:
            pg_schema.migrate(con)
            with con.transaction():
                n = _copy(src, con, origin)
            con.execute(f"ANALYZE {S}.messages")
            con.commit()
            return n
    finally:
        src.close()


def _copy(src: sqlite3.Connection, con: psycopg.Connection[Any], origin: str) -> int:
    con.execute(f"INSERT INTO {S}.origins (origin) VALUES (%s) ON CONFLICT DO NOTHING", (origin,))
    sids: dict[int, int] = {}
    for row in src.execute(f"SELECT sid, {_SESSION_COLS} FROM sessions ORDER BY sid"):
        values = [*row[1:-1], bool(row[-1])]
        new = con.execute(
            f"INSERT INTO {S}.sessions (origin, {_SESSION_COLS}) "
            f"VALUES (%s, {', '.join(['%s'] * len(values))}) RETURNING sid",
            [origin, *values],
        ).fetchone()
        assert new is not None
        sids[int(row[0])] = int(new[0])
    with con.cursor().copy(
        f'COPY {S}.files (origin, path, sid, status, error, dev, ino, size, mtime_ns, "offset", '
        "last_seq, last_crc) FROM STDIN"
    ) as cp:
        for r in src.execute(
            "SELECT path, sid, status, error, dev, ino, size, mtime_ns, offset, last_seq, "
            "last_crc FROM files"
        ):
            cp.write_row([origin, r[0], sids.get(r[1]) if r[1] is not None else None, *r[2:]])
    with con.cursor().copy(
        f'COPY {S}.events (origin, sid, seq, type, time, "offset", size, crc) FROM STDIN'
    ) as cp:
        for r in src.execute("SELECT sid, seq, type, time, offset, size, crc FROM events"):
            cp.write_row([origin, sids[r[0]], *r[1:]])
    with con.cursor().copy(f"COPY {S}.tool_calls (origin, sid, call_id, seq) FROM STDIN") as cp:
        for r in src.execute("SELECT sid, call_id, seq FROM tool_calls"):
            cp.write_row([origin, sids[r[0]], *r[1:]])
    n = 0
    cur = src.execute(
        "SELECT tkey, sid, seq, type, role, time, status, anchor, call_id, calls, truncated "
        "FROM messages ORDER BY tkey"
    )
    with (
        Texts(src) as texts,
        con.cursor().copy(
            f"COPY {S}.messages (origin, sid, seq, type, role, time, status, anchor, call_id, "
            "calls, text, truncated, idents, cjk) FROM STDIN"
        ) as cp,
    ):
        while batch := cur.fetchmany(_BATCH):
            got = texts.get(r[0] for r in batch)
            for r in batch:
                text = pg_text(got[r[0]] or "")
                g = grams(text)
                calls = _calls(r[9])
                cp.write_row(
                    [
                        origin,
                        sids[r[1]],
                        *r[2:9],
                        calls,
                        text,
                        bool(r[10]),
                        idents(text) or None,
                        g.split(" ") if g else None,
                    ]
                )
            texts.forget(r[0] for r in batch)
            n += len(batch)
    return n


def _calls(raw: str | None) -> list[str] | None:
    import json

    if not raw:
        return None
    value = json.loads(raw)
    return [str(v) for v in value] if isinstance(value, list) else None
