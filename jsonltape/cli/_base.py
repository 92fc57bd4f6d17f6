"""What every command module stands on: one-line errors with their exit codes, one-line
output, and the group whose commands load by name.

The command modules import these from here, never from :mod:`jsonltape.cli`, which loads them
by name: the package front uses this module, and this module uses no command (so the two never
import each other).
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
from typing import Any, ClassVar

import click

from .._display import shown
from ..errors import (
    ConcurrentModificationError,
    CorruptError,
    JsonltapeError,
    LockedError,
    SessionExistsError,
    StorageError,
)

__all__ = ["EXIT_CODES", "CliError", "LazyCommands", "available", "fail", "one_line", "say"]

#: The package the command modules live in.
_COMMANDS_PACKAGE = __name__.rpartition(".")[0]

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


def say(text: str, *, err: bool = False) -> None:
    """One line of human output (``err``: on stderr), whatever a path, name or value in it
    holds made safe to show (:func:`one_line`)."""
    click.echo(one_line(text), err=err)


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1b``).

    A diagnostic is one line whatever a file name or a value holds, and a terminal never
    receives an escape sequence from one.
    """
    return shown(text)


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


class LazyCommands(click.Group):
    """A group whose commands are loaded on first use from :attr:`table` (name -> module under
    ``jsonltape.cli``, attribute, first paragraph of its help), beside any added eagerly.

    A command whose module is not there (yet) is simply not listed. Listing them for ``--help``
    imports none: the table holds the text.
    """

    table: ClassVar[dict[str, tuple[str, str, str]]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = {n for n, (mod, _, _) in self.table.items() if available(mod)}
        return sorted(lazy | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = self.table.get(cmd_name)
        if target is None or not available(target[0]):
            return None
        module = importlib.import_module(f"{_COMMANDS_PACKAGE}.{target[0]}")
        command = getattr(module, target[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, as click writes it, from the table: listing the
        commands imports none of them (they would load the fold, the importers and sqlite3)."""
        helps: dict[str, str] = {}
        for name in self.list_commands(ctx):
            eager = self.commands.get(name)
            if eager is None:
                helps[name] = self.table[name][2]
            elif not eager.hidden:
                helps[name] = eager.help or ""
        if not helps:
            return
        limit = formatter.width - 6 - max(len(name) for name in helps)  # click's own layout
        rows = [
            (name, click.Command(name, help=text).get_short_help_str(limit))
            for name, text in helps.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def available(module: str) -> bool:
    """Whether the command module ``module`` (under ``jsonltape.cli``) is there."""
    return importlib.util.find_spec(f"{_COMMANDS_PACKAGE}.{module}") is not None
