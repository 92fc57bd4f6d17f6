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
import msgspec
from jsonltape_daemon.errors import IndexBusyError, IndexStateError
from jsonltape_daemon.foreign import engine_for, parse_source
from jsonltape_daemon.ingest import Ingestor, SyncStats, walk
from jsonltape_daemon.lock import daemon_status, index_lock, running_pid
from jsonltape_daemon.mirror import Mirror
from jsonltape_daemon.rows import FileRow
from jsonltape_daemon.store import SqliteStore, remove_db
from jsonltape_daemon.target import PgTarget

from . import CliError, one_line
from ._core import describe_root, root_here
from ._daemon_cmds import (
    daemon,
    echo_json,
    existing_root,
    index_of,
    index_option,
    index_stats,
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


def _build_substrings(
    store: SqliteStore, engine: Ingestor, label: str, *, quiet: bool = False
) -> SyncStats:
    """Finish the substring index in the foreground, with a progress bar on a terminal."""
    done, total = store.substring_progress()
    show = not quiet and sys.stderr.isatty()
    if not show or store.substrings_waiting():  # a helper process builds it: no steps to count
        if show:
            click.echo(f"{label}: building in a helper process ({total} messages)", err=True)
        return engine.build_substrings(tx_seconds=1.0)
    stats = SyncStats()
    with click.progressbar(
        length=max(total - done, 1), label=label, file=sys.stderr, show_eta=True
    ) as bar:
        while store.substrings_pending() and not engine.should_stop():
            step = engine.build_substrings(2.0, tx_seconds=1.0)
            stats.substrings += step.substrings
            stats.transactions += step.transactions
            stats.seconds += step.seconds
            stats.add("substrings", step.seconds)
            bar.update(step.substrings)
    return stats


# -- sync ---------------------------------------------------------------------------------


@click.command()
@root_arg
@index_option
@click.option(
    "--source",
    "sources",
    multiple=True,
    metavar="KIND:PATH",
    help="Also mirror a Claude Code / Codex / pi / Gemini CLI tree in place, read-only "
    "(claude-code:PATH, codex:PATH, pi:PATH, gemini-cli:PATH). Repeatable.",
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
    if isinstance(t, PgTarget):
        return _sync_shared(t, r, foreign, origin_of(origin), as_json)
    idx = t.path
    try:
        lock = index_lock(idx)
    except IndexBusyError:
        pid = running_pid(idx)
        status = daemon_status(idx) or {}
        if pid is None or status.get("root") != str(r):
            raise
        os.kill(pid, signal.SIGUSR1)
        click.echo(f"the daemon (pid {pid}) keeps {idx} in sync with {r}; asked it to rescan")
        return
    try:
        with _GracefulStop() as stop:
            store = SqliteStore(idx)
            try:
                mirror = Mirror(store, str(r), foreign, should_stop=stop)
                stats = mirror.rescan()  # foreign trees read-only, through the importers' mapping
                searchable = stats.seconds
                if store.substrings_pending() and not stop():
                    before = store.substring_progress()[0]
                    more = _build_substrings(store, mirror.main, "substring index", quiet=as_json)
                    stats.substrings = store.substring_progress()[0] - before
                    stats.transactions += more.transactions
                    stats.seconds += more.seconds
                    stats.add("substrings", more.seconds)
                pending = store.substrings_pending()
                total = store.con.execute("SELECT count(*) FROM sessions").fetchone()[0]
                errors = mirror.failed_files()
            finally:
                store.close()
    finally:
        lock.release()
    _report(r, total, stats, searchable, errors, as_json=as_json, stopped=stop())
    if pending and not stop():  # pragma: no cover - only when the substring build was cut short
        click.echo("jsonltape: the substring index is not complete yet", err=True)


def _sync_shared(
    t: PgTarget, r: Path, foreign: list[tuple[str, str]], origin: str, as_json: bool
) -> None:
    """Push ROOT (and the foreign trees) into a PostgreSQL team index as ``origin``: the same
    ingest, registry and continuity rules as a local sync; one writer per origin."""
    from jsonltape_daemon.pg_store import PgStore

    with _GracefulStop() as stop:
        store = PgStore(t.url, origin)
        try:
            mirror = Mirror(store, str(r), foreign, should_stop=stop)
            stats = mirror.rescan()
            total = store.session_count()
            errors = mirror.failed_files()
        finally:
            store.close()
    _report(r, total, stats, stats.seconds, errors, as_json=as_json, stopped=stop(), to=str(t))


def _report(
    r: Path,
    total: int,
    stats: SyncStats,
    searchable: float,
    errors: list[FileRow],
    *,
    as_json: bool,
    stopped: bool,
    to: str | None = None,
) -> None:
    if as_json:
        echo_json(stats)
    else:
        click.echo(
            f"{r}: {_n(total, 'session')} indexed{f' in {to}' if to else ''}; "
            f"{stats.files} files read, "
            f"{stats.sessions_added} sessions added, {stats.sessions_removed} removed, "
            f"+{stats.events} events, "
            f"+{stats.messages} messages in {stats.seconds:.2f} s"
            + (f" (searchable after {searchable:.2f} s)" if "substrings" in stats.phases else "")
        )
    if stopped:
        click.echo("jsonltape: stopped early; the next sync (or the daemon) goes on", err=True)
    for f in errors:
        click.echo(f"jsonltape: warning: {f.path}: {f.error}", err=True)


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
    click.echo(str(index_of(index_path)))


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
    info = index_stats(idx)
    pid = running_pid(idx)
    info["daemon"] = {"pid": pid, **(daemon_status(idx) or {})} if pid else None
    here, refused = root_here()
    info["root"] = here.as_json() if here else {"path": None, "from": None, "error": refused}
    if as_json:
        echo_json(info)
        return
    files = info["files"]
    click.echo(
        f"index:     {idx} ({info['bytes'] / 1e6:.1f} MB, schema {info['schema']}, "
        f"SQLite {info['sqlite']})"
    )
    click.echo(f"roots:     {', '.join(info['roots']) or '-'}")
    click.echo(one_line(f"root here: {describe_root(here, refused)}"))
    click.echo(
        f"sessions:  {info['sessions']} ({info['events']} events, {info['messages']} messages)"
    )
    click.echo("files:     " + (", ".join(f"{n} {k}" for k, n in sorted(files.items())) or "0"))
    if info["tables"]:
        click.echo(
            "tables:    " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in info["tables"].items())
        )
    if info["bytes_behind"]:
        click.echo(f"behind:    {info['bytes_behind']} bytes not indexed yet")
    if info["fts"] != "live":
        click.echo("search:    the word index is still being built")
    sub = info["substrings"]
    if sub["indexed"] < sub["messages"]:
        click.echo(
            f"search:    substring index {sub['indexed']} of {sub['messages']} messages "
            "(the rest is scanned)"
        )
    d = info["daemon"]
    click.echo(
        f"daemon:    running (pid {pid}, {d.get('watcher', '?')})"
        if d
        else "daemon:    not running"
    )
    for p in info["problems"]:
        click.echo(f"  {p['status']}: {p['path']}: {p['error']}")


def _shared_status(t: PgTarget, as_json: bool) -> None:
    from jsonltape_daemon.origin import default_origin
    from jsonltape_daemon.paths import data_dir
    from jsonltape_daemon.status import shared_status

    mine = default_origin(data_dir())
    info = shared_status(t.url, name=str(t), origin=mine)
    if as_json:
        echo_json(info)
        return
    click.echo(f"index:     {info['index']} (PostgreSQL {info['server']}, schema {info['schema']})")
    if not info["schema"]:
        click.echo(
            "           no team index here yet: `jsonltape sync ROOT --index URL` or "
            "`jsonltape index init`"
        )
    click.echo(f"origin:    {mine} (this machine)")
    if info["bytes_behind"]:
        click.echo(f"behind:    {info['bytes_behind']} bytes of this machine's files not pushed")
    for o in info["origins"]:
        lag = o["lag_seconds"]
        since = "never pushed" if lag is None else f"last push {_ago(lag)} ago"
        click.echo(
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
    if isinstance(t, PgTarget):
        return _rebuild_shared(t, roots, origin_of(origin))
    if origin is not None:
        raise CliError("--origin goes with a postgresql:// --index", 2)
    idx = t.path
    lock = index_lock(idx)
    try:
        try:
            store = SqliteStore(idx)
        except IndexStateError:  # unreadable, or written by a newer jsonltape: start over
            remove_db(idx)
            store = SqliteStore(idx)
        try:
            chosen = [str(r.absolute()) for r in roots] or store.roots() or [str(root_of(None))]
            total = sum(_size(p) for r in chosen if os.path.isabs(r) for p in walk(r))
            store.start_bulk()
            store.begin()
            store.set_meta("roots", msgspec.json.encode(sorted(chosen)).decode())
            store.commit()
            with click.progressbar(
                length=max(total, 1), label="rebuilding", file=sys.stderr, show_eta=True
            ) as bar:
                for r in chosen:  # a KIND:PATH root is a foreign tree (sync --source)
                    engine_for(store, r, progress=bar.update).rescan()
            store.rebuild_fts()
            store.finish_bulk()
            engine = engine_for(store, chosen[0])
            _build_substrings(store, engine, "substring index")
            n = store.con.execute("SELECT count(*) FROM sessions").fetchone()[0]
            store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            store.close()
    finally:
        lock.release()
    click.echo(f"{idx}: rebuilt from {', '.join(chosen)}: {n} sessions")


def _rebuild_shared(t: PgTarget, roots: tuple[Path, ...], origin: str) -> None:
    from jsonltape_daemon.pg_store import PgStore

    store = PgStore(t.url, origin)
    try:
        chosen = [str(r.absolute()) for r in roots] or store.roots() or [str(root_of(None))]
        total = sum(_size(p) for r in chosen if os.path.isabs(r) for p in walk(r))
        store.drop_origin()
        for r in chosen:
            store.add_root(r)
        with click.progressbar(
            length=max(total, 1), label="pushing", file=sys.stderr, show_eta=True
        ) as bar:
            for r in chosen:  # a KIND:PATH root is a foreign tree (sync --source)
                engine_for(store, r, progress=bar.update).rescan()
        n = store.session_count()
    finally:
        store.close()
    click.echo(f"{t}: origin {origin} rebuilt from {', '.join(chosen)}: {n} sessions")


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


@index.command("optimize")
@index_option
def index_optimize(index_path: str | None) -> None:
    """Merge the full-text indexes into one segment each (slow; faster searches after).

    On a PostgreSQL team index: VACUUM (ANALYZE) of its tables (needs the owner role).
    """
    t = target_of(index_path)
    if isinstance(t, PgTarget):
        from jsonltape_daemon.pg_admin import optimize

        done = optimize(t)
        click.echo(f"{t}: optimized ({', '.join(done)})")
        return
    idx = t.path
    if not idx.exists():
        raise CliError(f"{idx}: no index here yet", 2)
    lock = index_lock(idx)
    try:
        store = SqliteStore(idx)
        try:
            store.begin()
            store.optimize()
            store.commit()
        finally:
            store.close()
    finally:
        lock.release()
    click.echo(f"{idx}: optimized")
