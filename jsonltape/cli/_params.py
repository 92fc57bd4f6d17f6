"""Option types the commands share (a finite number of seconds, a JSON object), and the index
options, the index's target and the JSON line output that the query and index commands share.

Light on purpose: ``search``, ``sessions`` and ``show`` take their options from here and not
from ``_daemon_cmds`` (the whole ``daemon`` group, its click commands and the project-root
helpers), and the daemon package is imported only inside :func:`target_of` and
:func:`index_of`, so ``append`` and ``cat`` never load it.
"""

from __future__ import annotations

import math
import os
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from .._display import json_shown
from .._limits import MAX_INT
from ._base import CliError

if TYPE_CHECKING:
    from jsonltape_daemon.target import Target

__all__ = [
    "COUNT",
    "SECONDS",
    "SEQ",
    "JsonObject",
    "Seconds",
    "echo_json",
    "echo_lines",
    "index_of",
    "index_option",
    "json_line",
    "json_writer",
    "origins_option",
    "parse_json",
    "target_of",
]

_json = msgspec.json.Decoder()
_enc = msgspec.json.Encoder()


# ParamType is generic in new click only; subscripting it would break click 8.1 at run time.
class Seconds(click.ParamType):  # type: ignore[type-arg]
    """A finite, non-negative number of seconds (at least ``minimum``).

    click's ``FloatRange`` lets ``nan`` through (every comparison with it is false) and ``inf``
    with it, and a lock wait or a poll interval of either would hang or spin.
    """

    name = "seconds"

    def __init__(self, minimum: float = 0.0) -> None:
        self.minimum = minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            seconds = value
        else:
            try:
                seconds = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds < self.minimum:
            self.fail(
                f"{value!r} is not a finite number of seconds >= {self.minimum:g}", param, ctx
            )
        return seconds


#: Seconds from 0 on (``--wait``, ``--settle``).
SECONDS = Seconds()

#: A seq (or a count): 0 to the format's largest integer (spec §6). A seq past the end of a
#: session is the library's to refuse.
SEQ = click.IntRange(0, MAX_INT)
#: How many (``--limit``, ``--last``): at least one.
COUNT = click.IntRange(1, MAX_INT)


def parse_json(text: str, what: str) -> Any:
    """Decode a JSON option value; a bad one is a one-line usage error naming ``what``."""
    try:
        return _json.decode(text)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint=what) from None
    except RecursionError:
        from .._scan import TOO_DEEP  # not above: the read machinery, for the deepest input only

        raise click.BadParameter(TOO_DEEP, param_hint=what) from None


class JsonObject(click.ParamType):  # type: ignore[type-arg]
    """A JSON object given on the command line (``--data``, ``--meta``); ``null``, a list or a
    number is refused rather than silently stored as something else."""

    name = "json-object"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> dict[str, Any]:
        if isinstance(value, dict):
            return value
        what = f"'{param.opts[0]}'" if param is not None and param.opts else "value"
        obj = parse_json(str(value), what)
        if not isinstance(obj, dict):
            self.fail(f"must be a JSON object {{...}}, not {_kind(obj)}", param, ctx)
        return obj


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


# -- the index commands' options, their target, their output ---------------------------------


index_option = click.option(
    "--index",
    "index_path",
    metavar="PATH|URL",
    help="Index: a SQLite file, a postgresql:// URL or a libpq key=value string (default: "
    "$JSONLTAPE_INDEX or <data dir>/index.db).",
)
origins_option = click.option(
    "--origin",
    "origins",
    multiple=True,
    metavar="NAME",
    help="Only sessions pushed by this origin (machine and user) to a PostgreSQL team index. "
    "Repeatable.",
)


def _parse_target(value: str | None) -> Target:
    from jsonltape_daemon import paths, target

    return target.parse(value) if value is not None else target.default_target(paths.data_dir())


def target_of(value: str | None) -> Target:
    """The index ``--index`` (else ``$JSONLTAPE_INDEX``, else the default file) names; a
    ``scheme://`` value is a supported engine or one clear error, never a path."""
    from jsonltape_daemon.target import SqliteTarget

    t = _parse_target(value)
    if isinstance(t, SqliteTarget):
        return SqliteTarget(_regular_file(t.path))
    return t


def index_of(value: str | None) -> Path:
    """The SQLite index file to use; refused at once if something else is there (sqlite would
    block on a FIFO, and fail with a bare "disk I/O error" on a directory), or if ``value`` is
    a URL (the commands that take one call :func:`target_of`)."""
    from jsonltape_daemon.target import PgTarget

    t = _parse_target(value)
    if isinstance(t, PgTarget):
        raise CliError(f"{t}: this command needs a SQLite index file, not a PostgreSQL URL", 2)
    return _regular_file(t.path)


def _regular_file(index: Path) -> Path:
    try:
        mode = os.stat(index).st_mode
    except OSError:
        return index  # missing (created by a writer, reported by a reader) or unreadable
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise CliError(f"{index}: {kind}, not an index file", 2)
    return index


def json_text(text: str) -> str:
    """JSON text for stdout: on a terminal with the display rule's characters as ``\\u``
    escapes (the same value, see :func:`~jsonltape._display.json_shown`), else as it is."""
    return json_shown(text) if sys.stdout.isatty() else text


def json_writer() -> Callable[[bytes], object]:
    """The write for JSON text (encoded, whole tokens, raw lines) on stdout: on a terminal
    with the display rule's characters as ``\\u`` escapes (:func:`json_text`), else the
    bytes as they are."""
    out = sys.stdout.buffer
    if not sys.stdout.isatty():
        return out.write
    return lambda data: out.write(json_shown(data.decode("utf-8", "surrogateescape")).encode())


def json_line(obj: Any) -> str:
    """``obj`` as one line of JSON for stdout (without the line break; :func:`json_text`)."""
    return json_text(_enc.encode(obj).decode())


def echo_json(obj: Any) -> None:
    """``obj`` as one line of JSON on stdout."""
    click.echo(json_line(obj))


def echo_lines(lines: Iterable[str]) -> None:
    """``lines`` on stdout, each ending in a line break, a few KiB a write; nothing if none.

    A ``click.echo`` a line is a write (a system call) a line: 1.5 ms for the 60 lines of a
    20-hit search. Not one write of everything either: a reader that leaves early (``| head``)
    must still meet a later write and its EPIPE (exit 1), and with ``PYTHONUNBUFFERED`` a
    write cut short by it would be lost silently; blocks well under a pipe buffer keep both
    as they were with a line a write. The text is the same.
    """
    block: list[str] = []
    size = 0
    for line in lines:
        block.append(line)
        size += len(line) + 1
        if size >= _BLOCK:
            click.echo("\n".join(block))
            block, size = [], 0
    if block:
        click.echo("\n".join(block))


#: Characters a write of :func:`echo_lines` (a pipe buffer is 64 KiB on Linux, 16 on macOS).
_BLOCK = 4096
