"""Queries over the index: full-text search, the session list and transcript windows.

Search syntax: words are ANDed, ``"quoted phrases"`` match in order, ``prefix*`` matches word
beginnings; everything else is literal text (there is no FTS syntax to get wrong). Each term is
served by the cheapest index that can answer it:

1. words: the ``unicode61`` table (diacritics folded), ranked by bm25 of the query's
   informative words among its newest ``RANKED`` matches, newer first among equals; a query of
   common words only lists its matches newest first (``rank.py`` says which words count). A
   ``prefix*`` is read as the OR of the words it begins (``words.py``); a common one that
   begins more than ``words.MAX_WORDS`` is checked on the texts, newest first;
2. substrings: the ``trigram`` table, which holds only the *code-like* tokens of each message
   (``idents.py``: a whitespace-separated token with an underscore, a ``. / \\ : -`` between
   letters or digits, a case change inside it as in ``camelCase``, or letters next to digits).
   A term of three or more characters with a letter or digit is found inside those tokens:
   ``NotFound``, ``ound`` and ``Fou`` find ``FileNotFoundError``, ``lru_cach`` finds
   ``functools.lru_cache``; ``ound`` does not find the plain word ``found`` (plain words match
   whole, or by ``prefix*``, in pass 1). The table keeps no positions: all of a term's trigrams
   find candidates, the text decides; newest first, after the word hits. With several such
   terms each may also be a word of the message (``NotFound prompt``): the candidates are then
   the rarest term's matches of either kind, both tables read newest first and merged. Terms
   made of CJK characters only (any length, one character too) are served by the CJK table the
   same way;
3. scan: the texts newest first, for other terms (one or two characters, or punctuation only:
   ``->``, ``#``), anywhere in the text, case folded.

The index keeps no copy of the texts: a hit's text is read back from its session file
(``texts.py``) for its snippet and for the checks. A line that changed under the index gives no
text: the hit is left out where the text decides and shown without a snippet otherwise.

Every full-text rowid is the message's time-ordered key (``messages.tkey``), so each pass
reads its newest matches first and stops when it has what it needs; time, session and path
filters become rowid spans, read newest first (``filters.py``). Keys of deleted messages stay
in the contentless full-text tables (``dead_keys``) and lead nowhere: a hit needs its
``messages`` row.

Terms of the other kinds join a pass as filters, so every hit contains every term. While the
substring index is still being built (after a first sync), substring terms are found in the
messages it does not cover yet by a scan, so results stay complete; :func:`notes` says so.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import sqlite3
from collections.abc import Iterator, Sequence

from jsonltape_daemon.engines.sqlite.common import common_limit, is_common
from jsonltape_daemon.engines.sqlite.filters import Span, filter_sql, key_spans
from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.engines.sqlite.transcripts import (
    resolve_session,
    sessions,
    window,
)
from jsonltape_daemon.engines.sqlite.words import expansion
from jsonltape_daemon.search.language import (
    Filters,
    Hit,
    SessionInfo,
    Sort,
    Term,
    Turn,
    Window,
    parse_query,
    query_terms,
)
from jsonltape_daemon.search.rank import RANKED, tokens
from jsonltape_daemon.search.snippet import MARK_CLOSE, MARK_OPEN, snippet
from jsonltape_daemon.text.cjk import match_expr
from jsonltape_daemon.text.idents import contains

__all__ = [
    "MARK_CLOSE",
    "MARK_OPEN",
    "Filters",
    "Hit",
    "SessionInfo",
    "Sort",
    "Term",
    "Turn",
    "Window",
    "filter_sql",
    "notes",
    "parse_query",
    "resolve_session",
    "search",
    "sessions",
    "window",
]


def _fts_string(term: Term) -> str:
    quoted = '"' + term.text.replace('"', '""') + '"'
    return quoted + "*" if term.prefix else quoted


def _words_expr(con: sqlite3.Connection, term: Term) -> str | None:
    """The word index's expression that finds ``term``, None when no message has it as a
    word: a prefix is the OR of the words it begins where the word list tells
    (``words.py``), else FTS5's prefix query."""
    if term.prefix:
        found = expansion(con, term.text)
        if found is not None and found[0] is not None:
            if not found[0]:
                return None
            return "(" + " OR ".join('"' + w + '"' for w in found[0]) + ")"
    return _fts_string(term)


