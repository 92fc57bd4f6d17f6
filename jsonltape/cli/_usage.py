"""``jsonltape usage``: token and cost reports from the index (``jsonltape.usage``).

A report is one query of sums the index already counted, priced by the shipped LiteLLM table
(or ``--prices``); this module only parses the options and prints the :class:`Report`: an
aligned table (bold headings on a terminal, plain text when piped), CSV or JSON. Every text
that comes from a session (a model name, a title, a path) is printed through the display rule.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import sys
import unicodedata
from collections.abc import Callable, Sequence

import click

from .._display import shown
from ..usage import DIMENSIONS, KINDS, Line, Report, load_prices, report
from ._params import echo_json, echo_lines, index_option, origins_option, target_of

__all__ = ["usage"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _dims(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for item in value:
        for d in item.split(","):
            d = d.strip().lower()
            if d not in DIMENSIONS:
                raise click.BadParameter(
                    f"{d!r} is not one of {', '.join(DIMENSIONS)}", ctx=ctx, param=param
                )
            if d not in out:
                out.append(d)
    return out


@click.command()
@click.argument("kind", metavar="[REPORT]", default="daily", type=click.Choice(KINDS))
@click.option("--since", metavar="DATE", help="From this day on (2026-05-09 or 20260509).")
@click.option("--until", metavar="DATE", help="Up to this day, included.")
@click.option(
    "--by",
    "by",
    multiple=True,
    callback=_dims,
    metavar="DIMS",
    help="Split each period by model, agent, project (the cwd) and/or origin (the machine): "
    "comma-separated, repeatable. daily, weekly and monthly only.",
)
@click.option(
    "--breakdown",
    is_flag=True,
    help="session: list each session's sub-agent sessions (and forks) apart under its total.",
)
@click.option(
    "-z",
    "--timezone",
    metavar="ZONE",
    help="Time zone of days, weeks and months (IANA: UTC, Europe/Paris; default: this machine's).",
)
@click.option(
    "--week-start",
    type=click.Choice(_WEEKDAYS),
    default="sunday",
    show_default=True,
    help="weekly: the day weeks start on.",
)
@click.option(
    "--prices",
    "prices_path",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Price table to use instead of the shipped one: LiteLLM's "
    "model_prices_and_context_window.json, or one like jsonltape/usage/prices.json.",
)
@index_option
@origins_option
@click.option("--json", "as_json", is_flag=True, help="The report as one JSON document.")
@click.option("--csv", "as_csv", is_flag=True, help="The report as CSV, a line per row.")
def usage(
    kind: str,
    since: str | None,
    until: str | None,
    by: list[str],
    breakdown: bool,
    timezone: str | None,
    week_start: str,
    prices_path: str | None,
    index_path: str | None,
    origins: tuple[str, ...],
    as_json: bool,
    as_csv: bool,
) -> None:
    """Token usage and cost from the index; REPORT is daily (default), weekly, monthly,
    session (sub-agent sessions rolled into their parent's total) or blocks (5-hour billing
    blocks).

    Each model response is counted once, however many times its source logged it. Tokens are
    kept apart as providers bill them (input, output, cache writes of 5 minutes and 1 hour,
    cache reads, reasoning); the cost comes from a price table shipped with jsonltape (from
    LiteLLM, its version and date printed with the report) or --prices, never from the
    network. A model the table does not know is reported as unpriced, with its tokens, and
    never counted as $0. --json gives costs as integer micro-dollars.
    """
    from jsonltape_daemon.search.reader import open_reader

    if as_json and as_csv:
        raise click.UsageError("--json and --csv are two formats: choose one")
    prices = load_prices(prices_path) if prices_path is not None else None
    reader = open_reader(target_of(index_path))
    try:
        result = report(
            reader,
            kind,  # type: ignore[arg-type]  # one of KINDS (click.Choice)
            since=since,
            until=until,
            by=by,
            timezone=timezone,
            prices=prices,
            breakdown=breakdown,
            origins=origins,
            week_start=_WEEKDAYS.index(week_start),
        )
    finally:
        reader.close()
    if as_json:
        echo_json(result)
    elif as_csv:
        click.echo(_csv(result), nl=False)
    else:
        echo_lines(_table(result, sys.stdout.isatty()))


# -- the table ------------------------------------------------------------------------------

_COLUMNS: list[tuple[str, Callable[[Line], int]]] = [
    ("Input", lambda line: line.tokens.input),
    ("Output", lambda line: line.tokens.output),
    ("Cache write 5m", lambda line: line.tokens.cache_write_5m),
    ("Cache write 1h", lambda line: line.tokens.cache_write_1h),
    ("Cache read", lambda line: line.tokens.cache_read),
    ("Reasoning", lambda line: line.tokens.reasoning),
    ("Total", lambda line: line.tokens.total),
]
#: Columns printed only when some line has tokens of them.
_OPTIONAL = {"Cache write 1h", "Reasoning"}


def usd(micros: int) -> str:
    """Micro-dollars as dollars and cents (``$0.01`` and more), else to the micro-dollar."""
    if micros >= 10_000 or micros == 0:
        return f"${micros / 1_000_000:,.2f}"
    return f"${micros / 1_000_000:.6f}".rstrip("0")


def _cost(line: Line) -> str:
    if line.block is not None and line.block.gap:
        return ""
    if line.unpriced_tokens and line.unpriced_tokens == line.tokens.total:
        return "unpriced"
    return usd(line.cost_micros) + ("*" if line.unpriced_tokens else "")


def _when(ms: int, zone: str) -> str:
    from zoneinfo import ZoneInfo

    try:
        tz: dt.tzinfo | None = ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        tz = None
    when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).astimezone(tz)
    return when.strftime("%Y-%m-%d %H:%M")


def _label(r: Report, line: Line) -> list[str]:
    """The first columns of a line: what it is about."""
    if r.report == "session" and line.session is not None:
        s = line.session
        title = s.title or ""
        cells = [
            s.id,
            title[:40] + ("…" if len(title) > 40 else ""),
            s.project or "",
            s.agent or "",
        ]
        return cells
    if r.report == "blocks" and line.block is not None:
        b = line.block
        start = _when(b.start, r.timezone)
        if b.gap:
            return [start, f"gap of {(b.end - b.start) // 3_600_000} h"]
        if b.active:
            return [start, "active"]
        minutes = ((b.last or b.start) - (b.first or b.start)) // 60_000
        return [start, f"{minutes // 60} h {minutes % 60:02d} min"]
    return [line.period, *line.by.values()]


def _heads(r: Report) -> list[str]:
    if r.report == "session":
        return ["Session", "Title", "Project", "Agent"]
    if r.report == "blocks":
        return ["Block start", "Span"]
    first = {"daily": "Date", "weekly": "Week", "monthly": "Month"}[r.report]
    return [first, *(d.capitalize() for d in r.by)]


def _rows(r: Report) -> list[tuple[Line, str]]:
    """Every line to print, with its indent (sub-sessions under their session)."""
    out: list[tuple[Line, str]] = []
    for line in r.lines:
        out.append((line, ""))
        for sub in line.subsessions or ():
            out.append((sub, "  └ "))
    return out


def _table(r: Report, styled: bool) -> list[str]:
    rows = _rows(r)
    cols = [
        (name, get)
        for name, get in _COLUMNS
        if name not in _OPTIONAL or any(get(line) for line, _ in rows)
    ]
    lead = _heads(r)
    models = "model" not in r.by
    head = [*lead, *(["Models"] if models else []), *(n for n, _ in cols), "Cost"]
    body: list[list[str]] = []
    for line, indent in rows:
        cells = [shown(c) for c in _label(r, line)]
        cells[0] = indent + cells[0]
        if models:
            cells.append(shown(", ".join(m.model for m in line.models)))
        cells += [f"{get(line):,}" for _, get in cols]
        cells.append(_cost(line))
        body.append(cells)
    total = ["Total", *([""] * (len(lead) - 1)), *([""] if models else [])]
    total += [f"{get(r.total):,}" for _, get in cols] + [_cost(r.total)]
    numeric = len(lead) + (1 if models else 0)
    widths = [max(_width(c[i]) for c in [head, *body, total]) for i in range(len(head))]

    def fmt(cells: Sequence[str]) -> str:
        pads = (" " * (w - _width(c)) for c, w in zip(cells, widths, strict=True))
        return "  ".join(
            pad + c if i >= numeric else c + pad
            for i, (c, pad) in enumerate(zip(cells, pads, strict=True))
        ).rstrip()

    def bold(text: str) -> str:
        return click.style(text, bold=True) if styled else text

    out = [bold(fmt(head)), *(fmt(c) for c in body), bold(fmt(total))]
    out += _notes(r)
    return out


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal: East Asian wide and full-width characters two,
    combining marks none (titles are often Japanese or Chinese)."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _notes(r: Report) -> list[str]:
    p = r.prices
    where = f" ({shown(p.path)})" if p.path else ""
    notes = [
        f"prices: {shown(p.source)}{' ' + shown(p.version) if p.version else ''}"
        f"{', ' + shown(p.date) if p.date else ''}{where}; times in {shown(r.timezone)}"
    ]
    if r.total.unpriced_tokens:
        notes.append(
            f"* not in the cost: {r.total.unpriced_tokens:,} tokens the price table has no rate "
            f"for (unpriced: {shown(', '.join(r.unpriced_models))})"
        )
    for line in r.lines:
        b = line.block
        if b is not None and b.active and b.projected_tokens is not None:
            notes.append(
                f"active block: {b.tokens_per_minute or 0:,.0f} tokens/min, "
                f"{usd(b.cost_micros_per_hour or 0)}/h; by its end in {b.minutes_left} min: "
                f"{b.projected_tokens:,} tokens, {usd(b.projected_cost_micros or 0)}"
            )
    if not r.lines:
        notes.append("no usage in this period")
    return notes


# -- CSV ------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    """A text cell a spreadsheet will not run as a formula."""
    text = shown(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _csv(r: Report) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    lead = [h.lower() for h in _heads(r)]
    w.writerow(
        [*lead, "subsession_of", "models", "responses", "input", "output", "cache_write_5m",
         "cache_write_1h", "cache_read", "reasoning", "total", "cost_usd", "unpriced_tokens"]
    )  # fmt: skip
    for line in r.lines:
        for row, parent in [(line, ""), *((s, line.period) for s in line.subsessions or ())]:
            t = row.tokens
            w.writerow(
                [
                    *(_cell(c) for c in _label(r, row)),
                    _cell(parent),
                    _cell(";".join(m.model for m in row.models)),
                    row.responses, t.input, t.output, t.cache_write_5m, t.cache_write_1h,
                    t.cache_read, t.reasoning, t.total,
                    f"{row.cost_micros / 1_000_000:.6f}", row.unpriced_tokens,
                ]
            )  # fmt: skip
    return buf.getvalue()
