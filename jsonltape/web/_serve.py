"""Run a viewer: keep the index current, bind, print the address, serve until Ctrl-C."""

from __future__ import annotations

import dataclasses
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

from ._config import Config

__all__ = ["run", "url_of"]


def url_of(config: Config, port: int) -> str:
    host = config.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    if host in ("0.0.0.0", "[::]"):
        host = socket.gethostname()
    return f"http://{host}:{port}/"


def _bind(config: Config) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    host = "localhost" if config.host == "localhost" else config.host.strip("[]")
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted connections inherit it: without it a keep-alive client waits for its
        # delayed ACK between a response's head and body (40 ms a request on loopback)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, config.port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _on_sigterm() -> Any:
    """Make SIGTERM a KeyboardInterrupt (in the main thread only); the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _stop)


def run(
    config: Config,
    *,
    open_browser: bool = False,
    say: Callable[[str], None] = lambda text: print(text, flush=True),
) -> None:
    """Serve ``config`` until interrupted (Ctrl-C or SIGTERM end it cleanly)."""
    # SIGTERM (systemd, `daemon stop`, kill) stops it as Ctrl-C does, from now on: uvicorn
    # shuts down and then raises the signal again, which would otherwise end the process on
    # the spot, before the index mirror stops and removes its pid file
    previous = _on_sigterm()
    try:
        _serve(config, open_browser, say)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _serve(config: Config, open_browser: bool, say: Callable[[str], None]) -> None:
    import uvicorn

    from ._app import create_app
    from ._mirror import start_mirror

    sock = _bind(config)  # a port in use is one error line, before anything starts
    port = sock.getsockname()[1]
    config = dataclasses.replace(config, port=port)  # --port 0: the one the system chose
    mirror, note = start_mirror(config.target, config.root)
    try:
        app = create_app(config, note=note)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=2,
                server_header=False,
            )
        )
        url = url_of(config, port)
        say(f"jsonltape serve: {note}")
        say(f"jsonltape serve: reading {config.target}")
        say(f"jsonltape serve: open {url}" + (f"?token={config.token}" if config.token else ""))
        if open_browser:
            import webbrowser

            webbrowser.open(url + (f"?token={config.token}" if config.token else ""))
        server.run(sockets=[sock])
    finally:
        sock.close()
        if mirror is not None:
            mirror.stop()
            if mirror.error is not None:
                print(
                    f"jsonltape serve: the index mirror had stopped: {mirror.error}",
                    file=sys.stderr,
                )
