"""``jsonltape serve``: a local web viewer over the index (``pip install 'jsonltape[web]'``).

Browse sessions, search as you type, read transcripts (tool calls with their results, file
edits as diffs, compactions, revisions, retractions, forks), travel in time to the request
the model saw at any step, follow a live session and download a shareable transcript::

    from jsonltape.web import Config, run
    from jsonltape_daemon.target import parse

    run(Config(parse("index.db"), root=Path("sessions")))

It is a client of the library's public API and of the index's reader interface only
(``jsonltape_daemon.search.reader``); the routes hold no SQL (tests/web/test_web_layout.py).
Starlette, uvicorn, Jinja2 and sse-starlette are imported by the submodules, so importing
this package without the extra fails there, and ``jsonltape serve`` says which extra to
install.
"""

from __future__ import annotations

from ._config import Config, is_loopback, new_token
from ._serve import run

__all__ = ["Config", "is_loopback", "new_token", "run"]
