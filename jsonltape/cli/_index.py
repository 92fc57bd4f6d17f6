"""Index commands: sync, search, sessions, show, index ..., daemon ....

The daemon package (and with it sqlite3 and watchdog) is imported inside the command bodies
only, so neither ``import jsonltape`` nor ``jsonltape --help`` loads them.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

import click
import msgspec

from . import CliError

_enc = msgspec.json.Encoder()

index_option = click.option(
    "--index",
    "index_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Index file (default: $JSONLTAPE_INDEX or <data dir>/index.db).",
)
root_arg = click.argument("root", required=False, type=click.Path(file_okay=False, path_type=Path))


def _daemon(module: str) -> Any:
    """A module of the daemon package, imported on first use (it pulls in sqlite3/watchdog)."""
    return importlib.import_module(f"jsonltape_daemon.{module}")


def _index(path: Path | None) -> Path:
    default_index = _daemon("paths").default_index

    return (path or default_index()).absolute()


def _root(path: Path | None) -> Path:
    default_root = _daemon("paths").default_root

    return (path or default_root()).absolute()


def _reader(index: Path) -> Any:
    connect = _daemon("schema").connect

    return connect(index, readonly=True)


def _echo_json(obj: Any) -> None:
    click.echo(_enc.encode(obj).decode())


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M")


_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _parse_date(text: str, *, end: bool) -> int:
    """ISO date/time (local unless it has an offset), or relative: 30m, 2h, 7d, 2w."""
    t = text.strip().lower()
    m = _RELATIVE.match(t)
    if m:
        return int((time.time() - int(m.group(1)) * _UNIT_S[m.group(2)]) * 1000)
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
    if end and len(t) == 10:  # a whole day: --until 2026-05-09 includes that day
        value += dt.timedelta(days=1)
    return int(value.timestamp() * 1000)


# -- sync ---------------------------------------------------------------------------------


@click.command()
@root_arg
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print the sync statistics as JSON.")
def sync(root: Path | None, index_path: Path | None, as_json: bool) -> None:
    """Bring the index up to date with every session file under ROOT, once.

    Only new complete lines are read; renamed, truncated, replaced and deleted files are
    reconciled. ROOT defaults to $JSONLTAPE_ROOT or <data dir>/sessions.
    """
    IndexBusyError = _daemon("errors").IndexBusyError
    Ingestor = _daemon("ingest").Ingestor
    daemon_status = _daemon("service").daemon_status
    index_lock = _daemon("service").index_lock
    running_pid = _daemon("service").running_pid
    SqliteStore = _daemon("store").SqliteStore

    r, index = _root(root), _index(index_path)
    if not r.is_dir():
        raise CliError(f"{r}: no such directory", 2)
    try:
        lock = index_lock(index)
    except IndexBusyError:
        pid = running_pid(index)
        status = daemon_status(index) or {}
        if pid is None or status.get("root") != str(r):
            raise
        os.kill(pid, signal.SIGUSR1)
        click.echo(f"the daemon (pid {pid}) keeps {index} in sync with {r}; asked it to rescan")
        return
    try:
        store = SqliteStore(index)
        try:
            store.add_root(str(r))
            stats = Ingestor(store, r).rescan()
            errors = [f for f in store.files(under=str(r)).values() if f.status == "error"]
        finally:
            store.close()
    finally:
        lock.release()
    if as_json:
        _echo_json(stats)
    else:
        click.echo(
            f"{r}: {stats.files} files read, {stats.sessions_added} sessions added, "
            f"{stats.sessions_removed} removed, +{stats.events} events, "
            f"+{stats.messages} messages in {stats.seconds:.2f} s"
        )
    for f in errors:
        click.echo(f"jsonltape: warning: {f.path}: {f.error}", err=True)


# -- search -------------------------------------------------------------------------------


def _highlighter(styled: bool) -> Any:
    MARK_CLOSE = _daemon("search").MARK_CLOSE
    MARK_OPEN = _daemon("search").MARK_OPEN

    if styled:
        on, off = click.style("", bold=True, fg="yellow", reset=False), click.style("", reset=True)
    else:
        on, off = "[", "]"
    return lambda text: text.replace(MARK_OPEN, on).replace(MARK_CLOSE, off)


@click.command()
@click.argument("query", nargs=-1, required=True)
@index_option
@click.option("--session", help="Only this session (id, id prefix or path).")
@click.option("--role", "roles", multiple=True, help="Only this role (user, assistant, tool...).")
@click.option("--type", "types", multiple=True, help="Only this event type (glob: 'tool/*').")
@click.option("--since", help="Messages at or after: 2026-05-09, 2026-05-09T14:30, 7d, 12h.")
@click.option("--until", help="Messages before this date/time (a date includes that day).")
@click.option("--path", "path_glob", help="Only sessions whose path matches this glob.")
@click.option("--all", "all_", is_flag=True, help="Include superseded/compacted/retracted ones.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hit.")
def search(
    query: tuple[str, ...],
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

    Words are ANDed, "quoted phrases" match in order, prefix* matches word starts; any
    other character is literal. Substrings (NotFound in FileNotFoundError) and Japanese or
    Chinese text are found too. Best matches first (bm25), newer first among equals.
    """
    s = _daemon("search")

    text = " ".join(query)
    if not s.parse_query(text):
        raise CliError("nothing to search for", 2)
    filters = s.Filters(
        session=session,
        roles=roles,
        types=types,
        since=_parse_date(since, end=False) if since else None,
        until=_parse_date(until, end=True) if until else None,
        path=path_glob,
        all=all_,
    )
    con = _reader(_index(index_path))
    try:
        if con.execute("SELECT value FROM meta WHERE key = 'fts'").fetchone() == ("stale",):
            click.echo("jsonltape: warning: the index is still being built", err=True)
        hits = s.search(con, text, filters, limit)
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
            _echo_json(hit)
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
@click.option("--limit", type=click.IntRange(1), default=None, help="Show at most N sessions.")
@click.option("--path", "path_glob", help="Only sessions whose path matches this glob.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per session.")
def sessions(
    index_path: Path | None, limit: int | None, path_glob: str | None, as_json: bool
) -> None:
    """List sessions, most recent activity first (the last event's time, not the mtime)."""
    s = _daemon("search")

    con = _reader(_index(index_path))
    try:
        rows = s.sessions(con, limit=limit, path=path_glob)
    finally:
        con.close()
    for info in rows:
        if as_json:
            _echo_json(info)
            continue
        state = "" if info.state == "clean" else f" [{info.state}]"
        click.echo(
            f"{_when(info.updated)}  {info.session}  {info.messages:>5} msgs{state}  "
            f"{info.title or '(untitled)'}  {info.path}"
        )


