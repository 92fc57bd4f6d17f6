"""Goose sessions as :class:`~._source.Unit` s: each session of ``sessions.db`` rendered as JSONL
records the Goose mapper reads.

The tables, as Goose creates and migrates them (aaif-goose/goose
``crates/goose/src/session/session_manager.rs`` at commit
017176d06077b119ade382d3bb710e56c8c04e90, ``SessionStorage::create_schema`` and
``apply_migration``): ``sessions`` (``id`` text, ``name`` (``description`` before schema 4),
``session_type``, ``working_dir`` text, ``created_at``/``updated_at`` timestamps (text, as
SQLite's ``CURRENT_TIMESTAMP`` or sqlx writes them), ``parent_session_id`` (schema 15) text or
NULL, ...), ``messages`` (``id`` integer, ``message_id`` text (schema 7) or NULL, ``session_id``,
``role`` text, ``content_json`` text: a JSON array of ``MessageContent``, ``created_timestamp``
integer (seconds; some rows milliseconds), ``metadata_json`` text or NULL) and ``usage_ledger``
(schema 15: ``id``, ``session_id``, ``created_timestamp``, ``model``, token counts, ``cost``,
``cost_source``, ``is_compaction``: one row per model call, linked to no message).

A session renders as one ``{"type": "session", id, session_type, working_dir, created_at,
parent_session_id?, schedule_id?}`` record (the name, the token counters and the model are
rewritten in place: not in it), then its messages and ledger rows in the order they happened
(``created_timestamp`` in seconds, a message before a ledger row of the same second, then
insertion): ``{"type": "message", id, message_id, role, created_timestamp, content,
metadata}`` and ``{"type": "usage", id, created_timestamp, model, input_tokens,
output_tokens, total_tokens, cache_read_tokens, cache_write_tokens, cost, cost_source,
is_compaction}``. A message's ``metadata`` leaves out ``agentVisible``, which Goose rewrites in
old rows when it compacts, so the rendering only grows. The records from the session's last
prompt on (the turn still running: a reply or its usage may still come, and Goose dates a
message by when it was built) are held back until the source is settled.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
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

__all__ = ["NOTES", "GooseStoreError", "session_ids", "units", "utc_ms"]

_encode = msgspec.json.Encoder().encode
#: A content item sits two levels down in its record (``{"content": [{...}]}``).
CONTENT_DEPTH = MAX_DEPTH - 2
_ANY_TIME = ("text", "integer", "real", "null")
_SESSION = (("id", TEXT), ("session_type", OPTIONAL), ("working_dir", OPTIONAL),
            ("created_at", _ANY_TIME), ("updated_at", _ANY_TIME))  # fmt: skip
_NAMES = (("name", OPTIONAL), ("description", OPTIONAL))
_SESSION_LATER = (("parent_session_id", OPTIONAL), ("schedule_id", OPTIONAL))
_MESSAGE = (("id", INT), ("role", TEXT), ("content_json", TEXT), ("created_timestamp", INT),
            ("metadata_json", OPTIONAL))  # fmt: skip
_MESSAGE_LATER = (("message_id", OPTIONAL),)
_NUMBER = ("integer", "real", "null")
_USAGE = (("id", INT), ("created_timestamp", INT), ("model", OPTIONAL),
          ("input_tokens", OPTIONAL_INT), ("output_tokens", OPTIONAL_INT),
          ("total_tokens", OPTIONAL_INT), ("cache_read_tokens", OPTIONAL_INT),
          ("cache_write_tokens", OPTIONAL_INT), ("cost", _NUMBER), ("cost_source", OPTIONAL),
          ("is_compaction", OPTIONAL_INT))  # fmt: skip
COLUMNS = {"sessions": _SESSION, "messages": _MESSAGE}
#: How each of Goose's compaction notes begins (context_mgmt: CONVERSATION_, TOOL_LOOP_ and
#: MANUAL_COMPACT_CONTINUATION_TEXT, older and newer wordings).
NOTES = ("The previous message contains a summary", "Your context was compacted")
#: Goose's own normalisation: a ``created_timestamp`` above this is in milliseconds.
_MS = 10_000_000_000


class GooseStoreError(StoreError):
    """Not a Goose database, or one that cannot be read."""

    code = "bad-source"


class Database(SessionStore):
    """One ``sessions.db`` (see :class:`~._sqlite.SqliteSource`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            path, COLUMNS, agent="Goose", needed={"messages": ["session_id"]},
            error=GooseStoreError,
        )  # fmt: skip

    def _sessions(self, con: sqlite3.Connection) -> list[Listing | str]:
        self.check(con)
        sizes: dict[object, int] = {}
        for sid, n, chars in con.execute(
            "SELECT session_id, count(*), sum(length(content_json)) FROM messages"
            " GROUP BY session_id"
        ):
            sizes[sid] = n + (chars if isinstance(chars, int) else 0)
        if self.has(con, "usage_ledger", "session_id"):
            for sid, n in con.execute(
                "SELECT session_id, count(*) FROM usage_ledger GROUP BY session_id"
            ):
                sizes[sid] = sizes.get(sid, 0) + n
        columns = (*_SESSION, *[c for c in (*_NAMES, *_SESSION_LATER)
                                if self.has(con, "sessions", c[0])])  # fmt: skip
        names = ", ".join(c for c, _k in columns)
        out: list[Listing | str] = []
        for n, row in enumerate(con.execute(f"SELECT {names} FROM sessions"
                                            " ORDER BY created_at, id"), 1):  # fmt: skip
            try:
                got = checked(columns, "sessions", row, fallback=f"number {n} (its id is unusable)")
            except RowError as exc:
                out.append(str(exc))
                continue
            v = dict(zip([c for c, _k in columns], got, strict=True))
            record: dict[str, Any] = {"type": "session", "id": v["id"]}
            for key in ("session_type", "working_dir", "created_at", "parent_session_id",
                        "schedule_id"):  # fmt: skip
                if v.get(key) not in (None, ""):
                    record[key] = v[key]
            title = v.get("name") or v.get("description") or None
            changed = utc_ms(v["updated_at"]) or utc_ms(v["created_at"]) or 0
            out.append(Listing(v["id"], record, title, sizes.get(row[0], 0), changed))
        return out

    def _records(self, con: sqlite3.Connection, session: Listing) -> tuple[list[bytes], int | None]:
        rows: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
        columns = (*_MESSAGE, *[c for c in _MESSAGE_LATER if self.has(con, "messages", c[0])])
        names = ", ".join(c for c, _k in columns)
        for row in con.execute(
            f"SELECT {names} FROM messages WHERE session_id = ? ORDER BY id", (session.sid,)
        ):
            got = checked(columns, "messages", row, raw=("content_json", "metadata_json"))
            v = dict(zip([c for c, _k in columns], got, strict=True))
            rid = v["id"]
            content = json_value(f"messages row {rid}: content_json", v["content_json"],
                                 CONTENT_DEPTH, (list,))  # fmt: skip
            rec: dict[str, Any] = {"type": "message", "id": rid}
            if v.get("message_id"):
                rec["message_id"] = v["message_id"]
            rec.update(role=v["role"], created_timestamp=v["created_timestamp"], content=content)
            if v["metadata_json"] is not None:
                meta = json_value(f"messages row {rid}: metadata_json", v["metadata_json"],
                                  CONTENT_DEPTH)  # fmt: skip
                rec["metadata"] = {k: x for k, x in meta.items() if k != "agentVisible"}
            rows.append(((_seconds(v["created_timestamp"]), 0, rid), rec))
        if self.has(con, "usage_ledger", "session_id"):
            names = ", ".join(c for c, _k in _USAGE)
            for row in con.execute(
                f"SELECT {names} FROM usage_ledger WHERE session_id = ? ORDER BY id",
                (session.sid,),
            ):
                v = dict(zip([c for c, _k in _USAGE], checked(_USAGE, "usage_ledger", row),
                             strict=True))  # fmt: skip
                rec = {"type": "usage", **{k: x for k, x in v.items() if x is not None}}
                rows.append(((_seconds(v["created_timestamp"]), 1, v["id"]), rec))
        rows.sort(key=lambda r: r[0])
        records = [rec for _key, rec in rows]
        lines = [_encode(session.record)]
        held: int | None = 1 if rows else None  # no prompt yet: all of it may still change
        for i, rec in enumerate(records):
            if _prompt(rec):
                held = len(lines)
            if _summary(records, i):
                lines.append(_encode({"type": "compaction", "summary": rec["id"]}))
            lines.append(_encode(rec))
        return lines, held


