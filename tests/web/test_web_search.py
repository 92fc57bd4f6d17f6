"""Search as you type, on the server: a search whose client left (the page dropped its request
for the next keystroke's) is stopped, not left to run on one of the few readers for no one,
and the readers go on serving. The real routes over a real index, with the client's
connection closing as the ASGI server reports it."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.target import parse
from starlette.requests import Request

from jsonltape.web import Config
from jsonltape.web._app import Viewer
from tests.test_search_stop import many_texts

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return many_texts(tmp_path_factory.mktemp("typing"))


def _request(query: str, messages: list[dict[str, Any]]) -> Request:
    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # the connection stays open
        raise AssertionError("unreachable")

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/search/results",
        "query_string": f"q={query}".encode(),
        "headers": [(b"host", b"127.0.0.1")],
    }
    return Request(scope, receive)


def _served(viewer: Viewer, request: Request) -> Any:
    """The route's response, from an event loop of its own in a thread of its own (the
    browser tests' Playwright keeps a loop running in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, viewer.search_results(request)).result()


def _wait(until: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not until():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_search_whose_client_left_is_stopped(index: Path) -> None:
    viewer = Viewer(Config(parse(str(index))))
    try:
        left = [{"type": "http.request", "body": b""}, {"type": "http.disconnect"}]
        for n in range(1, 4):  # each of several keystrokes' dropped searches
            response = _served(viewer, _request("qz", list(left)))
            assert response.status_code == 204  # nothing for no one
            _wait(lambda n=n: viewer.index.stopped == n)
        # a client that stays gets its hits, whole (none stopped), from the same readers
        stays = [{"type": "http.request", "body": b""}]
        response = _served(viewer, _request("migration", stays))
        assert response.status_code == 200
        assert bytes(response.body).count(b'class="hit"') == 50
        assert viewer.index.stopped == 3
    finally:
        viewer.index.close()
