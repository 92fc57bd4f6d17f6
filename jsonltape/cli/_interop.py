"""Interop commands: import (Claude Code, Codex, pi) and export (markdown, html, json, ...)."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any, cast

import click
import msgspec

from .._display import json_shown, shown
from .._project import make_sessions_dir, resolve_root
from ..errors import JsonltapeError
from ..interop import SOURCES, FileReport, discover, import_many
from ..interop._engine import agent_of
from ..interop._source import Unit
from ..interop.export import FORMATS, Export, ExportFormat, export_to
from ._base import CliError, say
from ._params import SECONDS, json_line

_enc = msgspec.json.Encoder()
#: Line problems printed per file before "... and N more".
_MAX_PROBLEMS = 5
#: Show a progress bar from this many bytes of sources on (or more than one file).
_BAR_BYTES = 8 << 20


def _import_root(root: Path | None) -> Path:
    """-o ROOT, else $JSONLTAPE_ROOT, else the project's, else the user's (``resolve_root``);
    a project's sessions folder is created 0700 (without following a symlink) on first use."""
    chosen = resolve_root(root)
    if chosen.source == "project" and not chosen.path.is_dir():
        make_sessions_dir(chosen.path)
    return chosen.path


def _err(text: str) -> None:
    """A diagnostic line on stderr: the paths, ids, record types and errors it quotes come
    from the sources."""
    say(text, err=True)


@click.command("import")
@click.option(
    "--from",
    "source",
    type=click.Choice(["auto", *sorted(SOURCES)]),
    required=True,
    help="The tool that wrote the sessions; auto: every known agent's sessions on this machine "
    "(each agent's default places, and per-project files such as Aider's and Crush's below "
    "the SOURCES directories, default the current directory).",
)
@click.argument("sources", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "root",
    type=click.Path(file_okay=False, path_type=Path),
    help="Root to import into (default: $JSONLTAPE_ROOT, else the nearest project's "
    ".jsonltape/sessions, else <data dir>/sessions); sessions go to ROOT/<source>/<id>.jsonl.",
)
@click.option(
    "--settle",
    type=SECONDS,
    default=3600.0,
    show_default=True,
    help="Seconds after its last change when a source is finished: a turn it left open is "
    "closed as interrupted (as `repair` closes a crashed turn), or as completed when the "
    "source never marks a turn's end and it ended with a reply.",
)
@click.option("--live", is_flag=True, help="Never close open turns (sources still being written).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report per source file.")
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="Processes importing at once (default: one more than this machine's cores; one on "
    "a single core). An import of many sources goes on in worker processes once it has run "
    "0.2 s alone, or a source says the rest would take five times that long; 1: never.",
)
def import_(
    source: str,
    sources: tuple[Path, ...],
    root: Path | None,
    settle: float,
    live: bool,
    as_json: bool,
    jobs: int | None,
) -> None:
    """Import SOURCES (session files or whole trees such as ~/.claude/projects,
    ~/.codex/sessions or ~/.gemini/tmp; each agent's tree is searched for its session files,
    databases and task folders: see the README's table) as jsonltape sessions, one per source
    session. With --from auto, every known agent's sessions on this machine are imported, and
    what was found where is said.

    Every source line is kept verbatim in the imported session. Importing again adds nothing;
    a source that grew adds only its new part. Prints the session files created or appended
    to (every report with --json); problems (lines kept raw) and a one-line summary go to
    stderr. Exit 2 if a source could not be imported (nothing is written for it; the other
    sources are imported).
    """
    out_root = _import_root(root)
    if source == "auto":
        todo = _found(sources or (Path.cwd(),), out_root)
    else:
        if not sources:
            raise click.UsageError("Missing argument 'SOURCES...'.")
        files, skipped = discover(source, sources, exclude=str(out_root))
        for path, why in skipped:
            _err(f"jsonltape: skipped {path}: {why}")
        if not files:
            where = ", ".join(map(str, sources))
            pattern = agent_of(source).pattern
            raise CliError(f"no {source} sessions ({pattern}) found in {where}", 2)
        todo = [(source, f) for f in files]
    total = sum(_size(f) for _s, f in todo)
    bar: AbstractContextManager[Any] = nullcontext(None)
    if len(todo) > 1 or total >= _BAR_BYTES:
        what = source if len({s for s, _f in todo}) == 1 else "session"
        bar = click.progressbar(
            length=total, label=f"importing {len(todo)} {what} files", file=sys.stderr
        )
    reports: list[FileReport] = []
    with bar as progress:
        step = progress.update if progress is not None else None
        for report in import_many(
            todo, out_root, settle=None if live else settle, progress=step,
            waiting=partial(_waiting, root=out_root), workers=jobs,
        ):  # fmt: skip
            reports.append(report)
            if as_json:
                click.echo(json_line(report))
            elif report.status == "imported":  # what changed; the unchanged are only counted
                for s in report.sessions:
                    say(str(s))
    _report(reports, len(todo) == 1 and source != "auto")


