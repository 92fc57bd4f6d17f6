"""Run a viewer: keep the index current, bind, print the address, serve until Ctrl-C."""

from __future__ import annotations

import dataclasses
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._config import Config

if TYPE_CHECKING:
    from ._mirror import Mirror

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


class _Stop:
    """SIGINT and SIGTERM: ask the server to shut down, never raise. An exception raised from
    a signal handler lands in whatever Python code runs at that moment; in a weakref or
    module-lock callback it is printed as "ignored" and lost, and serve went on running (one
    start in ten under load). The first signal before the server exists is kept and given to
    it as soon as it does; uvicorn, which handles both signals while it serves, raises them
    again once it has shut down, and they land here as a no-op. So a second signal cannot cut
    the index mirror's stop short either (which left its pid file)."""

    def __init__(self) -> None:
        self.fired = False
        self.server: Any = None

    def __call__(self, signum: int, frame: object) -> None:
        self.fired = True
        if self.server is not None:
            self.server.should_exit = True

    def serve(self, server: Any) -> None:
        """Give ``server`` a signal that came before it existed (it then shuts down at once)."""
        self.server = server
        if self.fired:
            server.should_exit = True


def _install(handlers: dict[int, Any]) -> dict[int, Any]:
    """Install ``handlers`` (in the main thread only: elsewhere none); the previous ones."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}


def run(
    config: Config,
    *,
    open_browser: bool = False,
    say: Callable[[str], None] = lambda text: print(text, flush=True),
    exiting: bool = False,
) -> None:
    """Serve ``config`` until interrupted (Ctrl-C or SIGTERM end it cleanly). SIGUSR1
    (``jsonltape sync``) asks the index mirror to rescan, as it asks a daemon; SIGUSR2
    (``jsonltape daemon stop``) stops the mirror, and serving goes on. ``exiting``: the caller
    ends the process when this returns (the ``serve`` command); after a stop by signal, SIGINT
    and SIGTERM then stay ignored instead of restored, so a Ctrl-C more cannot turn the clean
    stop into an abort on the way out."""
    # SIGTERM (systemd, kill) stops it as Ctrl-C does, from now on: uvicorn shuts down and
    # then raises the signal again, which would otherwise end the process on the spot, before
    # the index mirror stops and removes its pid file
    stop = _Stop()
    keeper = _Keeper()
    handlers: dict[int, Any] = {signal.SIGINT: stop, signal.SIGTERM: stop}
    if hasattr(signal, "SIGUSR2"):  # POSIX: what the daemon's commands send
        handlers[signal.SIGUSR1] = keeper.rescan
        handlers[signal.SIGUSR2] = keeper.release
    previous = _install(handlers)
    try:
        _serve(config, open_browser, say, keeper, stop)
    finally:
        if exiting and stop.fired:
            previous.update((sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM))
        _install(previous)


class _Keeper:
    """The index mirror of this viewer: the signal handler's way to it (set before the mirror
    starts, so a ``daemon stop`` as soon as its pid file exists finds it)."""

    def __init__(self) -> None:
        self.mirror: Mirror | None = None

    def rescan(self, signum: int, frame: object) -> None:
        if self.mirror is not None:
            self.mirror.rescan()

    def release(self, signum: int, frame: object) -> None:
        if self.mirror is not None:
            self.mirror.release()


def _serve(
    config: Config,
    open_browser: bool,
    say: Callable[[str], None],
    keeper: _Keeper,
    stop: _Stop,
) -> None:
    import uvicorn

    from ._app import create_app
    from ._mirror import mirror_for

    sock = _bind(config)  # a port in use is one error line, before anything starts
    port = sock.getsockname()[1]
    config = dataclasses.replace(config, port=port)  # --port 0: the one the system chose
    url = url_of(config, port)
    mirror, note = mirror_for(config.target, config.root, url)
    if mirror is not None:
        keeper.mirror = mirror  # before its pid file exists: `daemon stop` may come at once
        mirror.start()
    try:
        app = create_app(config, note=lambda: note if mirror is None else mirror.note)
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
        stop.serve(server)
        say(f"jsonltape serve: {note}")
        say(f"jsonltape serve: reading {config.target}")
        say(f"jsonltape serve: open {url}" + (f"?token={config.token}" if config.token else ""))
        if open_browser and not stop.fired:
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
