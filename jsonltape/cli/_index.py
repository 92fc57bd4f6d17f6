"""Index commands that write it: sync and index (status, rebuild, path, optimize); and
``daemon`` (from ``_daemon_cmds``, re-exported here for the lazy command table).

This module loads the daemon package (and with it sqlite3), so ``jsonltape.cli`` imports it
only when one of these commands runs: neither ``import jsonltape`` nor ``jsonltape --help``
loads sqlite3 or watchdog. The read-only queries (search, sessions, show) are in ``_query``.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import click
from jsonltape_daemon import api
from jsonltape_daemon.errors import IndexBusyError
from jsonltape_daemon.ingest.foreign import parse_source
from jsonltape_daemon.service.lock import daemon_status, holder, running_pid
from jsonltape_daemon.target import PgTarget

from ._base import CliError, say
from ._core import describe_root, root_here
from ._daemon_cmds import (
    daemon,
    echo_json,
    existing_root,
    index_of,
    index_option,
    origin_of,
    origin_option,
    root_arg,
    root_of,
    target_of,
)

__all__ = ["daemon", "index", "sync"]


class _GracefulStop:
    """The first Ctrl-C stops at the next transaction boundary (whatever is loaded stays and
    the next sync goes on from there); a second one interrupts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._old: Any = None

    def __call__(self) -> bool:
        return self.requested

    def _handle(self, _sig: int, _frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        click.echo("\njsonltape: stopping at the next commit (Ctrl-C again to abort)", err=True)

    def __enter__(self) -> _GracefulStop:
        self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._old)


class _Bar:
    """An :class:`api.Progress` drawn as a click progress bar on stderr (``shown`` False:
    nothing is drawn)."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self._bar: Any = None

    def note(self, text: str) -> None:
        if self.shown:
            say(text, err=True)

    def begin(self, label: str, total: int) -> None:
        if not self.shown:
            return
        self._bar = click.progressbar(length=total, label=label, file=sys.stderr, show_eta=True)
        self._bar.__enter__()

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def end(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


# -- sync ---------------------------------------------------------------------------------


@click.command()
@root_arg
@index_option
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="KIND:PATH",
    help="Also mirror an agent's session tree in place, read-only (claude-code:PATH, "
    "goose:PATH, ...: an agent the README's table marks in place; its logs, documents, task "
    "folders and databases are read without writing beside them). Repeatable.",
)
@origin_option
@click.option("--json", "as_json", is_flag=True, help="Print the sync statistics as JSON.")
def sync(
    root: Path | None,
    index_path: str | None,
    sources: tuple[str, ...],
    origin: str | None,
    as_json: bool,
) -> None:
    """Bring the index up to date with every session file under ROOT, once.

    Only new complete lines are read; renamed, truncated, replaced and deleted files are
    reconciled. The first sync of an archive loads it in bulk; the index is searchable as soon
    as that is done, and the substring index is built right after. Ctrl-C stops at the next
    commit: the next sync (or the daemon) goes on from there. ROOT defaults to $JSONLTAPE_ROOT,
    else the .jsonltape/sessions of the nearest project above the current directory (`jsonltape
    init` makes one), else <data dir>/sessions.
    """
    t = target_of(index_path)
    r = existing_root(root)
    try:
        foreign = [parse_source(spec) for spec in sources]
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    for _kind, path in foreign:
        if not os.path.isdir(path):
            raise CliError(f"{path}: no such directory", 2)
    with _GracefulStop() as stop:
        try:
            report = api.sync(
                t,
                str(r),
                foreign,
                origin=origin_of(origin) if isinstance(t, PgTarget) else None,
                should_stop=stop,
                progress=_Bar(not as_json and sys.stderr.isatty()),
            )
        except IndexBusyError:
            if isinstance(t, PgTarget):
                raise
            pid = running_pid(t.path)
            status = daemon_status(t.path) or {}
            if pid is None or status.get("root") != str(r):
                raise
            os.kill(pid, signal.SIGUSR1)
            say(f"{holder(t.path, pid)} keeps {t.path} in sync with {r}; asked it to rescan")
            return
    _report(
        r, report, as_json=as_json, stopped=stop(), to=str(t) if isinstance(t, PgTarget) else None
    )
    if report.substrings_pending and not stop():  # pragma: no cover - a cut-short build
        say("jsonltape: the substring index is not complete yet", err=True)


def _report(
    r: Path, report: api.SyncReport, *, as_json: bool, stopped: bool, to: str | None = None
) -> None:
    stats = report.stats
    searchable = (
        f" (searchable after {report.searchable_seconds:.2f} s)"
        if "substrings" in stats.phases
        else ""
    )
    if as_json:
        echo_json(stats)
    else:
        say(
            f"{r}: {_n(report.sessions, 'session')} indexed{f' in {to}' if to else ''}; "
            f"{stats.files} files read, "
            f"{stats.sessions_added} sessions added, {stats.sessions_removed} removed, "
            f"+{stats.events} events, "
            f"+{stats.messages} messages in {stats.seconds:.2f} s{searchable}"
        )
    if stopped:
        say("jsonltape: stopped early; the next sync (or the daemon) goes on", err=True)
    for f in report.errors:
        say(f"jsonltape: warning: {f.path}: {f.error}", err=True)


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# -- index --------------------------------------------------------------------------------


@click.group()
def index() -> None:
    """The search index: status, rebuild, path, optimize; init and grant (PostgreSQL)."""


def _add_pg_commands() -> None:
    from ._pg_cmds import index_grant, index_init

    index.add_command(index_init)
    index.add_command(index_grant)


_add_pg_commands()


@index.command("path")
@index_option
def index_path_cmd(index_path: str | None) -> None:
    """Print where the index is."""
    say(str(index_of(index_path)))


@index.command("status")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def index_status(index_path: str | None, as_json: bool) -> None:
    """Counts, size per table, files that could not be indexed, and whether a daemon keeps it
    current; for a PostgreSQL team index, per origin: counts and the time since its last push
    (and this machine's bytes not pushed yet)."""
    t = target_of(index_path)
    if isinstance(t, PgTarget):
        return _shared_status(t, as_json)
    idx = t.path
    info = api.status(t)
    pid = running_pid(idx)
    info["daemon"] = {"pid": pid, **(daemon_status(idx) or {})} if pid else None
    here, refused = root_here()
    info["root"] = here.as_json() if here else {"path": None, "from": None, "error": refused}
    if as_json:
        echo_json(info)
        return
    files = info["files"]
    say(
        f"index:     {idx} ({info['bytes'] / 1e6:.1f} MB, schema {info['schema']}, "
        f"SQLite {info['sqlite']})"
    )
    say(f"roots:     {', '.join(info['roots']) or '-'}")
    say(f"root here: {describe_root(here, refused)}")
    say(f"sessions:  {info['sessions']} ({info['events']} events, {info['messages']} messages)")
    say("files:     " + (", ".join(f"{n} {k}" for k, n in sorted(files.items())) or "0"))
    if info["tables"]:
        say("tables:    " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in info["tables"].items()))
    if info["bytes_behind"]:
        say(f"behind:    {info['bytes_behind']} bytes not indexed yet")
    if info["fts"] != "live":
        say("search:    the word index is still being built")
    sub = info["substrings"]
    if sub["indexed"] < sub["messages"]:
        say(
            f"search:    substring index {sub['indexed']} of {sub['messages']} messages "
            "(the rest is scanned)"
        )
    d = info["daemon"]
    say(
        f"daemon:    running (pid {pid}, {d.get('watcher', '?')})"
        if d
        else "daemon:    not running"
    )
    for p in info["problems"]:
        say(f"  {p['status']}: {p['path']}: {p['error']}")


