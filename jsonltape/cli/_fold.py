"""Fold commands: messages, compact, prune, retract, fork, merge, discard, handoff, todo."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import click
import msgspec

from .. import fold
from ._base import CliError, say
from ._params import SECONDS, SEQ, json_text, json_writer

_json = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()

path_arg = click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
wait_opt = click.option(
    "--wait", type=SECONDS, default=0.0, help="Seconds to wait for another writer."
)
json_opt = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


def _print_json(obj: Any) -> None:
    click.echo(json_text(msgspec.json.format(_enc.encode(obj), indent=2).decode()))


def _text(value: str, what: str) -> str:
    """TEXT as given, or @FILE read from a file (@- reads stdin)."""
    if not value.startswith("@"):
        return value
    name = value[1:]
    try:
        if name == "-":
            return sys.stdin.read()
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{what}: cannot read {name}: {exc}", 2) from None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _parents(specs: tuple[str, ...]) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for spec in specs:
        sid, sep, where = spec.partition("=")
        if not sep or not sid or not where:
            raise CliError(f"--parent takes SESSION_ID=PATH, got {spec!r}", 2)
        out[sid] = where
    return out or None


parent_opt = click.option(
    "--parent",
    "parent_specs",
    multiple=True,
    metavar="ID=PATH",
    help="Where an ancestor session of a fork lives (overrides the header's path hint).",
)


@click.command()
@path_arg
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["neutral", "openai", "anthropic"]),
    default="neutral",
    show_default=True,
    help="neutral: the surface as logged; openai/anthropic: a request body.",
)
@click.option("--at", type=SEQ, help="Fold only up to this seq (what the model saw then).")
@click.option(
    "--all-versions",
    is_flag=True,
    help="Every message event with its status (and those a merge recorded: status branch).",
)
@click.option(
    "--branch",
    type=SEQ,
    help="The history of the version a git merge recorded at this branch/start seq.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Check the OpenAI and Anthropic request bodies instead: the providers' rules (members"
    " their APIs define, tool calls answered, signed thinking) and that each keeps every tool"
    " exchange the history completes; print each problem and exit 1, or nothing and exit 0.",
)
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing as a writer appends: one JSON line per message as it becomes visible"
    ' (the neutral items), and {"removed": [SEQ...], "status": ..., "by": SEQ} when a later'
    " event takes shown messages off the surface. Ctrl-C ends it with exit code 0; a"
    " replaced or rewritten file ends it with exit code 4.",
)
@parent_opt
def messages(
    path: Path,
    fmt: str,
    at: int | None,
    all_versions: bool,
    branch: int | None,
    check: bool,
    follow: bool,
    parent_specs: tuple[str, ...],
) -> None:
    """Print the model-visible history of PATH as JSON.

    Replaced, compacted and retracted messages are not in it; --all-versions lists them too,
    each with its status and the seq that changed it, and the messages of other versions a
    git merge recorded (status branch, by: the receipt). --branch SEQ folds such a version.
    --follow streams the history as it grows (JSON Lines, neutral items only).
    """
    if follow:
        if fmt != "neutral" or all_versions or branch is not None or at is not None or check:
            raise CliError(
                "--follow prints the neutral history as it grows: no --format, --at,"
                " --all-versions, --branch or --check with it",
                2,
            )
        _follow_messages(path, _parents(parent_specs))
        return
    if all_versions and fmt != "neutral":
        raise CliError("--all-versions needs --format neutral", 2)
    if branch is not None and at is not None:
        raise CliError("--branch folds a recorded version whole: no --at with it", 2)
    if check and (all_versions or fmt != "neutral"):
        raise CliError("--check checks both request bodies: no --format or --all-versions", 2)
    from ..fold._output import message_body, write_json

    if check:
        from ..fold._valid import check_anthropic, check_kept, check_openai

        parents = _parents(parent_specs)
        history = message_body(path, at=at, parents=parents, branch=branch)["messages"]
        items = list(history)
        problems = []
        for name, checker in (("openai", check_openai), ("anthropic", check_anthropic)):
            fmt_ = cast(fold.Format, name)
            body = message_body(path, at=at, format=fmt_, parents=parents, branch=branch)
            body["messages"] = list(body["messages"])
            found = checker(body) + check_kept(items, body)
            problems += [f"{path}: {name}: {p}" for p in found]
        for line in problems:
            say(line)  # a problem names PATH, and may quote an id from the session
        if problems:
            raise SystemExit(1)
        return

    body = message_body(
        path,
        at=at,
        format=cast(fold.Format, fmt),
        all_versions=all_versions,
        parents=_parents(parent_specs),
        branch=branch,
        branches=all_versions,
    )
    # message by message, each piece whole JSON tokens: a long history is never held whole
    write_json(json_writer(), body)
    sys.stdout.buffer.flush()


def _follow_messages(path: Path, parents: dict[str, str] | None) -> None:
    from ..fold._follow import follow_messages

    out = sys.stdout.buffer
    write = json_writer()
    try:
        for item in follow_messages(path, parents=parents, on_wait=out.flush):
            write(_enc.encode(item) + b"\n")
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a follow ends: what was printed is whole lines, a success
    out.flush()


@click.command()
@path_arg
@click.option("--summary", required=True, help="The summary: TEXT, or @FILE (@- for stdin).")
@click.option("--through", type=SEQ, required=True, help="Last seq to compact.")
@click.option("--start", type=SEQ, help="First seq to compact (default: the first message).")
@click.option("--reason", help="Why (e.g. manual, context-pressure).")
@click.option("--tokens", type=SEQ, help="Token count of what is compacted, if known.")
@click.option("--model", help="The model that wrote the summary.")
@json_opt
@wait_opt
def compact(
    path: Path,
    summary: str,
    through: int,
    start: int | None,
    reason: str | None,
    tokens: int | None,
    model: str | None,
    as_json: bool,
    wait: float,
) -> None:
    """Replace messages of PATH up to --through by a summary (nothing is deleted).

    Appends compaction/start, compaction/summary (with the file ledger), the summary message
    and compaction/end. An empty summary is refused and nothing is written.
    """
    result = fold.compact(
        path,
        _text(summary, "--summary"),
        through=through,
        start=start,
        reason=reason,
        tokens=tokens,
        model=model,
        lock_timeout=wait,
    )
    if as_json:
        _print_json(result)
        return
    n = len(result.shadowed)
    click.echo(
        f"compacted {_count(n, 'message')} (seqs {result.shadowed[0]}..{result.shadowed[-1]}) "
        f"into seq {result.message}"
    )


@click.command()
@path_arg
@click.argument("seq", type=SEQ)
@click.option("--stub", help="Text that replaces the output (default: a note with its size).")
@wait_opt
def prune(path: Path, seq: int, stub: str | None, wait: float) -> None:
    """Replace the output of tool result SEQ in PATH by a short stub (the original stays
    logged)."""
    events = fold.prune(path, seq, stub=stub, lock_timeout=wait)
    click.echo(f"pruned seq {seq}: stub is seq {events[-1].seq}")


@click.command()
@path_arg
@click.argument("seq", type=SEQ)
@click.option("--to", "end", type=SEQ, help="Retract the messages from SEQ through this seq.")
@click.option("--reason", help="Why the messages are retracted.")
@wait_opt
def retract(path: Path, seq: int, end: int | None, reason: str | None, wait: float) -> None:
    """Take message SEQ (or SEQ..--to) of PATH off the surface; its tool results go with it."""
    events = fold.retract(path, seq, end, reason=reason, lock_timeout=wait)
    click.echo(f"retracted by seq {events[0].seq}")


@click.command()
@path_arg
@click.option("--at", type=SEQ, required=True, help="Fork after this seq of PATH.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), help="New file.")
@click.option("--id", "session_id", help="Session id of the fork (default: generated).")
@click.option("--title", help="Title of the fork (default: the parent's).")
@parent_opt
@json_opt
def fork(
    path: Path,
    at: int,
    out: Path | None,
    session_id: str | None,
    title: str | None,
    parent_specs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create a fork of PATH as of seq --at and print its path.

    Nothing is copied: the fork's header names PATH's session, the seq and that line's crc.
    """
    info = fold.fork(
        path, at, out, session_id=session_id, title=title, parents=_parents(parent_specs)
    )
    if as_json:
        _print_json(info)
    else:
        say(str(info.path))


