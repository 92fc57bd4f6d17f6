"""The usage of sessions indexed before the index counted usage (SQLite schema 12).

Every session ingested since has its usage rows and tree links (``ingestor.py``). One indexed
before has neither: the first sync after the upgrade (or the daemon's first pass) reads its
header and its ``assistant/message`` and ``branch/event`` lines back from its file, at the
offsets the index holds, each line's crc checked. A session whose lines cannot be read back
so (a foreign session rendered from another agent's file, a file changed since) is ingested
again by that same sync instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from jsonltape._index_api import crc_of, frame_ok
from jsonltape.usage import Links, Response, response_of, session_links

__all__ = ["BackfillStore", "backfill", "shift_sql"]

_O_READ = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NONBLOCK", 0)
)
_PER_TRANSACTION = 200


def shift_sql(shifts: Sequence[tuple[int, int]], slot: str) -> str:
    """The offset in force at ``slot`` (an SQL expression of both engines), from ``(first
    slot, offset ms)`` shifts (``jsonltape.usage``'s ``Zone.shifts``): integers, so the text
    is safe to inline. The report queries of both engines bucket days with it."""
    last = int(shifts[-1][1])
    if len(shifts) == 1:
        return str(last)
    whens = "".join(
        f" WHEN {slot} < {int(s)} THEN {int(o)}"
        for (s, _), (_, o) in zip(shifts[1:], shifts, strict=False)
    )
    return f"(CASE{whens} ELSE {last} END)"


class BackfillStore(Protocol):
    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def sessions_without_usage(self) -> list[tuple[int, str, str, str | None]]: ...
    def response_marks(self, sid: int) -> list[tuple[int, str, int, int, str]]: ...
    def add_usage(self, sid: int, rows: Sequence[tuple[int, Response]]) -> None: ...
    def add_usage_session(self, sid: int, links: Links) -> None: ...
    def reread(self, sid: int) -> None: ...


class _Line(msgspec.Struct):
    type: str
    time: int
    data: dict[str, Any]
    key: str | None = None


_decode = msgspec.json.Decoder(_Line).decode


def _read(
    path: str, session_id: str, parent: str | None, marks: list[tuple[int, str, int, int, str]]
) -> tuple[Links, list[tuple[int, Response]]] | None:
    """The links and rows of one session read back from its file, or None if it cannot be."""
    try:
        fd = os.open(path, _O_READ)
    except OSError:
        return None
    try:
        links: Links | None = None
        rows: list[tuple[int, Response]] = []
        for seq, type_, offset, size, crc in marks:
            raw = os.pread(fd, size, offset)
            if not frame_ok(raw) or crc_of(raw) != crc:
                return None
            line = _decode(raw)
            if line.type != type_:
                return None
            if seq == 0:
                meta = line.data.get("meta")
                links = session_links(session_id, parent, meta if isinstance(meta, dict) else None)
                continue
            r = response_of(
                session_id, parent is not None, type_, seq, line.time, crc, line.data, line.key
            )
            if r is not None:
                rows.append((seq, r))
        return (links, rows) if links is not None else None
    except (OSError, msgspec.DecodeError, ValueError, TypeError, RecursionError):
        return None
    finally:
        os.close(fd)


def backfill(store: BackfillStore) -> int:
    """Give every session indexed before usage was counted its usage rows (or mark it to be
    ingested again); how many sessions were read back."""
    todo = store.sessions_without_usage()
    done = 0
    for i in range(0, len(todo), _PER_TRANSACTION):
        store.begin()
        try:
            for sid, session_id, path, parent in todo[i : i + _PER_TRANSACTION]:
                found = _read(path, session_id, parent, store.response_marks(sid))
                if found is None:
                    store.reread(sid)
                    continue
                links, rows = found
                store.add_usage_session(sid, links)
                if rows:
                    store.add_usage(sid, rows)
                done += 1
            store.commit()
        except BaseException:
            store.rollback()
            raise
    return done