_COLUMNS = "s.id, s.path, m.seq, m.time, m.role, m.type, m.status, s.title"
_IN_CJK = " AND m.tkey IN (SELECT rowid FROM messages_cjk WHERE messages_cjk MATCH ?)"
#: A text check: the needle (lower case), and whether it must be inside a code-like token
#: (a substring term) or anywhere in the text (a CJK term, a term of one or two characters).
#: A third member, for a term of a query that mixes words and identifier parts: the term as
#: words (folded as the word index folds them, the last one a prefix for ``word*``), which
#: satisfy the check too; with an empty needle only they do (a common prefix of many words).
Check = tuple[str, bool] | tuple[str, bool, "tuple[tuple[str, ...], bool]"]


def _passes(text: str, checks: Sequence[Check]) -> bool:
    """True when the text satisfies every check (case folded as the trigram table folds)."""
    low = text.lower()
    words: list[str] | None = None
    for check in checks:
        needle, ident = check[0], check[1]
        if needle and needle in low and (not ident or contains(text, needle)):
            continue
        if len(check) == 3:
            want, prefix = check[2]
            if text.isascii() and (not want or want[-1] not in low):
                return False  # folding changes nothing: the word is not there at all
            if words is None:
                words = tokens(text)
            if _has_words(words, want, prefix):
                continue
        return False
    return True


def _has_words(words: list[str], want: tuple[str, ...], prefix: bool) -> bool:
    """``want`` appears in ``words`` in order (its last word as a prefix with ``prefix``)."""
    n = len(want)
    if not n:
        return False
    for i in range(len(words) - n + 1):
        if words[i : i + n - 1] == list(want[:-1]) and (
            words[i + n - 1].startswith(want[-1]) if prefix else words[i + n - 1] == want[-1]
        ):
            return True
    return False


#: Matches counted per table to tell which term of a mixed query is the rarest.
_DRIVER_CAP = 2000


def _either_count(con: sqlite3.Connection, term: Term, cap: int) -> int:
    """How many messages have ``term`` as a word or inside an identifier, up to ``cap`` in
    each index (enough to tell the rarest term of a query)."""
    n = 0
    for table, expr in (
        ("messages_fts", _words_expr(con, term)),
        ("messages_trigram", trigram_expr(term.text)),
    ):
        if expr is None:
            continue
        n += con.execute(
            f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
            (expr, cap),
        ).fetchone()[0]
    return int(n)


def trigram_expr(text: str) -> str:
    """The trigram table's MATCH expression for a substring: its trigrams (the table keeps no
    positions; the candidates are then checked on their texts). Where the term has trigrams
    across a junction -- a case change inside it, a letter next to a digit, a ``_ . /`` --
    only those: they are the rare ones (``ckQ``, ``yOp`` in ``BlockQueryOpen``, against
    ``que`` in a quarter of all messages), and FTS5 reads every doclist of an AND."""
    low = text.lower()
    grams = [low[i : i + 3] for i in range(len(low) - 2)]
    junctions = [g for i, g in enumerate(grams) if _junction(text[i : i + 3])]
    return " ".join('"' + g.replace('"', '""') + '"' for g in dict.fromkeys(junctions or grams))


def _junction(gram: str) -> bool:
    return any(
        not a.isalnum()
        or not b.isalnum()
        or (a.islower() and b.isupper())
        or a.isalpha() != b.isalpha()
        for a, b in itertools.pairwise(gram)
    )


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
    terms = query_terms(query, phrases)
    if not terms:
        return []
    with Texts(con) as texts:
        return _search(con, texts, terms, filters or Filters(), limit, sort)


