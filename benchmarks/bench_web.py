"""The web viewer (``jsonltape serve``, issue 30): the real server on loopback, a real HTTP client
and Debian's Chromium. Bounded: every loop has a count or a deadline.

1. session list of ``--sessions`` sessions: time of a page (HTTP round trip, so an upper bound
   of the server's time), over every sort and pages spread over the list;
2. a transcript of ``--events`` events: DOMContentLoaded of its first and last pages in
   Chromium, and the server's peak RSS while ``--concurrent`` such pages are requested at once;
3. search as you type over the search benchmark's corpus of ``--search-events`` events:
   keystroke to results painted, in Chromium;
4. live: an append to a followed session until it is painted in the page;
5. ``--clients`` clients browsing and searching for ``--seconds``: errors and p95.

Each time is also given as a ratio to the same client fetching the server's stylesheet in the
same run (the cost of a request that does no work: the floor of any page).

    .venv/bin/python benchmarks/bench_web.py --dir /tmp/bench-web
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import jsonltape
from tests.web.conftest import ARGS, CHROMIUM
from tests.web.server import Serve, sync


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)] if xs else float("nan")


#: Event times of the corpus: a second apart from here (a burst of messages in one second
#: is what issue 29's item 4 makes slow to index; the viewer is measured, not that).
T0 = 1_760_000_000_000


def _msg(role: str, text: str, **extra: object) -> dict[str, object]:
    parts: list[dict[str, object]] = [{"type": "text", "content": text}]
    calls = extra.pop("calls", None)
    if calls:
        parts += calls  # type: ignore[arg-type]
    return {"message": {"id": f"{role}-{abs(hash(text))}", "role": role, "parts": parts}}


def _write_sessions(root: Path, first: int, last: int) -> None:
    agents = ["claude-code", "codex", "pi", "gemini-cli"]
    for i in range(first, last):
        path = root / f"s{i:06d}.jsonl"
        if path.exists():
            continue
        t = T0 + i * 60_000
        with jsonltape.open(
            path,
            create=True,
            title=f"session {i}",
            agent=agents[i % 4],
            cwd=f"/work/p{i % 37}",
            durability="manual",
        ) as tape:
            tape.append("user/message", _msg("user", f"question {i}"), time=t)
            tape.append("assistant/message", _msg("assistant", f"answer {i}"), time=t + 1000)


def build_sessions(root: Path, n: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    from concurrent.futures import ProcessPoolExecutor

    step = -(-n // 2)
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_write_sessions, [root, root], [0, step], [step, n]))


def build_long(root: Path, events: int) -> Path:
    """One session of ``events`` events, a turn of five every five seconds."""
    path = root / "long.jsonl"
    if path.exists():
        return path
    root.mkdir(parents=True, exist_ok=True)
    t = T0 - events * 1000
    with jsonltape.open(path, create=True, title="long", durability="manual") as tape:
        i = 0
        while i < events:
            call = {
                "type": "tool_call",
                "id": f"c{i}",
                "name": "Read",
                "arguments": {"file_path": f"f{i}.py"},
            }
            result = {
                "call_id": f"c{i}",
                "message": {
                    "id": f"r{i}",
                    "role": "tool",
                    "parts": [
                        {"type": "tool_call_response", "id": f"c{i}", "response": "line\n" * 20}
                    ],
                },
            }
            start = tape.append("turn/start", {}, time=t)
            tape.append("user/message", _msg("user", f"prompt {i} " + "words " * 20), time=t + 1000)
            tape.append(
                "assistant/message",
                _msg("assistant", f"reply {i} " + "more words " * 30, calls=[call]),
                time=t + 2000,
            )
            tape.append("tool/result", result, time=t + 3000)
            tape.append("turn/end", {"turn": start.seq, "reason": "completed"}, time=t + 4000)
            t += 5000
            i += 5
    return path


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed_gets(client: httpx.Client, paths: list[str]) -> list[float]:
    out = []
    for p in paths:
        t = time.perf_counter()
        r = client.get(p)
        out.append((time.perf_counter() - t) * 1000)
        assert r.status_code == 200, (p, r.status_code)
    return out


def floor_ms(client: httpx.Client, n: int = 100) -> float:
    return statistics.median(timed_gets(client, ["/static/app.css"] * n))


def bench_list(server: Serve, rows: list[list[str]]) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        base = floor_ms(c)
        rng = random.Random(30)
        paths = []
        for sort in ("updated", "created", "messages", "events", "title"):
            for order in ("desc", "asc"):
                paths += [
                    f"/?sort={sort}&order={order}&page={rng.randint(1, 400)}" for _ in range(8)
                ]
        paths += [f"/?agent=codex&page={rng.randint(1, 100)}" for _ in range(10)]
        paths += [f"/?q=session+1{rng.randint(0, 999)}" for _ in range(10)]
        timed_gets(c, paths[:5])  # warm
        ms = timed_gets(c, paths)
        rows.append(
            [
                "session list page (HTTP, all sorts, filters)",
                f"{len(ms)}",
                f"{statistics.median(ms):.1f}",
                f"{p95(ms):.1f}",
                f"{p95(ms) / base:.1f}x",
                "p95 < 50 ms",
            ]
        )


def bench_transcript(server: Serve, sid: str, concurrent: int, rows: list[list[str]]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        for label, where in (("first", ""), ("last", "?page=last")):
            times = []
            for _ in range(10):
                page.goto(f"{server.url}s/{sid}{where}", wait_until="domcontentloaded")
                times.append(
                    page.evaluate(
                        "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
                    )
                )
            rows.append(
                [
                    f"transcript 100k events, {label} page: DOMContentLoaded",
                    "10",
                    f"{statistics.median(times):.0f}",
                    f"{p95(times):.0f}",
                    "",
                    "< 300 ms",
                ]
            )
        browser.close()
    pid = server.proc.pid
    peak = rss_mb(pid)
    before = peak
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, rss_mb(pid))
            time.sleep(0.01)

    t = threading.Thread(target=sample)
    t.start()
    starts = [f"/s/{sid}?from={k * 200}" for k in range(concurrent)]
    with ThreadPoolExecutor(concurrent) as pool:

        def one(path: str) -> float:
            with httpx.Client(base_url=server.url, timeout=60) as c:
                return timed_gets(c, [path])[0]

        ms = list(pool.map(one, starts))
    stop.set()
    t.join()
    rows.append(
        [
            f"{concurrent} transcript pages at once: server RSS",
            f"{concurrent}",
            f"{before:.0f} MB before",
            f"{peak:.0f} MB peak",
            f"p95 {p95(ms):.0f} ms",
            "< 150 MB",
        ]
    )


def bench_typing(server: Serve, queries: list[str], rows: list[list[str]], label: str) -> None:
    from playwright.sync_api import sync_playwright

    times: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(server.url + "search")
        # measured in the page: from the key's keydown to the frame painted after the
        # results were put in (a Playwright round trip would add its own time)
        page.evaluate(
            "() => { window.__lat = [];"
            " document.addEventListener('keydown', () => { window.__t0 = performance.now(); },"
            " true);"
            " new MutationObserver(() => { const t0 = window.__t0;"
            " requestAnimationFrame(() => window.__lat.push(performance.now() - t0)); })"
            ".observe(document.querySelector('#results'), {childList: true}); }"
        )
        for q in queries:
            page.fill("#q", "")
            page.wait_for_timeout(300)
            page.evaluate("() => { window.__lat = []; }")
            typed = ""
            for ch in q:
                typed += ch
                page.keyboard.press(ch if ch != " " else "Space")
                page.wait_for_function(
                    "q => document.body.dataset.searched === q", arg=typed, timeout=30_000
                )
                page.wait_for_timeout(50)  # the frame after it
            times += page.evaluate("() => window.__lat")
        browser.close()
    rows.append(
        [
            f"search as you type ({label}): keystroke to results painted",
            f"{len(times)}",
            f"{statistics.median(times):.0f}",
            f"{p95(times):.0f}",
            "",
            "p95 < 100 ms",
        ]
    )


def bench_live(server: Serve, root: Path, rows: list[list[str]], n: int = 30) -> None:
    from playwright.sync_api import sync_playwright

    path = root / f"live-bench-{os.getpid()}.jsonl"
    with jsonltape.open(path, create=True, title="live bench") as tape:
        tape.user("start")
    sid = jsonltape.header(path).id
    with httpx.Client(base_url=server.url) as c:
        for _ in range(100):
            if sid in c.get("/", params={"q": sid}).text:
                break
            time.sleep(0.1)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.goto(f"{server.url}s/{sid}")
        page.wait_for_timeout(500)
        times = []
        with jsonltape.open(path, durability="always") as tape:
            for i in range(n):
                text = f"live message {i}"
                t0 = time.perf_counter()
                tape.user(text)
                page.wait_for_function(
                    "t => [...document.querySelectorAll('#transcript .body')]"
                    ".some(e => e.innerText === t)",
                    arg=text,
                    polling="raf",
                    timeout=10_000,
                )
                times.append((time.perf_counter() - t0) * 1000)
                time.sleep(random.Random(i).uniform(0.05, 0.6))  # follows idle in between
        browser.close()
    rows.append(
        [
            "live: append to painted in the page",
            f"{n}",
            f"{statistics.median(times):.0f}",
            f"{p95(times):.0f}",
            "",
            "p95 < 500 ms",
        ]
    )


def bench_clients(
    server: Serve, sid: str, clients: int, seconds: float, rows: list[list[str]]
) -> None:
    paths = [
        "/",
        "/?sort=messages&page=3",
        f"/s/{sid}",
        f"/s/{sid}?from=4000",
        "/search/results?q=session",
        "/search/results?q=answer+1*",
        "/search?q=question",
    ]
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(k: int) -> None:
        rng = random.Random(k)
        with httpx.Client(base_url=server.url, timeout=30) as c:
            while time.monotonic() < deadline:
                p = rng.choice(paths)
                t = time.perf_counter()
                try:
                    r = c.get(p)
                    ok = r.status_code == 200
                except httpx.HTTPError as exc:
                    ok, r = False, None
                    errors.append(f"{p}: {exc}")
                ms = (time.perf_counter() - t) * 1000
                with lock:
                    lat.append(ms)
                    if not ok and r is not None:
                        errors.append(f"{p}: {r.status_code}")
                # a person reads between two pages (0.5-2 s; typing in the search box is
                # measured above, one client at a time)
                time.sleep(rng.uniform(0.5, 2.0))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows.append(
        [
            f"{clients} clients browsing and searching for {seconds:.0f} s",
            f"{len(lat)} requests, {len(errors)} errors",
            f"{statistics.median(lat):.0f}",
            f"{p95(lat):.0f}",
            "",
            "no error, p95 < 200 ms",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/jsonltape-bench-web"))
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--concurrent", type=int, default=20)
    ap.add_argument("--search-events", type=int, default=1_000_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--live-appends", type=int, default=30)
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        help="list, transcript, typing, live, clients, search (skip a part)",
    )
    a = ap.parse_args()
    rows: list[list[str]] = []
    root = a.dir / "sessions"
    home = a.dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    build_sessions(root, a.sessions)
    long = build_long(root, a.events)
    sync(root, a.dir / "index.db", home)
    server = Serve("--index", str(a.dir / "index.db"), "--root", str(root), home=home)
    try:
        sid = jsonltape.header(long).id
        if "list" not in a.skip:
            bench_list(server, rows)
        if "transcript" not in a.skip:
            bench_transcript(server, sid, a.concurrent, rows)
        if "typing" not in a.skip:
            bench_typing(server, ["session 12", "answer 7"], rows, f"{a.sessions} sessions")
        if "live" not in a.skip:
            bench_live(server, root, rows, a.live_appends)
        if "clients" not in a.skip:
            bench_clients(server, sid, a.clients, a.seconds, rows)
    finally:
        server.stop()
    if "search" not in a.skip:
        from _search_corpus import build  # the search benchmark's corpus

        tree = a.dir / f"corpus-{a.search_events}"
        build(tree, a.search_events)
        index = a.dir / f"corpus-{a.search_events}.db"
        if not index.exists():
            sync(tree, index, home)
        big = Serve("--index", str(index), "--root", str(tree), home=home)
        try:
            bench_typing(
                big,
                ["migration error", "FileNotFound", "config"],
                rows,
                f"{a.search_events:,} events",
            )
        finally:
            big.stop()
    print("| measure | n | median (ms) | p95 (ms) | ratio / other | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