def _print_window(info: Any, turns: list[Any], more: int | None, ref: str) -> None:
    click.echo(f"{info.session}  {info.title or '(untitled)'}")
    click.echo(f"{info.path}  ·  {info.events} events  ·  {info.state}")
    if more is not None:
        click.echo(f"… older messages: jsonltape show {ref} --before {more}")
    for t in turns:
        status = "" if t.status == "current" else f" [{t.status}]"
        cut = " [truncated]" if t.truncated else ""
        stamp = dt.datetime.fromtimestamp(t.time / 1000).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"\n#{t.seq}  {stamp}  {t.role}{status}{cut}")
        for line in (t.text or "(no text)").splitlines() or [""]:
            click.echo(f"    {line}")


@click.command()
@click.argument("session")
@index_option
@click.option("--last", type=click.IntRange(1), default=20, show_default=True, help="Messages.")
@click.option("--before", type=int, help="Only messages before this seq (page backwards).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def show(
    session: str, index_path: Path | None, last: int, before: int | None, as_json: bool
) -> None:
    """Show the last messages of SESSION (id, id prefix or path) from the index.

    Without an index (or when the session is not in it) a session file is read directly.
    """
    s = _daemon("search")
    IndexStateError = _daemon("errors").IndexStateError

    index = _index(index_path)
    ref = os.path.abspath(session) if os.path.isfile(session) else session
    con = None
    try:
        con = _reader(index)
    except IndexStateError:
        if not os.path.isfile(session):
            raise
    try:
        found = s.resolve_session(con, ref) if con is not None else []
        if not found and con is not None and not os.path.isfile(session):
            raise CliError(f"{session}: no such session in {index}", 2)
        if len({info.session for _sid, info in found}) > 1:
            ids = ", ".join(sorted({info.session for _sid, info in found})[:5])
            raise CliError(f"{session}: ambiguous; matches {ids}", 2)
        if found:
            sid, info = found[0]
            win = s.window(con, sid, last=last, before=before)
        else:
            info, win = _window_from_file(Path(ref), last, before)
    finally:
        if con is not None:
            con.close()
    if as_json:
        for t in win.messages:
            _echo_json({"session": info.session, "path": info.path, **msgspec.to_builtins(t)})
        return
    _print_window(info, win.messages, win.more_before, session)


