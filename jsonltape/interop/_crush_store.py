"""Crush sessions as :class:`~._source.Unit` s: each session of a project's ``.crush/crush.db``
rendered as JSONL records the Crush mapper reads.

The tables, as Crush's migrations create them (charmbracelet/crush
``internal/db/migrations/*.sql`` at commit 37f36e93824e5c4f892e4a817f7f628e2682fe14; read to
learn the format, nothing copied): ``sessions`` (``id`` text, ``parent_session_id`` text or
NULL, ``title`` text, ``created_at`` integer, ...) and ``messages`` (``id``, ``session_id``,
``role`` text, ``parts`` text: a JSON array of ``{"type", "data"}``, ``model`` and ``provider``
text or NULL, ``created_at``, ``updated_at`` integers, ``finished_at`` integer or NULL,
``is_summary_message`` integer, added in 2025-08). Times are Unix **seconds** (``strftime('%s',
'now')``), whatever the schema's comments say.

A session renders as one ``{"type": "session", id, parent_session_id?, created_at}`` record
(what never changes: the title, the token counters and the cost are rewritten in place), then
one record per message in the order Crush reads them back (``created_at``, then insertion):
``{"type": "message", id, role, parts, model, provider, created_at, finished_at?,
is_summary_message}``, ``parts`` decoded. ``updated_at``, which every streamed chunk rewrites,
is left out so the rendering only grows. Records from the first assistant message without a
``finish`` part on (a reply still streaming) are held back until the source is settled.

The sessions Crush makes to generate a title (``title-<session id>``, titled "Generate a title")
are not imported: what they produce is the session's title. A sub-agent's session (its id
``<message id>$$<tool call id>``) is a session of its own, its ``parent_session_id`` kept.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from ._source import MAX_DEPTH, Unit
from ._sqlite import (
    INT,
    OPTIONAL,
    OPTIONAL_INT,
    TEXT,
    Listing,
    RowError,
    SessionStore,
    StoreError,
    checked,
    is_sqlite,
    json_value,
)

__all__ = ["CrushStoreError", "units"]

_encode = msgspec.json.Encoder().encode
#: A part's data sits three levels down in its record (``{"parts": [{"data": {...}}]}``).
PARTS_DEPTH = MAX_DEPTH - 1
_SESSION = (("id", TEXT), ("parent_session_id", OPTIONAL), ("title", OPTIONAL),
            ("created_at", INT))  # fmt: skip
_MESSAGE = (("rowid", INT), ("id", TEXT), ("role", TEXT), ("parts", TEXT), ("model", OPTIONAL),
            ("created_at", INT), ("finished_at", OPTIONAL_INT))  # fmt: skip
#: Columns later migrations added (older databases lack them): read where they exist.
_LATER = (("provider", OPTIONAL), ("is_summary_message", OPTIONAL_INT))
COLUMNS = {"sessions": _SESSION, "messages": _MESSAGE[1:]}


class CrushStoreError(StoreError):
    """Not a Crush database, or one that cannot be read."""

    code = "bad-source"


class Database(SessionStore):
    """One ``crush.db`` (see :class:`~._sqlite.SqliteSource`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path, COLUMNS, agent="Crush", needed={"messages": ["session_id", "updated_at"]},
            error=CrushStoreError,
        )  # fmt: skip

    def _sessions(self, con: sqlite3.Connection) -> list[Listing | str]:
        self.check(con)
        sizes: dict[object, tuple[int, int]] = {}
        for sid, n, chars, newest in con.execute(
            "SELECT session_id, count(*), sum(length(parts)), max(CASE WHEN"
            " typeof(updated_at) = 'integer' THEN updated_at END) FROM messages"
            " GROUP BY session_id"
        ):
            sizes[sid] = (n + (chars if isinstance(chars, int) else 0),
                          newest if isinstance(newest, int) else 0)  # fmt: skip
        out: list[Listing | str] = []
        names = ", ".join(c for c, _k in _SESSION)
        for n, row in enumerate(con.execute(f"SELECT {names} FROM sessions"
                                            " ORDER BY created_at, rowid"), 1):  # fmt: skip
            try:
                sid, parent, title, created = checked(
                    _SESSION, "sessions", row, fallback=f"number {n} (its id is unusable)"
                )
            except RowError as exc:
                out.append(str(exc))
                continue
            if sid.startswith("title-") and parent and title == "Generate a title":
                continue  # a title generation: it made the parent's title
            size, newest = sizes.get(row[0], (0, 0))
            record: dict[str, Any] = {"type": "session", "id": sid}
            if parent:
                record["parent_session_id"] = parent
            record["created_at"] = created
            out.append(Listing(sid, record, title, size, max(newest, created) * 1000))
        return out

    def _records(self, con: sqlite3.Connection, session: Listing) -> tuple[list[bytes], int | None]:
        later = [(c, k) for c, k in _LATER if self.has(con, "messages", c)]
        columns = (*_MESSAGE, *later)
        names = ", ".join(c for c, _k in columns)
        lines = [_encode(session.record)]
        held: int | None = None
        for row in con.execute(
            f"SELECT {names} FROM messages WHERE session_id = ? ORDER BY created_at, rowid",
            (session.sid,),
        ):
            got = checked(columns, "messages", row, raw=("parts",))
            values = dict(zip([c for c, _k in columns], got, strict=True))
            values.pop("rowid")
            where = f"messages row {values['id']!r}: parts"
            parts = json_value(where, values["parts"], PARTS_DEPTH, (list,))
            rec: dict[str, Any] = {"type": "message", "id": values["id"], "role": values["role"],
                                   "parts": parts}  # fmt: skip
            for key in ("model", "provider"):
                if values.get(key):
                    rec[key] = values[key]
            rec["created_at"] = values["created_at"]
            if values["finished_at"] is not None:
                rec["finished_at"] = values["finished_at"]
            if values.get("is_summary_message"):
                rec["is_summary_message"] = True
            if held is None and rec["role"] == "assistant" and not _finished(parts):
                held = len(lines)
            lines.append(_encode(rec))
        return lines, held


def _finished(parts: list[Any]) -> bool:
    return any(isinstance(p, dict) and p.get("type") == "finish" for p in parts)


def units(path: Path) -> list[Unit] | None:
    """The sessions of a ``crush.db`` (None for anything else: a directory is walked)."""
    return Database(path).units() if path.is_file() and is_sqlite(path) else None
