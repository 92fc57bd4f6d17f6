"""The ``jsonltape`` command: thin click commands over the library.

Commands load lazily, so ``jsonltape verify`` never imports the daemon, watchdog or sqlite3.
Data goes to stdout, diagnostics to stderr; library errors become one line and an exit code
here and nowhere else: one line on stderr, ``jsonltape: error: <where>: <what>``. Click's own
usage errors (a missing argument, an unknown option) are turned into that same one line here,
for every command and group, with a pointer to the command's ``--help``.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import sys
from typing import Any

import click

from .._scan import TOO_DEEP
from ..errors import (
    ConcurrentModificationError,
    CorruptError,
    JsonltapeError,
    LockedError,
    SessionExistsError,
    StorageError,
)

__all__ = ["EXIT_CODES", "cli", "main"]

# name -> (module under jsonltape.cli, attribute)
_COMMANDS: dict[str, tuple[str, str]] = {
    "new": ("_core", "new"),
    "append": ("_core", "append"),
    "cat": ("_core", "cat"),
    "info": ("_core", "info"),
    "verify": ("_core", "verify"),
    "repair": ("_core", "repair"),
    "messages": ("_fold", "messages"),
    "compact": ("_fold", "compact"),
    "prune": ("_fold", "prune"),
    "retract": ("_fold", "retract"),
    "fork": ("_fold", "fork"),
    "merge": ("_fold", "merge"),
    "discard": ("_fold", "discard"),
    "handoff": ("_fold", "handoff"),
    "todo": ("_fold", "todo"),
    "sync": ("_index", "sync"),
    "search": ("_index", "search"),
    "sessions": ("_index", "sessions"),
    "show": ("_index", "show"),
    "index": ("_index", "index"),
    "daemon": ("_daemon_cmds", "daemon"),
    "import": ("_interop", "import_"),
    "export": ("_interop", "export"),
}

#: Exit codes: 0 ok; 1 repairable (verify) or other error; 2 bad input; 3 corrupt;
#: 4 another writer / file changed underneath; 5 I/O failure (fsync, EIO, a full disk).
EXIT_CODES: list[tuple[type[BaseException], int]] = [
    (CorruptError, 3),
    (LockedError, 4),
    (ConcurrentModificationError, 4),
    (StorageError, 5),
    (SessionExistsError, 2),
    (JsonltapeError, 2),
]


class CliError(click.ClickException):
    """One line on stderr, ``jsonltape: error: <where>: <what>``, and an exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: Any = None) -> None:
        click.echo(f"jsonltape: error: {one_line(self.format_message())}", err=True)


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1b``).

    A diagnostic is one line whatever a file name or a value holds, and a terminal never
    receives an escape sequence from one.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _usage_line(exc: click.UsageError) -> CliError:
    """A click usage error as one line: ``<what> (see 'jsonltape CMD --help')``, exit 2."""
    what = exc.format_message().strip().rstrip(".")
    if what[:1].isupper() and what[1:2].islower():
        what = what[0].lower() + what[1:]
    where = exc.ctx.command_path if exc.ctx is not None else "jsonltape"
    return CliError(f"{what} (see '{where} --help')", 2)


def fail(exc: BaseException) -> CliError:
    """Map a library (or OS) error to its exit code."""
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return CliError(str(exc), code)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        code = 2 if exc.errno in _BAD_INPUT_ERRNOS else 5  # what the user named, or the I/O
        return CliError(f"{where}{exc.strerror or exc}", code)
    return CliError(str(exc), 1)


#: OS errors about the path the user gave (exit 2, bad input); any other is an I/O failure (5).
_BAD_INPUT_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EACCES,
        errno.EPERM,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EEXIST,
    }
)


class _LazyGroup(click.Group):
    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a bare `jsonltape` asked for the help text: click prints it
        except click.UsageError as exc:  # the top level's own options (`jsonltape --bogus`)
            raise _usage_line(exc) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, (mod, _) in _COMMANDS.items() if _available(mod))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None or not _available(target[0]):
            return None
        module = importlib.import_module(f"{__name__}.{target[0]}")
        command = getattr(module, target[1])
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a bare group (`jsonltape daemon`) prints its help, as asked
        except click.UsageError as exc:  # any subcommand's, in any group below this one
            raise _usage_line(exc) from None
        except (JsonltapeError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # the reader of our output left (`| head`): click exits quietly
            raise fail(exc) from None
        except RecursionError:  # a decode the library did not place (the deepest inputs)
            raise CliError(f"input: {TOO_DEEP}", 2) from None


def _available(module: str) -> bool:
    return importlib.util.find_spec(f"{__name__}.{module}") is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jsonltape")
def cli() -> None:
    """Crash-safe, append-only JSONL session logs for AI agents.

    Every line of a session file is an event with a dense seq and a CRC; `verify` tells a clean
    file from a torn tail or corruption, `repair` fixes a crash without losing a byte.
    """


def main() -> None:
    """Console-script entry point."""
    try:
        cli.main(prog_name="jsonltape")
    except KeyboardInterrupt:  # pragma: no cover - interactive
        click.echo("jsonltape: interrupted", err=True)
        sys.exit(130)
