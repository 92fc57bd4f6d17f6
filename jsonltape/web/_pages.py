"""What each page shows, gathered from the index's reader interface and the library; the
routes (``_app.py``) only parse the request, call one of these and render the template.

Nothing here writes SQL or opens a path that came from a request: a session is found by its
id in the index (``_index.Index.find``) and its file is the path the index holds for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from jsonltape_daemon.search.language import (
    SESSION_SORTS,
    Filters,
    Hit,
    ListedSession,
    SessionPage,
    SessionQuery,
    Sort,
    as_typed,
    parse_query,
)

import jsonltape
from jsonltape import Event, JsonltapeError

from ._index import Found, Index, key_text
from ._transcript import Block, blocks_of, page_events

__all__ = [
    "FACETS_SECONDS",
    "LIVE_MS",
    "SearchForm",
    "Transcript",
    "is_live",
    "link_of",
    "neutral_blocks",
    "parents_of",
    "read_transcript",
    "search_hits",
    "session_file",
    "session_list",
    "with_links",
]

#: A session its writer has not closed shows as live when a turn is open and its last event is
#: this recent (an agent mid-turn between two tool calls), or when its last event is
#: :data:`RECENT_MS` old or newer.
LIVE_MS = 15 * 60 * 1000
RECENT_MS = 60 * 1000
#: Sessions on one page of the list.
PER_PAGE = 50
#: Seconds the filter choices (agents, projects, origins: a count over every session) are
#: reused.
FACETS_SECONDS = 10.0
#: Seconds a session's list of forks and sub-agent sessions is reused.
CHILDREN_SECONDS = 10.0


def now_ms() -> int:
    return int(dt.datetime.now().timestamp() * 1000)


def is_live(listed: ListedSession) -> bool:
    """Being written: not closed by its writer (the index's ``closed``: its last line is a
    checkpoint with ``closed: true``), and its last event very recent, or a turn open and its
    last event recent. A writer that closes with no turn open writes no such checkpoint
    (spec §10.1), so such a session shows as live for :data:`RECENT_MS` after its last event."""
    if listed.closed:
        return False
    age = now_ms() - listed.info.updated
    return age < RECENT_MS or (listed.info.state == "open-turn" and age < LIVE_MS)


#: The origin column of a local index's sessions when this machine has no origin name yet
#: (it gets one when it first pushes to a team index).
THIS_MACHINE = "this machine"


def local_origin() -> str:
    """The origin of a local index's sessions (all are this machine's): its name on a team
    index (``$JSONLTAPE_ORIGIN``, or the one the daemon keeps), else :data:`THIS_MACHINE`.
    Read once; nothing is written."""
    from jsonltape_daemon.origin import known_origin

    try:
        return known_origin() or THIS_MACHINE
    except (OSError, JsonltapeError):  # unreadable or not a valid name: the daemon says so
        return THIS_MACHINE


def session_list(index: Index, args: dict[str, str]) -> tuple[SessionQuery, SessionPage, Any]:
    """The sessions page: the query the request asks for (unknown values fall back to the
    defaults), its page of sessions, and the filter choices (agents, projects, origins)."""
    sort = args.get("sort", "updated")
    page = _int(args.get("page"), 1, 1, 1_000_000)
    q = SessionQuery(
        agent=args.get("agent") or None,
        cwd=args.get("project") or None,
        origin=args.get("origin") or None,
        text=args.get("q") or None,
        sort=sort if sort in SESSION_SORTS else "updated",  # type: ignore[arg-type]
        descending=args.get("order", "desc") != "asc",
        offset=(page - 1) * PER_PAGE,
        limit=PER_PAGE,
    )
    found = index.run(lambda r: r.list_sessions(q))
    facets = index.memo("facets", FACETS_SECONDS, lambda r: r.facets())
    return q, found, facets


def _int(text: str | None, default: int, lo: int, hi: int) -> int:
    try:
        value = int(text) if text is not None else default
    except ValueError:
        return default
    return min(max(value, lo), hi)


@dataclass
class SearchForm:
    """A search as the page's form gives it (the names of ``jsonltape search``'s options)."""

    q: str = ""
    role: str = ""
    type: str = ""
    since: str = ""
    until: str = ""
    path: str = ""
    origin: str = ""
    sort: str = "relevance"
    all: bool = False
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, args: dict[str, str]) -> SearchForm:
        form = cls(q=args.get("q", ""), role=args.get("role", ""), type=args.get("type", ""))
        form.since, form.until = args.get("since", ""), args.get("until", "")
        form.path, form.origin = args.get("path", ""), args.get("origin", "")
        form.sort = "recent" if args.get("sort") == "recent" else "relevance"
        form.all = args.get("all") in ("1", "on", "true")
        return form

    def filters(self) -> Filters:
        return Filters(
            roles=(self.role,) if self.role else (),
            types=(self.type,) if self.type else (),
            since=self._day(self.since, end=False),
            until=self._day(self.until, end=True),
            path=self.path or None,
            all=self.all,
        )

    def _day(self, text: str, *, end: bool) -> int | None:
        """A date of the form's date field (local midnight; an end date includes its day)."""
        if not text:
            return None
        try:
            day = dt.date.fromisoformat(text)
        except ValueError:
            self.errors.append(f"not a date: {text!r} (use YYYY-MM-DD)")
            return None
        start = dt.datetime(day.year, day.month, day.day)
        if end:
            start += dt.timedelta(days=1)
        return int(start.timestamp() * 1000)


