"""Cursor composers as :class:`~._source.Unit` s: each conversation of Cursor's global
``state.vscdb`` rendered as JSONL records the Cursor mapper reads.

Cursor is closed source: what follows is what independent readers of the file observe (spec
Appendix B.20 names them), not a published schema. ``state.vscdb`` is VS Code's storage
database with Cursor's own table ``cursorDiskKV(key TEXT UNIQUE ON CONFLICT REPLACE, value
BLOB)``; its values are JSON, stored as TEXT or as a BLOB of UTF-8 (some builds store a JSON
string holding the JSON: decoded twice). Only two key families of that table are read:

* ``composerData:<composerId>``: one conversation, rewritten in place as it goes on:
  ``createdAt`` / ``lastUpdatedAt`` (epoch ms), ``name`` (its title, often empty),
  ``fullConversationHeadersOnly`` ``[{bubbleId, type}]`` (the order of its messages, and which
  are alive), ``subagentInfo`` ``{parentComposerId, toolCallId, subagentTypeName}`` on a
  sub-agent's composer; older composers keep the messages inline in ``conversation[]``.
* ``bubbleId:<composerId>:<bubbleId>``: one message (``type`` 1 user, 2 assistant).

``ItemTable``, which also holds Cursor's authentication tokens, is never read.

A composer renders as one ``{"type": "composer", composerId, createdAt?, subagentInfo?}``
record (what never changes: the title, headers and times are rewritten in place), then one
``{"type": "bubble", "id": <bubbleId>, "bubble": <the value>}`` per message in the order of its
headers (or of ``conversation[]``). A bubble the headers do not name is a dead branch (an edited
or regenerated turn) and is not rendered; a header whose bubble row is missing (or NULL) renders
nothing. A composer row that is NULL, or names no message, is no session (Cursor keeps one for
every chat opened and never written to).
Records from the last user bubble on are held back until the source is settled (Cursor
rewrites a bubble while its reply streams).

A composer is unchanged while its own row (its length and ``lastUpdatedAt``, which Cursor
moves on at every write) and the number of its bubble rows are: that costs one decode of the
composer row and a count the keys' index answers, never a read of the bubbles.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import msgspec

from ._source import MAX_DEPTH, Unit
from ._sqlite import (
    Listing,
    RowError,
    SessionStore,
    StoreError,
    Text,
    checked,
    is_sqlite,
    json_value,
    utf8,
)

__all__ = ["COMPOSER", "COUNT", "CursorStoreError", "Database", "composer_ids", "units"]

_encode = msgspec.json.Encoder().encode
COMPOSER = "composerData:"
_BUBBLE = "bubbleId:"
#: A bubble's value sits two levels down in its record (``{"bubble": {...}}``).
VALUE_DEPTH = MAX_DEPTH - 2
_ROW = (("key", ("text",)), ("value", ("text", "blob", "null")))
#: How many bubbles a composer has: answered from the keys' index alone, no value read (a
#: length of the values would read every bubble of a database of hundreds of MB at each import).
COUNT = "SELECT count(*) FROM cursorDiskKV WHERE key >= ? AND key < ?"
COLUMNS = {"cursorDiskKV": _ROW}
_USER = 1
#: What a composer id may be (Cursor's are uuids): it becomes a session id and a file name.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class CursorStoreError(StoreError):
    """Not a Cursor ``state.vscdb``, or one that cannot be read."""

    code = "bad-source"


def _after(prefix: str) -> str:
    """The first key past every key starting with ``prefix`` (its last character + 1): a
    range the table's unique index answers without a scan."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def value_of(key: str, data: bytes) -> Any:
    """A ``cursorDiskKV`` value: JSON (a JSON string holding JSON decoded once more), an
    object; else :class:`~._sqlite.RowError` naming the key and column."""
    where = f"cursorDiskKV row {key!r}: value"
    value = json_value(where, data, VALUE_DEPTH, (dict, str))
    if isinstance(value, str):  # stored as a JSON string of the JSON
        value = json_value(where, value.encode("utf-8", "surrogatepass"), VALUE_DEPTH)
    return value


