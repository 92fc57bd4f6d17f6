"""The viewer's routes: parse the request, ask ``_pages`` (index reader, library), render.

Pages are rendered on the server (Jinja2, autoescaping on: every string from a session is
escaped; only the export's Markdown renderer produces markup) and read with JavaScript off.
The little script there is (``static/app.js``) searches as you type, follows a live session,
copies a request as JSON and adds keys. Every route only reads: the server never writes a
session file (nor the index, but for the daemon loop it may run, ``_mirror.py``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode

import jinja2
import msgspec
from jsonltape_daemon.errors import IndexStateError, SearchStoppedError
from jsonltape_daemon.search.snippet import MARK_CLOSE, MARK_OPEN
from markupsafe import Markup, escape
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import jsonltape
from jsonltape import Event, JsonltapeError, interop
from jsonltape.fold import Format

from . import _live
from ._config import Config, allowed_hosts
from ._guard import Guard
from ._index import Found, Index
from ._pages import (
    FACETS_SECONDS,
    SearchForm,
    is_live,
    link_of,
    local_origin,
    neutral_blocks,
    parents_of,
    read_transcript,
    search_hits,
    session_file,
    session_list,
    with_links,
)
from ._transcript import blocks_of
from ._usage import install as usage_routes

__all__ = ["create_app"]

T = TypeVar("T")

_FORMATS = ("neutral", "openai", "anthropic")
#: Characters of a request shown on the time travel page (copy and download give it all).
_JSON_SHOWN = 1_000_000
_enc = msgspec.json.Encoder()


def _when(ms: Any) -> str:
    if not isinstance(ms, int):
        return ""
    try:
        return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _iso(ms: Any) -> str:
    if not isinstance(ms, int):
        return ""
    try:
        return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return ""


def _seq(text: str | None) -> int | None:
    """A query parameter as a seq: ASCII digits, at most 16 (``str.isdigit`` also takes ``²``,
    which ``int`` refuses, as it does more than 4,300 digits); else None. The library's rule
    (``jsonltape._limits.ascii_int``) is private, and the viewer uses only public modules."""
    if text is None or not (text.isascii() and text.isdigit()) or len(text) > 16:
        return None
    return int(text)


def _marked(snippet: str) -> Markup:
    """A snippet with the index's own highlight marks as ``<mark>``, the rest escaped."""
    out = escape(snippet)
    return Markup(str(out).replace(MARK_OPEN, "<mark>").replace(MARK_CLOSE, "</mark>"))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("jsonltape.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["iso"] = _iso
    env.filters["marked"] = _marked
    env.globals["link_of"] = link_of
    env.globals["is_live"] = is_live
    return env


class Viewer:
    """The routes of one viewer over one index."""

    def __init__(self, config: Config, note: Callable[[], str] = str) -> None:
        self.config = config
        self.index = Index(config.target)
        self.env = _environment()
        #: The origin column of a local index (a team index's rows name their own origin).
        self.env.globals["here"] = local_origin()
        self.note = note

    # -- helpers ----------------------------------------------------------------------------

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        if "link" in context:  # a session's pages: its address, to build the others'
            base, _, query = context["link"].partition("?")
            context.update(base=base, query=query, hidden=parse_qsl(query))
        context.setdefault("index_name", self.index.name)
        context.setdefault("note", self.note())
        html = self.env.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status)

    def error(self, status: int, text: str) -> HTMLResponse:
        return self.page(
            "error.html", status, title="Not found" if status == 404 else "Error", message=text
        )

    def find(self, request: Request) -> Found | Response:
        sid = request.path_params["sid"]
        q = request.query_params
        found = self.index.find(sid, origin=q.get("origin") or None, n=q.get("n") or None)
        if not found:
            return self.error(404, "no such session in this index")
        if len(found) > 1:
            return self.page("choose.html", 300, title="Which session?", found=found)
        return found[0]

    def local(self, request: Request) -> tuple[Found, str] | Response:
        """The session a request names and its file here (time travel, branches and export
        fold the file; a team index's session of another machine has none here)."""
        found = self.find(request)
        if isinstance(found, Response):
            return found
        path = session_file(found)
        if path is None:
            return self.error(404, "this needs the session file, which is on another machine")
        return found, path

    # -- pages ------------------------------------------------------------------------------

    def sessions(self, request: Request) -> Response:
        args = dict(request.query_params)
        try:
            query, found, facets = session_list(self.index, args)
        except IndexStateError as exc:
            return self.page("empty.html", 503, title="No index yet", message=str(exc))
        pages = max(1, -(-found.total // query.limit))
        current = query.offset // query.limit + 1

        def page_link(n: int) -> str:
            return "/?" + urlencode({**{k: v for k, v in args.items() if v}, "page": n})

        return self.page(
            "sessions.html",
            title="Sessions",
            query=query,
            found=found,
            facets=facets,
            args=args,
            pages=pages,
            current=current,
            page_link=page_link,
        )

    async def search(self, request: Request) -> Response:
        form = SearchForm.of(dict(request.query_params))
        hits = await self._hits(request, form)
        if hits is None or isinstance(hits, Response):
            return hits or _LEFT
        facets = await _to_thread(self._facets)
        return await _to_thread(
            lambda: self.page("search.html", title="Search", form=form, hits=hits, facets=facets)
        )

    async def search_results(self, request: Request) -> Response:
        """The hits alone, for search as you type: each keystroke asks anew, and the page
        drops the request of the one before (its search is then stopped, ``_hits``)."""
        form = SearchForm.of(dict(request.query_params))
        hits = await self._hits(request, form)
        if hits is None or isinstance(hits, Response):
            return hits or _LEFT
        template = self.env.get_template("_hits.html")
        html = await _to_thread(lambda: template.render(form=form, hits=hits))
        return HTMLResponse(html)

    async def _hits(self, request: Request, form: SearchForm) -> list[Any] | Response | None:
        """The hits of ``form``; None when the client left first: its search is stopped
        rather than left to run on a reader for no one (a keystroke's search of a rare
        two-letter word read every text: 15 s at 1M events, a reader lost meanwhile)."""
        stop = threading.Event()
        try:
            return await _unless_gone(
                request, asyncio.wrap_future(search_hits(self.index, form, stop.is_set)), stop
            )
        except IndexStateError as exc:
            return self.page("empty.html", 503, title="No index yet", message=str(exc))
        except SearchStoppedError:
            return None
        except JsonltapeError as exc:
            form.errors.append(str(exc))
            return []

    def _facets(self) -> dict[str, list[tuple[str, int]]]:
        try:
            return self.index.memo("facets", FACETS_SECONDS, lambda r: r.facets())
        except IndexStateError:
            return {}

    def transcript(self, request: Request) -> Response:
        found = self.find(request)
        if isinstance(found, Response):
            return found
        q = request.query_params
        size = self.config.page_events
        last = max(found.info.events - 1, 0)
        at = _seq(q.get("around") or q.get("from"))
        if at is not None:
            start = min(at, last) // size * size
        elif found.info.state != "clean" or q.get("page") == "last":
            start = last // size * size
        else:
            start = 0
        t = read_transcript(self.index, found, start, size)
        return self.page(
            "transcript.html",
            title=t.title or found.info.session,
            t=t,
            info=found.info,
            origin=found.origin,
            link=link_of(found),
            size=size,
            formats=_FORMATS,
        )

    def travel(self, request: Request) -> Response:
        got = self.local(request)
        if isinstance(got, Response):
            return got
        found, path = got
        q = request.query_params
        last = max(found.info.events - 1, 0)
        asked_seq = _seq(q.get("seq"))
        seq = last if asked_seq is None else min(asked_seq, last)
        asked = q.get("format", "neutral")
        fmt: Format = (
            "openai" if asked == "openai" else "anthropic" if asked == "anthropic" else "neutral"
        )
        parents = parents_of(self.index, path)
        try:
            body = jsonltape.messages(path, at=seq, format=fmt, parents=parents)
            neutral = (
                body if fmt == "neutral" else jsonltape.messages(path, at=seq, parents=parents)
            )
        except JsonltapeError as exc:
            return self.error(400, str(exc))
        text = msgspec.json.format(_enc.encode(body), indent=2).decode() + "\n"
        if q.get("download"):
            name = f"{found.info.session}-at-{seq}-{fmt}.json"
            return Response(
                text.encode(),
                media_type="application/json",
                headers={"content-disposition": f'attachment; filename="{name}"'},
            )
        return self.page(
            "travel.html",
            title=f"At seq {seq}",
            info=found.info,
            link=link_of(found),
            seq=seq,
            last=last,
            fmt=fmt,
            formats=_FORMATS,
            json_text=text if len(text) <= _JSON_SHOWN else text[:_JSON_SHOWN],
            json_cut=max(0, len(text) - _JSON_SHOWN),
            blocks=neutral_blocks(list(neutral["messages"])),
        )

    def branch(self, request: Request) -> Response:
        got = self.local(request)
        if isinstance(got, Response):
            return got
        found, path = got
        at = int(request.path_params["seq"])
        parents = parents_of(self.index, path)
        try:
            ours = jsonltape.messages(path, parents=parents)
            theirs = jsonltape.messages(path, branch=at, parents=parents)
        except JsonltapeError as exc:
            return self.error(400, str(exc))
        return self.page(
            "branch.html",
            title=f"Branch merged at seq {at}",
            info=found.info,
            link=link_of(found),
            at=at,
            ours=neutral_blocks(list(ours["messages"])),
            theirs=neutral_blocks(list(theirs["messages"])),
        )

    def export(self, request: Request) -> Response:
        got = self.local(request)
        if isinstance(got, Response):
            return got
        found, path = got
        q = request.query_params
        fmt = q.get("format", "html")
        if fmt not in ("html", "markdown"):
            return self.error(400, "format must be html or markdown")
        redact = q.getlist("redact")
        try:
            out = interop.export(
                path,
                "html" if fmt == "html" else "markdown",
                redact_tools="tools" in redact,
                redact_secrets="secrets" in redact,
                parents=dict(parents_of(self.index, path)) or None,
            )
        except JsonltapeError as exc:
            return self.error(400, str(exc))
        ext, mime = ("html", "text/html") if fmt == "html" else ("md", "text/markdown")
        return Response(
            out.text.encode("utf-8"),
            media_type=f"{mime}; charset=utf-8",
            headers={"content-disposition": f'attachment; filename="{found.info.session}.{ext}"'},
        )

    async def live(self, request: Request) -> Response:
        found = await _to_thread(self.find, request)
        path = None if isinstance(found, Response) else await _to_thread(session_file, found)
        if isinstance(found, Response) or path is None:
            # an answer the page's EventSource reads (an error status would only make it
            # reconnect for ever): the file went away, or the index no longer holds it
            return EventSourceResponse(_gone("the session file was replaced or deleted"))
        from_seq = _seq(request.query_params.get("from")) or 0
        crc = request.query_params.get("crc", "")
        after = (from_seq - 1, crc) if crc and from_seq > 0 else None
        block = self.env.get_template("_blocks.html").module.block  # type: ignore[attr-defined]
        calls: dict[str, dict[str, Any]] = {}

        def render(events: list[Event]) -> list[dict[str, Any]]:
            out = []
            for b in with_links(found, blocks_of(events, {}, calls=calls)):
                data = {"seq": b.get("seq"), "call_id": b.get("call_id"), "html": str(block(b))}
                out.append({"event": "block", "data": json.dumps(data)})
            last = events[-1]  # where a reconnect resumes, and what must still be there
            out.append({"event": "seq", "data": json.dumps({"seq": last.seq, "crc": last.crc})})
            return out

        async def events() -> AsyncIterator[dict[str, Any]]:
            async for item in _live.stream(path, from_seq, render, after=after):
                yield item

        return EventSourceResponse(events(), ping=15)


#: The answer to a client that left before its answer was ready (no one reads it).
_LEFT = Response(status_code=204)


async def _unless_gone(request: Request, work: Awaitable[T], stop: threading.Event) -> T | None:
    """``work``'s result; None when the client leaves first (its connection closed: a page
    that dropped the request), with ``stop`` set so that the work ends early."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    stop.set()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # no one awaits it now
    return None


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone (a GET's request message comes first)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _gone(why: str) -> AsyncIterator[dict[str, Any]]:
    yield {"event": "gone", "data": why}


async def _to_thread(fn: Callable[..., T], *args: Any) -> T:
    import anyio.to_thread

    return await anyio.to_thread.run_sync(fn, *args)


def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return PlainTextResponse("not found" if status == 404 else "error", status_code=status)


def create_app(config: Config, *, note: Callable[[], str] = str) -> Any:
    """The ASGI application of one viewer (the guard in front of the routes); ``note`` gives
    the footer's line on who keeps the index current."""
    import importlib.resources

    viewer = Viewer(config, note)
    static = importlib.resources.files("jsonltape.web") / "static"
    app = Starlette(
        routes=[
            Route("/", viewer.sessions),
            Route("/search", viewer.search),
            Route("/search/results", viewer.search_results),
            Route("/s/{sid}", viewer.transcript),
            Route("/s/{sid}/at", viewer.travel),
            Route("/s/{sid}/branch/{seq:int}", viewer.branch),
            Route("/s/{sid}/export", viewer.export),
            Route("/s/{sid}/live", viewer.live),
            *usage_routes(viewer),  # /usage, and the sessions list's tokens (_usage.py)
            Mount("/static", StaticFiles(directory=str(static)), name="static"),
        ],
        exception_handlers={HTTPException: _not_found},
    )
    return Guard(app, hosts=allowed_hosts(config, config.port), token=config.token)
