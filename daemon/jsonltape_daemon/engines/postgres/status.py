"""What ``index status`` reports about a team (PostgreSQL) index: per origin, the sessions,
events and messages it holds, when that origin last pushed (the lag), and for this machine's
origin the bytes of its files not pushed yet."""

from __future__ import annotations

import os
import time
from typing import Any

from jsonltape_daemon.engines.postgres import schema as pg_schema
from jsonltape_daemon.engines.postgres.conn import driver, failure, read_only
from jsonltape_daemon.target import PgTarget

__all__ = ["shared_status"]


def shared_status(url: str, *, name: str, origin: str | None) -> dict[str, Any]:
    """Status of a PostgreSQL team index: every origin the connection may see; ``origin``
    (this machine's) also gets its bytes not pushed yet."""
    t = PgTarget(url)
    con = read_only(t, check=False)
    try:
        version, rows, behind, server = _read(con, origin)
    except driver().Error as exc:
        raise failure(t, con, exc) from None
    finally:
        con.close()
    now = int(time.time() * 1000)
    return {
        "index": name,
        "engine": "postgresql",
        "server": server,
        "schema": version,
        "schema_supported": pg_schema.SCHEMA_VERSION,
        "origin": origin,
        "bytes_behind": behind,
        "origins": [
            {
                "origin": r.origin,
                "sessions": r.sessions,
                "events": r.events,
                "messages": r.messages,
                "files": r.files,
                "pushed": r.pushed,
                "lag_seconds": r.lag(now),
                "roots": list(r.roots),
            }
            for r in rows
        ],
    }


def _read(
    con: Any, origin: str | None
) -> tuple[int, list[pg_schema.OriginStatus], int | None, str | None]:
    """Schema version, the origins' rows, this origin's bytes not pushed, server version."""
    version = pg_schema.schema_version(con)
    rows = pg_schema.origin_status(con) if version else []
    behind = None
    if origin is not None and version:
        behind = 0
        for path, offset, size in con.execute(
            'SELECT path, "offset", size FROM jsonltape.files '
            "WHERE origin = %s AND status = 'indexed'",
            (origin,),
        ):
            try:
                now = os.stat(path).st_size
            except OSError:
                continue
            if size is None or now != size:
                behind += max(0, now - int(offset))
    server = con.execute("SHOW server_version").fetchone()
    return version, rows, behind, server[0] if server else None
