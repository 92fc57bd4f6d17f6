"""The rows a :class:`~.pg_store.PgStore` holds back until its next flush, indexed for look-ups.

The PostgreSQL engine sends event, message and tool-call rows in batches (``COPY`` into
staging tables, then ``INSERT ... ON CONFLICT DO NOTHING``). Between two batches the surface
fold still asks about rows it has just added (``surface.py``); :class:`Pending` answers the
part of each look-up that concerns the held-back rows, and ``pg_store.py`` combines it with
the database's answer exactly as the database would answer after the flush:

* a held-back row whose key is already in the database is dropped by the flush (``ON CONFLICT
  DO NOTHING``), so for such a key the database's row wins;
* of two held-back rows with one key the first wins (the flush inserts in order);
* every held-back message adds its tool-call rows, even one the flush drops (as the staging
  table of tool calls receives them all).

Look-ups cost a dictionary access or a bisection, not a scan of the batch: one session can
hold back tens of thousands of rows while a revision is folded every few events.

Also here: the column lists of the tables the engine writes and the conversions between rows
and columns (texts as PostgreSQL can hold them, the search columns of a message).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from jsonltape_daemon.ingest.rows import EventRow, FileRow, MessageRow, Node, SessionRow
from jsonltape_daemon.text.cjk import grams
from jsonltape_daemon.text.idents import idents

__all__ = [
    "FILE_COLS",
    "MESSAGE_COLS",
    "SESSION_COLS",
    "SESSION_NAMES",
    "STAGE",
    "Lookups",
    "Pending",
    "clean",
    "file_row",
    "message_values",
    "row_values",
    "session_row",
]


def clean(s: str) -> str:
    """``s`` as PostgreSQL text can hold it: no NUL, no lone surrogate (both replaced)."""
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    if not s.isascii():
        try:
            s.encode()
        except UnicodeEncodeError:
            s = s.encode(errors="replace").decode()
    return s


FILE_COLS = 'path, status, sid, error, dev, ino, size, mtime_ns, "offset", last_seq, last_crc'
FILE_NAMES = [c.strip('"') for c in FILE_COLS.split(", ")]
SESSION_COLS = (
    "sid, id, path, header_crc, title, cwd, agent, created, updated, parent, parent_seq, "
    "events, messages, state, error, open_turn, closed"
)
SESSION_NAMES = SESSION_COLS.split(", ")
STAGE = {
    "events": 'sid bigint, seq bigint, type text, time bigint, "offset" bigint, size bigint, '
    "crc text",
    "messages": "sid bigint, seq bigint, type text, role text, time bigint, status text, "
    "anchor bigint, call_id text, calls text[], text text, truncated boolean, idents text, "
    "cjk text[]",
    "tool_calls": "sid bigint, call_id text, seq bigint",
}
MESSAGE_COLS = (
    "sid, seq, type, role, time, status, anchor, call_id, calls, text, truncated, idents, cjk"
)


def _opt(s: str | None) -> str | None:
    return None if s is None else clean(s)


def row_values(row: FileRow | SessionRow) -> tuple[Any, ...]:
    """A row's columns in declaration order (the ``*_COLS`` order), texts cleaned."""
    return tuple(clean(v) if isinstance(v, str) else v for v in msgspec.structs.astuple(row))


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def file_row(r: Sequence[Any]) -> FileRow:
    """A registry row from its columns (``FILE_COLS``)."""
    d = dict(zip(FILE_NAMES, r, strict=True))
    d["dev"], d["ino"] = _int(d["dev"]), _int(d["ino"])
    return FileRow(**d)


def session_row(r: Sequence[Any]) -> SessionRow:
    """A session row from its columns (``SESSION_COLS``)."""
    return SessionRow(**dict(zip(SESSION_NAMES, r, strict=True)))


def message_values(m: MessageRow) -> tuple[Any, ...]:
    """A message's columns (``MESSAGE_COLS``), with the search columns computed here."""
    text = clean(m.text)
    g = grams(text)
    return (
        *m[:7],
        _opt(m.call_id),
        [clean(c) for c in m.calls] if m.calls else None,
        text,
        bool(m.truncated),
        idents(text) or None,
        g.split() if g else None,
    )


class _Session:
    """The held-back rows of one session."""

    __slots__ = ("by_anchor", "declares", "events", "messages", "results")

    def __init__(self) -> None:
        self.events: dict[int, EventRow] = {}
        self.messages: dict[int, MessageRow] = {}
        self.by_anchor: list[tuple[int, int]] = []  #: (anchor, seq), sorted
        self.declares: dict[str, dict[int, None]] = {}  #: call id -> seqs (tool_calls rows)
        self.results: dict[str, list[int]] = {}  #: call id -> seqs of tool results


