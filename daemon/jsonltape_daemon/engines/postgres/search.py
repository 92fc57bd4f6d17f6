"""Full-text search over the PostgreSQL team index (the session list and transcripts are in
``sessions.py``).

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
* "common": a word counts as common when its share of the newest :data:`SAMPLE` messages
  (in the filters' time range: ``since``/``until`` bound every sample and walk), times the
  number of messages, is above ``max(COMMON_MIN, COMMON_SHARE × messages)``
  (SQLite asks its word index for the match past the limit; here that would read up to 50k
  rows at 1M messages). Below
  ``rank.COMMON_MIN`` messages no word is common, in both engines;
* newest first is ``time`` (ms) then ``(origin, sid, seq)``; SQLite's key orders by second,
  then by insertion;
* letters and digits are PostgreSQL's ``[:alnum:]`` and diacritics are folded by
  ``unaccent``, where SQLite has Unicode categories and ``remove_diacritics 2``: the same for
  the scripts tested (Latin with diacritics, CJK), possibly not for every character;
* phrases past the 16383rd word of a text, or past the 256th place of one of their words in
  it, are not found by position (tsvector limits).

Plans are chosen here, not left to the planner (a reader role behind row-level security gets
no statistics for ``@@``; ``SET LOCAL`` and an ``OFFSET 0`` fence hold them; no JIT, whose
compiling costs more than any of them runs): a session or path filter naming a few small
sessions (:data:`SESSIONS_MAX`) reads just their messages (primary key); else each pass counts
its matches among the newest :data:`SAMPLE` messages of the time range (``k``) and takes the
cheapest of (costs in rows walked, :func:`_read_costs`):

* walking the time index (``messages_time``) newest first (from ``until``) until it has the
  ``n`` it needs (about ``n * SAMPLE / k`` rows, each checked);
* reading the GIN matches in spans of time going back from the sample's newest message, the GIN
  bitmap ANDed with the time index's (:data:`TIME_COST` a message in the span, then
  :data:`FETCH_COST` a match fetched): the first span should hold ``n`` and a quarter more
  (at the sample's rate), each next one, older, what is still missing at the rate seen so
  far, until ``n`` are found (the newest ``n``: the spans are disjoint) or the span reaches
  back past every message;
* reading every GIN match (:data:`GIN_COST` and :data:`FETCH_COST` each), then sorting.

The planner takes a phrase for rare (it multiplies its words' shares) and would never AND the
time index with it: the GIN index is given each phrase's rarest word (by the sample) and the
phrase is checked on what it reads. A very common word is answered from the newest messages,
a rare one from its matches, one in between from a span of them.

The pieces of the SQL (lexemes, tsquery text, filters as conditions) are in ``pg_query.py``.

Every value from the user is a bound parameter. Hits name their ``origin`` (the machine that
pushed them); ``origins`` restricts a search, the session list or a lookup to some origins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jsonltape_daemon.engines.postgres.query import (
    SESSION_ROWS,
    SESSIONS_MAX,
    RestTerms,
    Where,
    all_of,
    base_conditions,
    bigrams,
    clean,
    glob_regex,
    lexemes,
    like_pattern,
    substring_kind,
    time_range,
    tsquery,
)
from jsonltape_daemon.engines.postgres.schema import SCHEMA
from jsonltape_daemon.search.language import (
    Filters,
    Hit,
    Sort,
    Term,
    query_terms,
)
from jsonltape_daemon.search.rank import COMMON_MIN, COMMON_SHARE, RANKED, term_limit
from jsonltape_daemon.search.snippet import snippet

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "FETCH_COST",
    "GIN_COST",
    "SAMPLE",
    "SESSIONS_MAX",
    "SESSION_ROWS",
    "TIME_COST",
    "WINDOW_MARGIN",
    "PgHit",
    "glob_regex",
    "lexemes",
    "search",
    "tsquery",
]

#: Newest messages a pass looks at to choose its plan (and to tell common words).
SAMPLE = 1000
#: Terms of a query whose conditions the planner is given one by one (``query.RestTerms``).
PLANNED = 16
#: What reading one match from a GIN index (a random heap fetch) costs, against checking one
#: row while walking the time index (measured at 600k messages: ~8 µs against ~3.6 µs).
FETCH_COST = 2.2
#: What one match costs in a GIN lookup, and one message in a time index range ANDed with
#: it, against checking one row while walking the time index (measured at 600k messages:
#: ~0.03 and ~0.08 µs against ~1.3 µs).
GIN_COST = 0.025
TIME_COST = 0.06
#: ``ts_rank`` normalization: divide by 1 + the log of the text's length (as bm25 favours
#: short texts).
RANK_NORM = 1
#: An index pass first reads the span of time that should hold this many times the matches
#: it needs (at the sample's rate), then older spans sized the same way (``_windows``).
WINDOW_MARGIN = 1.25

_S = '"' + SCHEMA.replace('"', '""') + '"'
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


class PgHit(Hit):
    """A search hit of the team index: :class:`~search.Hit` and the origin that pushed it."""

    origin: str


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
    terms = query_terms(query, phrases)
    if not terms or limit <= 0:
        return []
    with con.transaction():
        return _Search(con, terms, filters or Filters(), limit, sort, origins).run()


def _read_costs(n: int, k: int, sampled: int, total: int, *, fetched: int) -> tuple[float, float]:
    """What reading a pass's newest ``n`` from the GIN index costs, in rows walked on the
    time index (walking costs ``n * sampled / k``), when ``k`` of the newest ``sampled``
    messages match and ``fetched`` of them are what the GIN index gives (-1: unknown, every
    match is fetched): read in spans of time (``_Search._windows``: the GIN lookup of each,
    the time index over the first span and a heap fetch of each in it; inf when it cannot
    be), and read whole (the GIN lookup and a heap fetch of each)."""
    total = max(total, sampled)
    reach = WINDOW_MARGIN * n * sampled / max(k, 1)
    whole = max(k, fetched) / max(sampled, 1) * total * (GIN_COST + FETCH_COST)
    if fetched < 0 or sampled < SAMPLE or reach >= total or k == 0:
        return float("inf"), whole
    read = fetched / sampled
    return read * total * GIN_COST + reach * (TIME_COST + read * FETCH_COST), whole


def _by_rarest(
    w: Where, queries: Sequence[str | None], judged: Sequence[tuple[int, str]], counts: list[int]
) -> tuple[Where, int]:
    """``w`` with its words condition checked on what the GIN index gives for the rarest
    word of each phrase (each other term whole), and at most how many of the sample's
    messages that gives."""
    w = w.copy()
    cond, params, via = w.conds.pop()
    assert via == "gin" and cond.startswith("m.words @@"), cond
    w.conds.append((cond, params, ""))
    rarest: dict[int, tuple[int, str]] = {}
    for (i, one), k in zip(judged, counts, strict=True):
        if i not in rarest or k < rarest[i][0]:
            rarest[i] = (k, one)
    picked = [rarest[i] for i, q in enumerate(queries) if q is not None and i in rarest]
    w.add("m.words @@ %s::tsquery", all_of([q for _, q in picked]), via="gin")
    return w, min(k for k, _ in picked)


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
        base = base_conditions(self.con, self.filters, self.origins)
        if base is None:
            return []
        terms = self.terms
        words = [t for t in terms if t.wordy]
        either: dict[int, str | None] = {}
        if words:
            found_lexemes = lexemes(self.con, words)
            queries = [tsquery(t, f) for t, f in zip(words, found_lexemes, strict=True)]
            if sum(t.trigram_ok for t in terms) > 1:
                # Several terms the substring index serves: each may also be a word of the
                # message ("NotFound prompt"), as in the SQLite index.
                either = {id(t): q for t, q in zip(words, queries, strict=True) if t.trigram_ok}
            w = self._substrings(base, [t for t in terms if not t.wordy])
            found = [q for q in queries if q is not None]
            if w is not None and found:
                w.add("m.words @@ %s::tsquery", all_of(found), via="gin")
                self._words_pass(w, words, found_lexemes, queries)
        # Then every term as a substring (idents, the CJK array or a scan), newest first.
        w = self._substrings(base, terms, either)
        if w is not None:
            indexed = any(t.trigram_ok or t.cjk for t in terms)
            self._pass(w, "substring" if indexed else "scan", indexed=indexed)
        return self.hits

    def _substrings(
        self, base: Where, terms: Sequence[Term], either: dict[int, str | None] | None = None
    ) -> Where | None:
        """``base`` and each term as a substring: inside a code-like token (``idents``) for
        the terms the substring index serves, anywhere in the text for the others (CJK
        terms through their bigrams); None when a term can never match (whitespace inside
        a code-like token)."""
        w = base.copy()
        rest = RestTerms()
        for n, t in enumerate(terms):
            text = clean(t.text)
            q = (either or {}).get(id(t))
            kind = substring_kind(t, text, q)
            if kind is None:
                return None
            if n >= PLANNED:
                rest.add(kind, t, text, q)
            elif kind == "words":
                w.add("m.words @@ %s::tsquery", q, via="gin")
            elif kind == "either":
                w.add(
                    "(m.words @@ %s::tsquery OR m.idents ILIKE %s)",
                    q,
                    like_pattern(text),
                    via="gin",
                )
            elif kind == "idents":
                w.add("m.idents ILIKE %s", like_pattern(text), via="gin")
            else:
                if t.cjk:
                    w.add("m.cjk @> %s::text[]", bigrams(text), via="gin")
                w.add("strpos(lower(m.text), %s) > 0", text.lower())
        rest.into(w)
        return w

    def _count_newest(
        self, cond: str, params: list[object], words: Sequence[str] = ()
    ) -> tuple[int, list[int]]:
        """How many of the newest :data:`SAMPLE` messages of the filters' time range there are,
        and how many of them meet ``cond``, then each of the ``words`` tsqueries. The counts
        are rows, one per word (the sample read once, joined with the array of words), not a
        column each: a statement has at most 1,664 columns, and a term may give more words
        here than ``MAX_QUERY_WORDS`` counts (a server whose letters are ASCII only cuts
        ``w1éw2`` in two)."""
        self._plan("walk")
        span, span_params = self._time_range()
        rows = self.con.execute(
            "SELECT t.i, count(*), min(m.time), max(m.time), count(*) FILTER (WHERE CASE WHEN "
            f"t.q IS NULL THEN {cond} ELSE m.words @@ t.q END) FROM (SELECT * FROM "
            f"{_S}.messages m{span} ORDER BY m.time DESC LIMIT {SAMPLE}) m CROSS JOIN "
            "unnest(array_prepend(NULL::tsquery, %s::tsquery[])) WITH ORDINALITY AS t(q, i) "
            "GROUP BY t.i ORDER BY t.i",
            [*params, *span_params, list(words)],
        ).fetchall()
        if not rows:  # no message in the range
            return 0, [0] * (len(words) + 1)
        _i, sampled, oldest, newest, _k = rows[0]
        self._span = (int(oldest), int(newest))
        return int(sampled), [int(r[4]) for r in rows]

    def _time_range(self) -> tuple[str, list[object]]:
        """The filters' ``since``/``until`` as a ``WHERE`` on ``time`` (or ""), for what reads
        the time index: a sample or a walk then starts at ``until``, not at the newest message
        (1M messages: a common word ``--until`` a month after the oldest took 450-520 ms)."""
        bounds = time_range(self.filters, "time")
        where = " WHERE " + " AND ".join(c for c, _ in bounds) if bounds else ""
        return where, [v for _, v in bounds]

    def _messages(self) -> int:
        """How many messages the index has: the statistics' estimate (``reltuples`` of the
        partitions, kept by autovacuum; a first push analyzes its own), or when they say no
        more than ``COMMON_MIN`` (below it no word is common) or nothing yet, a count that
        stops past it."""
        if self._total is None:
            row = self.con.execute(
                "SELECT coalesce(sum(c.reltuples) FILTER (WHERE c.reltuples >= 0), -1) "
                "FROM pg_partition_tree(%s::regclass) t JOIN pg_class c ON c.oid = t.relid "
                "WHERE t.isleaf",
                (f"{_S}.messages",),
            ).fetchone()
            total = int(row[0]) if row else -1
            if total <= COMMON_MIN:  # no statistics, or few: count, up to where it matters
                row = self.con.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {_S}.messages LIMIT {COMMON_MIN + 1}) m"
                ).fetchone()
                total = int(row[0]) if row else 0
            self._total = total
        return self._total

    def _words_pass(
        self,
        w: Where,
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
            sampled, counts = self._count_newest(cond, params, [q for _, q in judged])
        cap = max(COMMON_MIN, int(total * COMMON_SHARE))
        common = {i for i, _ in judged}
        for (i, _), k in zip(judged, counts[1:], strict=True):
            if k * total <= term_limit(cap, len(found[i])) * max(sampled, 1):
                common.discard(i)
        informative = [q for i, q in enumerate(queries) if q is not None and i not in common]
        rank = all_of(informative) if informative else None
        if self.sort != "relevance":
            rank = None  # sort="recent": every pass newest first
        fetched = counts[0]
        if any(len(f) > 1 for f in found):
            # The planner takes a phrase for rare (it multiplies its words' shares) and so
            # never ANDs the time index with it: give the GIN index the phrases' rarest words
            # only (their shares are known to it), the phrases checked on what it reads.
            if not judged:
                fetched = -1  # no counts: every match is fetched
            else:
                w, fetched = _by_rarest(w, queries, judged, counts[1:])
        self._pass(w, "word", indexed=True, rank=rank, sample=(sampled, counts[0]), fetched=fetched)

    def _plan(self, plan: str) -> None:
        """Steer the planner for the rest of the transaction (``SET LOCAL``)."""
        if plan != self._current_plan:
            # No JIT: compiling costs more (~15 ms) than any plan chosen here runs.
            jit = "" if self._current_plan else "SET LOCAL jit = off; "
            self.con.execute(jit + _PLANS[plan])
            self._current_plan = plan

    def _pass(
        self,
        w: Where,
        kind: str,
        *,
        indexed: bool,
        rank: str | None = None,
        sample: tuple[int, int] | None = None,
        fetched: int | None = None,
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
        spans = whole = 0.0
        if w.has("sessions"):
            plan = "sessions"
        elif indexed:
            if sample is None:
                sampled, (k,) = self._count_newest(cond, params)
            else:
                sampled, k = sample
            got = k if fetched is None else fetched
            spans, whole = _read_costs(n, k, sampled, self._messages(), fetched=got)
            if k < min(n, 5) or n * sampled > k * min(spans, whole):
                plan = "index"
        self._plan(plan)
        if plan == "index" and self._span is not None and spans < whole:
            found = self._windows(w, n, rank, k, sampled)
        else:
            found = self._query(w, plan, n, rank, None, None)
        keys = [(key, score) for key, score in found if key not in self.seen]
        self._add(keys[:want], kind)

    def _windows(
        self, w: Where, n: int, rank: str | None, k: int, sampled: int
    ) -> list[tuple[_Key, float]]:
        """The first ``n`` keys of an index pass read in spans of time going back from the
        newest message, each older than the last and grown to hold the matches still
        missing at the rate seen so far (:data:`WINDOW_MARGIN` more), until ``n`` are found
        or the span reaches back past every message (the last one has no lower bound):
        disjoint spans in time order give the newest ``n`` in time order, and ranking them
        (a stable sort by score) gives the same order as ranking in SQL."""
        assert self._span is not None
        lo, hi = self._span
        per_ms = (hi - lo + 1) / sampled  # ms per message, at the sample's rate
        total = self._messages()
        found: list[tuple[_Key, float]] = []
        upper: int | None = None
        reach = WINDOW_MARGIN * n * sampled / k  # messages the first span should hold
        while True:
            lower = None if reach >= total else hi - int(reach * per_ms)
            got = self._query(w, "index", n - len(found), rank, lower, upper, ordered=True)
            found += got
            if lower is None or len(found) >= n:
                break
            # grow the span to what should hold the missing ones (at least by a quarter)
            reach *= min(8.0, max(1.25, WINDOW_MARGIN * n / max(len(found), 1)))
            upper = lower
        found = found[:n]
        if rank is not None:  # best first, newer first among equals (the list's order)
            found.sort(key=lambda f: -f[1])
        return found

    def _query(
        self,
        w: Where,
        plan: str,
        n: int,
        rank: str | None,
        lower: int | None,
        upper: int | None,
        *,
        ordered: bool = False,
    ) -> list[tuple[_Key, float]]:
        """The first ``n`` keys of a pass (best first; ``ordered``: newest first) and their
        scores, among messages of ``time`` in ``[lower, upper)`` (None: unbounded)."""
        # OFFSET 0 fences the subquery (no condition is pushed into it): walking, it gives
        # the messages in time order; else exactly the matches of the index's conditions.
        if plan == "walk":
            span, params = self._time_range()
            src = f"(SELECT * FROM {_S}.messages{span} ORDER BY time DESC OFFSET 0) m"
            cond, more = w.part()
            params += more
        else:
            via = "gin" if plan == "index" else "sessions"
            fenced, params = w.part(via)
            if lower is not None:
                fenced += " AND m.time >= %s"
                params.append(lower)
            if upper is not None:
                fenced += " AND m.time < %s"
                params.append(upper)
            cond, rest = w.part(via, other=True)
            src = f"(SELECT * FROM {_S}.messages m WHERE {fenced} OFFSET 0) m"
            params += rest
        cols = "m.origin, m.sid, m.seq, m.time" + (", m.words" if rank is not None else "")
        inner = f"SELECT {cols} FROM {src} WHERE {cond} ORDER BY {_ORDER} LIMIT %s"
        order = f"r DESC, {_ORDER}" if rank is not None and not ordered else _ORDER
        if rank is not None:
            sql = (
                f"SELECT m.origin, m.sid, m.seq, ts_rank(m.words, %s::tsquery, {RANK_NORM}) "
                f"AS r FROM ({inner}) m ORDER BY {order}"
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
