"""The server as a server: it binds loopback unless given a token, refuses foreign Host
headers (DNS rebinding), asks for its token, sends its security headers on every answer,
never lets a request name a file, never writes a session file, and stops cleanly on Ctrl-C.
Every check is a real HTTP client against the real ``jsonltape serve``."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import jsonltape
from tests.web import corpus
from tests.web.server import Serve, sync

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("guard")
    root = base / "sessions"
    root.mkdir(mode=0o700)
    corpus.rich_session(root)
    home = base / "home"
    home.mkdir()
    sync(root, base / "index.db", home)
    return root, base / "index.db", home


@pytest.fixture(scope="module")
def server(tree: tuple[Path, Path, Path]) -> Iterator[Serve]:
    root, index, home = tree
    s = Serve("--index", str(index), "--root", str(root), home=home)
    yield s
    assert s.stop()[0] == 0


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _session_id(root: Path) -> str:
    return jsonltape.header(root / "rich.jsonl").id


HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def _check_headers(r: httpx.Response) -> None:
    csp = r.headers.get("content-security-policy", "")
    assert "default-src 'none'" in csp and "script-src 'self'" in csp, r.url
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    for k, v in HEADERS.items():
        assert r.headers.get(k) == v, (r.url, k)


def test_every_answer_carries_the_security_headers(server: Serve, tree: tuple[Path, ...]) -> None:
    sid = _session_id(tree[0])
    paths = [
        "/",
        "/search?q=migration",
        "/search/results?q=migration",
        f"/s/{sid}",
        f"/s/{sid}/at?seq=5",
        f"/s/{sid}/export?format=html",
        "/s/no-such-session",
        "/static/app.css",
        "/static/app.js",
        "/static/nothing-here",
        "/nowhere",
    ]
    with httpx.Client(base_url=server.url) as c:
        for p in paths:
            r = c.get(p)
            assert r.status_code in (200, 404), (p, r.status_code)
            _check_headers(r)
        r = c.get("/", headers={"host": "evil.example"})
        assert r.status_code == 421
        _check_headers(r)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1.evil.example:{port}",
        "localhost.:{port}",
        "127.0.0.2:{port}",
        "",
        "127.0.0.1:{port}@evil.example",
    ],
)
def test_a_foreign_host_header_is_refused(server: Serve, host: str) -> None:
    """DNS rebinding: a page of another site whose name resolves to 127.0.0.1 sends its own
    name as Host; the viewer answers only to its own address."""
    with httpx.Client(base_url=server.url) as c:
        r = c.get("/", headers={"host": host.format(port=server.port)})
    assert r.status_code == 421
    assert "Sessions" not in r.text and r.text.count("\n") == 1


def test_its_own_loopback_names_are_answered(server: Serve) -> None:
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "127.0.0.1"):
        with httpx.Client(base_url=server.url) as c:
            assert c.get("/", headers={"host": host}).status_code == 200, host


def test_a_request_path_never_names_a_file(server: Serve, tree: tuple[Path, ...]) -> None:
    """Sessions are addressed by index id only: a path, an id that is a path, a traversal
    in the static files or an encoded one finds nothing and reads nothing."""
    root = tree[0]
    rich = str(root / "rich.jsonl")
    attempts = [
        f"/s/{rich}",
        "/s/..%2f..%2f..%2fetc%2fpasswd",
        "/s/%2fetc%2fpasswd",
        f"/s/{rich.replace('/', '%2f')}",
        "/static/../../../../etc/passwd",
        "/static/..%2f..%2fconftest.py",
        "/static/%2e%2e/%2e%2e/_app.py",
        f"/s/{_session_id(root)[:6]}",  # a prefix is not an id
    ]
    with httpx.Client(base_url=server.url) as c:
        for p in attempts:
            r = c.get(p)
            assert r.status_code in (404, 400), (p, r.status_code)
            assert "root:" not in r.text and "import" not in r.text, p


def test_the_server_never_writes_a_session_file(server: Serve, tree: tuple[Path, ...]) -> None:
    root = tree[0]
    before = _digest(root)
    sid = _session_id(root)
    with httpx.Client(base_url=server.url) as c:
        for p in (
            "/",
            f"/s/{sid}",
            f"/s/{sid}/at?seq=3&format=openai",
            f"/s/{sid}/export?format=markdown&redact=secrets",
            "/search?q=NOT+NULL",
        ):
            assert c.get(p).status_code == 200
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert c.request(method, f"/s/{sid}").status_code == 405
    assert _digest(root) == before


def test_bad_input_in_a_request_is_one_clear_answer(server: Serve, tree: tuple[Path, ...]) -> None:
    """Undecodable bytes, a lone surrogate's UTF-8 bytes, huge and odd values: an answer,
    never a traceback."""
    sid = _session_id(tree[0])
    odd = [
        "/search?q=%ED%A0%80",
        "/search?q=%FF%FE",
        "/search?q=" + "a" * 20000,
        "/search/results?q=%22unclosed&since=2026-99-99&until=x",
        "/search/results?q=x&sort=bogus&role=%00",
        "/?page=-5&sort=evil;drop&order=sideways",
        "/?page=99999999999999999999",
        f"/s/{sid}?from=99999999999999999999999",
        f"/s/{sid}?around=-1",
        f"/s/{sid}?around=%C2%B2",  # a digit to str.isdigit that int refuses
        f"/s/{sid}?from=" + "1" * 4301,  # more digits than int converts
        f"/s/{sid}/at?seq=%C2%B2",
        f"/s/{sid}/at?seq=" + "1" * 4301,
        f"/s/{sid}/at?seq=abc&format=../../x",
        f"/s/{sid}/at?seq=999999999999",
        f"/s/{sid}/export?format=pdf",
        f"/s/{sid}/branch/3",
    ]
    with httpx.Client(base_url=server.url) as c:
        for p in odd:
            r = c.get(p)
            assert r.status_code in (200, 300, 400, 404), (p, r.status_code, r.text[:200])
            assert "Traceback" not in r.text, p


def _raw(base: str, request: str) -> str:
    """The head of the answer to a request written byte for byte (a client would normalise
    its path first)."""
    import socket

    host, port = base.split("//")[1].rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n\r\n")[0].decode("latin-1") + "\r\n"


def _run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "serve", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=60,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.invalid"])
def test_any_address_but_loopback_without_a_token_is_refused_before_binding(
    tree: tuple[Path, ...], host: str
) -> None:
    root, index, home = tree
    r = _run("--index", str(index), "--root", str(root), "--host", host, "--port", "0", home=home)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--token" in lines[0] and lines[0].startswith("jsonltape: error:")
    assert r.stdout == ""


def test_a_token_viewer_asks_for_its_token_then_remembers_it(tree: tuple[Path, ...]) -> None:
    root, index, home = tree
    s = Serve(
        "--index",
        str(index),
        "--root",
        str(root),
        "--host",
        "0.0.0.0",
        "--token",
        "generate",
        home=home,
    )
    try:
        assert s.token and len(s.token) >= 40
        base = s.url.replace(s.url.split("//")[1].split(":")[0], "127.0.0.1")
        with httpx.Client(base_url=base) as c:
            r = c.get("/")
            assert r.status_code == 401 and s.token not in r.text
            _check_headers(r)
            assert c.get("/", params={"token": "wrong"}).status_code == 401
            assert c.get("/", headers={"cookie": "jsonltape_token=wrong"}).status_code == 401
            first = c.get("/search", params={"q": "migration", "token": s.token})
            assert first.status_code == 303
            assert first.headers["location"] == "/search?q=migration"  # the token is dropped
            cookie = first.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            assert c.get("/search?q=migration").status_code == 200  # the cookie now
        with httpx.Client(base_url=base) as c2:
            auth = {"authorization": f"Bearer {s.token}"}
            assert c2.get("/", headers=auth).status_code == 200
        # a path of "//host" must not become a redirect to another site
        head = _raw(base, f"GET //evil.example/?token={s.token} HTTP/1.1\r\nHost: x\r\n\r\n")
        assert "\r\nlocation: /evil.example/\r\n" in head.lower(), head
    finally:
        assert s.stop()[0] == 0


def test_a_given_token_is_never_printed(tree: tuple[Path, ...]) -> None:
    root, index, home = tree
    s = Serve(
        "--index",
        str(index),
        "--root",
        str(root),
        "--host",
        "127.0.0.1",
        "--token",
        "s3cret-tok",
        home=home,
    )
    code, out, err = s.stop()
    assert code == 0
    assert "s3cret-tok" in "\n".join(s.lines)  # the address to open carries it once
    assert "s3cret-tok" not in out + err


def test_ctrl_c_stops_it_cleanly_and_a_taken_port_is_one_line(tree: tuple[Path, ...]) -> None:
    root, index, home = tree
    s = Serve("--index", str(index), "--root", str(root), home=home)
    taken = _run("--index", str(index), "--root", str(root), "--port", str(s.port), home=home)
    assert taken.returncode != 0
    assert len(taken.stderr.strip().splitlines()) == 1, taken.stderr
    assert "Traceback" not in taken.stderr
    code, out, err = s.stop()
    assert code == 0, err
    assert out.strip().endswith("jsonltape serve: stopped")
    assert "Traceback" not in err


@pytest.mark.parametrize("missing", ["starlette", "uvicorn", "jinja2", "sse_starlette"])
def test_without_the_web_extra_serve_names_it_in_one_line(tmp_path: Path, missing: str) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{missing!r}] = None  # as if it were not installed\n"
        "from jsonltape.cli import main\n"
        "sys.argv = ['jsonltape', 'serve', '--port', '0']\n"
        "main()\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(tmp_path)
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "jsonltape: error: jsonltape serve needs the web extra: pip install 'jsonltape[web]'"
    ]


def test_many_pages_at_once_share_a_few_index_readers(
    server: Serve, tree: tuple[Path, ...]
) -> None:
    """A reader holds a page cache and a map of the index: the server keeps a few, whatever
    the number of pages asked at once (one per worker thread grew it by ~20 MB a thread).
    Counted, not timed: the connections the server holds open on the index file."""
    from concurrent.futures import ThreadPoolExecutor

    from jsonltape.web._index import READERS

    index = tree[1]
    sid = _session_id(tree[0])

    def one(k: int) -> int:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            path = [f"/s/{sid}?from={k % 3 * 10}", "/", f"/search/results?q=m{k}"][k % 3]
            return c.get(path).status_code

    with ThreadPoolExecutor(24) as pool:
        assert set(pool.map(one, range(48))) == {200}
    fds = Path(f"/proc/{server.proc.pid}/fd")
    on_index = [f for f in fds.iterdir() if os.path.realpath(f) == str(index)]
    # the readers, and the index mirror's own connection
    assert 1 <= len(on_index) <= READERS + 1, len(on_index)


def test_sigterm_stops_it_cleanly_and_its_index_mirror_with_it(tmp_path: Path) -> None:
    """systemd, `daemon stop` and kill send SIGTERM: the same clean stop as Ctrl-C, the
    in-process mirror included (its pid file removed, so `daemon status` says stopped)."""
    import signal as sig

    from jsonltape_daemon.paths import pid_file

    root, index, home = tmp_path / "sessions", tmp_path / "index.db", tmp_path / "home"
    root.mkdir(mode=0o700)
    corpus.long_session(root, turns=2)
    s = Serve("--index", str(index), "--root", str(root), home=home)
    try:
        for _ in range(100):  # the mirror writes its pid file as it starts
            if pid_file(index).exists():
                break
            time.sleep(0.05)
        assert pid_file(index).read_text().strip() == str(s.proc.pid)
        s.proc.send_signal(sig.SIGTERM)
    finally:
        code, out, err = s.stop()
    assert code == 0, (code, err)
    assert out.strip().endswith("jsonltape serve: stopped")
    assert not pid_file(index).exists()


def test_a_running_daemon_keeps_the_index_current_and_serve_starts_no_second_mirror(
    tmp_path: Path,
) -> None:
    root = tmp_path / "sessions"
    root.mkdir(mode=0o700)
    corpus.long_session(root, turns=3)
    index, home = tmp_path / "index.db", tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(home)

    def cli(*args: str) -> None:
        subprocess.run(
            [sys.executable, "-P", "-m", "jsonltape", *args],
            check=True,
            capture_output=True,
            env=env,
            timeout=60,
        )

    cli("daemon", "start", str(root), "--index", str(index))
    try:
        from jsonltape_daemon.paths import pid_file

        daemon_pid = pid_file(index).read_text().strip()
        s = Serve("--index", str(index), "--root", str(root), home=home)
        try:
            assert f"the daemon (pid {daemon_pid}) keeps the index current" in s.lines[0]
            assert pid_file(index).read_text().strip() == daemon_pid  # not taken over
            with jsonltape.open(root / "new.jsonl", create=True, title="written meanwhile") as t:
                t.user("hello")
            with httpx.Client(base_url=s.url) as c:  # the daemon indexes it, serve shows it
                for _ in range(100):
                    if "written meanwhile" in c.get("/").text:
                        break
                    time.sleep(0.1)
                else:
                    raise AssertionError("the daemon's update never reached the viewer")
        finally:
            assert s.stop()[0] == 0
        assert pid_file(index).read_text().strip() == daemon_pid  # still the daemon's
    finally:
        cli("daemon", "stop", "--index", str(index))


@pytest.mark.parametrize("delay", [0.0, 0.15, 0.3, 0.45, 0.6, 0.8, 1.0, 1.3])
def test_sigterm_at_any_moment_of_start_up_stops_serve(tmp_path: Path, delay: float) -> None:
    """A stop signal that lands while serve is still starting (importing, opening the index,
    starting its mirror, before uvicorn takes the signals over) stops it too: serve's handler
    raised KeyboardInterrupt, which Python drops when it lands in a weakref or module-lock
    callback ("Exception ignored in ..."), and serve then ran on, deaf to the signal."""
    import signal as sig

    from jsonltape_daemon.paths import pid_file

    root, index, home = tmp_path / "sessions", tmp_path / "index.db", tmp_path / "home"
    root.mkdir(mode=0o700)
    home.mkdir(mode=0o700)
    corpus.long_session(root, turns=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(home)
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "jsonltape", "serve", "--index", str(index)]
        + ["--root", str(root), "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    time.sleep(delay)
    proc.send_signal(sig.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"serve still ran 30 s after SIGTERM at {delay} s: {out[-2000:]}")
    assert "Traceback" not in out and "Exception ignored" not in out, out
    if proc.returncode == -sig.SIGTERM:  # before serve set its handlers: nothing started yet
        assert "jsonltape serve:" not in out, out
    else:
        assert proc.returncode == 0, (proc.returncode, out)
        assert out.strip().endswith("jsonltape serve: stopped"), out
    assert not pid_file(index).exists()


def test_sigterm_as_soon_as_serve_gives_its_address_stops_it_every_time(tmp_path: Path) -> None:
    """The moment a script sees the address and stops serve (tests, supervisors) is when
    uvicorn starts: 12 starts, each stopped as soon as it printed the address, all end."""
    import signal as sig

    root, index, home = tmp_path / "sessions", tmp_path / "index.db", tmp_path / "home"
    root.mkdir(mode=0o700)
    home.mkdir(mode=0o700)
    corpus.long_session(root, turns=2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSONLTAPE_")}
    env["JSONLTAPE_HOME"] = str(home)
    for n in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "jsonltape", "serve", "--index", str(index)]
            + ["--root", str(root), "--port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        said = []
        for line in proc.stdout:
            said.append(line)
            if "http://" in line or len(said) > 5:
                break
        proc.send_signal(sig.SIGTERM)
        try:
            rest, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, _ = proc.communicate()
            pytest.fail(f"start {n}: serve still ran 30 s after SIGTERM: {''.join(said) + rest}")
        out = "".join(said) + rest
        assert proc.returncode == 0, (n, proc.returncode, out)
        assert "Traceback" not in out and "Exception ignored" not in out, out
        assert out.strip().endswith("jsonltape serve: stopped"), out