class Pending:
    """Event, message and tool-call rows not yet sent, per session (see the module docs)."""

    def __init__(self) -> None:
        self._by_sid: dict[int, _Session] = {}
        self._events: list[EventRow] = []
        self._messages: list[MessageRow] = []
        self._calls: list[tuple[int, str, int]] = []

    def __bool__(self) -> bool:
        return bool(self._events or self._messages)

    def clear(self) -> None:
        self._by_sid.clear()
        self._events, self._messages, self._calls = [], [], []

    def take(self) -> tuple[list[EventRow], list[MessageRow], list[tuple[int, str, int]]]:
        """The rows to send, in the order they were added (their latest statuses), and empty
        the buffer."""
        events = self._events
        messages = [self._by_sid[m.sid].messages[m.seq] for m in self._messages]
        calls = self._calls
        self.clear()
        return events, messages, calls

    def discard(self, sid: int) -> None:
        """Forget the rows of a session being deleted (the flush would insert them only for the
        delete to take them away again)."""
        if self._by_sid.pop(sid, None) is not None:
            self._events = [e for e in self._events if e[0] != sid]
            self._messages = [m for m in self._messages if m.sid != sid]
            self._calls = [c for c in self._calls if c[0] != sid]

    def _session(self, sid: int) -> _Session:
        s = self._by_sid.get(sid)
        if s is None:
            s = self._by_sid[sid] = _Session()
        return s

    def add_events(self, rows: Iterable[EventRow]) -> None:
        for r in rows:
            s = self._session(r[0])
            if r[1] not in s.events:  # the first of one key wins
                s.events[r[1]] = r
                self._events.append(r)

    def add_messages(self, rows: Iterable[MessageRow]) -> None:
        for m in rows:
            s = self._session(m.sid)
            for c in map(clean, m.calls):  # call ids as the database holds them
                if m.seq not in s.declares.setdefault(c, {}):
                    s.declares[c][m.seq] = None
                    self._calls.append((m.sid, c, m.seq))
            if m.seq in s.messages:
                continue
            s.messages[m.seq] = m
            self._messages.append(m)
            if m.anchor is not None:
                key = (m.anchor, m.seq)
                if not s.by_anchor or s.by_anchor[-1] < key:
                    s.by_anchor.append(key)  # appends come in surface order
                else:
                    bisect.insort(s.by_anchor, key)
            if m.type == "tool/result" and m.call_id is not None:
                s.results.setdefault(clean(m.call_id), []).append(m.seq)

    def set_status(self, sid: int, seqs: Iterable[int], status: str) -> None:
        s = self._by_sid.get(sid)
        if s is None:
            return
        for seq in seqs:
            m = s.messages.get(seq)
            if m is not None:
                s.messages[seq] = m._replace(status=status)

    # -- look-ups --------------------------------------------------------------------------

    def message(self, sid: int, seq: int) -> MessageRow | None:
        s = self._by_sid.get(sid)
        return None if s is None else s.messages.get(seq)

    def current_between(self, sid: int, lo: int, hi: int) -> list[MessageRow]:
        """Held-back current messages with anchors in ``[lo, hi]``."""
        s = self._by_sid.get(sid)
        if s is None:
            return []
        i = bisect.bisect_left(s.by_anchor, (lo, -1))
        out = []
        for anchor, seq in s.by_anchor[i:]:
            if anchor > hi:
                break
            m = s.messages[seq]
            if m.status == "current":
                out.append(m)
        return out

    def declaring(self, sid: int, call_id: str) -> list[int]:
        """Seqs of the held-back tool-call rows of ``call_id`` (as the database holds it)."""
        s = self._by_sid.get(sid)
        return [] if s is None else list(s.declares.get(call_id, ()))

    def answering(self, sid: int, call_id: str) -> list[MessageRow]:
        """Held-back current tool results for ``call_id`` (as the database holds it)."""
        s = self._by_sid.get(sid)
        if s is None:
            return []
        found = (s.messages[seq] for seq in s.results.get(call_id, ()))
        return [m for m in found if m.status == "current"]

    def event_types(self, sid: int, seqs: Iterable[int]) -> dict[int, str]:
        """``seq: type`` of the held-back events among ``seqs``."""
        s = self._by_sid.get(sid)
        if s is None:
            return {}
        return {seq: s.events[seq][2] for seq in seqs if seq in s.events}


_COMPACTIONS = ("compaction/summary", "compaction/prune", "handoff/anchor")

Query = Callable[[str, Sequence[Any]], list[Any]]


def _node(m: MessageRow) -> Node:
    assert m.anchor is not None, "current messages have an anchor"
    calls = tuple(clean(c) for c in m.calls)
    return Node(m.seq, m.anchor, m.type, None if m.call_id is None else clean(m.call_id), calls)


