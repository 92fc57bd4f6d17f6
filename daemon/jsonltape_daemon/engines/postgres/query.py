"""The pieces of a query over the PostgreSQL team index (``pg_search.py``): the lexemes and
tsquery text of word terms, ``LIKE`` patterns, CJK bigrams, SQLite's ``GLOB`` as a regular
expression, and a search's filters as conditions over ``messages``, each with the index that
can serve it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jsonltape_daemon.engines.postgres._rows import clean as stored
from jsonltape_daemon.engines.postgres.schema import SCHEMA
from jsonltape_daemon.search.language import Filters, Term

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SESSIONS_MAX",
    "SESSION_ROWS",
    "RestTerms",
    "Where",
    "all_of",
    "base_conditions",
    "bigrams",
    "clean",
    "glob_regex",
    "lexemes",
    "like_pattern",
    "path_glob",
    "sessions_where",
    "substring_kind",
    "time_range",
    "tsquery",
]

#: A session or path filter naming at most this many sessions, of at most ``SESSION_ROWS``
#: messages together, reads just their messages.
SESSIONS_MAX = 64
SESSION_ROWS = 20_000

_S = '"' + SCHEMA.replace('"', '""') + '"'
_CFG = "'" + SCHEMA.replace("'", "''") + ".words'::regconfig"
#: What the ``words`` column is made of (``pg_schema``): runs of letters and digits.
_WORDS = "regexp_replace({}, '[^[:alnum:]]+', ' ', 'g')"
_SURROGATE = re.compile("[\ud800-\udfff]")


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
        ([clean(t.text) for t in terms],),
    ).fetchall()
    out: list[list[tuple[str, int]]] = [[] for _ in terms]
    for i, lexeme, pos in rows:
        out[int(i) - 1].append((str(lexeme), int(pos)))
    return out


def all_of(queries: Sequence[str]) -> str:
    """The tsquery every one of ``queries`` must match, as a balanced tree of ``&``: a chain
    of thousands made the server recurse once per term ("stack depth limit exceeded" at
    20,000 words); a tree is as deep as the log of their number."""
    if len(queries) == 1:
        return f"({queries[0]})"
    half = len(queries) // 2
    return f"({all_of(queries[:half])} & {all_of(queries[half:])})"


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


def clean(text: str) -> str:
    """A query term as PostgreSQL text can hold it: NUL, which the pusher stores as U+FFFD
    (``_rows.clean``), and lone surrogates (bytes of the command line that are not UTF-8,
    which no indexed text holds) become U+FFFD; so such a term can match only a text that
    held U+FFFD or NUL there."""
    text = text.replace("\x00", "\ufffd")
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def stored_glob(glob: str) -> str:
    """A glob over stored values: a lone surrogate matches the ``?`` the pusher stored for it
    (``_rows.clean``), and only that, not any character."""
    return stored(glob if glob.isascii() else _SURROGATE.sub("[?]", glob))


def like_pattern(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def bigrams(term: str) -> list[str]:
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
            # Never empty: a ``]`` first in the set is a member (``[]`` and ``[^]`` are open).
            out.append("[" + ("^" if neg else "") + _bracket(body[1:] if neg else body) + "]")
            i = close
        else:
            out.append(c if c.isalnum() else "\\" + c)
        i += 1
    out.append("$")
    return "".join(out)


def _char(ch: str) -> str:
    return ch if ch.isalnum() else "\\" + ch


def _bracket(body: str) -> str:
    """The members of a ``GLOB`` set (``body``: what is between ``[`` or ``[^`` and ``]``) as a
    regular expression's, read as SQLite reads them: a ``-`` between two characters makes a
    range (``a-c-e`` is ``a-c``, ``-``, ``e``), any other ``-`` is itself, and a range whose
    ends are reversed (``z-a``) is only its first end (SQLite compares that one first), where
    PostgreSQL would refuse the expression.
    """
    out: list[str] = []
    prior = ""
    i = 0
    if body.startswith("]"):  # a leading ``]`` is itself and never starts a range
        out.append(_char("]"))
        i = 1
    while i < len(body):
        ch = body[i]
        if ch == "-" and prior and i + 1 < len(body):
            hi = body[i + 1]
            if prior < hi:  # a reversed range keeps only its first end, added already
                out[-1] = f"{_char(prior)}-{_char(hi)}"
            prior = ""
            i += 2
            continue
        out.append(_char(ch))
        prior = ch
        i += 1
    return "".join(out)


def path_glob(path: str) -> str | None:
    return glob_regex(path if path.startswith(("/", "*")) else "*" + path)


class Where:
    """A conjunction of SQL conditions over ``m`` (messages) and their parameters, each with
    the index that can serve it: ``gin`` (words, idents, cjk), ``sessions`` (a few sessions,
    by the primary key) or none."""

    def __init__(self) -> None:
        self.conds: list[tuple[str, list[object], str]] = []

    def add(self, cond: str, *params: object, via: str = "") -> None:
        self.conds.append((cond, list(params), via))

    def copy(self) -> Where:
        w = Where()
        w.conds = list(self.conds)
        return w

    def has(self, via: str) -> bool:
        return any(c[2] == via for c in self.conds)

    def part(self, via: str | None = None, *, other: bool = False) -> tuple[str, list[object]]:
        """The SQL and parameters of the conditions (``via``: those served by that index, or
        with ``other`` the rest)."""
        picked = [c for c in self.conds if via is None or (c[2] == via) != other]
        return " AND ".join(c[0] for c in picked) or "true", [p for c in picked for p in c[1]]


def sessions_where(
    session: str | None, path: str | None, origins: Sequence[str]
) -> tuple[str, list[object]]:
    where: list[str] = []
    params: list[object] = []
    if session:
        session = stored(session)
        where.append("(s.id = %s OR starts_with(s.id, %s) OR s.path = %s)")
        params += [session, session, session]
    if path:
        regex = path_glob(stored_glob(path))
        where.append("s.path ~ %s" if regex is not None else "false")
        params += [regex] if regex is not None else []
    if origins:
        where.append("s.origin = ANY(%s)")
        params.append([stored(o) for o in origins])
    return " AND ".join(where) or "true", params


def base_conditions(
    con: psycopg.Connection[Any], filters: Filters, origins: Sequence[str]
) -> Where | None:
    """The filters as conditions on ``m``; None when no message can pass them."""
    w = Where()
    if not filters.all:
        w.add("m.status = 'current'")
    if filters.roles:
        w.add("m.role = ANY(%s)", [stored(r) for r in filters.roles])
    if filters.types:
        types = [r for t in filters.types if (r := glob_regex(stored_glob(t))) is not None]
        if not types:
            return None
        w.add("m.type ~ ANY(%s)", types)
    for cond, value in time_range(filters, "m.time"):
        w.add(cond, value)
    if origins:
        w.add("m.origin = ANY(%s)", [stored(o) for o in origins])
    if filters.session or filters.path:
        where, params = sessions_where(filters.session, filters.path, origins)
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


def time_range(filters: Filters, column: str) -> list[tuple[str, int]]:
    """``since`` (inclusive) and ``until`` (exclusive) as conditions on ``column``."""
    out: list[tuple[str, int]] = []
    if filters.since is not None:
        out.append((f"{column} >= %s", filters.since))
    if filters.until is not None:
        out.append((f"{column} < %s", filters.until))
    return out


def substring_kind(t: Term, text: str, q: str | None) -> str | None:
    """How a term is found as a substring (the rule of SQLite's ``search.py``): ``words``
    (a word with whitespace: never inside one identifier), ``either`` (a word of the
    message or inside one of its identifiers: ``q`` is its tsquery), ``idents`` (inside an
    identifier), ``text`` (anywhere in the text: CJK and short terms); None when it can never
    match (whitespace inside a code-like token)."""
    if t.trigram_ok:
        if q is not None:
            return "words" if any(c.isspace() for c in text) else "either"
        return None if any(c.isspace() for c in text) else "idents"
    return "text"


class RestTerms:
    """The conditions of a query's terms past the first ``search.PLANNED``, each kind ANDed in one
    clause (the same rows as one clause a term): the planner's work grows with the square of
    the clauses it is given (a query of 400 words took seconds to plan at 7 origins, 5,000
    minutes), and the first terms are selective enough for the plan."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self.either: tuple[list[str], list[str]] = ([], [])
        self.idents: list[str] = []
        self.cjk: list[str] = []
        self.texts: list[str] = []

    def add(self, kind: str, t: Term, text: str, q: str | None) -> None:
        """Take one term of :func:`substring_kind` ``kind`` (``q``: its tsquery, if a word)."""
        if kind == "words":
            assert q is not None
            self.words.append(q)
        elif kind == "either":
            assert q is not None
            self.either[0].append(q)
            self.either[1].append(like_pattern(text))
        elif kind == "idents":
            self.idents.append(like_pattern(text))
        else:
            if t.cjk:
                self.cjk += bigrams(text)
            self.texts.append(like_pattern(text.lower()))

    def into(self, w: Where) -> None:
        if self.words:
            w.add("m.words @@ %s::tsquery", all_of(self.words))
        if self.either[0]:
            w.add(
                "NOT EXISTS (SELECT FROM unnest(%s::text[], %s::text[]) AS t(q, p) "
                "WHERE NOT coalesce(m.words @@ t.q::tsquery OR m.idents ILIKE t.p, false))",
                *self.either,
            )
        if self.idents:
            w.add("m.idents ILIKE ALL (%s::text[])", self.idents)
        if self.cjk:
            w.add("m.cjk @> %s::text[]", list(dict.fromkeys(self.cjk)))
        if self.texts:
            w.add("lower(m.text) LIKE ALL (%s::text[])", self.texts)