def _seconds(ts: int) -> int:
    return ts // 1000 if abs(ts) > _MS else ts


def _summary(records: list[dict[str, Any]], i: int) -> bool:
    """Whether message ``i`` is the summary of a compaction: hidden from the user, and the next
    message is the assistant note Goose adds after it (both are written in one transaction)."""
    rec = records[i]
    meta = rec.get("metadata")
    if rec.get("type") != "message" or not (isinstance(meta, dict) and meta.get("userVisible")
                                            is False):  # fmt: skip
        return False
    nxt = next((r for r in records[i + 1 :] if r.get("type") == "message"), None)
    if nxt is None or nxt.get("role") != "assistant":
        return False
    text = next((c.get("text") for c in nxt["content"] if isinstance(c, dict)
                 and c.get("type") == "text"), None)  # fmt: skip
    return isinstance(text, str) and text.startswith(NOTES)


def _prompt(rec: dict[str, Any]) -> bool:
    """Whether a record is a prompt the user typed (a user message with text, shown)."""
    if rec.get("type") != "message" or rec.get("role") != "user":
        return False
    meta = rec.get("metadata")
    if isinstance(meta, dict) and meta.get("userVisible") is False:
        return False
    return any(isinstance(c, dict) and c.get("type") == "text" for c in rec["content"])


def utc_ms(value: Any) -> int | None:
    """Epoch ms of a Goose timestamp: text as SQLite's ``CURRENT_TIMESTAMP`` (UTC) or sqlx's
    ``chrono`` write it, or a number of seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value * 1000) if abs(value) < 1e11 else int(value)
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace(" ", "T", 1)
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    head, dot, rest = text.partition(".")
    if dot:  # Python 3.10 takes at most 6 fraction digits
        digits = "".join(c for c in rest if c.isdigit())
        text = f"{head}.{(digits + '000000')[:6]}{rest[len(digits) :]}"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def units(path: Path) -> list[Unit] | None:
    """The sessions of a ``sessions.db`` (None for anything else: a directory is walked, a
    legacy ``.jsonl`` read as it is)."""
    return Database(path).units() if path.is_file() and is_sqlite(path) else None


def session_ids(path: Path) -> set[str]:
    """The ids of the sessions in a ``sessions.db`` (empty when it cannot be read)."""
    try:
        return {s.sid for s in Database(path).sessions() if not isinstance(s, str)}
    except StoreError:
        return set()
