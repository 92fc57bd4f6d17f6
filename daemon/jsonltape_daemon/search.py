"""Queries over the index: full-text search, the session list and transcript windows.

Search syntax: words are ANDed, ``"quoted phrases"`` match in order, ``prefix*`` matches word
beginnings; everything else is literal text (there is no FTS syntax to get wrong). Each term is
served by the cheapest index that can answer it:

1. words: the ``unicode61`` table (diacritics folded), ranked by bm25 of the query's
   informative words among its newest ``RANKED`` matches, newer first among equals; a query of
   common words only lists its matches newest first (``rank.py`` says which words count);
2. substrings: the ``trigram`` table (no positions: all of a term's trigrams find candidates,
   the text decides), for identifiers inside identifiers and any text of three or more
   characters, newest first; it adds the hits the word pass did not find. Terms made of CJK
   characters only (any length, one character too) are served by the CJK bigram table;
3. scan: ``LIKE``, newest first, for other terms of one or two characters (``->``, ``#``).

Every full-text rowid is the message's time-ordered key (``messages.tkey``), so each pass
reads its newest matches first and stops when it has what it needs; ``since`` and a session or
path filter become a rowid range.

Terms of the other kinds join a pass as filters, so every hit contains every term. While the
substring index is still being built (after a first sync), substring terms are found in the
messages it does not cover yet by a scan, so results stay complete; :func:`notes` says so.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Literal

import msgspec

from .cjk import is_cjk, is_cjk_term, match_expr
from .rank import RANKED, common_limit, doc_freq
from .schema import tkey_base

__all__ = [
    "MARK_CLOSE",
    "MARK_OPEN",
    "Filters",
    "Hit",
    "SessionInfo",
    "Term",
    "Turn",
    "notes",
    "parse_query",
    "resolve_session",
    "search",
    "sessions",
    "window",
]

#: Highlight markers inside snippets; the CLI turns them into brackets or terminal styles.
MARK_OPEN = "\x02"
MARK_CLOSE = "\x03"
_SNIPPET_TOKENS = 16
_SCAN_CONTEXT = 48
_QUERY = re.compile(r'"([^"]*)"?(\*?)|(\S+)')


# Term, Filters and Window are plain classes, not dataclasses: building the three dataclasses
# took ~3 ms of every `jsonltape search` start-up (benchmarks/README.md, issue 11). They keep
# what dataclasses gave them that is used: keyword or positional construction, ==, repr, and
# for Term immutability and a hash.


class Term:
    """One search term: a word (``prefix`` for ``word*``) or a quoted phrase."""

    __slots__ = ("phrase", "prefix", "text")

    text: str
    prefix: bool
    phrase: bool

    def __init__(self, text: str, prefix: bool = False, phrase: bool = False) -> None:
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "phrase", phrase)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a Term")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a Term")

    def _key(self) -> tuple[str, bool, bool]:
        return (self.text, self.prefix, self.phrase)

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if type(other) is Term else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Term(text={self.text!r}, prefix={self.prefix!r}, phrase={self.phrase!r})"

    @property
    def wordy(self) -> bool:
        """The unicode61 tokenizer gives this term as words (no CJK, some letter or digit)."""
        return any(c.isalnum() for c in self.text) and not any(map(is_cjk, self.text))

    @property
    def cjk(self) -> bool:
        """Only CJK characters: the bigram table serves it, whatever its length."""
        return is_cjk_term(self.text)

    @property
    def trigram_ok(self) -> bool:
        return len(self.text) >= 3


def parse_query(query: str) -> list[Term]:
    """Split a query into terms: phrases in double quotes (a missing closing quote is fine)."""
    terms: list[Term] = []
    for m in _QUERY.finditer(query):
        phrase, star, word = m.group(1), m.group(2), m.group(3)
        if word is not None:
            text = word.rstrip("*")
            prefix = text != word
            text = text.strip('"')
            if text:
                terms.append(Term(text, prefix=prefix))
        elif phrase is not None and phrase.strip():
            terms.append(Term(phrase.strip(), prefix=bool(star), phrase=True))
    return terms


class Filters:
    """Which messages a search considers; the defaults keep every current message.

    ``since`` and ``until`` are ms since the epoch (inclusive, exclusive); ``path`` is a glob
    over the absolute path (a relative glob matches anywhere); ``all`` also takes superseded,
    compacted, retracted and rejected messages.
    """

    __slots__ = ("all", "path", "roles", "session", "since", "types", "until")

    def __init__(
        self,
        session: str | None = None,
        roles: tuple[str, ...] = (),
        types: tuple[str, ...] = (),
        since: int | None = None,
        until: int | None = None,
        path: str | None = None,
        all: bool = False,
    ) -> None:
        self.session = session
        self.roles = roles
        self.types = types
        self.since = since
        self.until = until
        self.path = path
        self.all = all

    def _key(self) -> tuple[object, ...]:
        return (
            self.session,
            self.roles,
            self.types,
            self.since,
            self.until,
            self.path,
            self.all,
        )

    def __eq__(self, other: object) -> bool:
        return self._key() == other._key() if type(other) is Filters else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return (
            f"Filters(session={self.session!r}, roles={self.roles!r}, types={self.types!r}, "
            f"since={self.since!r}, until={self.until!r}, path={self.path!r}, all={self.all!r})"
        )

    def sql(self) -> tuple[str, list[object]]:
        where: list[str] = []
        params: list[object] = []
        if not self.all:
            where.append("m.status = 'current'")
        if self.session:
            where.append("(s.id = ? OR substr(s.id, 1, length(?)) = ? OR s.path = ?)")
            params += [self.session, self.session, self.session, self.session]
        if self.roles:
            where.append(f"m.role IN ({', '.join('?' * len(self.roles))})")
            params += list(self.roles)
        if self.types:
            where.append("(" + " OR ".join("m.type GLOB ?" for _ in self.types) + ")")
            params += list(self.types)
        if self.since is not None:
            where.append("m.time >= ?")
            params.append(self.since)
        if self.until is not None:
            where.append("m.time < ?")
            params.append(self.until)
        if self.path:
            glob = self.path if self.path.startswith(("/", "*")) else "*" + self.path
            where.append("s.path GLOB ?")
            params.append(glob)
        return " AND ".join(where) or "1", params


class Hit(msgspec.Struct):
    session: str
    path: str
    seq: int
    time: int
    role: str
    type: str
    status: str
    title: str | None
    snippet: str
    score: float
    match: Literal["word", "substring", "scan"]


def _fts_string(term: Term) -> str:
    quoted = '"' + term.text.replace('"', '""') + '"'
    return quoted + "*" if term.prefix else quoted


def _like(term: Term) -> str:
    text = term.text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{text}%"


_COLUMNS = "m.id, s.id, s.path, m.seq, m.time, m.role, m.type, m.status, s.title, m.text"
_LIKE = " AND m.text LIKE ? ESCAPE '\\'"
_IN_CJK = " AND m.tkey IN (SELECT rowid FROM messages_cjk WHERE messages_cjk MATCH ?)"
#: A substring, checked on the text as the trigram tokenizer matches it (case folded).
_HAS = " AND jt_has(m.text, ?)"


def _has(text: str | None, needle: str) -> bool:
    return text is not None and needle in text.lower()


def trigram_expr(text: str) -> str:
    """The trigram table's MATCH expression for a substring: each of its trigrams (the table
    keeps no positions; the rows are then checked with ``jt_has``)."""
    low = text.lower()
    grams = dict.fromkeys(low[i : i + 3] for i in range(len(low) - 2))
    return " ".join('"' + g.replace('"', '""') + '"' for g in grams)


def substrings_upto(con: sqlite3.Connection) -> int | None:
    """The last message id the substring index covers, or None when it covers all."""
    row = con.execute("SELECT value FROM meta WHERE key = 'substrings'").fetchone()
    upto = int(row[0]) if row else 0
    top = con.execute("SELECT max(id) FROM messages").fetchone()[0]
    return None if top is None or upto >= top else upto


def notes(con: sqlite3.Connection) -> list[str]:
    """What a searcher should know about the state of the index (shown as warnings)."""
    out = []
    if con.execute("SELECT value FROM meta WHERE key = 'fts'").fetchone() == ("stale",):
        out.append("the word index is still being built; word matches may be missing")
    upto = substrings_upto(con)
    if upto is not None:
        top = con.execute("SELECT max(id) FROM messages").fetchone()[0]
        out.append(
            f"the substring index is still being built ({100 * upto // top}% done); substring "
            "matches in the rest are found by a slower scan"
        )
    return out


Sort = Literal["relevance", "recent"]


def _key_range(con: sqlite3.Connection, filters: Filters) -> tuple[int | None, int | None]:
    """A full-text rowid range ``[lo, hi)`` that holds every message the filters allow (more
    too: the rows are checked): from ``since`` (a key is never below its second's base; above
    it a busy second may spill, so ``until`` gives no bound) and the time span of the few
    sessions a session or path filter names. A search then reads only that span."""
    lo = tkey_base(filters.since) if filters.since is not None else None
    hi = None
    if not filters.session and not filters.path:
        return lo, hi
    where, params = Filters(session=filters.session, path=filters.path, all=True).sql()
    sids = [
        r[0] for r in con.execute(f"SELECT s.sid FROM sessions s WHERE {where} LIMIT 65", params)
    ]
    if len(sids) > 64:
        return lo, hi
    if not sids:
        return 0, 0  # nothing can match
    a, b = con.execute(
        f"SELECT min(tkey), max(tkey) FROM messages WHERE sid IN ({', '.join('?' * len(sids))})",
        sids,
    ).fetchone()
    if a is None:
        return 0, 0
    return (max(a, lo) if lo is not None else a), b + 1


def search(
    con: sqlite3.Connection,
    query: str,
    filters: Filters | None = None,
    limit: int = 20,
    *,
    phrases: Sequence[str] = (),
    sort: Sort = "relevance",
) -> list[Hit]:
    """Run a query (see the module docs); at most ``limit`` hits, best first.

    ``phrases`` are more phrase terms, taken as they are: they may hold any character, a
    double quote too, which a phrase written inside ``query`` cannot. ``sort="recent"`` lists
    every pass newest first instead of ranking the word matches.
    """
    terms = parse_query(query) + [Term(p.strip(), phrase=True) for p in phrases if p.strip()]
    if not terms:
        return []
    con.create_function("jt_has", 2, _has, deterministic=True)
    filters = filters or Filters()
    base_where, base_params = filters.sql()
    lo, hi = _key_range(con, filters)
    upto = substrings_upto(con)
    hits: list[Hit] = []
    seen: set[int] = set()

    def as_substrings(ts: list[Term]) -> tuple[str, list[object]]:
        """Filters that keep messages containing each term as a substring."""
        sql = ""
        params: list[object] = []
        for t in ts:
            if t.cjk:
                sql += _IN_CJK
                params.append(match_expr(t.text))
            elif t.trigram_ok:
                # checked on each row a pass reads (newest first, it stops): cheaper than
                # the set of every message holding it
                sql += _HAS
                params.append(t.text.lower())
            else:
                sql += _LIKE
                params.append(_like(t))
        return sql, params

    def in_range(col: str) -> tuple[str, list[object]]:
        sql = ""
        params: list[object] = []
        if lo is not None:
            sql += f" AND {col} >= ?"
            params.append(lo)
        if hi is not None:
            sql += f" AND {col} < ?"
            params.append(hi)
        return sql, params

    def run(
        table: str | None,
        match: str | None,
        kind: str,
        more: str,
        more_params: list[object],
        rank: str | None = None,
    ) -> None:
        """Add the hits of one pass: its newest matches (``table`` None: a scan of the
        messages in time order), or with ``rank`` (the informative words' expression) the
        best by bm25 among its newest ``RANKED``."""
        want = limit - len(hits)
        if want <= 0 or (lo is not None and hi is not None and lo >= hi):
            return
        not_seen = ""
        params: list[object] = []
        if seen:
            not_seen = f" AND m.id NOT IN ({', '.join('?' * len(seen))})"
            params += sorted(seen)
        key = f"{table}.rowid" if table is not None else "m.tkey"
        rng, rng_params = in_range(key)
        source = (
            f"{table} JOIN messages m ON m.tkey = {table}.rowid" if table is not None
            else "messages m"
        )  # fmt: skip
        head = [match] if table is not None else []
        cond = f"{table} MATCH ? AND " if table is not None else ""
        n = max(RANKED, want) if rank is not None else want
        keys = [
            int(r[0])
            for r in con.execute(
                f"SELECT {key} FROM {source} JOIN sessions s ON s.sid = m.sid "
                f"WHERE {cond}{base_where}{more}{not_seen}{rng} ORDER BY {key} DESC LIMIT ?",
                [*head, *base_params, *more_params, *params, *rng_params, n],
            )
        ]
        if not keys:
            return
        scores: dict[int, float] = {}
        if rank is not None:
            # One range read of the informative words (a rowid IN list would make bm25 count
            # every match again for each member): their counts are cheap, by definition.
            scores = dict(
                con.execute(
                    f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? "
                    "AND rowid >= ? AND rowid <= ?",
                    (rank, keys[-1], keys[0]),
                ).fetchall()
            )
            keys.sort(key=lambda k: (scores.get(k, 0.0), -k))
        top = keys[:want]
        rows = {
            int(r[0]): r
            for r in con.execute(
                f"SELECT m.tkey, {_COLUMNS} FROM messages m JOIN sessions s ON s.sid = m.sid "
                f"WHERE m.tkey IN ({', '.join('?' * len(top))})",
                top,
            )
        }
        for k in top:
            r = rows[k][1:]
            snippet = None
            if table == "messages_fts":
                # The trigram tokenizer's own snippets cut words apart; scan for those instead.
                got = con.execute(
                    f"SELECT snippet({table}, 0, '{MARK_OPEN}', '{MARK_CLOSE}', '…', "
                    f"{_SNIPPET_TOKENS}) FROM {table} WHERE {table} MATCH ? AND rowid = ?",
                    (match, k),
                ).fetchone()
                snippet = got[0] if got else None
            seen.add(int(r[0]))
            hits.append(
                Hit(
                    session=r[1],
                    path=r[2],
                    seq=r[3],
                    time=r[4],
                    role=r[5],
                    type=r[6],
                    status=r[7],
                    title=r[8],
                    snippet=_one_line(snippet if snippet else _scan_snippet(str(r[9]), terms)),
                    score=round(-float(scores.get(k, 0.0)), 6) + 0.0,
                    match=kind,  # type: ignore[arg-type]
                )
            )

    words = [t for t in terms if t.wordy]
    if words:
        more, params = as_substrings([t for t in terms if not t.wordy])
        informative: list[Term] = []
        if sort == "relevance":
            common = common_limit(con)
            informative = [t for t in words if doc_freq(con, t.text, t.prefix, common) <= common]
        run(
            "messages_fts",
            " ".join(_fts_string(t) for t in words),
            "word",
            more,
            params,
            " ".join(_fts_string(t) for t in informative) if informative else None,
        )
    # Then every term as a substring, served by the trigram table, the CJK table or a scan,
    # newest first.
    tri = [t for t in terms if t.trigram_ok and not t.cjk]
    cjk = [t for t in terms if t.cjk]
    if tri:
        more, params = as_substrings(terms)  # the trigrams find candidates; the text decides
        match = " ".join(trigram_expr(t.text) for t in tri)
        run("messages_trigram", match, "substring", more, params)
        if upto is not None:  # what the substring index does not cover yet: a scan
            run(None, None, "scan", f" AND m.id > ?{more}", [upto, *params])
    elif cjk:
        more, params = as_substrings([t for t in terms if not t.cjk])
        match = " AND ".join(match_expr(t.text) for t in cjk)
        run("messages_cjk", match, "substring", more, params)
    else:
        more, params = as_substrings(terms)
        run(None, None, "scan", more, params)
    return hits


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _scan_snippet(text: str, terms: list[Term]) -> str:
    folded = text.casefold()
    spots = [(folded.find(t.text.casefold()), len(t.text)) for t in terms]
    spots = [(i, n) for i, n in spots if i >= 0]
    if not spots:
        return text[: 2 * _SCAN_CONTEXT]
    first = min(i for i, _ in spots)
    lo = max(0, first - _SCAN_CONTEXT)
    hi = min(len(text), first + _SCAN_CONTEXT)
    out = []
    pos = lo
    for i, n in sorted(spots):
        if i < pos or i >= hi:
            continue
        out += [text[pos:i], MARK_OPEN, text[i : i + n], MARK_CLOSE]
        pos = i + n
    out.append(text[pos:hi])
    return ("…" if lo > 0 else "") + "".join(out) + ("…" if hi < len(text) else "")


# -- sessions and transcripts -------------------------------------------------------------


class SessionInfo(msgspec.Struct):
    session: str
    path: str
    title: str | None
    cwd: str | None
    agent: str | None
    created: int
    updated: int
    events: int
    messages: int
    state: str
    error: str | None
    parent: str | None


_SESSION_SQL = (
    "SELECT id, path, title, cwd, agent, created, updated, events, messages, state, error, parent "
    "FROM sessions"
)


def _info(r: tuple[object, ...]) -> SessionInfo:
    return SessionInfo(*r)  # type: ignore[arg-type]


def sessions(
    con: sqlite3.Connection, *, limit: int | None = None, path: str | None = None
) -> list[SessionInfo]:
    """Every session, most recent activity (the last event's time) first."""
    sql = _SESSION_SQL
    params: list[object] = []
    if path:
        sql += " WHERE path GLOB ?"
        params.append(path if path.startswith(("/", "*")) else "*" + path)
    sql += " ORDER BY updated DESC, path"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_info(r) for r in con.execute(sql, params)]


def resolve_session(con: sqlite3.Connection, ref: str) -> list[tuple[int, SessionInfo]]:
    """Sessions matching a path, an id or an id prefix (best match kind only)."""
    sql = f"SELECT sid, {_SESSION_SQL[7:]}"
    for where, params in (
        ("path = ?", [ref]),
        ("id = ?", [ref]),
        ("substr(id, 1, length(?)) = ?", [ref, ref]),
    ):
        rows = con.execute(f"{sql} WHERE {where} ORDER BY updated DESC", params).fetchall()
        if rows:
            return [(int(r[0]), _info(r[1:])) for r in rows]
    return []


class Turn(msgspec.Struct):
    """One message of a transcript window."""

    seq: int
    time: int
    role: str
    type: str
    status: str
    text: str
    truncated: bool


class Window:
    """A page of a transcript; ``more_before`` is the seq to pass as ``--before`` for the
    previous page (None on the first)."""

    __slots__ = ("messages", "more_before")

    def __init__(self, messages: list[Turn] | None = None, more_before: int | None = None) -> None:
        self.messages: list[Turn] = [] if messages is None else messages
        self.more_before = more_before

    def __eq__(self, other: object) -> bool:
        if type(other) is not Window:
            return NotImplemented
        return (self.messages, self.more_before) == (other.messages, other.more_before)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return f"Window(messages={self.messages!r}, more_before={self.more_before!r})"


def window(con: sqlite3.Connection, sid: int, *, last: int, before: int | None) -> Window:
    """The ``last`` messages before seq ``before`` (all statuses), oldest first."""
    params: list[object] = [sid]
    sql = "SELECT seq, time, role, type, status, text, truncated FROM messages WHERE sid = ?"
    if before is not None:
        sql += " AND seq < ?"
        params.append(before)
    sql += " ORDER BY seq DESC LIMIT ?"
    params.append(last + 1)
    rows = con.execute(sql, params).fetchall()
    more = len(rows) > last
    rows = rows[:last]
    rows.reverse()
    turns = [Turn(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6])) for r in rows]
    return Window(turns, turns[0].seq if more and turns else None)
