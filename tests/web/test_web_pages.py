"""Every page and feature of ``jsonltape serve`` in a real browser (Debian's Chromium) against
the real server: the session list, search as you type, permalinks, the transcript's blocks,
their merged branch, time travel with copy as JSON, share downloads, keys, dark mode and a
phone's width. Every test also checks the page opened no dialog, made no request outside its
origin and raised no script error (the ``watch`` fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import jsonltape
from tests.web.conftest import Site, Watch
from tests.web.server import Serve

pytestmark = pytest.mark.timeout(180)


def test_the_origin_of_a_local_index_is_this_machines_name(site: Site, tmp_path: Path) -> None:
    """The origin column of a local index names this machine as a team index would: its
    $JSONLTAPE_ORIGIN, else the name the daemon keeps (read, never created by the viewer)."""
    for env, kept in (({"JSONLTAPE_ORIGIN": "alice@laptop"}, None), ({}, "bob@desk-0a1b2c")):
        home = tmp_path / f"home-{kept}"
        home.mkdir()
        if kept:
            (home / "origin").write_text(kept + "\n")
        s = Serve("--index", str(site.index), home=home, env=env)
        try:
            with httpx.Client(base_url=s.url) as c:
                listing = c.get("/").text
        finally:
            code, _out, err = s.stop()
            assert code == 0, err
        name = env.get("JSONLTAPE_ORIGIN") or kept
        assert listing.count(f'<td data-label="Origin">{name}</td>') == len(site.paths)
        assert (home / "origin").exists() is bool(kept)  # the viewer made no name up


@pytest.fixture(autouse=True)
def _clean(watch: Watch) -> Iterator[None]:
    yield
    assert watch.dialogs == [] and watch.outside == [] and watch.errors == [], vars(watch)


def _id(site: Site, name: str) -> str:
    return jsonltape.header(site.paths[name]).id


def _cli(site: Site, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(site.root.parent / "home")
    return subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", *args], capture_output=True, env=env, check=True
    )


def test_the_session_list_filters_sorts_and_links(page: Any, site: Site) -> None:
    page.goto(site.url)
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == len(site.paths)
    page.select_option("select[name=agent]", "codex")
    page.click("button:has-text('Apply')")
    assert rows.count() == 1 and "Merged in git" in rows.inner_text()
    page.goto(site.url + "?sort=events&order=asc")
    counts = [int(t) for t in page.locator("td[data-label=Events]").all_inner_texts()]
    assert counts == sorted(counts) and len(counts) == len(site.paths)
    # a local index: every session is this machine's, which has no origin name yet
    origins = page.locator("td[data-label=Origin]").all_inner_texts()
    assert origins == ["this machine"] * len(site.paths)
    assert page.locator(".badge:has-text('fork')").count() == 1
    page.click("a:has-text('A fork')")
    assert page.locator("h1").inner_text() == "A fork"


def test_the_session_list_pages_on_the_server(page: Any, site: Site) -> None:
    page.goto(site.url + "?sort=title&order=asc&page=1")
    assert "page 1 of 1" in page.locator("nav.pager").inner_text()
    page.goto(site.url + "?page=7")  # past the end: an empty page, not an error
    assert page.locator("table.sessions").count() == 0


def _cli_hits(site: Site, query: str) -> list[tuple[str, int]]:
    out = _cli(site, "search", query, "--index", str(site.index), "--json", "--limit", "50")
    return [(h["session"], h["seq"]) for h in map(json.loads, out.stdout.splitlines())]


def _page_hits(page: Any) -> list[tuple[str, int]]:
    out = []
    for href in page.locator("a.hit").evaluate_all("as => as.map(a => a.getAttribute('href'))"):
        sid = href.split("/s/")[1].split("?")[0]
        out.append((sid, int(href.split("#seq-")[1])))
    return out


#: What the search box asks the index for as "NOT NULL" is typed, as ``search -i`` asks: the
#: word being typed is a prefix, left out while it is under three characters after others.
TYPED = [
    ("N", "N*"),
    ("NO", "NO*"),
    ("NOT", "NOT*"),
    ("NOT ", "NOT "),
    ("NOT N", "NOT "),
    ("NOT NU", "NOT "),
    ("NOT NUL", "NOT NUL*"),
    ("NOT NULL", "NOT NULL*"),
]


def test_search_as_you_type_shows_the_cli_hits_on_each_keystroke(page: Any, site: Site) -> None:
    page.goto(site.url + "search")
    box = page.locator("#q")
    for typed, query in TYPED:
        ch = typed[-1]
        box.press(ch if ch != " " else "Space")
        page.wait_for_function("q => document.body.dataset.searched === q", arg=typed)
        assert _page_hits(page) == _cli_hits(site, query), typed
    assert page.locator("ol.hits mark").count() >= 1  # the index's own highlight
    assert "q=NOT+NULL" in page.url  # the address keeps the search
    first = _page_hits(page)[0]
    box.press("Enter")
    page.wait_for_url(f"**/s/{first[0]}**")
    target = page.locator(f"#seq-{first[1]}")
    assert target.is_visible() and page.evaluate("location.hash") == f"#seq-{first[1]}"


def test_search_reads_with_javascript_off(browser: Any, site: Site) -> None:
    ctx = browser.new_context(java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(site.url + "search?q=prompt&role=user")
        hits = page.locator("a.hit")
        assert hits.count() >= 1 and all(" user " in t for t in hits.all_inner_texts())
        page.goto(site.url)
        assert page.locator("table.sessions tbody tr").count() == len(site.paths)
    finally:
        ctx.close()


def test_a_permalink_to_a_seq_opens_the_page_that_holds_it(page: Any, site: Site) -> None:
    sid = _id(site, "long")
    seq = next(
        e.seq
        for e in jsonltape.read(site.paths["long"])
        if e.type == "user/message" and e.seq > 420
    )
    page.goto(f"{site.url}s/{sid}#seq-{seq}")
    page.wait_for_url(f"**around={seq}**")
    assert page.locator(f"#seq-{seq}").is_visible()
    assert "events #400–#" in page.locator("nav.pager").first.inner_text()
    page.goto(f"{site.url}s/{sid}?from=200")
    seqs = page.locator("#transcript [data-seq]").evaluate_all(
        "es => es.map(e => Number(e.dataset.seq))"
    )
    assert seqs and 200 <= min(seqs) < 210 and max(seqs) < 400


def test_the_transcript_draws_every_kind_of_block(page: Any, site: Site) -> None:
    page.goto(f"{site.url}s/{_id(site, 'rich')}")
    t = page.locator("#transcript")
    assert t.locator(".md strong:has-text('test_migration')").count() == 1  # Markdown
    thinking = t.locator("details.thinking").first
    assert thinking.get_attribute("open") is None  # thinking collapsed
    read = t.locator("details.call[data-call-id=c1]")
    assert read.locator("summary .tool").inner_text() == "Read"
    assert read.locator(".results details.res").get_attribute("open") is None  # collapsed
    assert "NOT NULL" in (read.locator(".results pre").text_content() or "")
    bash = t.locator("details.call[data-call-id=c7]")
    assert bash.locator(":scope > summary .err").count() == 1  # the call says it failed
    captions = t.locator("figure.diff figcaption").all_inner_texts()
    for path in (
        "m/0042.sql",
        "app/models.py",
        "docs/migration.md",
        "src/app.py",
        "NOTES.md",
        "pi.ts",
    ):
        assert path in captions, path
    assert t.locator("figure.diff .d-add").count() >= 6
    assert t.locator("figure.diff .d-del").count() >= 3
    assert page.evaluate("document.querySelector('img.img').naturalWidth") == 1  # inline image
    assert t.locator("section.todo li").count() == 2
    assert t.locator(".badge:has-text('revises')").count() == 2  # the revision, the summary
    assert t.locator(".badge.s-retracted").count() == 1
    assert t.locator(".badge.s-compacted").count() >= 1
    assert "context compacted" in t.locator("section.boundary").inner_text()
    assert t.locator("p.note:has-text('retracted')").count() == 1
    # forks both ways
    page.click("nav.children a:has-text('A fork')")
    assert page.locator("h1").inner_text() == "A fork"
    page.click("a[rel=up]")
    assert page.locator("h1").inner_text() == "Fix the flaky migration"


def test_a_merged_session_shows_their_branch_beside_ours(page: Any, site: Site) -> None:
    page.goto(f"{site.url}s/{_id(site, 'merged')}")
    page.click("a[data-branch]")
    ours, theirs = page.locator(".side-by-side section").all()
    assert "Went our way." in ours.inner_text() and "Went their way." not in ours.inner_text()
    assert "Went their way." in theirs.inner_text() and "Went our way." not in theirs.inner_text()


def test_time_travel_shows_the_request_at_each_seq_and_copies_it(page: Any, site: Site) -> None:
    path = site.paths["rich"]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"{site.url}s/{_id(site, 'rich')}")
    page.click("a:has-text('Time travel')")
    for seq, fmt in ((5, "neutral"), (12, "openai"), (30, "anthropic")):
        page.fill("#seq-number", str(seq))
        page.locator("#seq-number").dispatch_event("change")
        page.wait_for_url(f"**seq={seq}**")
        if fmt != "neutral":
            page.check(f"input[value={fmt}]")
            page.wait_for_url(f"**format={fmt}**")
        want = jsonltape.messages(path, at=seq, format=fmt)  # type: ignore[arg-type]
        shown = json.loads(page.locator("#request-json").inner_text())
        assert shown == want, (seq, fmt)
        page.click("#copy-json")
        page.wait_for_function(
            "() => document.querySelector('#copy-state').textContent === 'copied'"
        )
        copied = page.evaluate("navigator.clipboard.readText()")
        assert json.loads(copied) == want


@pytest.mark.parametrize(
    ("fmt", "redact"), [("html", ()), ("markdown", ("tools", "secrets")), ("html", ("tools",))]
)
def test_share_downloads_exactly_what_the_cli_exports(
    page: Any, site: Site, tmp_path: Path, fmt: str, redact: tuple[str, ...]
) -> None:
    page.goto(f"{site.url}s/{_id(site, 'rich')}")
    page.select_option("form.share select[name=format]", fmt)
    for kind in ("tools", "secrets"):
        box = page.locator(f"form.share input[value={kind}]")
        box.set_checked(kind in redact)
    with page.expect_download() as got:
        page.click("form.share button")
    downloaded = Path(got.value.path()).read_bytes()
    out = tmp_path / "cli-export"
    flags = [a for k in redact for a in ("--redact", k)]
    _cli(site, "export", str(site.paths["rich"]), "--format", fmt, *flags, "-o", str(out))
    assert downloaded == out.read_bytes()


def test_keys_jump_from_prompt_to_prompt(page: Any, site: Site) -> None:
    page.goto(f"{site.url}s/{_id(site, 'long')}")
    prompts = [
        int(s)
        for s in page.locator("article.msg.user").evaluate_all("as => as.map(a => a.dataset.seq)")
    ]
    page.keyboard.press("j")
    assert page.evaluate("document.body.dataset.prompt") == str(prompts[0])
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.evaluate("document.body.dataset.prompt") == str(prompts[2])
    page.keyboard.press("k")
    assert page.evaluate("document.body.dataset.prompt") == str(prompts[1])
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "quick-q"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_dark_mode_follows_the_system_and_a_phone_width_never_scrolls_sideways(
    browser: Any, site: Site, scheme: str
) -> None:
    ctx = browser.new_context(color_scheme=scheme, viewport={"width": 360, "height": 740})
    try:
        page = ctx.new_page()
        sid = _id(site, "rich")
        for where in (
            "",
            "search?q=migration",
            f"s/{sid}",
            f"s/{sid}/at?seq=12",
            f"s/{_id(site, 'merged')}",
        ):
            page.goto(site.url + where)
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            level = sum(int(v) for v in background[4:-1].split(",")[:3])
            assert (level < 150) is (scheme == "dark"), (where, background)
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 360, (where, width)
    finally:
        ctx.close()
