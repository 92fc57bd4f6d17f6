"""Usage reports from an index: daily, weekly, monthly, per session, 5-hour blocks.

:func:`report` asks the index (anything with the :class:`UsageSource` methods: the readers of
``jsonltape_daemon``) for sums it has already counted -- each response once, per source rule
-- prices them, and returns a :class:`Report`: plain data that the command line prints as a
table, CSV or JSON and the web viewer charts. No SQL here, and no import of the index.
"""

from __future__ import annotations

import datetime as dt
import functools
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, Literal

import msgspec

from ..errors import InvalidArgumentError
from ._blocks import BLOCK_MS, blocks_of
from ._periods import Zone, bounds, day_label, month_label, parse_day, week_label
from ._prices import UNIT_PER_USD, PriceInfo, PriceTable, load_prices
from ._rules import SLOT_MS, Tokens
from ._source import SessionNode, UsageSource

__all__ = [
    "DIMENSIONS",
    "KINDS",
    "BlockInfo",
    "Counts",
    "Line",
    "ModelLine",
    "Report",
    "SessionInfo",
    "report",
]

KINDS = ("daily", "weekly", "monthly", "session", "blocks")
#: What ``by`` may split lines by.
DIMENSIONS = ("model", "agent", "project", "origin")
Kind = Literal["daily", "weekly", "monthly", "session", "blocks"]


class Counts(msgspec.Struct, frozen=True):
    input: int
    output: int
    cache_write_5m: int
    cache_write_1h: int
    cache_read: int
    reasoning: int
    total: int


class ModelLine(msgspec.Struct):
    model: str
    responses: int
    tokens: Counts
    #: micro-dollars of the priced tokens; None when no token of the model is priced
    cost_micros: int | None
    unpriced_tokens: int


class SessionInfo(msgspec.Struct):
    id: str
    path: str
    title: str | None
    project: str | None
    agent: str | None
    origin: str
    last_activity: int  #: ms, the session's last event
    subsessions: int  #: sub-agent sessions (and forks) rolled into this line


class BlockInfo(msgspec.Struct):
    start: int  #: ms
    end: int
    first: int | None
    last: int | None
    gap: bool
    active: bool
    #: tokens and micro-dollars per minute, between the first and the last response (active)
    tokens_per_minute: float | None = None
    cost_micros_per_hour: int | None = None
    #: at the end of the block at that rate (active)
    projected_tokens: int | None = None
    projected_cost_micros: int | None = None
    minutes_left: int | None = None


class Line(msgspec.Struct, omit_defaults=True):
    """One row of a report: a period (or a session, a block) and the values of ``by``."""

    period: str
    by: dict[str, str]
    responses: int
    tokens: Counts
    cost_micros: int
    unpriced_tokens: int
    models: list[ModelLine]
    session: SessionInfo | None = None
    block: BlockInfo | None = None
    subsessions: list[Line] | None = None


class Report(msgspec.Struct):
    report: str
    timezone: str
    since: str | None
    until: str | None
    by: list[str]
    prices: PriceInfo
    index: str
    lines: list[Line]
    total: Line
    #: models with tokens the price table has no rate for (never counted as $0)
    unpriced_models: list[str]
    generated: int  #: ms


