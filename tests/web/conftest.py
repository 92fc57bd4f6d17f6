"""The browser and the server of the viewer's tests.

One Chromium for the whole run (Debian's ``chromium``, driven by Playwright through
``executable_path``: Playwright's own browser download is not used), a page per test. Every
page records the dialogs that open (none may: a hostile payload that ran would open one) and
every request that leaves the server's origin (none may; each is aborted). Without Chromium
the browser tests skip, except under CI, where they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.web import corpus
from tests.web.server import Serve, sync

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: The axe-core build the accessibility checks inject (vendored, see vendor/README.md).
AXE = Path(__file__).parent / "vendor" / "axe.min.js"


def _need_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        why = "Debian's chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") or os.environ.get("JSONLTAPE_REQUIRE_BROWSER"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    _need_chromium()
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": ARGS}


class Watch:
    """What a page did that it must not: dialogs, requests to other origins."""

    def __init__(self) -> None:
        self.dialogs: list[str] = []
        self.outside: list[str] = []
        self.errors: list[str] = []


@pytest.fixture
def watch(page: Any, site: Serve) -> Watch:
    w = Watch()
    origin = site.url.rstrip("/")

    def dialog(d: Any) -> None:
        w.dialogs.append(d.message)
        d.dismiss()

    def route(r: Any) -> None:
        url = r.request.url
        if url.startswith(origin + "/") or url == origin or url.startswith("data:"):
            r.continue_()
        else:
            w.outside.append(url)
            r.abort()

    page.on("dialog", dialog)
    page.on("pageerror", lambda exc: w.errors.append(str(exc)))
    page.context.route("**/*", route)
    return w


class Site(Serve):
    root: Path
    index: Path
    paths: dict[str, Path]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A server over a temporary index of the test corpus (rich, a fork of it, a merged
    session, the hostile one)."""
    base = tmp_path_factory.mktemp("site")
    root = base / "sessions"
    root.mkdir(mode=0o700)
    rich = corpus.rich_session(root)
    paths = {
        "rich": rich,
        "fork": corpus.fork_of(rich),
        "merged": corpus.merged_session(root),
        "hostile": corpus.hostile_session(root),
        "long": corpus.long_session(root),
    }
    yield from serving(base, root, paths)


def serving(base: Path, root: Path, paths: dict[str, Path]) -> Iterator[Site]:
    """A server over an index of ``root`` (made under ``base``), stopped cleanly after."""
    index = base / "index.db"
    home = base / "home"
    home.mkdir()
    sync(root, index, home)
    s = Site("--index", str(index), "--root", str(root), home=home)
    s.root, s.index, s.paths = root, index, paths
    try:
        yield s
    finally:
        code, _out, err = s.stop()
        assert code == 0, err
