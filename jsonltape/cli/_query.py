"""Index queries: search, sessions, show. They only read the index.

Light on purpose: a query imports the search module and sqlite3, not what writes the index
(the store, ingest, the foreign-tree readers, the lock library), the daemon's watchdog, the
``daemon`` commands (its options come from ``_params``) nor, for a local index, the PostgreSQL
door; ``show`` loads the ingest engine only when it reads a session file that is not indexed.
Output is written a few KiB at a time (``_params.echo_lines``), not a system call a line.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click
import msgspec
from jsonltape_daemon.engines.sqlite import search as s
from jsonltape_daemon.errors import IndexStateError
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import SqliteTarget

from .._display import shown
from .._time import MAX_TIME, format_ms
from ._base import CliError
from ._params import (
    COUNT,
    SEQ,
    echo_lines,
    index_option,
    json_line,
    origins_option,
    target_of,
)

__all__ = ["search", "sessions", "show"]


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
@origins_option
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
@click.option(
    "--sort",
    type=click.Choice(["relevance", "recent"]),
    default="relevance",
    show_default=True,
    help="relevance: word matches by bm25 among the newest 1,000 (words in more than 5% of "
    "messages only filter), newer first among equals; recent: newest first.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hit.")
@click.option(
    "-i",
    "--interactive",
    is_flag=True,
    help="Search as you type in the terminal: the query re-runs on every keystroke (the word "
    "being typed is a prefix from its third character); "
    "Up/Down select a hit, Enter opens its transcript, Esc goes back, Ctrl-C quits.",
)
def search(
    query: tuple[str, ...],
    phrases: tuple[str, ...],
    index_path: str | None,
    origins: tuple[str, ...],
    session: str | None,
    roles: tuple[str, ...],
    types: tuple[str, ...],
    since: str | None,
    until: str | None,
    path_glob: str | None,
    all_: bool,
    limit: int,
    sort: str,
    as_json: bool,
    interactive: bool,
) -> None:
    """Full-text search over every indexed message.

    The words of QUERY are ANDed, "quoted phrases" match in order, prefix* matches word
    starts; any other character is literal. Quote a phrase for the shell too:
    search 'migration "NOT NULL"', or use --phrase 'NOT NULL'. Substrings (NotFound in
    FileNotFoundError) and Japanese or Chinese text of any length are found too.

    Word matches come first, best first: bm25 of the query's words among its newest 1,000
    matches, newer first among equals; a word in more than 5% of the messages (and 20,000)
    only filters, as does a phrase whose rarest word is in more than 20,000, and a query of
    such terms only lists its matches newest first. Substring and CJK matches follow, newest
    first; in a query of several terms each may be a word or inside an identifier. --sort
    recent lists every match newest first. A query has at most 1,024 words.
    """
    text = " ".join(query)
    if interactive and as_json:
        raise CliError("-i/--interactive and --json cannot be used together", 2)
    if not interactive and not s.parse_query(text) and not any(p.strip() for p in phrases):
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
    t = target_of(index_path)
    if interactive:
        from ._search_tui import interactive_search  # prompt_toolkit only for -i

        return interactive_search(t, text, phrases, filters, limit, origins)
    index = open_reader(t)
    try:
        for note in index.notes():
            click.echo(f"jsonltape: warning: {note}", err=True)
        hits = index.search(
            text, filters, limit, phrases=phrases, sort=cast(s.Sort, sort), origins=origins
        )
    except Exception as exc:
        if type(exc).__module__ == "sqlite3":
            raise CliError(f"search failed: {exc}", 2) from None
        raise
    finally:
        index.close()
    mark = _highlighter(not as_json and sys.stdout.isatty())
    if as_json:
        for hit in hits:
            hit.snippet = mark(hit.snippet)
        echo_lines([json_line(hit) for hit in hits])
        return
    if not hits:
        click.echo("no matches", err=True)
    out: list[str] = []
    for hit in hits:
        status = "" if hit.status == "current" else f" ({hit.status})"
        title = f"  {hit.title}" if hit.title else ""
        origin = getattr(hit, "origin", None)
        where = f"  {origin}" if origin else ""
        # the snippet is already shown safe (the index's rule); the rest is made so here
        out.append(shown(f"{hit.session}{where}  {_when(hit.time)}  {hit.role}{status}{title}"))
        out.append(f"    {mark(hit.snippet)}")
        out.append(shown(f"    {hit.path}:{hit.seq}"))
    echo_lines(out)


# -- sessions / show ----------------------------------------------------------------------


@click.command()
@index_option
@origins_option
@click.option("--limit", type=COUNT, default=None, help="Show at most N sessions.")
@click.option("--path", "path_glob", help="Only sessions whose path matches this glob.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per session.")
def sessions(
    index_path: str | None,
    origins: tuple[str, ...],
    limit: int | None,
    path_glob: str | None,
    as_json: bool,
) -> None:
    """List sessions, most recent activity first (the last event's time, not the mtime)."""
    index = open_reader(target_of(index_path))
    try:
        rows = index.sessions(limit=limit, path=path_glob, origins=origins)
    finally:
        index.close()
    if as_json:
        echo_lines([json_line(info) for info in rows])
        return
    out: list[str] = []
    for info in rows:
        state = "" if info.state == "clean" else f" [{info.state}]"
        origin = getattr(info, "origin", None)
        where = f"  {origin}" if origin else ""
        out.append(
            shown(
                f"{_when(info.updated)}  {info.session}{where}  {info.messages:>5} msgs{state}  "
                f"{info.title or '(untitled)'}  {info.path}"
            )
        )
    echo_lines(out)


def _print_window(info: s.SessionInfo, turns: list[s.Turn], more: int | None, ref: str) -> None:
    """A transcript window as text, everything from the session :func:`shown` safe (a turn's
    line breaks and tabs kept)."""
    out = [
        shown(f"{info.session}  {info.title or '(untitled)'}"),
        shown(f"{info.path}  ·  {info.events} events  ·  {info.state}"),
    ]
    if more is not None:
        out.append(shown(f"… older messages: jsonltape show {ref} --before {more}"))
    for t in turns:
        status = "" if t.status == "current" else f" [{t.status}]"
        cut = " [truncated]" if t.truncated else ""
        stamp = format_ms(t.time, utc=False)
        out.append("\n" + shown(f"#{t.seq}  {stamp}  {t.role}{status}{cut}"))
        lines = (t.text or "(no text)").splitlines() or [""]
        out.extend("    " + shown(line, newlines=True, sequences=True) for line in lines)
    echo_lines(out)


@click.command()
@click.argument("session")
@index_option
@origins_option
@click.option(
    "--last", type=COUNT, default=20, show_default=True, help="How many messages to show."
)
@click.option("--before", type=SEQ, help="Only messages before this seq (page backwards).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def show(
    session: str,
    index_path: str | None,
    origins: tuple[str, ...],
    last: int,
    before: int | None,
    as_json: bool,
) -> None:
    """Show the last messages of SESSION (id, id prefix or path) from the index.

    Without an index (or when the session is not in it) a session file is read directly.
    """
    t = target_of(index_path)
    local = isinstance(t, SqliteTarget)
    ref = os.path.abspath(session) if os.path.isfile(session) else session
    index = None
    try:
        index = open_reader(t)
    except IndexStateError:
        if not (local and os.path.isfile(session)):
            raise
    try:
        found = index.resolve(ref, origins=origins) if index is not None else []
        if not found and index is not None and not (local and os.path.isfile(session)):
            raise CliError(f"{session}: no such session in {t}", 2)
        keys = {(getattr(info, "origin", None), info.session) for _key, info in found}
        if len(keys) > 1:
            ids = ", ".join(sorted(f"{o}:{i}" if o else i for o, i in keys)[:5])
            raise CliError(f"{session}: ambiguous; matches {ids}", 2)
        if found and index is not None:
            key, info = found[0]
            win = index.window(key, last=last, before=before)
        else:
            info, win = _window_from_file(Path(ref), last, before)
    finally:
        if index is not None:
            index.close()
    if as_json:
        head = {"session": info.session, "path": info.path}
        echo_lines([json_line({**head, **msgspec.to_builtins(turn)}) for turn in win.messages])
        return
    _print_window(info, win.messages, win.more_before, session)


def _window_from_file(path: Path, last: int, before: int | None) -> tuple[s.SessionInfo, Any]:
    from jsonltape_daemon.engines.sqlite.store import SqliteStore
    from jsonltape_daemon.ingest.ingestor import (
        Ingestor,  # the writing side, for this rare path only
    )

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
