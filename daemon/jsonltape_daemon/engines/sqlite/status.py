"""What ``index status`` and ``daemon status`` report about a local (SQLite) index: counts,
settings, the size of each table, the files it could not read, and how many bytes of its files
it has not read yet."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from jsonltape_daemon.engines.sqlite import schema

__all__ = ["local_status", "table_sizes"]


def table_sizes(con: sqlite3.Connection) -> dict[str, int] | None:
    """Bytes per table, its indexes and full-text shadow tables folded into it, largest
    first; None when this SQLite has no ``dbstat``."""
    try:
        rows = con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        master = con.execute("SELECT name, tbl_name, sql FROM sqlite_master").fetchall()
    except sqlite3.OperationalError:
        return None
    owners = {str(name): str(tbl) for name, tbl, _sql in master}
    virtual = [
        str(name)
        for name, _tbl, sql in master
        if sql and str(sql).upper().startswith("CREATE VIRTUAL TABLE")
    ]
    out: dict[str, int] = {}
    for name, size in rows:
        owner = owners.get(str(name), str(name))
        for v in virtual:  # FTS5 keeps a table's index in <name>_data, _idx, _docsize, ...
            if owner.startswith(v + "_"):
                owner = v
        out[owner] = out.get(owner, 0) + int(size)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def local_status(index: Path) -> dict[str, Any]:
    """Counts, settings and problems of a SQLite index, and how far it is behind its files."""
    con = schema.connect(index, readonly=True)
    try:

        def one(sql: str) -> Any:
            return con.execute(sql).fetchone()[0]

        files = dict(con.execute("SELECT status, count(*) FROM files GROUP BY status").fetchall())
        problems = con.execute(
            "SELECT path, status, error FROM files WHERE status IN ('error', 'foreign') "
            "UNION ALL SELECT path, state, error FROM sessions WHERE state = 'corrupt' "
            "UNION ALL SELECT path, 'unreadable', error FROM files "
            "WHERE status = 'indexed' AND error IS NOT NULL AND path NOT IN "
            "(SELECT path FROM sessions WHERE state = 'corrupt') "
            "ORDER BY path LIMIT 50"
        ).fetchall()
        behind = 0
        for path, offset, size in con.execute(
            "SELECT path, offset, size FROM files WHERE status = 'indexed'"
        ):
            try:
                now = os.stat(path).st_size
            except OSError:
                continue
            if size is None or now != size:
                behind += max(0, now - offset)
        upto = int(one("SELECT value FROM meta WHERE key = 'substrings'"))
        covered, messages = con.execute(
            "SELECT count(*) FILTER (WHERE id <= ?), count(*) FROM messages", (upto,)
        ).fetchone()
        out = {
            "index": str(index),
            "bytes": sum(
                os.path.getsize(p) for p in (index, Path(f"{index}-wal")) if os.path.exists(p)
            ),
            "tables": table_sizes(con),
            "schema": one("PRAGMA user_version"),
            "schema_supported": schema.SCHEMA_VERSION,
            "sqlite": sqlite3.sqlite_version,
            "features": schema.features(con),
            "fts": one("SELECT value FROM meta WHERE key = 'fts'"),
            "substrings": {"indexed": covered, "messages": messages},
            "roots": msgspec.json.decode(
                (con.execute("SELECT value FROM meta WHERE key = 'roots'").fetchone() or ["[]"])[0]
            ),
            "sessions": one("SELECT count(*) FROM sessions"),
            "events": one("SELECT count(*) FROM events"),
            "messages": messages,
            "files": files,
            "bytes_behind": behind,
            "problems": [{"path": p, "status": st, "error": e} for p, st, e in problems],
        }
    finally:
        con.close()
    return out