def search_hits(
    index: Index, form: SearchForm, stop: Callable[[], bool], limit: int = 50
) -> Future[list[Hit]]:
    """The hits of ``form`` (the index's own query language, filters and ranking), the query
    read as it is being typed (``as_typed``: its last word a prefix, as ``search -i`` reads
    it), to come: the search ends early, with ``SearchStoppedError``, once ``stop()``."""
    query = as_typed(form.q)
    filters = form.filters()
    origins = (form.origin,) if form.origin else ()
    sort: Sort = "recent" if form.sort == "recent" else "relevance"
    if not parse_query(query):
        done: Future[list[Hit]] = Future()
        done.set_result([])
        return done
    return index.submit(
        lambda r: r.search(query, filters, limit, sort=sort, origins=origins, stop=stop)
    )


# -- a transcript ----------------------------------------------------------------------------


def session_file(found: Found) -> str | None:
    """The session file of ``found`` when this machine holds it: the path the index names,
    if the file there is a jsonltape session with that id (a team index names other
    machines' paths, and another file may sit at the same path here)."""
    try:
        header = jsonltape.header(found.info.path)
    except (JsonltapeError, OSError, ValueError):
        return None
    return found.info.path if header.id == found.info.session else None


def parents_of(index: Index, path: str) -> dict[str, str]:
    """The files of a fork's ancestors (session id -> path), found by id in the index."""
    out: dict[str, str] = {}
    try:
        parent = jsonltape.header(path).parent
    except (JsonltapeError, OSError):
        return out
    for _ in range(64):
        if parent is None or parent.session in out:
            break
        found = index.find(parent.session)
        where = session_file(found[0]) if found else None
        if where is None:
            break
        out[parent.session] = where
        try:
            parent = jsonltape.header(where).parent
        except (JsonltapeError, OSError):
            break
    return out


@dataclass
class Transcript:
    """One page of a session's transcript."""

    found: Found
    path: str | None  #: the session file here (None: shown from the index's texts)
    start: int
    end: int  #: one past the last seq of this page
    last: int  #: the session's last seq as the index knows it
    blocks: list[Block]
    live_from: int | None  #: where a live follow starts (None: not the last page)
    live_after: str  #: the crc of the event before ``live_from`` (the page's last one)
    children: list[ListedSession]
    title: str | None


def read_transcript(index: Index, found: Found, start: int, page: int) -> Transcript:
    """Page ``[start, start + page)`` of ``found``: from its file when this machine holds it,
    else its messages' texts from the index."""
    info = found.info
    last = max(info.events - 1, 0)
    # forks and sub-agents (found through the index on the parent): the answer is kept for a
    # few seconds, not asked again for each page of a session being read
    children = index.memo(
        ("children", info.session),
        CHILDREN_SECONDS,
        lambda r: r.list_sessions(SessionQuery(parent=info.session, limit=100)),
    ).sessions
    path = session_file(found)
    end = start + page
    if path is None:
        blocks = _index_blocks(index, found, start, end)
        return Transcript(found, None, start, end, last, blocks, None, "", children, info.title)
    statuses = index.run(lambda r: r.statuses(found.key, start, end))
    events = list(page_events(path, start, page))
    blocks = with_links(found, blocks_of(events, statuses))
    top = events[-1].seq if events else start - 1
    live_from = top + 1 if events and (len(events) < page or top >= last) else None
    crc = events[-1].crc if events else ""
    return Transcript(
        found, path, start, end, max(last, top), blocks, live_from, crc, children, info.title
    )


def with_links(found: Found, blocks: Iterable[Block]) -> list[Block]:
    """``blocks`` with the addresses they link to within this session (a merged branch)."""
    out = list(blocks)
    base = link_of(found)
    for b in out:
        if b["kind"] == "branch":
            path, _, query = base.partition("?")
            b["href"] = f"{path}/branch/{b['seq']}?{query}"
    return out


def _index_blocks(index: Index, found: Found, start: int, end: int) -> list[Block]:
    """A page from the index alone (another machine's session): each message's text."""
    window = index.run(lambda r: r.window(found.key, last=end - start, before=end))
    return [
        {
            "kind": "message",
            "seq": t.seq,
            "time": t.time,
            "role": t.role,
            "status": t.status,
            "model": None,
            "usage": None,
            "revises": None,
            "parts": [{"kind": "plain", "text": t.text}],
        }
        for t in window.messages
        if t.seq >= start
    ]


def neutral_blocks(items: list[dict[str, Any]]) -> list[Block]:
    """Blocks for the messages of a fold (``jsonltape.messages``): the same drawing as a
    transcript page."""
    events = [
        Event(
            seq=int(i.get("seq", 0)),
            type=str(i.get("type", "user/message")),
            time=int(i.get("time", 0)),
            data={k: v for k, v in i.items() if k in ("message", "call_id", "error")},
        )
        for i in items
    ]
    return list(
        blocks_of(events, {int(i.get("seq", 0)): i.get("status", "current") for i in items})
    )


def link_of(found: Found | ListedSession) -> str:
    """The transcript address of ``found``: its id, its key (the same id may be indexed more
    than once: a copy of a file) and, on a team index, its origin."""
    params = {"n": key_text(found.key)}
    origin = getattr(found.info, "origin", None)
    if isinstance(origin, str):
        params["origin"] = origin
    return f"/s/{quote(found.info.session)}?{urlencode(params)}"