def _shared_status(t: PgTarget, as_json: bool) -> None:
    mine = origin_of(None)
    info = api.status(t, origin=mine)
    if as_json:
        echo_json(info)
        return
    say(f"index:     {info['index']} (PostgreSQL {info['server']}, schema {info['schema']})")
    if not info["schema"]:
        say(
            "           no team index here yet: `jsonltape sync ROOT --index URL` or "
            "`jsonltape index init`"
        )
    say(f"origin:    {mine} (this machine)")
    if info["bytes_behind"]:
        say(f"behind:    {info['bytes_behind']} bytes of this machine's files not pushed")
    for o in info["origins"]:
        lag = o["lag_seconds"]
        since = "never pushed" if lag is None else f"last push {_ago(lag)} ago"
        say(
            f"  {o['origin']}: {o['sessions']} sessions, {o['events']} events, "
            f"{o['messages']} messages; {since}"
        )


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


@index.command("rebuild")
@click.argument("roots", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@index_option
@origin_option
def index_rebuild(roots: tuple[Path, ...], index_path: str | None, origin: str | None) -> None:
    """Recreate the index from the session files (ROOTS default to those synced before).

    The new index is built beside the old one, which stays searchable until it is replaced.
    On a PostgreSQL team index only this machine's origin (--origin) is rebuilt: its rows are
    deleted and pushed again from the files (the other origins are untouched; meanwhile its
    sessions come back as they are pushed).
    """
    t = target_of(index_path)
    if origin is not None and not isinstance(t, PgTarget):
        raise CliError("--origin goes with a postgresql:// --index", 2)
    report = api.rebuild(
        t,
        [str(r.absolute()) for r in roots],
        origin=origin_of(origin) if isinstance(t, PgTarget) else None,
        default_root=str(root_of(None)),
        progress=_Bar(True),
    )
    chosen = ", ".join(report.roots)
    if isinstance(t, PgTarget):
        say(f"{t}: origin {origin_of(origin)} rebuilt from {chosen}: {report.sessions} sessions")
    else:
        say(f"{t.path}: rebuilt from {chosen}: {report.sessions} sessions")


@index.command("optimize")
@index_option
def index_optimize(index_path: str | None) -> None:
    """Merge the full-text indexes into one segment each (slow; faster searches after).

    On a PostgreSQL team index: VACUUM (ANALYZE) of its tables (needs the owner role).
    """
    t = target_of(index_path)
    if not isinstance(t, PgTarget) and not t.path.exists():
        raise CliError(f"{t.path}: no index here yet", 2)
    done = api.optimize(t)
    if isinstance(t, PgTarget):
        say(f"{t}: optimized ({', '.join(done)})")
    else:
        say(f"{t.path}: optimized")