class Database(SessionStore):
    """One ``state.vscdb`` (see :class:`~._sqlite.SqliteSource`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, COLUMNS, agent="Cursor", error=CursorStoreError)

    def _rows(self, con: sqlite3.Connection, prefix: str) -> dict[str, bytes]:
        """The rows whose key starts with ``prefix``, checked (a NULL value: no row)."""
        out: dict[str, bytes] = {}
        for row in con.execute(
            "SELECT key, value FROM cursorDiskKV WHERE key >= ? AND key < ?",
            (prefix, _after(prefix)),
        ):
            key, value = checked(_ROW, "cursorDiskKV", row, raw=("value",))
            if value is not None:
                out[key] = bytes(value)
        return out

    def _sessions(self, con: sqlite3.Connection) -> list[Listing | str]:
        self.check(con)
        out: list[Listing | str] = []
        for n, row in enumerate(con.execute(
            "SELECT key, value FROM cursorDiskKV WHERE key >= ? AND key < ? ORDER BY key",
            (COMPOSER, _after(COMPOSER)),
        ), 1):  # fmt: skip
            try:
                key, raw = checked(_ROW, "cursorDiskKV", row, raw=("value",),
                                   fallback=f"number {n} of composerData")  # fmt: skip
                cid = key[len(COMPOSER) :]
                if _ID.fullmatch(cid) is None:  # Cursor's are uuids; the id names files
                    raise RowError(f"cursorDiskKV row {key!r}: key names no composer id")
                if raw is None:
                    continue  # an emptied row: no conversation
                data = value_of(key, bytes(raw))
            except RowError as exc:
                out.append(str(exc))
                continue
            if not (data.get("fullConversationHeadersOnly") or data.get("conversation")):
                continue  # a chat opened and never written to (Cursor keeps many)
            record: dict[str, Any] = {"type": "composer", "composerId": cid}
            created = data.get("createdAt")
            if type(created) is int:
                record["createdAt"] = created
            sub = data.get("subagentInfo")
            if isinstance(sub, dict) and sub:
                record["subagentInfo"] = sub
            prefix = f"{_BUBBLE}{cid}:"
            (count,) = con.execute(COUNT, (prefix, _after(prefix))).fetchone()
            size = len(raw) + count
            changed = data.get("lastUpdatedAt")
            changed = changed if type(changed) is int else created if type(created) is int else 0
            name = data.get("name")
            title = name if isinstance(name, str) and name.strip() else None
            out.append(Listing(cid, record, title, size, changed))
        return out

    def _records(self, con: sqlite3.Connection, session: Listing) -> tuple[list[bytes], int | None]:
        key = f"{COMPOSER}{session.sid}"
        row = con.execute("SELECT key, value FROM cursorDiskKV WHERE key = ?", (key,)).fetchone()
        value = None if row is None else checked(_ROW, "cursorDiskKV", row, raw=("value",))[1]
        if value is None:
            raise RowError(f"cursorDiskKV row {key!r} is gone (Cursor deleted the conversation)")
        data = value_of(key, bytes(value))
        bubbles = self._rows(con, f"{_BUBBLE}{session.sid}:")
        lines = [_encode(session.record)]
        held: int | None = None
        for bid, value in _ordered(session.sid, data, bubbles):
            if value.get("type") == _USER:
                held = len(lines)
            lines.append(_encode({"type": "bubble", "id": bid, "bubble": value}))
        return lines, held


def _ordered(cid: str, data: dict[str, Any], bubbles: dict[str, bytes]) -> list[tuple[str, Any]]:
    """The composer's live messages in order: its headers' bubbles (decoded), else the
    inline ``conversation[]`` of an older composer."""
    headers = data.get("fullConversationHeadersOnly")
    out: list[tuple[str, Any]] = []
    if isinstance(headers, list):
        for h in headers:
            bid = h.get("bubbleId") if isinstance(h, dict) else None
            key = f"{_BUBBLE}{cid}:{bid}"
            if isinstance(bid, str) and key in bubbles:
                out.append((bid, value_of(key, bubbles[key])))
        return out
    inline = data.get("conversation")
    for i, b in enumerate(inline if isinstance(inline, list) else ()):
        if isinstance(b, dict):
            bid = b.get("bubbleId")
            out.append((bid if isinstance(bid, str) and bid else f"conversation-{i}", b))
    return out


def units(path: Path) -> list[Unit] | None:
    """The composers of a ``state.vscdb`` (None for anything else: an agent transcript is
    known by its name, unopened, as the read-only index asks at every sync)."""
    if path.name.endswith(".jsonl") or not (path.is_file() and is_sqlite(path)):
        return None
    return Database(path).units()


def composer_ids(path: Path) -> frozenset[str]:
    """The ids of the composers in a ``state.vscdb`` (keys only; empty when it cannot be
    read)."""

    def ids(con: sqlite3.Connection) -> frozenset[str]:
        db.check(con)
        got = con.execute(
            "SELECT key FROM cursorDiskKV WHERE key >= ? AND key < ?",
            (COMPOSER, _after(COMPOSER)),
        )
        keys = (utf8(k) if isinstance(k, Text) else None for (k,) in got)
        return frozenset(k[len(COMPOSER) :] for k in keys if k)

    db = Database(path)
    try:
        return db.read(ids) if is_sqlite(path) else frozenset()
    except StoreError:
        return frozenset()
