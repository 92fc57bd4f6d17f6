"""Index commands: sync, search, sessions, show, index ...; and ``daemon`` (from
``_daemon_cmds``, re-exported here for the lazy command table).

This module loads the daemon package (and with it sqlite3), so ``jsonltape.cli`` imports it
only when one of these commands runs: neither ``import jsonltape`` nor ``jsonltape --help``
loads sqlite3 or watchdog.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click
import msgspec
from jsonltape_daemon import search as s
from jsonltape_daemon.errors import IndexBusyError, IndexStateError
from jsonltape_daemon.foreign import engine_for, parse_source
from jsonltape_daemon.ingest import Ingestor, SyncStats, walk
from jsonltape_daemon.lock import daemon_status, index_lock, running_pid
from jsonltape_daemon.store import SqliteStore, remove_db

from .._time import MAX_TIME, format_ms
from . import CliError
from ._daemon_cmds import (
    daemon,
    echo_json,
    existing_root,
    index_of,
    index_option,
    index_stats,
    reader,
    root_arg,
    root_of,
)
from ._params import COUNT, SEQ

__all__ = ["daemon", "index", "search", "sessions", "show", "sync"]


def _when(ms: int) -> str:
    return format_ms(ms, utc=False, seconds=False)


_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _parse_date(text: str, *, end: bool) -> int:
    """ISO date/time (local unless it has an offset), or relative: 30m, 2h, 7d, 2w."""
    t = text.strip().lower()
    m = _RELATIVE.match(t)
    if m:  # int arithmetic: a 400-digit "ago" is just before any session, not an overflow
        return max(0, time.time_ns() // 1_000_000 - int(m.group(1)) * _UNIT_S[m.group(2)] * 1000)
    if t in ("today", "yesterday"):
        day = dt.date.today() - dt.timedelta(days=1 if t == "yesterday" else 0)
        t = day.isoformat()
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        try:
            value = dt.datetime.fromisoformat(t)
        except ValueError:
            raise CliError(
                f"cannot read date {text!r}; use 2026-05-09, 2026-05-09T14:30, 7d, 12h or 30m", 2
            ) from None
    try:
        if end and len(t) == 10:  # a whole day: --until 2026-05-09 includes that day
            value += dt.timedelta(days=1)
        return int(value.timestamp() * 1000)
    except (OverflowError, OSError, ValueError):  # 9999-12-31 + 1 day, year 1 in local time
        return 0 if value.year < 1970 else MAX_TIME + 1


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
    help="Also mirror a Claude Code / Codex / pi tree in place, read-only "
    "(claude-code:PATH, codex:PATH, pi:PATH). Repeatable.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the sync statistics as JSON.")
def sync(
    root: Path | None, index_path: Path | None, sources: tuple[str, ...], as_json: bool
) -> None:
    """Bring the index up to date with every session file under ROOT, once.

    Only new complete lines are read; renamed, truncated, replaced and deleted files are
    reconciled. The first sync of an archive loads it in bulk; the index is searchable as soon
    as that is done, and the substring index is built right after. Ctrl-C stops at the next
    commit: the next sync (or the daemon) goes on from there. ROOT defaults to $JSONLTAPE_ROOT
    or <data dir>/sessions.
    """
    r, idx = existing_root(root), index_of(index_path)
    try:
        foreign = [parse_source(spec) for spec in sources]
    except ValueError as exc:
        raise CliError(str(exc), 2) from None
    for _kind, path in foreign:
        if not os.path.isdir(path):
            raise CliError(f"{path}: no such directory", 2)
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
                store.add_root(str(r))
                engine = Ingestor(store, r, should_stop=stop)
                stats = engine.rescan()
                for kind, path in foreign:  # read-only, through the importers' mapping
                    store.add_root(f"{kind}:{path}")
                    more = engine_for(store, f"{kind}:{path}", should_stop=stop).rescan()
                    for name in (
                        "files",
                        "sessions_added",
                        "sessions_removed",
                        "events",
                        "messages",
                        "errors",
                        "transactions",
                        "seconds",
                    ):
                        setattr(stats, name, getattr(stats, name) + getattr(more, name))
                searchable = stats.seconds
                if store.substrings_pending() and not stop():
                    before = store.substring_progress()[0]
                    more = _build_substrings(store, engine, "substring index", quiet=as_json)
                    stats.substrings = store.substring_progress()[0] - before
                    stats.transactions += more.transactions
                    stats.seconds += more.seconds
                    stats.add("substrings", more.seconds)
                pending = store.substrings_pending()
                total = store.con.execute("SELECT count(*) FROM sessions").fetchone()[0]
                errors = [
                    f
                    for under in [str(r), *(path for _kind, path in foreign)]
                    for f in store.files(under=under).values()
                    if f.status == "error"
                ]
            finally:
                store.close()
    finally:
        lock.release()
    if as_json:
        echo_json(stats)
    else:
        click.echo(
            f"{r}: {_n(total, 'session')} indexed; {stats.files} files read, "
            f"{stats.sessions_added} sessions added, {stats.sessions_removed} removed, "
            f"+{stats.events} events, "
            f"+{stats.messages} messages in {stats.seconds:.2f} s"
            + (f" (searchable after {searchable:.2f} s)" if "substrings" in stats.phases else "")
        )
    if stop():
        click.echo("jsonltape: stopped early; the next sync (or the daemon) goes on", err=True)
    elif pending:  # pragma: no cover - only when the substring build was cut short
        click.echo("jsonltape: the substring index is not complete yet", err=True)
    for f in errors:
        click.echo(f"jsonltape: warning: {f.path}: {f.error}", err=True)


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# -- search -------------------------------------------------------------------------------


def _highlighter(styled: bool) -> Callable[[str], str]:
    if styled:
        on, off = click.style("", bold=True, fg="yellow", reset=False), click.style("", reset=True)
    else:
        on, off = "[", "]"
    return lambda text: text.replace(s.MARK_OPEN, on).replace(s.MARK_CLOSE, off)


@click.command()
@click.argument("query", nargs=-1)
@click.option(
    "--phrase",
    "phrases",
    multiple=True,
    metavar="TEXT",
    help="Also require this exact phrase, taken literally (no quoting needed). Repeatable.",
)
@index_option
@click.option("--session", help="Only this session (id, id prefix or path).")
@click.option("--role", "roles", multiple=True, help="Only this role (user, assistant, tool...).")
@click.option("--type", "types", multiple=True, help="Only this event type (glob: 'tool/*').")
@click.option("--since", help="Messages at or after: 2026-05-09, 2026-05-09T14:30, 7d, 12h.")
@click.option("--until", help="Messages before this date/time (a date includes that day).")
@click.option("--path", "path_glob", help="Only sessions whose path matches this glob.")
@click.option("--all", "all_", is_flag=True, help="Include superseded/compacted/retracted ones.")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="Show at most N hits.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hit.")
def search(
    query: tuple[str, ...],
    phrases: tuple[str, ...],
    index_path: Path | None,
    session: str | None,
    roles: tuple[str, ...],
    types: tuple[str, ...],
    since: str | None,
    until: str | None,
    path_glob: str | None,
    all_: bool,
    limit: int,
    as_json: bool,
) -> None:
    """Full-text search over every indexed message.

    The words of QUERY are ANDed, "quoted phrases" match in order, prefix* matches word
    starts; any other character is literal. Quote a phrase for the shell too:
    search 'migration "NOT NULL"', or use --phrase 'NOT NULL'. Substrings (NotFound in
    FileNotFoundError) and Japanese or Chinese text of any length are found too. Best
    matches first (bm25), newer first among equals.
    """
    text = " ".join(query)
    if not s.parse_query(text) and not any(p.strip() for p in phrases):
        raise CliError("nothing to search for (give QUERY or --phrase)", 2)
    filters = s.Filters(
        session=session,
        roles=roles,
        types=types,
        since=_parse_date(since, end=False) if since else None,
        until=_parse_date(until, end=True) if until else None,
        path=path_glob,
        all=all_,
    )
    con = reader(index_of(index_path))
    try:
        for note in s.notes(con):
            click.echo(f"jsonltape: warning: {note}", err=True)
        hits = s.search(con, text, filters, limit, phrases=phrases)
    except Exception as exc:
        if type(exc).__module__ == "sqlite3":
            raise CliError(f"search failed: {exc}", 2) from None
        raise
    finally:
        con.close()
    mark = _highlighter(not as_json and sys.stdout.isatty())
    if as_json:
        for hit in hits:
            hit.snippet = mark(hit.snippet)
            echo_json(hit)
        return
    if not hits:
        click.echo("no matches", err=True)
    for hit in hits:
        status = "" if hit.status == "current" else f" ({hit.status})"
        title = f"  {hit.title}" if hit.title else ""
        click.echo(f"{hit.session}  {_when(hit.time)}  {hit.role}{status}{title}")
        click.echo(f"    {mark(hit.snippet)}")
        click.echo(f"    {hit.path}:{hit.seq}")


# -- sessions / show ----------------------------------------------------------------------


@click.command()
@index_option
@click.option("--limit", type=COUNT, default=None, help="Show at most N sessions.")
@click.option("--path", "path_glob", help="Only sessions whose path matches this glob.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per session.")
def sessions(
    index_path: Path | None, limit: int | None, path_glob: str | None, as_json: bool
) -> None:
    """List sessions, most recent activity first (the last event's time, not the mtime)."""
    con = reader(index_of(index_path))
    try:
        rows = s.sessions(con, limit=limit, path=path_glob)
    finally:
        con.close()
    for info in rows:
        if as_json:
            echo_json(info)
            continue
        state = "" if info.state == "clean" else f" [{info.state}]"
        click.echo(
            f"{_when(info.updated)}  {info.session}  {info.messages:>5} msgs{state}  "
            f"{info.title or '(untitled)'}  {info.path}"
        )


def _print_window(info: s.SessionInfo, turns: list[s.Turn], more: int | None, ref: str) -> None:
    click.echo(f"{info.session}  {info.title or '(untitled)'}")
    click.echo(f"{info.path}  ·  {info.events} events  ·  {info.state}")
    if more is not None:
        click.echo(f"… older messages: jsonltape show {ref} --before {more}")
    for t in turns:
        status = "" if t.status == "current" else f" [{t.status}]"
        cut = " [truncated]" if t.truncated else ""
        stamp = format_ms(t.time, utc=False)
        click.echo(f"\n#{t.seq}  {stamp}  {t.role}{status}{cut}")
        for line in (t.text or "(no text)").splitlines() or [""]:
            click.echo(f"    {line}")


@click.command()
@click.argument("session")
@index_option
@click.option(
    "--last", type=COUNT, default=20, show_default=True, help="How many messages to show."
)
@click.option("--before", type=SEQ, help="Only messages before this seq (page backwards).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def show(
    session: str, index_path: Path | None, last: int, before: int | None, as_json: bool
) -> None:
    """Show the last messages of SESSION (id, id prefix or path) from the index.

    Without an index (or when the session is not in it) a session file is read directly.
    """
    idx = index_of(index_path)
    ref = os.path.abspath(session) if os.path.isfile(session) else session
    con = None
    try:
        con = reader(idx)
    except IndexStateError:
        if not os.path.isfile(session):
            raise
    try:
        found = s.resolve_session(con, ref) if con is not None else []
        if not found and con is not None and not os.path.isfile(session):
            raise CliError(f"{session}: no such session in {idx}", 2)
        if len({info.session for _sid, info in found}) > 1:
            ids = ", ".join(sorted({info.session for _sid, info in found})[:5])
            raise CliError(f"{session}: ambiguous; matches {ids}", 2)
        if found and con is not None:
            sid, info = found[0]
            win = s.window(con, sid, last=last, before=before)
        else:
            info, win = _window_from_file(Path(ref), last, before)
    finally:
        if con is not None:
            con.close()
    if as_json:
        for t in win.messages:
            echo_json({"session": info.session, "path": info.path, **msgspec.to_builtins(t)})
        return
    _print_window(info, win.messages, win.more_before, session)


def _window_from_file(path: Path, last: int, before: int | None) -> tuple[s.SessionInfo, Any]:
    store = SqliteStore(":memory:")
    try:
        Ingestor(store, path.parent).sync_file(str(path))
        reg = store.file(str(path))
        if reg is None or reg.sid is None:
            why = reg.error if reg is not None and reg.error else "not a jsonltape session"
            raise CliError(f"{path}: {why}", 2)
        sid, info = s.resolve_session(store.con, str(path))[0]
        return info, s.window(store.con, sid, last=last, before=before)
    finally:
        store.close()


# -- index --------------------------------------------------------------------------------


@click.group()
def index() -> None:
    """The search index: status, rebuild, path, optimize."""


@index.command("path")
@index_option
def index_path_cmd(index_path: Path | None) -> None:
    """Print where the index is."""
    click.echo(str(index_of(index_path)))


@index.command("status")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def index_status(index_path: Path | None, as_json: bool) -> None:
    """Counts, files that could not be indexed, and whether a daemon keeps it current."""
    idx = index_of(index_path)
    info = index_stats(idx)
    pid = running_pid(idx)
    info["daemon"] = {"pid": pid, **(daemon_status(idx) or {})} if pid else None
    if as_json:
        echo_json(info)
        return
    files = info["files"]
    click.echo(
        f"index:     {idx} ({info['bytes'] / 1e6:.1f} MB, schema {info['schema']}, "
        f"SQLite {info['sqlite']})"
    )
    click.echo(f"roots:     {', '.join(info['roots']) or '-'}")
    click.echo(
        f"sessions:  {info['sessions']} ({info['events']} events, {info['messages']} messages)"
    )
    click.echo("files:     " + (", ".join(f"{n} {k}" for k, n in sorted(files.items())) or "0"))
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


@index.command("rebuild")
@click.argument("roots", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@index_option
def index_rebuild(roots: tuple[Path, ...], index_path: Path | None) -> None:
    """Recreate the index from the session files (ROOTS default to those synced before).

    The new index is built beside the old one, which stays searchable until it is replaced.
    """
    idx = index_of(index_path)
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


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


@index.command("optimize")
@index_option
def index_optimize(index_path: Path | None) -> None:
    """Merge the full-text indexes into one segment each (slow; faster searches after)."""
    idx = index_of(index_path)
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