def _window_from_file(path: Path, last: int, before: int | None) -> tuple[Any, Any]:
    s = _daemon("search")
    Ingestor = _daemon("ingest").Ingestor
    SqliteStore = _daemon("store").SqliteStore

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
    click.echo(str(_index(index_path)))


def _stats(index: Path) -> dict[str, Any]:
    SCHEMA_VERSION = _daemon("schema").SCHEMA_VERSION
    features = _daemon("schema").features

    con = _reader(index)
    try:

        def one(sql: str) -> Any:
            return con.execute(sql).fetchone()[0]

        files = dict(con.execute("SELECT status, count(*) FROM files GROUP BY status").fetchall())
        problems = con.execute(
            "SELECT path, status, error FROM files WHERE status IN ('error', 'foreign') "
            "UNION ALL SELECT path, state, error FROM sessions WHERE state = 'corrupt' "
            "ORDER BY path LIMIT 50"
        ).fetchall()
        import sqlite3

        behind = 0
        for path, offset, size in con.execute(
            "SELECT path, offset, size FROM files WHERE status = 'indexed'"
        ):
            try:
                now = os.stat(path).st_size
            except OSError:
                continue
            if size is None or now != size:
                behind += max(0, now - offset)
        out = {
            "index": str(index),
            "bytes": sum(
                os.path.getsize(p) for p in (index, Path(f"{index}-wal")) if os.path.exists(p)
            ),
            "schema": one("PRAGMA user_version"),
            "schema_supported": SCHEMA_VERSION,
            "sqlite": sqlite3.sqlite_version,
            "features": features(con),
            "fts": one("SELECT value FROM meta WHERE key = 'fts'"),
            "roots": msgspec.json.decode(
                (con.execute("SELECT value FROM meta WHERE key = 'roots'").fetchone() or ["[]"])[0]
            ),
            "sessions": one("SELECT count(*) FROM sessions"),
            "events": one("SELECT count(*) FROM events"),
            "messages": one("SELECT count(*) FROM messages"),
            "files": files,
            "bytes_behind": behind,
            "problems": [{"path": p, "status": st, "error": e} for p, st, e in problems],
        }
    finally:
        con.close()
    return out