@click.command()
@click.argument("parent", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("fork_path", metavar="FORK", type=click.Path(dir_okay=False, path_type=Path))
@parent_opt
@json_opt
@wait_opt
def merge(
    parent: Path, fork_path: Path, parent_specs: tuple[str, ...], as_json: bool, wait: float
) -> None:
    """Append FORK's messages to PARENT with a receipt; merging again adds nothing."""
    result = fold.merge(parent, fork_path, parents=_parents(parent_specs), lock_timeout=wait)
    if as_json:
        _print_json(result)
    elif result.already:
        click.echo(f"already merged (receipt seq {result.receipt}); nothing written")
    else:
        click.echo(f"merged {_count(len(result.merged), 'message')}; receipt seq {result.receipt}")


@click.command()
@click.argument("parent", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("fork_path", metavar="FORK", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--reason", help="Why the fork is discarded.")
@parent_opt
@wait_opt
def discard(
    parent: Path, fork_path: Path, reason: str | None, parent_specs: tuple[str, ...], wait: float
) -> None:
    """Append a discard receipt for FORK to PARENT (no file is deleted)."""
    event = fold.discard(
        parent, fork_path, reason=reason, parents=_parents(parent_specs), lock_timeout=wait
    )
    if event is None:
        click.echo("already discarded; nothing written")
    else:
        click.echo(f"discarded: receipt seq {event.seq}")


@click.command()
@path_arg
@click.option("--summary", required=True, help="The summary: TEXT, or @FILE (@- for stdin).")
@click.option("--state", help="State to carry over, as JSON.")
@click.option("--reason", help="Why the handoff happens.")
@wait_opt
def handoff(path: Path, summary: str, state: str | None, reason: str | None, wait: float) -> None:
    """Start PATH afresh from a summary: the context is rebuilt from this handoff on."""
    state_obj = None
    if state is not None:
        try:
            state_obj = _json.decode(_text(state, "--state"))
        except msgspec.DecodeError as exc:
            raise CliError(f"--state is not valid JSON: {exc}", 2) from None
    events = fold.handoff(
        path, _text(summary, "--summary"), state=state_obj, reason=reason, lock_timeout=wait
    )
    click.echo(f"handoff at seq {events[0].seq}; context starts at seq {events[-1].seq}")


_MARK = {"pending": " ", "in_progress": "~", "completed": "x"}


@click.command()
@path_arg
@click.option("--at", type=SEQ, help="The todo list as of this seq.")
@parent_opt
@json_opt
def todo(path: Path, at: int | None, parent_specs: tuple[str, ...], as_json: bool) -> None:
    """Print the latest todo list of PATH."""
    todos = fold.todo(path, at, parents=_parents(parent_specs))
    if as_json:
        _print_json(todos or [])
        return
    if not todos:
        click.echo("no todos", err=True)
        return
    for item in todos:
        say(f"[{_MARK.get(item.get('status', ''), '?')}] {item.get('content', '')}")
