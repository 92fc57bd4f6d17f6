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

__all__ = ["EXIT_CODES", "LazyCommands", "cli", "main", "one_line", "say"]

# name -> (module under jsonltape.cli, attribute, the first paragraph of its help). The help
# text lives here too so that `jsonltape --help` lists every command without importing any;
# tests/test_startup.py checks it against each command's own help.
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "new": (
        "_core",
        "new",
        "Create a new session file at PATH and print its id (refused if PATH exists).",
    ),
    "append": (
        "_core",
        "append",
        "Append events to PATH and print their seqs; durable when the command exits.",
    ),
    "cat": (
        "_core",
        "cat",
        "Print the committed lines of PATH exactly as stored (a torn tail is not printed).",
    ),
    "info": (
        "_core",
        "info",
        "Show the header and the tail state of PATH (reads only the end of the file).",
    ),
    "verify": (
        "_core",
        "verify",
        "Check every line of each file in PATHS: framing, CRC, valid JSON envelope, dense seq.",
    ),
    "repair": (
        "_core",
        "repair",
        "Repair PATH: cut a torn tail (kept in a .torn sidecar) and close a crashed turn.",
    ),
    "messages": ("_fold", "messages", "Print the model-visible history of PATH as JSON."),
    "compact": (
        "_fold",
        "compact",
        "Replace messages of PATH up to --through by a summary (nothing is deleted).",
    ),
    "prune": (
        "_fold",
        "prune",
        "Replace the output of tool result SEQ in PATH by a short stub (the original stays "
        "logged).",
    ),
    "retract": (
        "_fold",
        "retract",
        "Take message SEQ (or SEQ..--to) of PATH off the surface; its tool results go with it.",
    ),
    "fork": ("_fold", "fork", "Create a fork of PATH as of seq --at and print its path."),
    "merge": (
        "_fold",
        "merge",
        "Append FORK's messages to PARENT with a receipt; merging again adds nothing.",
    ),
    "discard": (
        "_fold",
        "discard",
        "Append a discard receipt for FORK to PARENT (no file is deleted).",
    ),
    "handoff": (
        "_fold",
        "handoff",
        "Start PATH afresh from a summary: the context is rebuilt from this handoff on.",
    ),
    "todo": ("_fold", "todo", "Print the latest todo list of PATH."),
    "sync": (
        "_index",
        "sync",
        "Bring the index up to date with every session file under ROOT, once.",
    ),
    "search": ("_query", "search", "Full-text search over every indexed message."),
    "sessions": (
        "_query",
        "sessions",
        "List sessions, most recent activity first (the last event's time, not the mtime).",
    ),
    "show": (
        "_query",
        "show",
        "Show the last messages of SESSION (id, id prefix or path) from the index.",
    ),
    "index": (
        "_index",
        "index",
        "The search index: status, rebuild, path, optimize; init and grant (PostgreSQL).",
    ),
    "daemon": (
        "_daemon_cmds",
        "daemon",
        "The sync daemon: keeps the index current while agents write.",
    ),
    "import": (
        "_interop",
        "import_",
        "Import SOURCES (session files or whole trees such as ~/.claude/projects, "
        "~/.codex/sessions or ~/.gemini/tmp; trees are searched for *.jsonl, rollout-*.jsonl "
        "for codex, also legacy session-*.json for gemini-cli; for opencode an opencode.db, a "
        "storage tree or the data directory ~/.local/share/opencode) as jsonltape sessions, one "
        "per source session.",
    ),
    "export": (
        "_interop",
        "export",
        "Export the session at PATH for sharing: a Markdown or self-contained HTML transcript, "
        "the neutral JSON history, or an OpenAI / Anthropic request body.",
    ),
    "git": (
        "_git",
        "git",
        "Keep session files in git: set-up, merge driver, readable diffs, commit guard.",
    ),
    "init": (
        "_git",
        "init",
        "Create DIR/.jsonltape/sessions/ (0700) for a project's sessions; set up git there too.",
    ),
    # Listed once its module exists (another part of issue 12).
    "redact": (
        "_git_check",
        "redact",
        "Write a copy of SRC to DST with every secret the redaction patterns find masked.",
    ),
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


class LazyCommands(click.Group):
    """A group whose commands are loaded on first use from :attr:`table` (name -> module under
    ``jsonltape.cli``, attribute, first paragraph of its help), beside any added eagerly.

    A command whose module is not there (yet) is simply not listed. Listing them for ``--help``
    imports none: the table holds the text.
    """

    table: ClassVar[dict[str, tuple[str, str, str]]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = {n for n, (mod, _, _) in self.table.items() if _available(mod)}
        return sorted(lazy | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = self.table.get(cmd_name)
        if target is None or not _available(target[0]):
            return None
        module = importlib.import_module(f"{__name__}.{target[0]}")
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


class _LazyGroup(LazyCommands):
    table = _COMMANDS

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
            from .._scan import TOO_DEEP  # not at the top: it loads the decoder for every command

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