def _search(
    con: sqlite3.Connection,
    texts: Texts,
    terms: list[Term],
    filters: Filters,
    limit: int,
    sort: Sort,
) -> list[Hit]:
    base_where, base_params = filter_sql(filters)
    # the sessions row is read for the hits anyway; in a pass only when the filter needs it
    join_s = " JOIN sessions s ON s.sid = m.sid" if filters.on_sessions else ""
    spans = key_spans(con, filters)  # newest first; a pass reads each in turn
    upto = substrings_upto(con)
    hits: list[Hit] = []
    seen: set[int] = set()  # keys of the hits so far

    def as_substrings(ts: list[Term]) -> tuple[str, list[object], list[Check]]:
        """Filters (SQL, then checks on the texts) that keep messages containing each term
        as a substring: inside a code-like token, or for CJK and short terms anywhere."""
        checks: list[Check] = [(t.text.lower(), t.trigram_ok) for t in ts]
        cjk = [match_expr(t.text) for t in ts if t.cjk]
        if not cjk:
            return "", [], checks
        # One look-up for all of them: a condition per term nested SQLite's expression tree
        # a level deeper each ("Expression tree is too large" past 1,000 CJK terms).
        return _IN_CJK, [" AND ".join(cjk)], checks

    def in_range(col: str, span: Span) -> tuple[str, list[object]]:
        lo, hi = span
        sql = ""
        params: list[object] = []
        if lo is not None:
            sql += f" AND {col} >= ?"
            params.append(lo)
        if hi is not None:
            sql += f" AND {col} < ?"
            params.append(hi)
        return sql, params

    def candidates(sql: str, params: list[object], n: int, checks: list[Check]) -> list[int]:
        """The first ``n`` keys the query gives whose texts pass the checks, reading the
        texts a growing batch at a time (the query gives its newest first)."""
        if not checks:
            return [int(r[0]) for r in con.execute(sql + " LIMIT ?", [*params, n])]
        out: list[int] = []
        cur = con.execute(sql, params)
        step = max(n, 16) if n < 1024 else 1024
        while len(out) < n:
            batch = [int(r[0]) for r in cur.fetchmany(step)]
            if not batch:
                break
            got = texts.get(batch)
            ok = [k for k in batch if (t := got[k]) is not None and _passes(t, checks)]
            texts.forget(set(batch).difference(ok))
            out += ok
            step = min(step * 2, 1024)
        cur.close()
        return out[:n]

    def either_keys(term: Term) -> Iterator[int]:
        """The keys of the messages holding ``term`` as a word or inside an identifier,
        newest first: both full-text tables read in rowid order and merged, a span at a
        time (a prefix: once over all of them), so a pass that stops early reads only what
        it needs."""

        def in_spans(table: str, expr: str) -> Iterator[int]:
            for span in spans:
                rng, rng_params = in_range("rowid", span)
                cur = con.execute(
                    f"SELECT rowid FROM {table} WHERE {table} MATCH ?{rng} ORDER BY rowid DESC",
                    [expr, *rng_params],
                )
                yield from (int(r[0]) for r in cur)

        words = _words_expr(con, term)
        streams = [in_spans("messages_trigram", trigram_expr(term.text))]
        if words is not None:
            streams.append(
                spanned("messages_fts", words)
                if words.endswith("*") and len(spans) > 1  # FTS5's own prefix query
                else in_spans("messages_fts", words)
            )
        last = None
        for k in heapq.merge(*streams, reverse=True):
            if k != last:
                yield k
                last = k

    def spanned(table: str, match: str) -> Iterator[int]:
        """The keys of ``match`` inside the spans, newest first, read by one query over all of
        them: FTS5 merges the doclists of every word a prefix matches each time a query
        starts, whatever its rowid range (1.6 ms for ``migr*`` at 5M messages), so a prefix
        is read once and the keys between the spans are skipped here."""
        lo, hi = spans[-1][0], spans[0][1]
        rng, rng_params = in_range("rowid", (lo, hi))
        cur = con.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ?{rng} ORDER BY rowid DESC",
            [match, *rng_params],
        )
        # oldest first for bisect; an open end is past every key
        starts = [-(2**63) if a is None else a for a, _ in reversed(spans)]
        ends = [2**63 if b is None else b for _, b in reversed(spans)]
        while rows := cur.fetchmany(1024):
            for (k,) in rows:
                i = bisect.bisect_right(starts, k) - 1
                if i >= 0 and k < ends[i]:
                    yield k
        cur.close()

    def streamed(
        keys: Iterator[int], n: int, more: str, more_params: list[object], checks: list[Check]
    ) -> list[int]:
        """The first ``n`` of ``keys`` (newest first) that pass the filter and the checks."""
        out: list[int] = []
        step = 64
        while len(out) < n:
            batch = list(itertools.islice(keys, step))
            if not batch:
                break
            marks = ", ".join("?" * len(batch))
            kept = {
                int(r[0])
                for r in con.execute(
                    f"SELECT m.tkey FROM messages m{join_s} WHERE m.tkey IN ({marks}) AND "
                    f"{base_where}{more}",
                    [*batch, *base_params, *more_params],
                )
            }
            batch = [k for k in batch if k in kept and k not in seen]
            if not checks:  # nothing for the texts to decide
                out += batch
                step = min(step * 2, 2048)
                continue
            got = texts.get(batch)
            ok = [k for k in batch if (t := got[k]) is not None and _passes(t, checks)]
            texts.forget(set(batch).difference(ok))
            out += ok
            step = min(step * 2, 2048)
        return out[:n]

    def run(
        table: str | None,
        match: str | None,
        kind: str,
        more: str,
        more_params: list[object],
        checks: list[Check],
        rank: str | None = None,
        stream: Iterator[int] | None = None,
        prefix: bool = False,
    ) -> None:
        """Add the hits of one pass: its newest matches (``table`` None: a scan of the
        messages in time order) that pass the checks, or with ``rank`` (the informative words'
        expression) the best by bm25 among its newest ``RANKED``. ``prefix``: ``match`` has
        a prefix term, read once over several spans (:func:`spanned`)."""
        want = limit - len(hits)
        if want <= 0 or not spans:
            return
        if prefix and len(spans) > 1 and table is not None and match is not None:
            stream = spanned(table, match)
        key = f"{table}.rowid" if table is not None else "m.tkey"
        not_seen = ""
        params: list[object] = []
        if seen:
            not_seen = f" AND {key} NOT IN ({', '.join('?' * len(seen))})"
            params += sorted(seen)
        source = (
            f"{table} JOIN messages m ON m.tkey = {table}.rowid" if table is not None
            else "messages m"
        )  # fmt: skip
        head = [match] if table is not None else []
        cond = f"{table} MATCH ? AND " if table is not None else ""
        n = max(RANKED, want) if rank is not None else want
        scores: dict[int, float] = {}
        keys: list[int] = []
        if stream is not None:
            keys = streamed(stream, n, more, more_params, checks)
        # Every word informative and one span: the pass that finds the newest matches ranks
        # them too, and SQLite keeps the best (the order of the sort below). Over several
        # spans bm25 would count the words' matches again in each (its weights are the whole
        # table's): the keys are found first and ranked by one statement after.
        fused = rank is not None and rank == match and not checks and len(spans) == 1
        for span in spans if stream is None else ():
            rng, rng_params = in_range(key, span)
            where = f"WHERE {cond}{base_where}{more}{not_seen}{rng} ORDER BY {key} DESC"
            args = [*head, *base_params, *more_params, *params, *rng_params]
            if fused:
                scores = {
                    int(r[0]): r[1]
                    for r in con.execute(
                        f"SELECT k, score FROM (SELECT {key} AS k, bm25({table}) AS score "
                        f"FROM {source}{join_s} {where} LIMIT ?) ORDER BY score, k DESC LIMIT ?",
                        [*args, n, want],
                    )
                }
                keys = list(scores)
            else:
                keys += candidates(
                    f"SELECT {key} FROM {source}{join_s} {where}", args, n - len(keys), checks
                )
            if len(keys) >= n:
                break
        if not keys:
            return
        if rank is not None and not scores:
            # One read of the informative words over the keys' range, ranking only the keys
            # (``+``: not handed to FTS5, which would start over, and count every match again,
            # for each member of the list).
            scores = dict(
                con.execute(
                    f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? "
                    f"AND rowid >= ? AND rowid <= ? AND +rowid IN ({', '.join('?' * len(keys))})",
                    (rank, min(keys), max(keys), *keys),
                ).fetchall()
            )
        if rank is not None:
            keys.sort(key=lambda k: (scores.get(k, 0.0), -k))  # best first; newer among equals
        top = keys[:want]
        rows = {
            int(r[0]): r[1:]
            for r in con.execute(
                f"SELECT m.tkey, {_COLUMNS} FROM messages m JOIN sessions s ON s.sid = m.sid "
                f"WHERE m.tkey IN ({', '.join('?' * len(top))})",
                top,
            )
        }
        got = texts.get(top)
        for k in top:
            r = rows.get(k)
            if r is None:  # a message without its session row: never in an intact index
                continue
            text = got[k]
            seen.add(k)
            hits.append(
                Hit(
                    session=r[0],
                    path=r[1],
                    seq=r[2],
                    time=r[3],
                    role=r[4],
                    type=r[5],
                    status=r[6],
                    title=r[7],
                    # no text: the file changed under the index; the word index still knows
                    snippet=snippet(text, terms) if text is not None else "",
                    score=round(-float(scores.get(k, 0.0)), 6) + 0.0,
                    match=kind,  # type: ignore[arg-type]
                )
            )

    words = [t for t in terms if t.wordy]
    common = common_limit(con) if words else 0
    # A common prefix of more words than the list expands (``c*``, ``s*``) is checked on the
    # texts: in a twentieth of the messages or more, a few hundred texts hold the newest 20,
    # where FTS5 would merge the doclists of thousands of words (5M messages: ``c*`` 3.3 s).
    broad = [
        t
        for t in words
        if t.prefix
        and (found := expansion(con, t.text)) is not None
        and found[0] is None
        and found[1] > common
    ]
    indexed = [t for t in words if t not in broad]
    exprs = [_words_expr(con, t) for t in indexed]
    if words and None not in exprs:
        more, params, checks = as_substrings([t for t in terms if not t.wordy])
        checks += [("", False, (tuple(tokens(t.text)), True)) for t in broad]
        informative: list[Term] = []
        if sort == "relevance":
            informative = [t for t in indexed if not is_common(con, t.text, t.prefix, common)]
        run(
            "messages_fts" if indexed else None,
            " AND ".join(e for e in exprs if e is not None) if indexed else None,  # no ( ) ( )
            "word",
            more,
            params,
            checks,
            " AND ".join(_fts_string(t) for t in informative) if informative else None,
            prefix=any(e.endswith("*") for e in exprs if e is not None),
        )
    # Then every term as a substring, served by the trigram table, the CJK table or a scan,
    # newest first; the candidates' texts decide.
    tri = [t for t in terms if t.trigram_ok]
    cjk = [t for t in terms if t.cjk]
    if len(tri) > 1:
        # Several terms the substring index serves: each may be a word of the message or
        # inside one of its identifiers ("NotFound prompt"). The rarest term's matches of
        # either kind are the candidates, newest first; the texts decide the rest.
        more, params, checks = as_substrings(terms)
        checks = [  # as_substrings gives one check per term, in order
            (c[0], c[1], (tuple(tokens(t.text)), t.prefix)) if t.trigram_ok else c
            for t, c in zip(terms, checks, strict=True)
        ]
        checks.sort(key=len)  # the plain checks first: they turn most candidates down
        driver = min(tri, key=lambda t: _either_count(con, t, _DRIVER_CAP))
        run(None, None, "substring", more, params, checks, stream=either_keys(driver))
        if upto is not None:
            run(None, None, "scan", f" AND m.id > ?{more}", [upto, *params], checks)
    elif tri:
        more, params, checks = as_substrings(terms)
        match = " ".join(trigram_expr(t.text) for t in tri)
        run("messages_trigram", match, "substring", more, params, checks)
        if upto is not None:  # what the substring index does not cover yet: a scan
            run(None, None, "scan", f" AND m.id > ?{more}", [upto, *params], checks)
    elif cjk:
        more, params, checks = as_substrings([t for t in terms if not t.cjk])
        checks += [(t.text.lower(), False) for t in cjk]
        match = " AND ".join(match_expr(t.text) for t in cjk)
        run("messages_cjk", match, "substring", more, params, checks)
    else:
        more, params, checks = as_substrings(terms)
        run(None, None, "scan", more, params, checks)
    return hits
