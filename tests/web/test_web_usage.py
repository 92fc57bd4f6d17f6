"""The viewer's usage: the usage page (a chart per day and model drawn on the server, no script,
and its table) and the sessions list's tokens column, in a real Chromium against a real
``jsonltape serve``; every number checked against a brute-force sum of what the sessions
hold, each response once."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from tests.web.conftest import Site, Watch, serving
from tests.web.test_web_hostile import _axe

pytestmark = pytest.mark.timeout(180)

HOSTILE = '<img src=x onerror="alert(1)">'
#: (session, day offset, model, input, output, cache read); noon UTC of 2026-11-01 + days
RESPONSES = [
    ("main", 0, "claude-sonnet-4-5", 1200, 80, 30000),
    ("main", 0, "gpt-5", 500, 40, 0),
    ("main", 1, "claude-sonnet-4-5", 900, 60, 41000),
    ("main", 3, "claude-sonnet-4-5", 300, 20, 5000),
    ("sub", 1, "claude-haiku-4-5", 4000, 300, 0),
    ("hostile", 3, HOSTILE, 7, 5, 0),
]
NOON = int(dt.datetime(2026, 11, 1, 12, tzinfo=dt.timezone.utc).timestamp() * 1000)
DAY = 86_400_000


def _day(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).date().isoformat()  # the server's zone


def _write(root: Path) -> dict[str, Path]:
    paths = {
        "main": root / "main.jsonl",
        "sub": root / "sub.jsonl",
        "hostile": root / "hostile.jsonl",
    }
    with jsonltape.open(paths["main"], create=True, title="Main", agent="claude-code") as tape:
        tape.user("go")
    jsonltape.fork(paths["main"], at=1, out=paths["sub"], title="A sub-agent")
    with jsonltape.open(paths["hostile"], create=True, title=HOSTILE) as tape:
        tape.user(HOSTILE)
    for name, path in paths.items():
        with jsonltape.open(path) as tape:
            for k, (who, day, model, inp, out, cached) in enumerate(RESPONSES):
                if who != name:
                    continue
                usage = {"input_tokens": inp, "output_tokens": out}
                if cached:
                    usage["cache_read_input_tokens"] = cached
                data = {"message": {"id": f"m{k}", "role": "assistant",
                                    "parts": [{"type": "text", "content": "ok"}]},
                        "model": model, "usage": usage}  # fmt: skip
                tape.append("assistant/message", data, time=NOON + day * DAY + k * 60_000)
    return paths


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A server over an index of three sessions with usage: one with a sub-agent, one whose
    model name and title are markup."""
    base = tmp_path_factory.mktemp("usage-site")
    root = base / "sessions"
    root.mkdir(mode=0o700)
    yield from serving(base, root, _write(root))


@pytest.fixture(autouse=True)
def _clean(watch: Watch, page: Any) -> Iterator[None]:
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    yield
    assert watch.dialogs == [] and watch.outside == [] and watch.errors == [], vars(watch)
    # no CSP refusal (the chart is no inline script or style); a 400 page logs its status
    assert [m for m in console if "status of 400" not in m] == []


def _expected() -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """Tokens per (day, model) and per session, summed by hand."""
    per: dict[tuple[str, str], int] = defaultdict(int)
    own: dict[str, int] = defaultdict(int)
    for k, (who, day, model, inp, out, cached) in enumerate(RESPONSES):
        t = inp + out + cached
        per[(_day(NOON + day * DAY + k * 60_000), model)] += t
        own[who] += t
    return per, own


def test_the_usage_page_charts_tokens_per_day_and_model(page: Any, site: Site) -> None:
    page.goto(site.url + "usage")
    per, _own = _expected()
    rects = page.locator("figure.usage-chart svg rect")
    titles = rects.locator("title").all_text_contents()
    assert sorted(titles) == sorted(f"{d} · {m}: {t:,} tokens" for (d, m), t in per.items())
    # one bar a day, its parts as tall as their tokens: the tallest day reaches the top
    days: dict[str, int] = defaultdict(int)
    for (d, _m), t in per.items():
        days[d] += t
    heights: dict[str, float] = defaultdict(float)
    for r in rects.all():
        title = r.locator("title").text_content()
        heights[title.split(" · ")[0]] += float(r.get_attribute("height"))
    top = max(days.values())
    for d, t in days.items():
        assert heights[d] == pytest.approx((220 - 8) * t / top, abs=0.05)
    total = sum(per.values())
    assert page.locator("td.total-tokens").text_content() == f"{total:,}"
    # the markup in a model name is text: no image, no dialog (the watch fixture)
    assert page.locator("main img").count() == 0
    assert page.get_by_role("cell", name=HOSTILE, exact=True).count() == 1
    row = page.locator("tr", has=page.get_by_role("cell", name=HOSTILE, exact=True))
    assert "unpriced" in row.text_content()
    assert HOSTILE in page.locator("p.unpriced").text_content()
    assert page.get_by_role("link", name="Usage").get_attribute("aria-current") == "page"


def test_the_usage_page_sums_weeks_and_months_and_narrows_to_days(page: Any, site: Site) -> None:
    per, _own = _expected()
    page.goto(site.url + "usage?report=monthly")
    models = {m for _d, m in per}
    assert page.locator("figure.usage-chart svg rect").count() == len(models)
    assert page.locator("td.total-tokens").text_content() == f"{sum(per.values()):,}"
    first = min(d for d, _m in per)
    page.goto(site.url + f"usage?since={first}&until={first}")
    want = sum(t for (d, _m), t in per.items() if d == first)
    assert page.locator("td.total-tokens").text_content() == f"{want:,}"
    assert page.locator("select[name=report]").input_value() == "daily"


def test_a_day_that_is_no_day_is_one_clear_line(page: Any, site: Site) -> None:
    response = page.goto(site.url + "usage?since=2026-13-01")
    assert response.status == 400
    assert "2026-13-01" in page.get_by_role("alert").text_content()
    assert page.locator("figure.usage-chart").count() == 0


def test_the_session_list_shows_each_sessions_own_tokens(page: Any, site: Site) -> None:
    _per, own = _expected()
    page.goto(site.url)
    header = page.locator("table.sessions thead th").all_text_contents()
    column = header.index("Tokens")
    for name, path in site.paths.items():
        title = jsonltape.header(path).title
        row = page.locator("table.sessions tbody tr", has=page.get_by_role("link", name=title))
        cells = row.locator("td").all_text_contents()
        assert cells[column].strip() == f"{own[name]:,}", name


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_usage_page_has_no_serious_accessibility_violation(
    browser: Any, site: Site, scheme: str
) -> None:
    context = browser.new_context(color_scheme=scheme)
    try:
        page = context.new_page()
        page.goto(site.url + "usage")
        assert _axe(page) == []
    finally:
        context.close()
