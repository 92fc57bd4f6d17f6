"""Live transcripts in a real browser: events another process appends appear without a reload,
each exactly once, across checkpoints, a crash and the repair that cuts its torn tail; a
"new since you last looked" marker on the next visit; a replaced or deleted file is said on
the page. The writer is a real subprocess (``jsonltape append``), as an agent would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import jsonltape
from tests.web.conftest import Site, Watch

pytestmark = pytest.mark.timeout(180)


def _append(site: Site, path: Path, *texts: str) -> None:
    lines = [
        json.dumps(
            {
                "type": "user/message",
                "data": {
                    "message": {
                        "id": f"m{abs(hash(t))}",
                        "role": "user",
                        "parts": [{"type": "text", "content": t}],
                    }
                },
            }
        )
        for t in texts
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(site.root.parent / "home")
    subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "append", str(path), "-"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        capture_output=True,
        env=env,
    )


def _new_session(site: Site, name: str, page: Any) -> tuple[Path, str]:
    path = site.root / f"{name}.jsonl"
    with jsonltape.open(path, create=True, title=f"live {name}") as tape:
        tape.append("turn/start", {})
        tape.user("first words")
    sid = jsonltape.header(path).id
    # the server's own mirror indexes it (inotify): wait until the list shows it
    for _ in range(100):
        page.goto(site.url + "?q=" + sid)
        if page.locator("table.sessions tbody tr").count() == 1:
            break
        page.wait_for_timeout(100)
    else:
        raise AssertionError("the new session never reached the index")
    return path, sid


def _texts(page: Any) -> list[str]:
    return page.locator("#transcript article.msg .body").all_inner_texts()


def test_appended_events_appear_once_across_a_crash_and_its_repair(
    page: Any, site: Site, watch: Watch
) -> None:
    path, sid = _new_session(site, "follow", page)
    page.goto(f"{site.url}s/{sid}")
    assert page.locator("#live-state").inner_text() == "following new events"
    assert page.locator("#transcript").get_attribute("data-live") is not None
    _append(site, path, "second words", "third words")
    page.wait_for_function("() => document.querySelectorAll('#transcript article.msg').length >= 3")
    # a crash: half a line after the last checkpoint; nothing of it is shown
    with open(path, "ab") as f:
        f.write(b'{"seq":99,"type":"user/message","data":{"mess')
    page.wait_for_timeout(600)
    assert _texts(page)[-1] == "third words"
    r = subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "repair", str(path)], capture_output=True
    )
    assert r.returncode == 0, r.stderr
    _append(site, path, "after the repair")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#transcript article.msg .body')]"
        ".some(e => e.innerText === 'after the repair')"
    )
    texts = _texts(page)
    want = ["first words", "second words", "third words", "after the repair"]
    assert [t for t in texts if t in want] == want  # each once, in order
    assert page.locator("#transcript article.msg.new").count() >= 3  # marked as new
    seqs = page.locator("#transcript [data-seq]").evaluate_all("es => es.map(e => e.dataset.seq)")
    assert len(seqs) == len(set(seqs))
    assert watch.dialogs == [] and watch.outside == [] and watch.errors == []


def test_a_replaced_file_is_said_on_the_page(page: Any, site: Site, watch: Watch) -> None:
    path, sid = _new_session(site, "replaced", page)
    page.goto(f"{site.url}s/{sid}")
    other = path.with_name("other.tmp")
    with jsonltape.open(other, create=True, title="another") as tape:
        tape.user("another file")
    os.replace(other, path)
    page.wait_for_selector("#live-state.gone")
    assert "replaced" in page.locator("#live-state").inner_text()
    assert watch.errors == []


def test_a_deleted_file_is_said_on_the_page(page: Any, site: Site, watch: Watch) -> None:
    path, sid = _new_session(site, "deleted", page)
    page.goto(f"{site.url}s/{sid}")
    page.wait_for_timeout(300)
    path.unlink()
    page.wait_for_selector("#live-state.gone")
    text = page.locator("#live-state").inner_text()
    assert "deleted" in text or "replaced" in text, text
    assert watch.errors == []


def test_new_since_you_last_looked(page: Any, site: Site, watch: Watch) -> None:
    path, sid = _new_session(site, "seen", page)
    page.goto(f"{site.url}s/{sid}")
    page.wait_for_load_state("networkidle")
    assert page.locator("#new-since").count() == 0  # first visit: nothing is new
    page.goto(site.url)  # away
    _append(site, path, "while you were away")
    page.goto(f"{site.url}s/{sid}")
    marker = page.locator("#new-since")
    assert marker.count() == 1
    after = marker.evaluate("m => m.nextElementSibling.innerText")
    assert "while you were away" in after
    assert watch.errors == []


def _listed(site: Site, sid: str, events: int) -> str:
    """The list's row of session ``sid`` once the index holds its first ``events`` events."""
    with httpx.Client(base_url=site.url, timeout=10) as c:
        for _ in range(200):
            html = c.get("/", params={"q": sid}).text
            row = html.partition("<tbody>")[2].partition("</tbody>")[0]
            if f'data-label="Events" class="num">{events}<' in row:
                return row
            time.sleep(0.05)
    raise AssertionError(f"the index never held {events} events of {sid}")


def _events(path: Path) -> int:
    return 1 + max(line.event.seq for line in jsonltape.lines(path))


def test_a_session_is_live_while_its_writer_holds_it_and_not_once_it_closed_it(
    site: Site,
) -> None:
    """Live is what the index records: a session whose writer closed it (its last line a
    checkpoint with ``closed: true``) is not live, however recent its last event; one whose
    writer still holds it, its turn open, is."""
    path = site.root / "held.jsonl"
    tape = jsonltape.open(path, create=True, title="live held")
    try:
        tape.append("turn/start", {})
        tape.user("still writing")
        tape.flush()
        sid = jsonltape.header(path).id
        assert 'class="badge live"' in _listed(site, sid, _events(path))
    finally:
        tape.close()  # a turn left open on purpose: the last checkpoint says closed
    last = list(jsonltape.lines(path))[-1].event
    assert last.type == "session/flush" and last.data.get("closed") is True
    assert 'class="badge live"' not in _listed(site, sid, _events(path))
    # a writer that closed with no turn open wrote no closing checkpoint: its recent last
    # event keeps it live for RECENT_MS (the index cannot tell it from a running writer)
    with jsonltape.open(path) as tape:
        tape.append("turn/end", {"turn": 1, "reason": "completed"})
    assert 'class="badge live"' in _listed(site, sid, _events(path))
