"""Core commands: new, append, cat, info, verify, repair.

The writer (and with it the lock library) is imported by the commands that write, not here:
``cat``, ``info`` and ``verify`` only read, and start faster without it.
"""

from __future__ import annotations

import fnmatch
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from .. import reader
from .._scan import TOO_DEEP
from .._time import format_ms
from ..errors import InvalidEventError, JsonltapeError
from ._base import CliError, fail, one_line, say
from ._params import SECONDS, SEQ, JsonObject, json_line, json_writer, parse_json

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .._project import SessionRoot
    from .._scan import TailScan
    from ..events import Line

_json = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()

path_arg = click.argument("path", type=click.Path(dir_okay=False, path_type=Path))


@click.command()
@path_arg
@click.option("--id", "session_id", help="Session id (A-Z a-z 0-9 . _ -); default: time-sorted.")
@click.option("--title", help="A title for people.")
@click.option("--cwd", help="Working directory the agent ran in.")
@click.option("--agent", help="Name/version of the agent writing the session.")
@click.option("--meta", type=JsonObject(), help="Free metadata as a JSON object.")
def new(
    path: Path,
    session_id: str | None,
    title: str | None,
    cwd: str | None,
    agent: str | None,
    meta: dict[str, Any] | None,
) -> None:
    """Create a new session file at PATH and print its id (refused if PATH exists)."""
    from .. import writer

    with writer.open(
        path,
        create=True,
        session_id=session_id,
        title=title,
        cwd=cwd,
        agent=agent,
        meta=meta,
        durability="manual",
    ) as tape:
        click.echo(tape.session_id)


@click.command()
@path_arg
@click.argument("stdin", required=False, metavar="[-]")
@click.option("--type", "type_", help="Event type, e.g. user/message.")
@click.option("--data", type=JsonObject(), help="Event data as a JSON object (default {}).")
@click.option("--key", help="Idempotency key: an event with this key is written only once.")
@click.option("--surface", help='Surface op as JSON: "append" or {"op":"replace",...}.')
@click.option("--sources", help="Comma-separated seqs this event derives from.")
@click.option(
    "--ignorable",
    is_flag=True,
    default=None,
    help="Mark an extension type (x-vendor/...) ignorable: readers that do not know it skip "
    "it. An unknown type that is not ignorable is refused.",
)
@click.option("--create", is_flag=True, help="Create the session if PATH does not exist.")
@click.option("--wait", type=SECONDS, default=0.0, help="Seconds to wait for another writer.")
def append(
    path: Path,
    stdin: str | None,
    type_: str | None,
    data: dict[str, Any] | None,
    key: str | None,
    surface: str | None,
    sources: str | None,
    ignorable: bool | None,
    create: bool,
    wait: float,
) -> None:
    """Append events to PATH and print their seqs; durable when the command exits.

    Either one event from --type/--data, or `-` to read JSON lines of
    {type, data, surface?, sources?, key?, ignorable?} from stdin. All events are checked
    before any is written: one bad line means nothing is appended. STDIN is that `-`.
    """
    items: list[dict[str, Any]] = []
    if stdin is not None:
        if stdin != "-":
            raise CliError(f"unexpected argument {stdin!r}; use - to read stdin", 2)
        if type_ or data or key or surface or sources:
            raise CliError("give either - (stdin) or --type/--data, not both", 2)
        for n, raw in enumerate(sys.stdin.buffer.read().splitlines(), 1):
            if not raw.strip():
                continue
            try:
                item = _json.decode(raw)
            except msgspec.DecodeError as exc:
                raise CliError(f"<stdin>: line {n}: not valid JSON: {exc}", 2) from None
            except RecursionError:
                raise CliError(f"<stdin>: line {n}: {TOO_DEEP}", 2) from None
            if not isinstance(item, dict):
                raise CliError(f"<stdin>: line {n}: an event must be a JSON object", 2)
            if "data" in item and not isinstance(item["data"], dict):
                raise CliError(f"<stdin>: line {n}: $.data: data must be a JSON object", 2)
            item["_line"] = n
            items.append(item)
        if not items:
            raise CliError("<stdin>: no events", 2)
    else:
        if not type_:
            raise CliError("--type is required (or - to read events from stdin)", 2)
        item = {"type": type_}
        if data is not None:
            item["data"] = data
        if surface is not None:
            item["surface"] = (
                parse_json(surface, "'--surface'") if surface.strip()[:1] in '{"' else surface
            )
        if sources:
            try:
                item["sources"] = [int(s) for s in sources.split(",")]
            except ValueError:
                raise CliError("--sources takes comma-separated integers", 2) from None
        if key is not None:
            item["key"] = key
        if ignorable is not None:
            item["ignorable"] = ignorable
        items.append(item)
    lines = [item.pop("_line", None) for item in items]
    from .. import writer

    with writer.open(
        path, create="if-missing" if create else False, durability="manual", lock_timeout=wait
    ) as tape:
        try:
            events = tape.append_batch(items)
        except InvalidEventError as exc:
            if stdin is not None and exc.batch_item is not None:
                raise exc.at(path="<stdin>", line=lines[exc.batch_item]) from exc.__cause__
            raise
    for event in events:
        click.echo(event.seq)


