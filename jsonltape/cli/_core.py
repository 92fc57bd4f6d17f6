"""Core commands: new, append, cat, info, verify, repair."""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path
from typing import Any

import click
import msgspec

from .. import reader, writer
from .._scan import TOO_DEEP
from ..errors import InvalidEventError, JsonltapeError
from ..events import Line
from ..repair import repair as repair_file
from . import CliError, fail

_json = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()

path_arg = click.argument("path", type=click.Path(dir_okay=False, path_type=Path))


def _parse_json(text: str, what: str) -> Any:
    try:
        return _json.decode(text)
    except msgspec.DecodeError as exc:
        raise CliError(f"{what} is not valid JSON: {exc}", 2) from None
    except RecursionError:
        raise CliError(f"{what}: {TOO_DEEP}", 2) from None


@click.command()
@path_arg
@click.option("--id", "session_id", help="Session id (A-Z a-z 0-9 . _ -); default: time-sorted.")
@click.option("--title", help="A title for people.")
@click.option("--cwd", help="Working directory the agent ran in.")
@click.option("--agent", help="Name/version of the agent writing the session.")
@click.option("--meta", help="Free metadata as a JSON object.")
def new(
    path: Path,
    session_id: str | None,
    title: str | None,
    cwd: str | None,
    agent: str | None,
    meta: str | None,
) -> None:
    """Create a new session file at PATH and print its id."""
    meta_obj = _parse_json(meta, "--meta") if meta is not None else None
    if meta_obj is not None and not isinstance(meta_obj, dict):
        raise CliError("--meta must be a JSON object", 2)
    with writer.open(
        path,
        create=True,
        session_id=session_id,
        title=title,
        cwd=cwd,
        agent=agent,
        meta=meta_obj,
        durability="manual",
    ) as tape:
        click.echo(tape.session_id)


@click.command()
@path_arg
@click.argument("stdin", required=False, metavar="[-]")
@click.option("--type", "type_", help="Event type, e.g. user/message.")
@click.option("--data", help="Event data as a JSON object.")
@click.option("--key", help="Idempotency key: an event with this key is written only once.")
@click.option("--surface", help='Surface op as JSON: "append" or {"op":"replace",...}.')
@click.option("--sources", help="Comma-separated seqs this event derives from.")
@click.option("--ignorable", is_flag=True, default=None, help="Mark an extension type ignorable.")
@click.option("--create", is_flag=True, help="Create the session if PATH does not exist.")
@click.option("--wait", type=float, default=0.0, help="Seconds to wait for another writer.")
def append(
    path: Path,
    stdin: str | None,
    type_: str | None,
    data: str | None,
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
    before any is written: one bad line means nothing is appended.
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
            item["_line"] = n
            items.append(item)
        if not items:
            raise CliError("<stdin>: no events", 2)
    else:
        if not type_:
            raise CliError("--type is required (or - to read events from stdin)", 2)
        item = {"type": type_}
        if data is not None:
            item["data"] = _parse_json(data, "--data")
        if surface is not None:
            item["surface"] = (
                _parse_json(surface, "--surface") if surface.strip()[:1] in '{"' else surface
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
    with writer.open(
        path, create="if-missing" if create else False, durability="manual", lock_timeout=wait
    ) as tape:
        try:
            events = tape.append_batch(items)
        except InvalidEventError as exc:
            if stdin is not None and exc.batch_item is not None:
                exc.path, exc.line = "<stdin>", lines[exc.batch_item]
            raise
    for event in events:
        click.echo(event.seq)


@click.command()
@path_arg
@click.option("--from", "from_seq", type=int, default=0, help="Start at this seq.")
@click.option("--type", "pattern", help="Only event types matching this glob, e.g. 'tool/*'.")
def cat(path: Path, from_seq: int, pattern: str | None) -> None:
    """Print the committed lines of PATH exactly as stored (a torn tail is not printed)."""
    out = sys.stdout.buffer
    line: Line
    for line in reader.lines(path, from_seq=from_seq):
        if pattern is None or fnmatch.fnmatchcase(line.event.type, pattern):
            out.write(line.raw)
    out.flush()


@click.command()
@path_arg
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def info(path: Path, as_json: bool) -> None:
    """Show the header and the tail state of PATH (reads only the end of the file)."""
    scan = reader.tail_scan(path)
    h = scan.header
    obj = {
        "path": str(path),
        "id": h.id,
        "title": h.title,
        "created": h.created,
        "cwd": h.cwd,
        "agent": h.agent,
        "parent": msgspec.to_builtins(h.parent) if h.parent else None,
        "version": f"{h.version}.{h.minor}",
        "events": scan.next_seq,
        "size": scan.size,
        "tail_state": scan.state,
        "last_checkpoint_seq": scan.checkpoint_seq,
        "open_turn": scan.turn.seq if scan.turn else None,
        "closed": scan.closed,
    }
    if as_json:
        click.echo(_enc.encode(obj).decode())
        return
    for k, v in obj.items():
        if v is not None:
            click.echo(f"{k + ':':<20} {v}")


_VERIFY_EXIT = {"clean": 0, "torn-tail": 1, "open-turn": 1, "corrupt": 3}


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file.")
def verify(paths: tuple[Path, ...], as_json: bool) -> None:
    """Check every line of each file: framing, CRC, valid JSON envelope, dense seq.

    Exit 0 when all are clean, 1 when some need `repair` (torn tail, or a turn a crash left
    open), 3 when some are corrupt (damage before the last checkpoint), 2 on unreadable input.
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
        if as_json:
            click.echo(_enc.encode(report).decode())
        else:
            where = ""
            if report.line is not None:
                where = f" at line {report.line} (byte {report.offset}): {report.reason}"
            elif report.state == "open-turn":
                where = f": turn started at seq {report.open_turn} never ended"
            click.echo(f"{p}: {report.state}, {report.events} events{where}")
    sys.exit(worst)


@click.command()
@path_arg
@click.option("--force", is_flag=True, help="Also cut a corrupt file at its first damaged line.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.option("--wait", type=float, default=0.0, help="Seconds to wait for a live writer.")
def repair(path: Path, force: bool, as_json: bool, wait: float) -> None:
    """Repair PATH: cut a torn tail (kept in a .torn sidecar) and close a crashed turn.

    Corrupt files are refused unless --force. Running it twice changes nothing more.
    """
    result = repair_file(path, force=force, lock_timeout=wait)
    if as_json:
        click.echo(_enc.encode(result).decode())
        return
    said = False
    if result.sidecar:
        click.echo(
            f"cut {result.cut_bytes} bytes at offset {result.cut_offset}; kept in {result.sidecar}"
        )
        said = True
    if result.closers:
        click.echo(f"closed the interrupted turn with seqs {result.closers}")
        said = True
    if not said:
        click.echo(f"{path}: {result.state_before}, nothing to repair")
