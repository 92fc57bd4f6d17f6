"""The ``daemon`` command group, and what the index commands share (``_index`` imports it).

The daemon package's paths and schema (sqlite3) are imported here at module level, so only
commands that need them load them; ``lock``, ``service`` and ``units`` (filelock, watchdog,
plistlib) only inside the commands that use them. A query (``_query``) does not import this
module at all: the index options, :func:`target_of` and :func:`echo_json` live in ``_params``
(re-exported here for the index commands).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import click
from jsonltape_daemon import paths, target
from jsonltape_daemon.engines.sqlite import schema

from .._project import make_sessions_dir, resolve_root
from ._base import CliError, say
from ._params import Seconds, echo_json, index_of, index_option, origins_option, target_of

__all__ = [
    "daemon",
    "echo_json",
    "existing_root",
    "index_of",
    "index_option",
    "index_stats",
    "origin_of",
    "origin_option",
    "origins_option",
    "reader",
    "root_arg",
    "target_of",
]

origin_option = click.option(
    "--origin",
    "origin",
    metavar="NAME",
    help="Push as this origin to a PostgreSQL team index (default: $JSONLTAPE_ORIGIN, else "
    "this machine and user's, kept in <data dir>/origin).",
)
root_arg = click.argument("root", required=False, type=click.Path(file_okay=False, path_type=Path))


def origin_of(value: str | None) -> str:
    """The origin to push as: ``--origin``, else ``$JSONLTAPE_ORIGIN``, else this machine's."""
    from jsonltape_daemon import origin

    return origin.validate(value) if value is not None else origin.default_origin(paths.data_dir())


def root_of(path: Path | None) -> Path:
    """The sessions root: ROOT, else $JSONLTAPE_ROOT, else the project's, else the user's
    (:func:`jsonltape._project.resolve_root` decides, for every command)."""
    return resolve_root(path).path


def existing_root(path: Path | None) -> Path:
    """The sessions root to mirror. jsonltape's own default (``<data dir>/sessions``) and a
    project's ``.jsonltape/sessions`` are created 0700 on first use, so a fresh install just
    works; a root the user named (ROOT or ``$JSONLTAPE_ROOT``) must exist: a typo is reported,
    not created."""
    root = resolve_root(path)
    if not root.path.is_dir():
        if root.source == "project":
            make_sessions_dir(root.path)
        elif root.source == "default" or root.path == paths.data_dir() / "sessions":
            paths.ensure_private_dir(root.path)
        else:
            raise CliError(f"{root.path}: no such directory", 2)
    return root.path


def reader(index: Path) -> sqlite3.Connection:
    return schema.connect(index, readonly=True)


def index_stats(index: Path) -> dict[str, Any]:
    """Counts and problems of a local index (``index status``, ``daemon status``)."""
    from jsonltape_daemon.engines.sqlite.status import local_status

    return local_status(index)


@click.group()
def daemon() -> None:
    """The sync daemon: keeps the index current while agents write."""


local_index_option = click.option(
    "--local-index",
    "local_index",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With a postgresql:// --index: the local index kept beside it, searched while the "
    "server is away (default: <data dir>/index.db). Its pid, status and log files are the "
    "daemon's.",
)


def local_index_of(index_path: str | None, local: Path | None) -> tuple[Path, str | None]:
    """The daemon's local index file, and the PostgreSQL URL it also pushes to (if any)."""
    t = target_of(index_path)
    if isinstance(t, target.SqliteTarget):
        if local is not None:
            raise CliError("--local-index goes with a postgresql:// --index", 2)
        return t.path, None
    return index_of(str(local) if local else str(paths.data_dir() / "index.db")), t.url


