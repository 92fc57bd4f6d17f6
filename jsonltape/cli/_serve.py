"""``jsonltape serve``: the local web viewer (the ``web`` extra; loaded only when it runs)."""

from __future__ import annotations

from pathlib import Path

import click

from ._base import CliError, say
from ._params import index_option, target_of

__all__ = ["serve"]

_EXTRA = "jsonltape serve needs the web extra: pip install 'jsonltape[web]'"


@click.command()
@index_option
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Sessions root to keep the index current with while serving (default: as for sync; "
    "not for a postgresql:// index).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="TCP port (0: any free port; the address printed names it).",
)
@click.option(
    "--token",
    metavar="TOKEN|generate",
    help="Required to listen on any address but loopback: every request must carry it "
    "(generate: a random one, printed once).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a browser.")
def serve(
    index_path: str | None,
    root: Path | None,
    host: str,
    port: int,
    token: str | None,
    open_browser: bool,
) -> None:
    """Browse, search and follow sessions in a web browser: a local server over the index.

    It keeps the index current while it runs (the running daemon's, else the daemon's loop
    in-process), prints its address and stops on Ctrl-C. It listens on 127.0.0.1; any other
    --host needs --token. It only reads sessions, never writes one.
    """
    try:  # the web extra, all of it, before anything starts (the server imports it later)
        import jinja2  # noqa: F401
        import sse_starlette.sse  # noqa: F401
        import starlette.applications  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise CliError(_EXTRA, 2) from None
    from jsonltape_daemon.target import SqliteTarget

    from jsonltape import web

    t = target_of(index_path)
    if token == "generate":
        token = web.new_token()
    sessions_root = None
    if isinstance(t, SqliteTarget):
        from ._daemon_cmds import existing_root

        sessions_root = existing_root(root)
    elif root is not None:
        raise CliError("--root goes with a local index (a team index is pushed by daemons)", 2)
    config = web.Config(t, host=host, port=port, token=token, root=sessions_root)
    try:
        web.run(config, open_browser=open_browser, say=say, exiting=True)
    except KeyboardInterrupt:  # pragma: no cover - uvicorn handles Ctrl-C itself
        pass
    say("jsonltape serve: stopped")