@index.command("status")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def index_status(index_path: Path | None, as_json: bool) -> None:
    """Counts, files that could not be indexed, and whether a daemon keeps it current."""
    daemon_status = _daemon("service").daemon_status
    running_pid = _daemon("service").running_pid

    idx = _index(index_path)
    info = _stats(idx)
    pid = running_pid(idx)
    info["daemon"] = {"pid": pid, **(daemon_status(idx) or {})} if pid else None
    if as_json:
        _echo_json(info)
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
        click.echo("search:    still being built")
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
    Ingestor = _daemon("ingest").Ingestor
    walk = _daemon("ingest").walk
    index_lock = _daemon("service").index_lock
    SqliteStore = _daemon("store").SqliteStore

    idx = _index(index_path)
    lock = index_lock(idx)
    try:
        chosen = [str(r.absolute()) for r in roots]
        if not chosen and idx.exists():
            try:
                chosen = SqliteStore(idx).roots()
            except Exception:
                chosen = []
        chosen = chosen or [str(_root(None))]
        tmp = idx.with_name(idx.name + ".rebuild")
        _remove_db(tmp)
        total = sum(_size(p) for r in chosen for p in walk(r))
        store = SqliteStore(tmp)
        try:
            with click.progressbar(
                length=max(total, 1), label="rebuilding", file=sys.stderr, show_eta=True
            ) as bar:
                for r in chosen:
                    store.add_root(r)
                    Ingestor(store, r, progress=bar.update).rescan()
            n = store.con.execute("SELECT count(*) FROM sessions").fetchone()[0]
            store.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            store.close()
        _remove_db(idx)
        os.replace(tmp, idx)
    finally:
        lock.release()
    click.echo(f"{idx}: rebuilt from {', '.join(chosen)}: {n} sessions")


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _remove_db(path: Path) -> None:
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


@index.command("optimize")
@index_option
def index_optimize(index_path: Path | None) -> None:
    """Merge the full-text indexes into one segment each (slow; faster searches after)."""
    index_lock = _daemon("service").index_lock
    SqliteStore = _daemon("store").SqliteStore

    idx = _index(index_path)
    if not idx.exists():
        raise CliError(f"{idx}: no index here yet", 2)
    lock = index_lock(idx)
    try:
        store = SqliteStore(idx)
        try:
            store.begin()
            for table in ("messages_fts", "messages_trigram"):
                store.con.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
            store.commit()
        finally:
            store.close()
    finally:
        lock.release()
    click.echo(f"{idx}: optimized")


# -- daemon -------------------------------------------------------------------------------


@click.group()
def daemon() -> None:
    """The sync daemon: keeps the index current while agents write."""


def _daemon_options(fn: Any) -> Any:
    for opt in reversed(
        [
            root_arg,
            index_option,
            click.option("--poll", is_flag=True, help="Poll instead of inotify/FSEvents (NFS)."),
            click.option(
                "--poll-interval",
                type=click.FloatRange(0.1),
                default=2.0,
                show_default=True,
                help="Seconds between polls.",
            ),
            click.option(
                "--rescan-interval",
                type=click.FloatRange(1),
                default=60.0,
                show_default=True,
                help="Seconds between full rescans.",
            ),
            click.option(
                "--debounce",
                type=click.FloatRange(0),
                default=0.1,
                show_default=True,
                help="Seconds of quiet before a changed file is synced.",
            ),
        ]
    ):
        fn = opt(fn)
    return fn


@daemon.command("run")
@_daemon_options
def daemon_run(
    root: Path | None,
    index_path: Path | None,
    poll: bool,
    poll_interval: float,
    rescan_interval: float,
    debounce: float,
) -> None:
    """Run the daemon in the foreground (for systemd, launchd or a terminal)."""
    Config = _daemon("service").Config
    Daemon = _daemon("service").Daemon

    config = Config(
        root=_root(root),
        index=_index(index_path),
        poll=poll,
        poll_interval=poll_interval,
        rescan_interval=rescan_interval,
        debounce=debounce,
    )
    sys.exit(Daemon(config).run())


@daemon.command("start")
@_daemon_options
def daemon_start(
    root: Path | None,
    index_path: Path | None,
    poll: bool,
    poll_interval: float,
    rescan_interval: float,
    debounce: float,
) -> None:
    """Start the daemon in the background (pid and log files beside the index)."""
    log_file = _daemon("paths").log_file
    start = _daemon("service").start

    idx, r = _index(index_path), _root(root)
    args = [
        str(r),
        "--index",
        str(idx),
        "--poll-interval",
        str(poll_interval),
        "--rescan-interval",
        str(rescan_interval),
        "--debounce",
        str(debounce),
    ]
    if poll:
        args.append("--poll")
    pid = start(args, idx)
    click.echo(f"daemon started (pid {pid}); log: {log_file(idx)}")