@click.command()
@path_arg
@click.option("--from", "from_seq", type=SEQ, default=0, help="Start at this seq.")
@click.option("--type", "pattern", help="Only event types matching this glob, e.g. 'tool/*'.")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing lines as a writer commits them, across checkpoints and a repair of a "
    "torn tail; Ctrl-C ends it with exit code 0. A replaced or rewritten file ends it with exit "
    "code 4.",
)
def cat(path: Path, from_seq: int, pattern: str | None, follow: bool) -> None:
    """Print the committed lines of PATH exactly as stored (a torn tail is not printed).

    On a terminal, the characters that could drive it (C1 controls, DEL, bidi controls,
    line separators, ...) are written as \\u escapes: each line is still the same JSON.
    """
    out = sys.stdout.buffer
    write = json_writer()  # byte for byte into a pipe or a file
    line: Line
    lines: Iterator[Line]
    if follow:
        from .._follow import follow_lines

        lines = follow_lines(path, from_seq=from_seq, on_wait=out.flush)
    else:
        lines = reader.lines(path, from_seq=from_seq)
    try:
        for line in lines:
            if pattern is None or fnmatch.fnmatchcase(line.event.type, pattern):
                write(line.raw)
    except KeyboardInterrupt:
        if not follow:
            raise
        # Ctrl-C is how a follow ends: what was printed is whole lines, so it is a success.
    out.flush()


@click.command()
@path_arg
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (raw epoch ms).")
def info(path: Path, as_json: bool) -> None:
    """Show the header and the tail state of PATH (reads only the end of the file).

    Times are shown in local time (--json keeps the epoch milliseconds), and the state is
    explained: a turn left open on purpose by a writer that closed cleanly, or by a crash.
    """
    scan = reader.tail_scan(path)
    h = scan.header
    mode = _mode(path)
    obj = {
        "path": str(path),
        "id": h.id,
        "title": h.title,
        "created": h.created,
        "last_event": scan.last_time,
        "cwd": h.cwd,
        "agent": h.agent,
        "parent": msgspec.to_builtins(h.parent) if h.parent else None,
        "version": f"{h.version}.{h.minor}",
        "events": scan.next_seq,
        "size": scan.size,
        "mode": f"{mode:04o}" if mode is not None else None,
        "tail_state": scan.state,
        "last_checkpoint_seq": scan.checkpoint_seq,
        "open_turn": scan.turn.seq if scan.turn else None,
        "closed": scan.closed,
    }
    here, refused = root_here()
    obj["root"] = here.as_json() if here else {"path": None, "from": None, "error": refused}
    warning = mode_warning(path, mode)
    if warning:
        click.echo(one_line(warning), err=True)
    if as_json:
        click.echo(json_line(obj))
        return
    rows: list[tuple[str, object]] = [
        ("path", path),
        ("id", h.id),
        ("title", h.title),
        ("created", f"{format_ms(h.created, utc=False)} (local time)"),
        ("last event", format_ms(scan.last_time, utc=False)),
        ("cwd", h.cwd),
        ("agent", h.agent),
        ("parent", _parent(h.parent)),
        ("format", f"jsonltape {h.version}.{h.minor}"),
        ("events", f"{scan.next_seq} (seq 0 to {scan.next_seq - 1}), {scan.size} bytes"),
        ("permissions", _permissions(mode)),
        ("state", _state(scan)),
        ("root here", describe_root(here, refused)),
    ]
    for k, v in rows:
        if v is not None:
            click.echo(f"{k + ':':<13} {one_line(str(v))}")


def root_here() -> tuple[SessionRoot | None, str | None]:
    """The sessions root a bare ``sync`` here would use, or why the project's was refused."""
    from .._project import resolve_root

    try:
        return resolve_root(), None
    except JsonltapeError as exc:
        return None, str(exc)


def describe_root(root: SessionRoot | None, refused: str | None) -> str:
    """``PATH (where it came from)``, as ``info`` and ``index status`` show it."""
    if root is None:
        return f"refused: {refused}"
    return f"{root.path} ({root.describe()})"


