"""Token usage in the viewer: the sessions list's tokens column and the usage page (tokens per
day, week or month and model as a chart drawn on the server, an SVG with no script, and the
same numbers as a table with their cost).

Both ask ``jsonltape.usage`` (the report ``jsonltape usage`` prints) through the index's reader
interface: no SQL here. :func:`install` plugs them into a viewer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from jsonltape_daemon.errors import IndexStateError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from jsonltape import JsonltapeError
from jsonltape.usage import Report, report

if TYPE_CHECKING:
    import jinja2
    from jsonltape_daemon.search.reader import Reader
    from starlette.responses import HTMLResponse

    from ._index import Index


class Viewer(Protocol):
    """What the usage pages use of the viewer (``_app.Viewer``, which imports this module)."""

    index: Index
    env: jinja2.Environment

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse: ...


__all__ = ["Chart", "chart_of", "install", "page_tokens", "usd"]

Kind = Literal["daily", "weekly", "monthly"]
#: Reports the page draws (sessions and blocks are the command's).
KINDS: tuple[Kind, ...] = ("daily", "weekly", "monthly")
#: Models drawn in a colour of their own, the most used first; the others share one.
COLOURS = 7
#: The chart's drawing area, in SVG units.
WIDTH, HEIGHT, LEFT, BOTTOM = 720, 220, 64, 20


def usd(micros: int) -> str:
    """Micro-dollars as dollars: cents from a cent up, else every digit there is."""
    if micros >= 10_000 or micros == 0:
        return f"${micros / 1_000_000:,.2f}"
    return f"${micros / 1_000_000:.6f}".rstrip("0")


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def page_tokens(index: Index, sessions: Sequence[Any]) -> list[str]:
    """Tokens of each listed session's own responses (each counted once), as shown: one query
    for the page's sessions by their index keys; "" for a session with none, or for all of
    them when the index cannot say yet (the list still shows)."""
    keys = [s.key for s in sessions]

    def read(reader: Reader) -> dict[Any, int]:
        reader.usage_check()
        found: dict[Any, int] = {}
        for key, _model, _tier, _fast, _n, *tokens in reader.usage_by_session(None, None, (), keys):
            k = _hashable(key)
            found[k] = found.get(k, 0) + sum(tokens)
        return found

    try:
        found = index.run(read) if keys else {}
    except (IndexStateError, JsonltapeError):
        found = {}
    return [f"{n:,}" if (n := found.get(_hashable(k))) else "" for k in keys]


class Bar(NamedTuple):
    """One model's part of one period's bar."""

    x: float
    y: float
    width: float
    height: float
    colour: str  #: a class: ``c0`` … (a model of its own), ``co`` (the others)
    label: str  #: what the part is (a tooltip and what a screen reader says)


class Chart(NamedTuple):
    bars: list[Bar]
    ticks: list[tuple[float, str]]  #: x and the period under it
    top: int  #: the tokens of the tallest bar (the scale)
    legend: list[tuple[str, str]]  #: (colour class, model)


def chart_of(r: Report) -> Chart:
    """Stacked bars, one a period, one part a model, heights in tokens."""
    totals: dict[str, int] = {}
    for line in r.lines:
        for m in line.models:
            totals[m.model] = totals.get(m.model, 0) + m.tokens.total
    ranked = sorted(totals, key=lambda m: (-totals[m], m))
    colour = {m: f"c{k}" for k, m in enumerate(ranked[:COLOURS])}
    legend = [(colour[m], m or "(no model)") for m in ranked[:COLOURS]]
    if len(ranked) > COLOURS:
        legend.append(("co", f"{len(ranked) - COLOURS} other models"))
    top = max((line.tokens.total for line in r.lines), default=0)
    n = max(len(r.lines), 1)
    step = (WIDTH - LEFT) / n
    every = max(1, -(-n // 8))  # at most about eight period labels under the bars
    bars: list[Bar] = []
    ticks: list[tuple[float, str]] = []
    for k, line in enumerate(r.lines):
        x = LEFT + k * step + step * 0.1
        y = float(HEIGHT)
        for m in sorted(line.models, key=lambda m: ranked.index(m.model)):
            if not m.tokens.total or not top:
                continue
            h = (HEIGHT - 8) * m.tokens.total / top
            y -= h
            label = f"{line.period} · {m.model or '(no model)'}: {m.tokens.total:,} tokens"
            bars.append(Bar(x, y, step * 0.8, h, colour.get(m.model, "co"), label))
        if k % every == 0:
            ticks.append((x + step * 0.4, line.period))
    return Chart(bars, ticks, top, legend)


def _page(viewer: Viewer, request: Request) -> Response:
    args = dict(request.query_params)
    kind: Kind = "daily"
    for k in KINDS:
        kind = k if args.get("report") == k else kind
    since, until = args.get("since") or None, args.get("until") or None
    form = {"report": kind, "since": since or "", "until": until or ""}
    try:
        r = viewer.index.run(lambda reader: report(reader, kind, since=since, until=until))
    except IndexStateError as exc:
        return viewer.page("empty.html", 503, title="No index yet", message=str(exc))
    except JsonltapeError as exc:  # a day that is no day, until before since
        return viewer.page("usage.html", 400, title="Usage", form=form, error=str(exc), r=None)
    return viewer.page(
        "usage.html", title="Usage", form=form, error=None, r=r, chart=chart_of(r), usd=usd
    )


def install(viewer: Viewer) -> list[Route]:
    """The usage page's route, and the sessions list's tokens (``tokens_of(sessions)`` in
    templates: a page's at once)."""

    def tokens_of(sessions: Sequence[Any]) -> list[str]:
        return page_tokens(viewer.index, sessions)

    def usage(request: Request) -> Response:
        return _page(viewer, request)

    viewer.env.globals["tokens_of"] = tokens_of
    viewer.env.globals["chart_size"] = {"width": WIDTH, "height": HEIGHT, "left": LEFT,
                                        "bottom": BOTTOM}  # fmt: skip
    return [Route("/usage", usage)]