@daemon.command("stop")
@index_option
def daemon_stop(index_path: Path | None) -> None:
    """Stop the daemon (it finishes its current transaction first)."""
    stop = _daemon("service").stop

    pid = stop(_index(index_path))
    click.echo(f"daemon stopped (pid {pid})" if pid else "the daemon is not running")


@daemon.command("status")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def daemon_status_cmd(index_path: Path | None, as_json: bool) -> None:
    """Pid, root, index, files tracked, events indexed, lag and errors. Exit 1 if stopped."""
    daemon_status = _daemon("service").daemon_status
    running_pid = _daemon("service").running_pid

    idx = _index(index_path)
    pid = running_pid(idx)
    status = daemon_status(idx) or {}
    info: dict[str, Any] = {"running": pid is not None, "pid": pid, "index": str(idx)}
    if pid is not None:
        info.update({k: v for k, v in status.items() if k not in ("pid", "index")})
    if idx.exists():
        stats = _stats(idx)
        info["files"] = sum(stats["files"].values())
        info["events_indexed"] = stats["events"]
        info["sessions"] = stats["sessions"]
        info["bytes_behind"] = stats["bytes_behind"]
        info["problems"] = len(stats["problems"])
    if as_json:
        _echo_json(info)
    elif pid is None:
        click.echo("the daemon is not running")
    else:
        ago = (time.time() * 1000 - status.get("last_sync", 0)) / 1000
        click.echo(f"running:  pid {pid} ({status.get('watcher', '?')})")
        click.echo(f"root:     {status.get('root')}")
        click.echo(f"index:    {idx}")
        click.echo(
            f"files:    {info.get('files', 0)} tracked, {info.get('problems', 0)} with problems"
        )
        click.echo(f"events:   {info.get('events_indexed', 0)} indexed")
        click.echo(f"lag:      {status.get('lag', 0):.3f} s pending, last sync {ago:.1f} s ago")
        for err in status.get("errors") or []:
            click.echo(f"error:    {err}")
    sys.exit(0 if pid is not None else 1)


def _service_text(kind: str, root: Path, index: Path) -> str:
    units = _daemon("units")
    log_file = _daemon("paths").log_file

    if kind == "launchd":
        return str(units.launchd(sys.executable, str(root), str(index), str(log_file(index))))
    return str(units.systemd(sys.executable, str(root), str(index)))


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
def daemon_print_service(root: Path | None, index_path: Path | None, kind: str | None) -> None:
    """Print a systemd user unit or a launchd agent that runs the daemon."""
    default_kind = _daemon("units").default_kind

    click.echo(_service_text(kind or default_kind(), _root(root), _index(index_path)), nl=False)


@daemon.command("install-service")
@root_arg
@index_option
@_kind_option
@click.option("--force", is_flag=True, help="Overwrite an existing service file.")
def daemon_install_service(
    root: Path | None, index_path: Path | None, kind: str | None, force: bool
) -> None:
    """Write the service file into place and print the commands that enable it."""
    LAUNCHD_LABEL = _daemon("units").LAUNCHD_LABEL
    SYSTEMD_NAME = _daemon("units").SYSTEMD_NAME
    default_kind = _daemon("units").default_kind
    install_path = _daemon("units").install_path

    k = kind or default_kind()
    dest = install_path(k)
    if dest.exists() and not force:
        raise CliError(f"{dest} exists; --force overwrites it", 2)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(_service_text(k, _root(root), _index(index_path)))
    click.echo(f"wrote {dest}")
    if k == "systemd":
        click.echo(
            f"enable it:  systemctl --user daemon-reload && "
            f"systemctl --user enable --now {SYSTEMD_NAME}"
        )
        click.echo("keep it running after logout:  loginctl enable-linger $USER")
    else:
        click.echo(f"enable it:  launchctl bootstrap gui/$(id -u) {dest}")
        click.echo(f"stop it:    launchctl bootout gui/$(id -u)/{LAUNCHD_LABEL}")