def _daemon_options(fn: Any) -> Any:
    for opt in reversed(
        [
            root_arg,
            index_option,
            local_index_option,
            origin_option,
            click.option("--poll", is_flag=True, help="Poll instead of inotify/FSEvents (NFS)."),
            click.option(
                "--poll-interval",
                type=Seconds(0.1),
                default=2.0,
                show_default=True,
                help="Seconds between polls.",
            ),
            click.option(
                "--rescan-interval",
                type=Seconds(1),
                default=60.0,
                show_default=True,
                help="Seconds between full rescans.",
            ),
            click.option(
                "--debounce",
                type=Seconds(0),
                default=0.1,
                show_default=True,
                help="Seconds of quiet before a changed file is synced.",
            ),
            click.option(
                "--source",
                "sources",
                multiple=True,
                metavar="KIND:PATH",
                help="Also mirror an agent's session tree, read-only (claude-code:PATH, "
                "goose:PATH, ...: an agent the README's table marks in place; a database's "
                "-wal is watched for it). Repeatable.",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def _sources(specs: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    from jsonltape_daemon.ingest.foreign import parse_source

    out = []
    for spec in specs:
        try:
            kind, path = parse_source(spec)
        except ValueError as exc:
            raise CliError(str(exc), 2) from None
        if not os.path.isdir(path):
            raise CliError(f"{path}: no such directory", 2)
        out.append((kind, path))
    return tuple(out)


@daemon.command("run")
@_daemon_options
def daemon_run(
    root: Path | None,
    index_path: str | None,
    local_index: Path | None,
    origin: str | None,
    poll: bool,
    poll_interval: float,
    rescan_interval: float,
    debounce: float,
    sources: tuple[str, ...],
) -> None:
    """Run the daemon in the foreground (for systemd, launchd or a terminal).

    It mirrors the session files under ROOT into the index until SIGTERM or Ctrl-C. ROOT
    defaults to $JSONLTAPE_ROOT, else the .jsonltape/sessions of the nearest project above the
    current directory, else <data dir>/sessions (those two are created 0700 on first use; a
    ROOT you name must exist). With a postgresql:// --index it also pushes them into that team
    index as --origin, beside its local index (--local-index): while the server is away the
    local index goes on, and the push resumes with backoff.
    """
    from jsonltape_daemon.service.daemon import Config, Daemon

    idx, remote = local_index_of(index_path, local_index)
    config = Config(
        root=existing_root(root),
        index=idx,
        remote=remote,
        origin=origin_of(origin) if remote else None,
        poll=poll,
        poll_interval=poll_interval,
        rescan_interval=rescan_interval,
        debounce=debounce,
        sources=_sources(sources),
    )
    sys.exit(Daemon(config).run())


@daemon.command("start")
@_daemon_options
def daemon_start(
    root: Path | None,
    index_path: str | None,
    local_index: Path | None,
    origin: str | None,
    poll: bool,
    poll_interval: float,
    rescan_interval: float,
    debounce: float,
    sources: tuple[str, ...],
) -> None:
    """Start the daemon in the background (pid and log files beside the index).

    ROOT is as for `daemon run`. Exit 0 once it is up; it is refused when one already runs.
    """
    from jsonltape_daemon.service.daemon import start

    (idx, remote), r = local_index_of(index_path, local_index), existing_root(root)
    env = None
    # Paths as paths: the daemon runs in / (jsonltape._spawn), they are passed absolute.
    args: list[str | os.PathLike[str]] = [r]
    if remote is None:
        args += ["--index", idx]
    else:  # the URL goes by the environment: a password in argv is visible to every user
        env = {"JSONLTAPE_INDEX": remote}
        args += ["--local-index", idx, "--origin", origin_of(origin)]
    args += [
        "--poll-interval",
        str(poll_interval),
        "--rescan-interval",
        str(rescan_interval),
        "--debounce",
        str(debounce),
    ]
    if poll:
        args.append("--poll")
    for kind, path in _sources(sources):
        args += ["--source", f"{kind}:{path}"]
    pid = start(args, idx, env=env)
    say(f"daemon started (pid {pid}); log: {paths.log_file(idx)}")


@daemon.command("stop")
@index_option
@local_index_option
def daemon_stop(index_path: str | None, local_index: Path | None) -> None:
    """Stop the daemon (it finishes its current transaction first).

    When `jsonltape serve` runs the daemon's loop in-process, only that loop stops: the
    viewer goes on serving the index, no longer keeping it current. Stopping a daemon that is
    not running succeeds (exit 0, "not running"), as LSB init scripts and systemd do.
    """
    from jsonltape_daemon.service.daemon import in_serve, running_pid, stop

    idx = local_index_of(index_path, local_index)[0]
    running = running_pid(idx)
    serve = in_serve(idx, running) if running is not None else None
    pid = stop(idx)
    if pid is None:
        say("the daemon is not running")
    elif serve is not None and pid == running:
        say(
            f"stopped keeping the index current in jsonltape serve (pid {pid}, {serve}); "
            "the viewer goes on serving it"
        )
    else:
        say(f"daemon stopped (pid {pid})")


#: ``daemon status`` exit codes, LSB's for a service's status action.
STATUS_RUNNING, STATUS_DEAD_PIDFILE, STATUS_NOT_RUNNING = 0, 1, 3


@daemon.command("status")
@index_option
@local_index_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_status_cmd(index_path: str | None, local_index: Path | None, as_json: bool) -> None:
    """Pid, root, index, files tracked, events indexed, lag and errors.

    Exit codes follow LSB for a service's status: 0 running, 3 not running, 1 not running but
    its pid file remains (the daemon died without cleaning up; `daemon start` starts anew).
    """
    from jsonltape_daemon.service.lock import daemon_status, running_pid  # not for every query

    idx = local_index_of(index_path, local_index)[0]
    pid = running_pid(idx)
    stale = pid is None and paths.pid_file(idx).exists()
    status = daemon_status(idx) or {}
    info: dict[str, Any] = {
        "running": pid is not None,
        "state": "running" if pid is not None else "dead" if stale else "stopped",
        "pid": pid,
        "index": str(idx),
    }
    if pid is not None:
        info.update({k: v for k, v in status.items() if k not in ("pid", "index")})
    if idx.exists():
        stats = index_stats(idx)
        info["files"] = sum(stats["files"].values())
        info["events_indexed"] = stats["events"]
        info["sessions"] = stats["sessions"]
        info["bytes_behind"] = stats["bytes_behind"]
        info["problems"] = len(stats["problems"])
        info["substrings"] = stats["substrings"]
    if as_json:
        echo_json(info)
    elif stale:
        say(
            f"the daemon is not running, but its pid file {paths.pid_file(idx)} remains "
            "(it died without stopping)"
        )
    elif pid is None:
        say("the daemon is not running")
    else:
        ago = (time.time() * 1000 - status.get("last_sync", 0)) / 1000
        serve = status.get("serve")
        where = f" in jsonltape serve {serve}" if isinstance(serve, str) else ""
        say(f"running:  pid {pid}{where} ({status.get('watcher', '?')})")
        say(f"root:     {status.get('root')}")
        say(f"index:    {idx}")
        say(f"files:    {info.get('files', 0)} tracked, {info.get('problems', 0)} with problems")
        say(f"events:   {info.get('events_indexed', 0)} indexed")
        sub = info.get("substrings") or {}
        if sub and sub["indexed"] < sub["messages"]:
            say(f"building: substring index, {sub['indexed']} of {sub['messages']} messages")
        held = status.get("held") or 0
        back = f" ({held} held back: mapped again at their pace)" if held else ""
        say(
            f"lag:      {status.get('lag', 0):.3f} s, {status.get('pending', 0)} pending{back}, "
            f"last sync {ago:.1f} s ago"
        )
        remote = status.get("remote")
        if remote:  # a PostgreSQL team index the daemon pushes into
            state = "connected" if remote.get("connected") else f"retrying ({remote.get('error')})"
            pushed = status.get("pushed")
            when = f", last push {(time.time() * 1000 - pushed) / 1000:.1f} s ago" if pushed else ""
            say(f"push:     {remote.get('index')}: {state}{when}")
        for err in status.get("errors") or []:
            say(f"error:    {err}")
    sys.exit(
        STATUS_RUNNING if pid is not None else STATUS_DEAD_PIDFILE if stale else STATUS_NOT_RUNNING
    )


def _service_text(kind: str, root: Path, index: Path) -> str:
    from jsonltape_daemon.ingest import units

    from .._spawn import SAFE_CWD, command

    argv = command("jsonltape", "daemon", "run", root, "--index", index)
    if kind == "launchd":
        return units.launchd(argv, SAFE_CWD, str(paths.log_file(index)))
    return units.systemd(argv, SAFE_CWD)


_kind_option = click.option(
    "--kind",
    type=click.Choice(["systemd", "launchd"]),
    default=None,
    help="Service manager (default: launchd on macOS, systemd elsewhere).",
)


@daemon.command("print-service")
@root_arg
@index_option
@_kind_option
def daemon_print_service(root: Path | None, index_path: str | None, kind: str | None) -> None:
    """Print a systemd user unit or a launchd agent that runs the daemon over ROOT."""
    from jsonltape_daemon.ingest import units

    text = _service_text(kind or units.default_kind(), root_of(root), index_of(index_path))
    click.echo(text, nl=False)


@daemon.command("install-service")
@root_arg
@index_option
@_kind_option
@click.option("--force", is_flag=True, help="Overwrite an existing service file.")
def daemon_install_service(
    root: Path | None, index_path: str | None, kind: str | None, force: bool
) -> None:
    """Write the service file (the daemon over ROOT) into place and print the commands that
    enable it."""
    from jsonltape_daemon.ingest import units

    k = kind or units.default_kind()
    dest = units.install_path(k)
    if dest.exists() and not force:
        raise CliError(f"{dest} exists; --force overwrites it", 2)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(_service_text(k, root_of(root), index_of(index_path)))
    say(f"wrote {dest}")
    if k == "systemd":
        say(
            f"enable it:  systemctl --user daemon-reload && "
            f"systemctl --user enable --now {units.SYSTEMD_NAME}"
        )
        say("keep it running after logout:  loginctl enable-linger $USER")
    else:
        say(f"enable it:  launchctl bootstrap gui/$(id -u) {dest}")
        say(f"stop it:    launchctl bootout gui/$(id -u)/{units.LAUNCHD_LABEL}")