def mode_warning(path: Path, mode: int | None) -> str | None:
    """The warning line for a session file group or others may read or write, else None."""
    if mode is None or not mode & 0o077:
        return None
    what = "writable" if mode & 0o022 else "readable"
    return (
        f"jsonltape: warning: {path}: {what} by group or others (mode {mode:04o}); "
        "`chmod 600` it, or run `jsonltape git install` in its git repository (after git, "
        "whose checkouts keep no modes)"
    )


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)
    except OSError:
        return None


def _permissions(mode: int | None) -> str | None:
    if mode is None:
        return None
    if mode & 0o022:
        return f"{mode:04o}: writable by group or others; writers refuse it (chmod 600 it)"
    if mode & 0o044:
        return f"{mode:04o}: readable by group or others (sessions are created 0600)"
    return f"{mode:04o} (owner only)"


def _parent(parent: Any) -> str | None:
    if parent is None:
        return None
    where = f" ({parent.path})" if parent.path else ""
    return f"forked from {parent.session} at seq {parent.seq}{where}"


def _state(scan: TailScan) -> str:
    """The tail state in words: what it means and what to do about it."""
    if scan.state == "corrupt":
        return (
            f"corrupt: line {scan.bad_line} (byte {scan.bad_offset}): {scan.bad_reason}; this "
            "is damage before the last checkpoint, not a crash (`repair --force` cuts it)"
        )
    if scan.state == "torn-tail":
        return (
            f"torn tail: line {scan.bad_line} (byte {scan.bad_offset}): {scan.bad_reason}; a "
            "crash cut the last write (`jsonltape repair` moves it to a sidecar)"
        )
    if scan.turn is not None and scan.closed:
        return (
            f"open turn, on purpose: the turn started at seq {scan.turn.seq} has no end, but the "
            "last writer closed the session cleanly (as a script appending one event per run "
            "does); nothing to repair"
        )
    if scan.turn is not None:
        return (
            f"open turn: the turn started at seq {scan.turn.seq} never ended and no writer closed "
            "the session: a writer is still running, or it crashed (`jsonltape repair` closes "
            "the turn as interrupted)"
        )
    return "clean: no turn is open, nothing to repair"


_VERIFY_EXIT = {"clean": 0, "torn-tail": 1, "open-turn": 1, "corrupt": 3}


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file.")
def verify(paths: tuple[Path, ...], as_json: bool) -> None:
    """Check every line of each file in PATHS: framing, CRC, valid JSON envelope, dense seq.

    The branch records a merge wrote are checked for their shape too. Exit 0 when all are
    clean, 1 when some need `repair` (torn tail, or a turn a crash left open), 3 when some are
    corrupt (damage before the last checkpoint), 2 on unreadable input. A file group or others
    may read gets a warning on stderr; it does not change the exit code.
    """
    worst = 0
    for p in paths:
        try:
            report = reader.verify(p)
        except (JsonltapeError, OSError) as exc:  # say so, and go on with the other files
            err = fail(exc)
            err.show()
            worst = max(worst, err.exit_code)
            continue
        worst = max(worst, _VERIFY_EXIT[report.state])
        warning = mode_warning(p, _mode(p))  # said, but not in the exit code: the bytes are fine
        if warning:
            click.echo(one_line(warning), err=True)
        if as_json:
            click.echo(json_line(report))
        else:
            where = ""
            if report.line is not None:
                where = f" at line {report.line} (byte {report.offset}): {report.reason}"
            elif report.state == "open-turn":
                where = f": turn started at seq {report.open_turn} never ended"
            say(f"{p}: {report.state}, {report.events} events{where}")
    sys.exit(worst)


@click.command()
@path_arg
@click.option("--force", is_flag=True, help="Also cut a corrupt file at its first damaged line.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.option("--wait", type=SECONDS, default=0.0, help="Seconds to wait for a live writer.")
def repair(path: Path, force: bool, as_json: bool, wait: float) -> None:
    """Repair PATH: cut a torn tail (kept in a .torn sidecar) and close a crashed turn.

    Corrupt files are refused unless --force. Running it twice changes nothing more.
    """
    from ..repair import repair as repair_file

    result = repair_file(path, force=force, lock_timeout=wait)
    if as_json:
        click.echo(json_line(result))
        return
    said = False
    if result.sidecar:
        say(f"cut {result.cut_bytes} bytes at offset {result.cut_offset}; kept in {result.sidecar}")
        said = True
    if result.closers:
        say(f"closed the interrupted turn with seqs {result.closers}")
        said = True
    if not said:
        say(f"{path}: {result.state_before}, nothing to repair")