class Lookups:
    """The surface look-ups (``surface.py``) of one origin, over the database and the rows
    held back in ``pending``: what the database would answer after a flush, without one.
    ``query(sql, params)`` runs a statement and returns its rows; ``s`` is the quoted schema.
    Each look-up is one statement, as before the buffer; only when held-back rows bear on it
    does the statement also fetch the stored rows with the same keys (theirs win)."""

    def __init__(self, query: Query, s: str, origin: str, pending: Pending) -> None:
        self._q, self._s, self._origin, self._pending = query, s, origin, pending

    def current(self, sid: int, seq: int) -> tuple[int, str] | None:
        held = self._pending.message(sid, seq)
        rows = self._q(
            f"SELECT anchor, type, status FROM {self._s}.messages WHERE origin = %s AND sid = %s "
            "AND seq = %s" + (" AND status = 'current'" if held is None else ""),
            (self._origin, sid, seq),
        )
        if rows:
            anchor, type_, status = rows[0]
        elif held is not None:
            anchor, type_, status = held.anchor, held.type, held.status
        else:
            return None
        return (int(anchor), str(type_)) if status == "current" else None

    def current_between(self, sid: int, lo: int, hi: int) -> list[Node]:
        held = {m.seq: m for m in self._pending.current_between(sid, lo, hi)}
        where = "status = 'current' AND anchor BETWEEN %s AND %s"
        params: list[Any] = [self._origin, sid, lo, hi]
        if held:
            # the stored rows of the held-back keys too: they hide the held-back ones
            where = f"({where}) OR seq = ANY(%s)"
            params.append(list(held))
        nodes = []
        for seq, anchor, type_, call_id, calls, status in self._q(
            f"SELECT seq, anchor, type, call_id, calls, status FROM {self._s}.messages "
            f"WHERE origin = %s AND sid = %s AND ({where})",
            params,
        ):
            held.pop(int(seq), None)
            if status == "current" and anchor is not None and lo <= anchor <= hi:
                nodes.append(Node(int(seq), int(anchor), str(type_), call_id, tuple(calls or ())))
        nodes.extend(_node(m) for m in held.values())
        nodes.sort(key=lambda n: (n.anchor, n.seq))
        return nodes

    def declared(self, sid: int, call_id: str) -> int:
        s, c = self._s, clean(call_id)
        held = self._pending.declaring(sid, c)
        sql = (
            f"SELECT t.seq, m.status, true FROM {s}.tool_calls t LEFT JOIN {s}.messages m "
            "ON m.origin = t.origin AND m.sid = t.sid AND m.seq = t.seq "
            "WHERE t.origin = %s AND t.sid = %s AND t.call_id = %s"
        )
        params: list[Any] = [self._origin, sid, c]
        if held:
            sql += (
                f" UNION ALL SELECT seq, status, false FROM {s}.messages "
                "WHERE origin = %s AND sid = %s AND seq = ANY(%s)"
            )
            params += [self._origin, sid, held]
        declaring = set(held)
        stored: dict[int, str] = {}  # seq: status of the stored messages
        for seq, status, is_call in self._q(sql, params):
            if is_call:
                declaring.add(int(seq))
            if status is not None:
                stored[int(seq)] = str(status)
        n = 0
        for seq in declaring:
            status = stored.get(seq)
            if status is None:
                m = self._pending.message(sid, seq)
                status = None if m is None else m.status
            n += status == "current"
        return n

    def answers(self, sid: int, call_id: str) -> list[tuple[int, int]]:
        c = clean(call_id)
        held = {m.seq: m for m in self._pending.answering(sid, c)}
        where = "call_id = %s AND status = 'current' AND type = 'tool/result'"
        params: list[Any] = [self._origin, sid, c]
        if held:
            where = f"({where}) OR seq = ANY(%s)"
            params.append(list(held))
        out = []
        for seq, anchor, found in self._q(
            f"SELECT seq, anchor, call_id = %s AND status = 'current' AND type = 'tool/result' "
            f"FROM {self._s}.messages WHERE origin = %s AND sid = %s AND ({where})",
            [c, *params],
        ):
            held.pop(int(seq), None)
            if found:
                out.append((int(seq), int(anchor)))
        out.extend((n.seq, n.anchor) for n in map(_node, held.values()))
        return out

    def has_compaction(self, sid: int, wanted: list[int]) -> bool:
        """True if one of ``wanted`` is a compaction, prune or handoff event."""
        held = self._pending.event_types(sid, wanted)
        if not held:
            return bool(
                self._q(
                    f"SELECT 1 FROM {self._s}.events WHERE origin = %s AND sid = %s "
                    "AND type = ANY(%s) AND seq = ANY(%s) LIMIT 1",
                    (self._origin, sid, list(_COMPACTIONS), wanted),
                )
            )
        types = dict(held)
        for seq, type_ in self._q(
            f"SELECT seq, type FROM {self._s}.events WHERE origin = %s AND sid = %s "
            "AND seq = ANY(%s)",
            (self._origin, sid, wanted),
        ):
            types[int(seq)] = str(type_)  # a stored event hides a held-back one
        return any(t in _COMPACTIONS for t in types.values())
