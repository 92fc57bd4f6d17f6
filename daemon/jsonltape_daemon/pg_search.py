"""Queries over the PostgreSQL team index: full-text search, the session list, transcripts.

The query language is the SQLite index's (``search.py``: :func:`parse_query`, :class:`Term`,
:class:`Filters`), and so are the passes and their order; only the indexes differ
(``pg_schema.py``):

1. words: ``words @@ tsquery`` (GIN). The tsquery is built here from the lexemes PostgreSQL
   makes of each term exactly as of a text (runs of letters and digits, then ``to_tsvector``
   with the ``words`` configuration: diacritics folded, lower case), each quoted, a term's
   lexemes joined by ``<->`` at their positions (a phrase), ``:*`` on the last for
   ``prefix*``; user text never reaches ``to_tsquery``. Ranked by
   ``ts_rank`` of the informative words among the newest :data:`~rank.RANKED` matches, newer
   first among equals; a query of common words only lists its matches newest first;
2. substrings: ``idents ILIKE '%…%'`` (the code-like tokens, ``pg_trgm`` GIN) for terms the
   SQLite trigram table serves, newest first, after the word hits; terms of CJK characters
   only: ``cjk @> '{bigrams}'`` (one character: ``'{雨}'``, exact), checked on the text;
3. scan: other terms of one or two characters (``->``, ``#``), newest first.

Terms of the other kinds join a pass as filters, checked in SQL (``strpos`` on the lower-case
text; substring terms on ``idents``), so every hit contains every term.

What differs from SQLite, and why:

* ranking: ``ts_rank(words, q, 1)`` (term frequency over ``1 + log(length)``) instead of bm25,
  which also weighs each word by its rarity: the same hits, in the same classes (words, then
  substrings, then scans; newest first where not ranked), the order of unequal word hits may
  differ;
* "common": a word counts as common when its share of the newest :data:`SAMPLE` messages,
  times the number of messages, is above ``rank.common_limit`` (SQLite counts its matches up
  to the limit; here that would read up to 50k rows at 1M messages). Below
  ``rank.COMMON_MIN`` messages no word is common, in both engines;
* newest first is ``time`` (ms) then ``(origin, sid, seq)``; SQLite's key orders by second,
  then by insertion;
* letters and digits are PostgreSQL's ``[:alnum:]`` and diacritics are folded by
  ``unaccent``, where SQLite has Unicode categories and ``remove_diacritics 2``: the same for
  the scripts tested (Latin with diacritics, CJK), possibly not for every character;
* phrases past the 16383rd word of a text are not found by position (a tsvector limit).

Plans are chosen here, not left to the planner (a reader role behind row-level security gets
no statistics for ``@@``; ``SET LOCAL`` and an ``OFFSET 0`` fence hold them): a session or
path filter naming a few small sessions (:data:`SESSIONS_MAX`) reads just their messages
(primary key); else each pass counts its matches among the newest :data:`SAMPLE` messages
(``k``) and takes the cheaper of walking the time index (``messages_time``) newest first
until it has the ``n`` it needs (about ``n * SAMPLE / k`` rows, each checked) and reading
every match from the GIN index (about ``k / SAMPLE`` of the messages, each a random heap
fetch, :data:`FETCH_COST` times a walked row), then sorting them. Read from the index, a
pass first tries the span of time that should hold its ``n`` twice over (at the sample's
rate), the GIN matches ANDed with the time index: holding ``n`` matches, it holds the newest
``n``; else every match is read. A very common word is answered from the newest messages, a
rare one from its matches.

Every value from the user is a bound parameter. Hits name their ``origin`` (the machine that
pushed them); ``origins`` restricts a search, the session list or a lookup to some origins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .pg_schema import SCHEMA
from .rank import COMMON_MIN, COMMON_SHARE, RANKED
from .search import Filters, Hit, Sort, Term, parse_query
from .snippet import snippet
from .transcripts import SessionInfo, Turn, Window

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "FETCH_COST",
    "SAMPLE",
    "SESSIONS_MAX",
    "SESSION_ROWS",
    "PgHit",
    "PgSessionInfo",
    "SessionKey",
    "glob_regex",
    "lexemes",
    "resolve_session",
    "search",
    "sessions",
    "tsquery",
    "window",
]

#: Newest messages a pass looks at to choose its plan (and to tell common words).
SAMPLE = 1000
#: What reading one match from a GIN index (a random heap fetch) costs, against checking one
#: row while walking the time index (measured at 600k messages: ~8 µs against ~3.6 µs).
FETCH_COST = 2.2
#: A session or path filter naming at most this many sessions, of at most ``SESSION_ROWS``
#: messages together, reads just their messages.
SESSIONS_MAX = 64
SESSION_ROWS = 20_000
#: ``ts_rank`` normalization: divide by 1 + the log of the text's length (as bm25 favours
#: short texts).
RANK_NORM = 1

_S = '"' + SCHEMA.replace('"', '""') + '"'
_CFG = "'" + SCHEMA.replace("'", "''") + ".words'::regconfig"
#: What the ``words`` column is made of (``pg_schema``): runs of letters and digits.
_WORDS = "regexp_replace({}, '[^[:alnum:]]+', ' ', 'g')"
_ORDER = "m.time DESC, m.origin DESC, m.sid DESC, m.seq DESC"
_PLANS = {
    # walk the time index newest first (a common word, a scan)
    "walk": "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_indexscan = on; "
    "SET LOCAL enable_seqscan = off",
    # read the matches from a GIN index, then sort
    "index": "SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = off; "
    "SET LOCAL enable_seqscan = off",
    # the messages of a few sessions, by the primary key
    "sessions": "SET LOCAL enable_bitmapscan = on; SET LOCAL enable_indexscan = on; "
    "SET LOCAL enable_seqscan = off",
}
#: A session of the team index: ``(origin, sid)``.
SessionKey = tuple[str, int]


class PgHit(Hit):
    """A search hit of the team index: :class:`~search.Hit` and the origin that pushed it."""

    origin: str


class PgSessionInfo(SessionInfo):
    """A session of the team index: :class:`~transcripts.SessionInfo` and its origin."""

    origin: str


# -- query pieces --------------------------------------------------------------------------


def _quote_lexeme(lexeme: str) -> str:
    # tsquery input: a quoted value with ' doubled and \ escaping the next character.
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def lexemes(con: psycopg.Connection[Any], terms: Sequence[Term]) -> list[list[tuple[str, int]]]:
    """The lexemes PostgreSQL makes of each term, with their positions, in order."""
    if not terms:
        return []
    rows = con.execute(
        "SELECT t.i, l.lexeme, p FROM unnest(%s::text[]) WITH ORDINALITY AS t(txt, i), "
        f"unnest(to_tsvector({_CFG}, {_WORDS.format('t.txt')})) AS l, unnest(l.positions) AS p "
        "ORDER BY t.i, p",
        ([_clean(t.text) for t in terms],),
    ).fetchall()
    out: list[list[tuple[str, int]]] = [[] for _ in terms]
    for i, lexeme, pos in rows:
        out[int(i) - 1].append((str(lexeme), int(pos)))
    return out


def tsquery(term: Term, found: Sequence[tuple[str, int]]) -> str | None:
    """The tsquery text of a word term from its :func:`lexemes` (None: there are none):
    each quoted, joined by ``<N>`` at their distances; ``prefix*``: the last with ``:*``."""
    q = ""
    last = found[0][1] if found else 0
    for n, (lexeme, pos) in enumerate(found):
        item = _quote_lexeme(lexeme) + (":*" if term.prefix and n == len(found) - 1 else "")
        q += item if not q else f" <{pos - last}> {item}"
        last = pos
    return q or None


def _clean(text: str) -> str:
    # PostgreSQL text holds no NUL; the pusher stores U+FFFD for it (pg_store.py).
    return text.replace("\x00", "\ufffd")


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _bigrams(term: str) -> list[str]:
    """The ``cjk`` elements a CJK term needs: itself (one character) or its bigrams."""
    if len(term) == 1:
        return [term]
    return list(dict.fromkeys(term[i : i + 2] for i in range(len(term) - 1)))


def glob_regex(glob: str) -> str | None:
    """A PostgreSQL regular expression matching what SQLite's ``GLOB`` matches (``*``,
    ``?``, ``[...]`` with ``^`` for negation; case-sensitive; the whole string); None for a
    glob that matches nothing (an unclosed ``[``, as in SQLite)."""
    out = ["^"]
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + 1
            if j < len(glob) and glob[j] == "^":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            close = glob.find("]", j)
            if close < 0:
                return None
            body = glob[i + 1 : close]
            neg = body.startswith("^")
            body = body[1:] if neg else body
            esc = "".join(ch if ch.isalnum() or ch == "-" else "\\" + ch for ch in body)
            out.append("[" + ("^" if neg else "") + esc + "]")
            i = close
        else:
            out.append(c if c.isalnum() else "\\" + c)
        i += 1
    out.append("$")
    return "".join(out)


def _path_glob(path: str) -> str | None:
    return glob_regex(path if path.startswith(("/", "*")) else "*" + path)


class _Where:
    """A conjunction of SQL conditions over ``m`` (messages) and their parameters, each with
    the index that can serve it: ``gin`` (words, idents, cjk), ``sessions`` (a few sessions,
    by the primary key) or none."""

    def __init__(self) -> None:
        self.conds: list[tuple[str, list[object], str]] = []

    def add(self, cond: str, *params: object, via: str = "") -> None:
        self.conds.append((cond, list(params), via))

    def copy(self) -> _Where:
        w = _Where()
        w.conds = list(self.conds)
        return w

    def has(self, via: str) -> bool:
        return any(c[2] == via for c in self.conds)

    def part(self, via: str | None = None, *, other: bool = False) -> tuple[str, list[object]]:
        """The SQL and parameters of the conditions (``via``: those served by that index, or
        with ``other`` the rest)."""
        picked = [c for c in self.conds if via is None or (c[2] == via) != other]
        return " AND ".join(c[0] for c in picked) or "true", [p for c in picked for p in c[1]]


def _sessions_where(
    session: str | None, path: str | None, origins: Sequence[str]
) -> tuple[str, list[object]]:
    where: list[str] = []
    params: list[object] = []
    if session:
        session = _clean(session)
        where.append("(s.id = %s OR starts_with(s.id, %s) OR s.path = %s)")
        params += [session, session, session]
    if path:
        regex = _path_glob(_clean(path))
        where.append("s.path ~ %s" if regex is not None else "false")
        params += [regex] if regex is not None else []
    if origins:
        where.append("s.origin = ANY(%s)")
        params.append([_clean(o) for o in origins])
    return " AND ".join(where) or "true", params


def _base(con: psycopg.Connection[Any], filters: Filters, origins: Sequence[str]) -> _Where | None:
    """The filters as conditions on ``m``; None when no message can pass them."""
    w = _Where()
    if not filters.all:
        w.add("m.status = 'current'")
    if filters.roles:
        w.add("m.role = ANY(%s)", [_clean(r) for r in filters.roles])
    if filters.types:
        types = [r for t in filters.types if (r := glob_regex(_clean(t))) is not None]
        if not types:
            return None
        w.add("m.type ~ ANY(%s)", types)
    if filters.since is not None:
        w.add("m.time >= %s", filters.since)
    if filters.until is not None:
        w.add("m.time < %s", filters.until)
    if origins:
        w.add("m.origin = ANY(%s)", [_clean(o) for o in origins])
    if filters.session or filters.path:
        where, params = _sessions_where(filters.session, filters.path, origins)
        found = con.execute(
            f"SELECT s.origin, s.sid, s.messages FROM {_S}.sessions s WHERE {where}", params
        ).fetchall()
        if not found:
            return None
        w.add(
            "(m.origin, m.sid) IN (SELECT * FROM unnest(%s::text[], %s::bigint[]))",
            [r[0] for r in found],
            [r[1] for r in found],
            # a few small sessions: read their messages; else the pass plans as without
            via="sessions"
            if len(found) <= SESSIONS_MAX and sum(int(r[2]) for r in found) <= SESSION_ROWS
            else "",
        )
    return w


# -- search --------------------------------------------------------------------------------

_Key = tuple[str, int, int]


def search(
    con: psycopg.Connection[Any],
    query: str,
    filters: Filters | None = None,
    limit: int = 20,
    *,
    phrases: Sequence[str] = (),
    sort: Sort = "relevance",
    origins: Sequence[str] = (),
) -> list[PgHit]:
    """Run a query (``search.search``'s language and passes, see the module docs); at most
    ``limit`` hits, best first. ``origins``: only messages pushed by these origins."""
    terms = parse_query(query) + [Term(p.strip(), phrase=True) for p in phrases if p.strip()]
    if not terms or limit <= 0:
        return []
    with con.transaction():
        return _Search(con, terms, filters or Filters(), limit, sort, origins).run()


class _Search:
    def __init__(
        self,
        con: psycopg.Connection[Any],
        terms: list[Term],
        filters: Filters,
        limit: int,
        sort: Sort,
        origins: Sequence[str],
    ) -> None:
        self.con = con
        self.terms = terms
        self.filters = filters
        self.limit = limit
        self.sort = sort
        self.origins = origins
        self.hits: list[PgHit] = []
        self.seen: set[_Key] = set()
        self._total: int | None = None
        self._current_plan = ""
        self._span: tuple[int, int] | None = None  # times of the sample's oldest and newest

    def run(self) -> list[PgHit]:
        base = _base(self.con, self.filters, self.origins)
        if base is None:
            return []
        terms = self.terms
        words = [t for t in terms if t.wordy]
        if words:
            found_lexemes = lexemes(self.con, words)
            queries = [tsquery(t, f) for t, f in zip(words, found_lexemes, strict=True)]
            w = self._substrings(base, [t for t in terms if not t.wordy])
            found = [q for q in queries if q is not None]
            if w is not None and found:
                w.add("m.words @@ %s::tsquery", " & ".join(f"({q})" for q in found), via="gin")
                self._words_pass(w, words, found_lexemes, queries)
        # Then every term as a substring (idents, the CJK array or a scan), newest first.
        w = self._substrings(base, terms)
        if w is not None:
            indexed = any(t.trigram_ok or t.cjk for t in terms)
            self._pass(w, "substring" if indexed else "scan", indexed=indexed)
        return self.hits

    def _substrings(self, base: _Where, terms: Sequence[Term]) -> _Where | None:
        """``base`` and each term as a substring: inside a code-like token (``idents``) for
        the terms the substring index serves, anywhere in the text for the others (CJK
        terms through their bigrams); None when a term can never match (whitespace inside
        a code-like token)."""
        w = base.copy()
        for t in terms:
            text = _clean(t.text)
            if t.trigram_ok:
                if any(c.isspace() for c in text):
                    return None
                w.add("m.idents ILIKE %s", _like(text), via="gin")
                continue
            if t.cjk:
                w.add("m.cjk @> %s::text[]", _bigrams(text), via="gin")
            w.add("strpos(lower(m.text), %s) > 0", text.lower())
        return w

    def _count_newest(self, conds: Sequence[tuple[str, list[object]]]) -> tuple[int, list[int]]:
        """How many of the newest :data:`SAMPLE` messages there are, and how many of them
        meet each condition."""
        self._plan("walk")
        counts = "".join(f", count(*) FILTER (WHERE {c})" for c, _ in conds)
        row = self.con.execute(
            f"SELECT count(*), min(m.time), max(m.time){counts} FROM "
            f"(SELECT * FROM {_S}.messages m ORDER BY m.time DESC LIMIT {SAMPLE}) m",
            [p for _, ps in conds for p in ps],
        ).fetchone()
        assert row is not None
        if row[1] is not None:
            self._span = (int(row[1]), int(row[2]))
        return int(row[0]), [int(x) for x in row[3:]]

    def _messages(self) -> int:
        """How many messages the index has: the statistics' estimate (``reltuples``, kept by
        autovacuum), or before any, a count that stops past ``COMMON_MIN`` (below it no word
        is common)."""
        if self._total is None:
            row = self.con.execute(
                "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", (f"{_S}.messages",)
            ).fetchone()
            total = int(row[0]) if row else -1
            if total < 0:  # never analyzed (nor vacuumed): count, up to where it matters
                row = self.con.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {_S}.messages LIMIT {COMMON_MIN + 1}) m"
                ).fetchone()
                total = int(row[0]) if row else 0
            self._total = total
        return self._total

    def _words_pass(
        self,
        w: _Where,
        words: Sequence[Term],
        found: Sequence[Sequence[tuple[str, int]]],
        queries: Sequence[str | None],
    ) -> None:
        """The word pass, ranked by its informative words. A word term is common when every
        one of its words is (a phrase is as rare as its rarest word), each judged by its
        share of the newest messages (module docs), counted in the pass's own sample."""
        total = self._messages() if self.sort == "relevance" else 0
        judged: list[tuple[int, str]] = []  # (term index, one word of it)
        if total > COMMON_MIN:
            for i, (term, lexemes_) in enumerate(zip(words, found, strict=True)):
                for n, (lexeme, _) in enumerate(lexemes_):
                    prefix = term.prefix and n == len(lexemes_) - 1
                    one = tsquery(Term(lexeme, prefix=prefix), [(lexeme, 1)])
                    judged.append((i, one or ""))
        cond, params = w.part()
        if not judged and w.has("sessions"):  # neither the plan nor the ranking needs it
            sampled, counts = 0, [0]
        else:
            sampled, counts = self._count_newest(
                [(cond, params)] + [("m.words @@ %s::tsquery", [q]) for _, q in judged]
            )
        cap = max(COMMON_MIN, int(total * COMMON_SHARE))
        common = {i for i, _ in judged}
        for (i, _), k in zip(judged, counts[1:], strict=True):
            if k * total <= cap * max(sampled, 1):
                common.discard(i)
        informative = [q for i, q in enumerate(queries) if q is not None and i not in common]
        rank = " & ".join(f"({q})" for q in informative) or None
        if self.sort != "relevance":
            rank = None  # sort="recent": every pass newest first
        self._pass(w, "word", indexed=True, rank=rank, sample=(sampled, counts[0]))

    def _plan(self, plan: str) -> None:
        """Steer the planner for the rest of the transaction (``SET LOCAL``)."""
        if plan != self._current_plan:
            self.con.execute(_PLANS[plan])
            self._current_plan = plan

    def _pass(
        self,
        w: _Where,
        kind: str,
        *,
        indexed: bool,
        rank: str | None = None,
        sample: tuple[int, int] | None = None,
    ) -> None:
        """Add the hits of one pass: its newest matches, or with ``rank`` (the informative
        words' tsquery) the best by ``ts_rank`` among its newest ``RANKED``."""
        want = self.limit - len(self.hits)
        if want <= 0:
            return
        n = (max(RANKED, want) if rank is not None else want) + len(self.seen)
        cond, params = w.part()
        plan = "walk"
        sampled = k = 0
        if w.has("sessions"):
            plan = "sessions"
        elif indexed:
            if sample is None:
                sampled, (k,) = self._count_newest([(cond, params)])
            else:
                sampled, k = sample
            # rows walked, n * sampled / k, against matches fetched, k / sampled * total
            total = max(self._messages(), sampled)
            if k < min(n, 5) or n * sampled * sampled > FETCH_COST * k * k * total:
                plan = "index"
        self._plan(plan)
        window = None
        if plan == "index" and k > 0 and sampled >= SAMPLE and self._span is not None:
            # The newest n matches are within the newest n * sampled / k messages or so: try
            # twice that span of time first (the GIN matches ANDed with the time index);
            # holding n matches, it holds the newest n. Else read every match.
            lo, hi = self._span
            reach = 2 * n * sampled / k
            if reach < self._messages():
                window = hi - int((hi - lo) * reach / sampled) - 1
        found = self._query(w, plan, n, rank, window)
        if window is not None and len(found) < n:
            found = self._query(w, plan, n, rank, None)
        keys = [(key, score) for key, score in found if key not in self.seen]
        self._add(keys[:want], kind)

    def _query(
        self, w: _Where, plan: str, n: int, rank: str | None, window: int | None
    ) -> list[tuple[_Key, float]]:
        """The first ``n`` keys of a pass (best first) and their scores."""
        # OFFSET 0 fences the subquery (no condition is pushed into it): walking, it gives
        # the messages in time order; else exactly the matches of the index's conditions.
        if plan == "walk":
            src = f"(SELECT * FROM {_S}.messages ORDER BY time DESC OFFSET 0) m"
            cond, params = w.part()
        else:
            via = "gin" if plan == "index" else "sessions"
            fenced, params = w.part(via)
            if window is not None:
                fenced += " AND m.time >= %s"
                params.append(window)
            cond, rest = w.part(via, other=True)
            src = f"(SELECT * FROM {_S}.messages m WHERE {fenced} OFFSET 0) m"
            params += rest
        cols = "m.origin, m.sid, m.seq, m.time" + (", m.words" if rank is not None else "")
        inner = f"SELECT {cols} FROM {src} WHERE {cond} ORDER BY {_ORDER} LIMIT %s"
        if rank is not None:
            sql = (
                f"SELECT m.origin, m.sid, m.seq, ts_rank(m.words, %s::tsquery, {RANK_NORM}) "
                f"AS r FROM ({inner}) m ORDER BY r DESC, {_ORDER}"
            )
            params = [rank, *params, n]
        else:
            sql = f"SELECT m.origin, m.sid, m.seq, 0.0 FROM ({inner}) m ORDER BY {_ORDER}"
            params = [*params, n]
        return [
            ((str(origin), int(sid), int(seq)), float(score))
            for origin, sid, seq, score in self.con.execute(sql, params)
        ]

    def _add(self, keys: list[tuple[_Key, float]], kind: str) -> None:
        if not keys:
            return
        rows = {
            (str(r[0]), int(r[1]), int(r[2])): r[3:]
            for r in self.con.execute(
                "SELECT m.origin, m.sid, m.seq, s.id, s.path, m.time, m.role, m.type, m.status, "
                f"s.title, m.text FROM {_S}.messages m JOIN {_S}.sessions s "
                "ON s.origin = m.origin AND s.sid = m.sid WHERE (m.origin, m.sid, m.seq) IN "
                "(SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[]))",
                [[k[0] for k, _ in keys], [k[1] for k, _ in keys], [k[2] for k, _ in keys]],
            )
        }
        for key, score in keys:
            r = rows[key]
            self.seen.add(key)
            self.hits.append(
                PgHit(
                    session=r[0],
                    path=r[1],
                    seq=key[2],
                    time=r[2],
                    role=r[3],
                    type=r[4],
                    status=r[5],
                    title=r[6],
                    snippet=snippet(r[7], self.terms),
                    score=round(score, 6) + 0.0,
                    match=kind,  # type: ignore[arg-type]
                    origin=key[0],
                )
            )


# -- sessions and transcripts --------------------------------------------------------------

_SESSION_COLS = (
    "s.id, s.path, s.title, s.cwd, s.agent, s.created, s.updated, s.events, s.messages, "
    "s.state, s.error, s.parent, s.origin"
)


def _info(r: Sequence[Any]) -> PgSessionInfo:
    return PgSessionInfo(*r)


def sessions(
    con: psycopg.Connection[Any],
    *,
    limit: int | None = None,
    path: str | None = None,
    origins: Sequence[str] = (),
) -> list[PgSessionInfo]:
    """Every session (of ``origins``, when given), most recent activity first."""
    where, params = _sessions_where(None, path, origins)
    sql = f"SELECT {_SESSION_COLS} FROM {_S}.sessions s WHERE {where} "
    sql += "ORDER BY s.updated DESC, s.path, s.origin"
    if limit is not None:
        sql += " LIMIT %s"
        params.append(limit)
    return [_info(r) for r in con.execute(sql, params)]


def resolve_session(
    con: psycopg.Connection[Any], ref: str, *, origins: Sequence[str] = ()
) -> list[tuple[SessionKey, PgSessionInfo]]:
    """Sessions matching a path, an id or an id prefix (best match kind only); the same path
    or id may be found on several origins."""
    extra, extra_params = _sessions_where(None, None, origins)
    ref = _clean(ref)
    for where, params in (
        ("s.path = %s", [ref]),
        ("s.id = %s", [ref]),
        ("starts_with(s.id, %s)", [ref]),
    ):
        rows = con.execute(
            f"SELECT s.origin, s.sid, {_SESSION_COLS} FROM {_S}.sessions s "
            f"WHERE {where} AND {extra} ORDER BY s.updated DESC, s.origin",
            [*params, *extra_params],
        ).fetchall()
        if rows:
            return [((str(r[0]), int(r[1])), _info(r[2:])) for r in rows]
    return []


def window(
    con: psycopg.Connection[Any], session: SessionKey, *, last: int, before: int | None
) -> Window:
    """The ``last`` messages before seq ``before`` (all statuses), oldest first."""
    params: list[object] = [session[0], session[1]]
    sql = (
        f"SELECT seq, time, role, type, status, text, truncated FROM {_S}.messages "
        "WHERE origin = %s AND sid = %s"
    )
    if before is not None:
        sql += " AND seq < %s"
        params.append(before)
    sql += " ORDER BY seq DESC LIMIT %s"
    params.append(last + 1)
    rows = con.execute(sql, params).fetchall()
    more = len(rows) > last
    rows = rows[:last]
    rows.reverse()
    turns = [Turn(int(r[0]), int(r[1]), r[2], r[3], r[4], r[5], bool(r[6])) for r in rows]
    return Window(turns, turns[0].seq if more and turns else None)
