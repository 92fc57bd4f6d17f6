"""Screenshots of every page of ``jsonltape serve`` (light and dark, desktop and phone) for
the README: ``.venv/bin/python -m scripts.web_screenshots [OUT]`` (default docs/web/).

It serves the viewer tests' corpus (tests/web/corpus.py) with the real server and takes the
pictures with Debian's chromium through Playwright.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.web import corpus
from tests.web.conftest import ARGS, CHROMIUM
from tests.web.server import Serve, sync

PAGES = {
    "sessions": "/",
    "search": "/search?q=migration",
    "transcript": "{rich}",
    "travel": "{rich_at}",
    "branch": "{branch}",
    "usage": "/usage",
}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = base / "sessions"
        root.mkdir(mode=0o700)
        rich = corpus.rich_session(root)
        corpus.fork_of(rich)
        merged = corpus.merged_session(root)
        (base / "home").mkdir()
        sync(root, base / "index.db", base / "home")
        server = Serve("--index", str(base / "index.db"), "--root", str(root), home=base / "home")
        try:
            import jsonltape

            sid = jsonltape.header(rich).id
            at = next(e.seq for e in jsonltape.read(merged) if e.type == "branch/start")
            links = {
                "rich": f"/s/{sid}",
                "rich_at": f"/s/{sid}/at?seq=12",
                "branch": f"/s/{jsonltape.header(merged).id}/branch/{at}",
            }
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for scheme in ("light", "dark"):
                    for label, size in (("desktop", (1280, 860)), ("phone", (390, 844))):
                        ctx = browser.new_context(
                            color_scheme=scheme,
                            viewport={"width": size[0], "height": size[1]},
                            device_scale_factor=1,
                        )
                        page = ctx.new_page()
                        for name, where in PAGES.items():
                            page.goto(server.url.rstrip("/") + where.format(**links))
                            page.wait_for_load_state("networkidle")
                            shot = out / f"{name}-{scheme}-{label}.png"
                            page.screenshot(path=str(shot), full_page=False)
                            print(shot)
                        ctx.close()
                browser.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/web"))