def micros(units: int) -> int:
    """Micro-dollars of a cost in units of ``1 / UNIT_PER_USD`` dollars, rounded half up."""
    per = UNIT_PER_USD // 1_000_000
    return (units + per // 2) // per


class _Acc:
    """Responses, tokens and cost added up per model: ``[responses, units, unpriced, *the six
    token counts]`` (lists added in place: a report adds up tens of thousands of rows)."""

    __slots__ = ("models",)

    def __init__(self) -> None:
        self.models: dict[str, list[int]] = {}

    def add(
        self, table: PriceTable, model: str, tier: int, fast: bool, n: int, tokens: Sequence[int]
    ) -> None:
        """``n`` responses of ``model`` (in fast mode: ``<model>-fast``), priced."""
        cost = table.cost(model, tokens, tier, fast)
        self._put(f"{model}-fast" if fast else model, [n, cost.units, cost.unpriced, *tokens])

    def merge(self, other: _Acc) -> None:
        for label, sums in other.models.items():
            self._put(label, sums)

    def _put(self, label: str, sums: list[int]) -> None:
        m = self.models.get(label)
        if m is None:
            self.models[label] = list(sums)
        else:
            for i, x in enumerate(sums):
                m[i] += x

    def line(self, period: str, by: dict[str, str]) -> tuple[Line, int]:
        """The line of these sums, and its exact cost (a total is the exact sum of its
        lines, each rounded once)."""
        models, all_sums = [], [0] * 9
        for label in sorted(self.models):
            sums = self.models[label]
            n, units, bad, tokens = sums[0], sums[1], sums[2], sums[3:]
            priced = bad < sum(tokens)
            models.append(
                ModelLine(label, n, _counts(tokens), micros(units) if priced else None, bad)
            )
            for i, x in enumerate(sums):
                all_sums[i] += x
        n, units, bad = all_sums[:3]
        return Line(period, by, n, _counts(all_sums[3:]), micros(units), bad, models), units


def _counts(t: Sequence[int]) -> Counts:
    i, o, c5, c1, cr, r = t
    return Counts(i, o, c5, c1, cr, r, i + o + c5 + c1 + cr + r)


def _check(kind: str, by: Sequence[str], breakdown: bool) -> None:
    if kind not in KINDS:
        raise InvalidArgumentError(f"unknown report {kind!r} (one of {', '.join(KINDS)})")
    for d in by:
        if d not in DIMENSIONS:
            raise InvalidArgumentError(
                f"cannot split by {d!r} (one of {', '.join(DIMENSIONS)})", field="by"
            )
    if kind in ("session", "blocks") and by:
        raise InvalidArgumentError(
            f"each line of the {kind} report is one {kind}, with its models listed: "
            "--by is for daily, weekly and monthly",
            field="by",
        )
    if breakdown and kind != "session":
        raise InvalidArgumentError(
            "--breakdown shows sub-agent sessions apart: only the session report has them",
            field="breakdown",
        )


def report(
    source: UsageSource,
    kind: Kind = "daily",
    *,
    since: str | dt.date | None = None,
    until: str | dt.date | None = None,
    by: Sequence[str] = (),
    timezone: str | None = None,
    prices: PriceTable | None = None,
    breakdown: bool = False,
    origins: Sequence[str] = (),
    week_start: int = 6,
    now_ms: int | None = None,
) -> Report:
    """The ``kind`` report of the usage the index ``source`` holds. ``since``/``until`` are
    days (inclusive) in ``timezone`` (an IANA name; default the machine's); ``by`` splits
    lines by model, agent, project or origin; ``breakdown`` lists each session's sub-agent
    sessions apart (session report); ``week_start`` 0 = Monday ... 6 = Sunday."""
    _check(kind, by, breakdown)
    zone = Zone(timezone)
    d0 = parse_day(since, "since") if isinstance(since, str) else since
    d1 = parse_day(until, "until") if isinstance(until, str) else until
    if d0 is not None and d1 is not None and d1 < d0:
        raise InvalidArgumentError(f"--until {d1} is before --since {d0}", field="until")
    table = prices if prices is not None else load_prices()
    source.usage_check()
    lo, hi = bounds(zone, d0, d1)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if kind == "session":
        found = _sessions(source, table, lo, hi, origins, breakdown)
    elif kind == "blocks":
        found = _blocks(source, table, lo, hi, origins, now)
    else:
        found = _periods(source, table, zone, kind, lo, hi, by, origins, week_start)
    total = _Acc()
    for acc, _line in found:
        total.merge(acc)
    total_line, _usd = total.line("total", {})
    lines = [line for _acc, line in found]
    return Report(
        report=kind,
        timezone=zone.name,
        since=d0.isoformat() if d0 else None,
        until=d1.isoformat() if d1 else None,
        by=list(by),
        prices=table.info,
        index=source.name,
        lines=lines,
        total=total_line,
        unpriced_models=sorted({m.model for m in total_line.models if m.unpriced_tokens}),
        generated=now,
    )


Found = list[tuple[_Acc, Line]]


def _periods(
    source: UsageSource,
    table: PriceTable,
    zone: Zone,
    kind: str,
    lo: int | None,
    hi: int | None,
    by: Sequence[str],
    origins: Sequence[str],
    week_start: int,
) -> Found:
    span = source.usage_span(origins)
    if span is None:
        return []
    first = span[0] if lo is None else max(lo, span[0])
    last = span[1] if hi is None else min(hi - 1, span[1])
    if last < first:
        return []
    dims = [d for d in by if d != "model"]
    labels: dict[str, Callable[[int], str]] = {
        "daily": day_label,
        "weekly": functools.partial(week_label, start=week_start),
        "monthly": month_label,
    }
    label = labels[kind]
    split = "model" in by
    accs: dict[tuple[str, ...], _Acc] = {}
    for row in source.usage_days(zone.shifts(first, last), lo, hi, dims, origins):
        day, model, tier, fast = row[0], row[1], row[2], bool(row[3])
        values = tuple("" if v is None else str(v) for v in row[4 : 4 + len(dims)])
        n, tokens = row[4 + len(dims)], row[5 + len(dims) :]
        key = (label(day), model if split else "", *values)
        acc = accs.get(key)
        if acc is None:
            acc = accs[key] = _Acc()
        acc.add(table, model, tier, fast, n, tokens)
    found: Found = []
    for key in sorted(accs):
        named = dict(zip(dims, key[2:], strict=True), model=key[1])
        by_values = {d: named[d] for d in by}
        found.append((accs[key], accs[key].line(key[0], by_values)[0]))
    return found


def _sessions(
    source: UsageSource,
    table: PriceTable,
    lo: int | None,
    hi: int | None,
    origins: Sequence[str],
    breakdown: bool,
) -> Found:
    own: dict[Any, _Acc] = {}
    for key, model, tier, fast, n, *tokens in source.usage_by_session(lo, hi, origins):
        acc = own.get(key)
        if acc is None:
            acc = own[key] = _Acc()
        acc.add(table, model, tier, bool(fast), n, tokens)
    nodes = {n.key: n for n in source.usage_sessions(origins)}
    named: dict[tuple[str, str], Any] = {}
    for n in nodes.values():
        named[(n.origin, n.name)] = n.key
        if n.alias is not None:
            named.setdefault((n.origin, n.alias), n.key)

    def root(key: Any) -> Any:
        seen = {key}
        while True:
            node = nodes[key]
            up = named.get((node.origin, node.up)) if node.up else None
            if up is None or up in seen:
                return key
            seen.add(up)
            key = up

    trees: dict[Any, list[Any]] = {}
    for key in own:
        trees.setdefault(root(key) if key in nodes else key, []).append(key)
    found: Found = []
    for top, members in trees.items():
        acc = _Acc()
        for k in members:
            acc.merge(own[k])
        line, _usd = acc.line(nodes[top].id, {})
        line.session = _info(nodes[top], sum(1 for k in members if k != top))
        if breakdown and len(members) > 1:
            subs = []
            for k in sorted(members, key=lambda k: (k != top, nodes[k].id)):
                sub, _usd = own[k].line(nodes[k].id, {})
                sub.session = _info(nodes[k], 0)
                subs.append(sub)
            line.subsessions = subs
        found.append((acc, line))
    found.sort(key=lambda f: (f[1].session.last_activity if f[1].session else 0, f[1].period))
    return found


def _info(node: SessionNode, subs: int) -> SessionInfo:
    return SessionInfo(
        id=node.id,
        path=node.path,
        title=node.title,
        project=node.cwd,
        agent=node.agent,
        origin=node.origin,
        last_activity=node.updated,
        subsessions=subs,
    )


def _iso(ms: int) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _blocks(
    source: UsageSource,
    table: PriceTable,
    lo: int | None,
    hi: int | None,
    origins: Sequence[str],
    now: int,
) -> Found:
    rows = source.usage_responses(
        None if lo is None else lo * SLOT_MS, None if hi is None else hi * SLOT_MS, origins
    )
    found: Found = []
    for b in blocks_of((t, m, tier, bool(f), Tokens(*tok)) for t, m, tier, f, *tok in rows):
        acc = _Acc()
        for _t, model, tier, fast, tokens in b.items:
            acc.add(table, model, tier, fast, 1, tokens)
        line, units = acc.line(_iso(b.start), {})
        active = not b.gap and now - b.last < BLOCK_MS and now < b.end
        info = BlockInfo(b.start, b.end, b.first or None, b.last or None, b.gap, active)
        minutes = Fraction(b.last - b.first, 60_000)
        if active and minutes > 0:
            left = round(Fraction(b.end - now, 60_000))
            per_minute = line.tokens.total / minutes
            info.tokens_per_minute = float(per_minute)
            info.cost_micros_per_hour = micros(round(units / minutes * 60))
            info.projected_tokens = round(line.tokens.total + per_minute * left)
            info.projected_cost_micros = micros(round(units + units / minutes * left))
            info.minutes_left = left
        line.block = info
        found.append((acc, line))
    return found
