"""The query language both engines serve, and what a search returns.

Search syntax: words are ANDed, ``"quoted phrases"`` match in order, ``prefix*`` matches word
beginnings; everything else is literal text (there is no FTS syntax to get wrong). The engines
(``engines/sqlite/search.py``, ``engines/postgres/search.py``) turn a list of :class:`Term`
and a :class:`Filters` into :class:`Hit` lists by the same rules; ``sessions`` and ``show``
return :class:`SessionInfo` and :class:`Window` of :class:`Turn`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from jsonltape.errors import InvalidArgumentError
from jsonltape_daemon.text.cjk import is_cjk, is_cjk_term

__all__ = [
    "FACET_LIMIT",
    "MAX_QUERY_WORDS",
    "SESSION_SORTS",
    "Filters",
    "Hit",
    "ListedSession",
    "SessionInfo",
    "SessionPage",
    "SessionQuery",
    "SessionSort",
    "Sort",
    "Term",
    "Turn",
    "Window",
    "as_typed",
    "parse_query",
    "query_size",
    "query_terms",
]

Sort = Literal["relevance", "recent"]

_QUERY = re.compile(r'"([^"]*)"?(\*?)|(\S+)')

#: The most words a query may have, on either engine (:func:`query_size`); a longer one is
#: refused before any index is read. Each engine had a limit of its own, well apart:
#: PostgreSQL's 1,664 columns of a statement (it counts each word in the newest messages) and,
#: in a tsquery, the server's stack depth; SQLite's expression depth of 1,000 (CJK terms
#: mixed with others); and the work of a query grows with its words on both.
MAX_QUERY_WORDS = 1024


# Term, Filters and Window are plain classes, not dataclasses: building the
# three dataclasses took ~3 ms of every `jsonltape search` start-up (benchmarks/README.md,
# issue 11). They keep what dataclasses gave them that is used: keyword or positional
# construction, ==, repr, and for Term immutability and a hash.


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
        """Three characters or more, with a letter or digit: the substring index serves it
        (inside code-like tokens, ``idents.py``); other terms of punctuation are scanned for."""
        return len(self.text) >= 3 and self.wordy


def parse_query(query: str) -> list[Term]:
    """Split a query into terms: phrases in double quotes (a missing closing quote is fine).
    A NUL is U+FFFD, as in the texts a team index holds (SQLite's FTS5 refuses one)."""
    terms: list[Term] = []
    for m in _QUERY.finditer(query.replace("\x00", "\ufffd")):
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


#: Characters the word being typed needs before a search as you type looks for it.
TYPED_MIN = 3


def as_typed(query: str) -> str:
    """A query as it is being typed (``search -i``, the viewer's search as you type): the word
    at its end, still being typed, is a prefix (``quok`` finds ``quokka``); while it has fewer
    than :data:`TYPED_MIN` characters and words come before it, it is left out (such a prefix
    begins so many words that nearly every text of the others has one, and it is checked on
    the texts: a ranked search read a thousand of them, 1M events: ``migration e*`` 230 ms,
    ``migration`` 30). A query that ends in a space, ``*`` or a closed phrase is as written,
    and so is one inside an open phrase."""
    if not query or query[-1].isspace() or query.endswith(("*", '"')) or query.count('"') % 2:
        return query
    head, last = _TYPED.fullmatch(query).groups()  # type: ignore[union-attr]
    if len(last) >= TYPED_MIN or not head.strip():
        return query + "*"
    return head


_TYPED = re.compile(r"(.*\s|)(\S+)", re.DOTALL)


def query_size(terms: list[Term]) -> int:
    """How many words ``terms`` have for :data:`MAX_QUERY_WORDS`: each run of letters and
    decimal digits counts one (where PostgreSQL and SQLite may cut a term into more words
    than that, such as at ``²`` or a combining accent, each cuts it there or joins more), and
    a term with none (``->``) counts one."""
    n = 0
    for t in terms:
        runs = 0
        inside = False
        for c in t.text:
            word = c.isalpha() or c.isdecimal()
            runs += word and not inside
            inside = word
        n += max(runs, 1)
    return n


def query_terms(query: str, phrases: Sequence[str] = ()) -> list[Term]:
    """The terms of ``query`` (:func:`parse_query`) and of ``phrases``, more phrase terms taken
    as they are; :class:`~jsonltape.errors.InvalidArgumentError` (``field`` ``query``) when
    they have more than :data:`MAX_QUERY_WORDS` words."""
    terms = parse_query(query) + [Term(p.strip(), phrase=True) for p in phrases if p.strip()]
    n = query_size(terms)
    if n > MAX_QUERY_WORDS:
        raise InvalidArgumentError(
            f"it has {n:,} words; a search takes at most {MAX_QUERY_WORDS:,}",
            field="query",
        )
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

    @property
    def on_sessions(self) -> bool:
        """The filter reads the ``sessions`` row (``s``): a session or path filter. Without
        one a pass reads only the messages (a join per candidate less)."""
        return bool(self.session or self.path)


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


# -- the session list of a viewer (``jsonltape serve``): filters, sort, pages -------------

SessionSort = Literal["updated", "created", "messages", "events", "title"]
#: The session columns a list may be sorted by.
SESSION_SORTS: tuple[str, ...] = ("updated", "created", "messages", "events", "title")


class SessionQuery(msgspec.Struct, kw_only=True):
    """Which sessions a list shows and in what order: each filter is an exact value (``text``:
    a case-insensitive substring of the title or the id; ``parent``: the forks and sub-agent
    sessions of that session id; ``origin``: a team index's), a sort column, and a page."""

    agent: str | None = None
    cwd: str | None = None
    origin: str | None = None
    parent: str | None = None
    text: str | None = None
    sort: SessionSort = "updated"
    descending: bool = True
    offset: int = 0
    limit: int = 50


class ListedSession(msgspec.Struct):
    """A session of a list: its index key (what ``window`` and ``statuses`` take), its row,
    and whether its writer closed it (a session not closed is still being written, or its
    writer died)."""

    key: Any
    info: SessionInfo
    closed: bool


class SessionPage(msgspec.Struct):
    """One page of a session list and how many sessions pass its filters in all."""

    sessions: list[ListedSession]
    total: int


#: How many values of each field :func:`facets` names (the most common first).
FACET_LIMIT = 200