def _waiting(source: str | os.PathLike[str] | Unit, lock: Path, *, root: Path) -> None:
    where = source.path if isinstance(source, Unit) else source
    # the lock is one of a few hundred: the import holding it is of this source, or rarely
    # of another one whose lock is the same file
    _err(f"jsonltape: {where}: waiting for another import into {root} to end (it holds {lock})")


def _found(dirs: tuple[Path, ...], out_root: Path) -> list[tuple[str, Path | Unit]]:
    """What ``import --from auto`` imports: every agent's sources found on this machine, each
    agent said on stderr with where its sessions are (an agent whose place cannot be read is
    said too, and the others are imported)."""
    from ..interop._auto import MAX_DIRS, find
    from ..interop._registry import AGENTS

    found, capped = find(dirs, exclude=out_root)
    where = ", ".join(map(str, dirs))
    if capped:
        _err(
            f"jsonltape: import: searched the first {MAX_DIRS:,} directories of {where} for "
            "per-project sessions; name narrower directories to search the rest"
        )
    jobs: list[tuple[str, Path | Unit]] = []
    for f in found:
        name, places = f.agent.name, ", ".join(map(str, f.paths))
        try:
            items, skipped = discover(name, f.paths, exclude=str(out_root))
        except JsonltapeError as exc:
            _err(f"jsonltape: found {f.agent.label} ({name}) in {places}, not read: {exc}")
            continue
        for path, why in skipped:
            _err(f"jsonltape: skipped {path}: {why}")
        if items:
            _err(
                f"jsonltape: found {f.agent.label} ({name}): {_n(len(items), 'source')} in {places}"
            )
        else:
            _err(f"jsonltape: found {f.agent.label}'s place ({name}) {places}, with no sessions")
        jobs += [(name, item) for item in items]
    if not jobs:
        labels = ", ".join(a.label for a in AGENTS.values())
        raise CliError(
            f"no sessions of a known agent found ({labels}) in their default places, nor "
            f"per-project ones in {where}",
            2,
        )
    return jobs


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _size(path: Path | Unit) -> int:
    if isinstance(path, Unit):
        return path.size
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _report(reports: list[FileReport], single: bool) -> None:
    errors = [r for r in reports if r.status == "error"]
    for r in reports:
        for n, why in r.problems[:_MAX_PROBLEMS]:
            _err(f"jsonltape: {r.path}: line {n}: {why} (kept raw)")
        if len(r.problems) > _MAX_PROBLEMS:
            _err(f"jsonltape: {r.path}: ... and {len(r.problems) - _MAX_PROBLEMS} more lines")
        if r.torn is not None:
            _err(
                f"jsonltape: {r.path}: line {r.torn.line}: incomplete last line ({r.torn.bytes} "
                f"bytes at byte {r.torn.offset}, no newline) not imported; it is imported once "
                "it is complete"
            )
        if r.held is not None:
            _err(
                f"jsonltape: {r.path}: record {r.held.line} on: still changing (a reply being "
                "written), not imported yet; it is imported once the source is finished "
                "(see --settle)"
            )
    if single and errors:
        raise CliError(str(errors[0].error), 2)
    for r in errors:
        _err(f"jsonltape: error: {r.error}")
    status = Counter(r.status for r in reports)
    created = sum(len(r.created) for r in reports)
    events = sum(r.events for r in reports)
    raw: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for r in reports:
        raw.update(r.raw)
        unknown.update(r.unknown)
    parts = [_n(len(reports), "file")]
    parts += [f"{n} {s}" for s, n in sorted(status.items())]
    line = (
        f"jsonltape: import: {', '.join(parts)}; {_n(created, 'session')} created, "
        f"{_n(events, 'event')} appended"
    )
    if raw:
        line += f"; {_n(sum(raw.values()), 'line')} kept only raw"
    if unknown:
        kinds = ", ".join(f"{k} ×{n}" for k, n in unknown.most_common(5))
        line += f" ({sum(unknown.values())} not understood: {kinds})"
    closed: Counter[str] = Counter()
    for r in reports:
        closed.update(r.closed)
    if closed:
        # what each turn/end says: a source that never marks a turn's end (Claude Code,
        # OpenCode) completed a turn that ended with a reply; the others were interrupted
        how = ", ".join(f"{n} {reason}" for reason, n in sorted(closed.items()))
        turns = _n(sum(closed.values()), "open turn")
        files = _n(sum(1 for r in reports if r.closed), "finished source")
        line += f"; closed {turns} of {files} ({how})"
    _err(line)
    if errors:
        sys.exit(2)


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="markdown",
    show_default=True,
    help="markdown/html: a transcript; json: the neutral fold; openai/anthropic: a request "
    "body; atif: a Harbor ATIF-v1.7 trajectory (sub-agents embedded); otel: an OTLP JSON trace "
    "(OpenTelemetry GenAI spans).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (created 0600) instead of stdout.",
)
@click.option(
    "--redact",
    multiple=True,
    type=click.Choice(["tools", "secrets"]),
    help="tools: hide tool arguments and results; secrets: mask keys, tokens, passwords, "
    "private keys. Repeatable.",
)
@click.option(
    "--parent",
    "parent_specs",
    multiple=True,
    metavar="ID=PATH",
    help="Where an ancestor session of a fork lives.",
)
def export(
    path: Path,
    fmt: str,
    output: Path | None,
    redact: tuple[str, ...],
    parent_specs: tuple[str, ...],
) -> None:
    """Export the session at PATH for sharing: a Markdown or self-contained HTML transcript,
    the neutral JSON history, an OpenAI / Anthropic request body, or an agent trace (ATIF,
    OpenTelemetry).

    atif: a trajectory in Harbor's Agent Trajectory Interchange Format; sessions beside PATH
    that fork from it or that it spawned are embedded as sub-agent trajectories. otel: an OTLP
    JSON trace a collector takes (OpenTelemetry GenAI conventions: a span per turn, per model
    call with its input and output messages, per tool call).

    An open or torn session is exported as far as it is committed (stderr says so). atif and
    otel say on stderr what the format cannot carry (earlier versions of revised messages,
    retracted messages, compaction boundaries, turns, ...); the document says it too (ATIF
    notes and extra.jsonltape.dropped; the root span's jsonltape.dropped). With --redact, what
    was redacted is summarised on stderr.
    """
    if output is not None and (not output.name or output.is_dir()):
        raise CliError(f"-o {output}: is a directory; name the file to write", 2)
    parents: dict[str, str | os.PathLike[str]] = {}
    for spec in parent_specs:
        sid, sep, where = spec.partition("=")
        if not sep or not sid or not where:
            raise CliError(f"--parent takes SESSION_ID=PATH, got {spec!r}", 2)
        parents[sid] = where
    shown_on_tty = output is None and sys.stdout.isatty()

    def write(text: str) -> None:
        if shown_on_tty:
            # Markup is escaped, terminal controls are not: a transcript read on the terminal
            # is shown by the display rule, JSON as the same value with \u escapes (a pipe or
            # -o gets the export byte for byte).
            text = shown(text, newlines=True) if fmt in ("markdown", "html") else json_shown(text)
        sys.stdout.write(text)

    kw: dict[str, Any] = {
        "redact_tools": "tools" in redact,
        "redact_secrets": "secrets" in redact,
        "parents": parents or None,
    }
    if output is None:
        result = export_to(write, path, cast(ExportFormat, fmt), **kw)
        sys.stdout.flush()
    else:
        result = _write_private(output, lambda w: export_to(w, path, cast(ExportFormat, fmt), **kw))
    for note in result.notes:
        _err(f"jsonltape: note: {note}")
    if result.redacted:
        _err(f"jsonltape: {result.redacted}")


def _write_private(path: Path, make: Callable[[Callable[[str], object]], Export]) -> Export:
    """Write what ``make`` gives its writer to ``path`` owner-only, replacing it atomically
    (never a partial file: a failed export leaves the old file, or none)."""
    tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            result = make(f.write)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise
    return result
