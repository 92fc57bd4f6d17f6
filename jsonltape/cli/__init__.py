"""The ``jsonltape`` command: thin click commands over the library.

Commands load lazily, so ``jsonltape verify`` never imports the daemon, watchdog or sqlite3.
Data goes to stdout, diagnostics to stderr; library errors become one line and an exit code
here and nowhere else: one line on stderr, ``jsonltape: error: <where>: <what>``. Click's own
usage errors (a missing argument, an unknown option) are turned into that same one line here,
for every command and group, with a pointer to the command's ``--help``.
"""

from __future__ import annotations

import errno
import gc
import sys
from typing import Any, NoReturn

import click

from ..errors import JsonltapeError
from ._base import EXIT_CODES, CliError, LazyCommands, fail, one_line, say

__all__ = ["EXIT_CODES", "CliError", "LazyCommands", "cli", "fail", "main", "one_line", "say"]

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
    "usage": (
        "_usage",
        "usage",
        "Token usage and cost from the index; REPORT is daily (default), weekly, monthly, "
        "session (sub-agent sessions rolled into their parent's total) or blocks (5-hour "
        "billing blocks).",
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
        "~/.codex/sessions or ~/.gemini/tmp; each agent's tree is searched for its session "
        "files, databases and task folders: see the README's table) as jsonltape sessions, one "
        "per source session. With --from auto, every known agent's sessions on this machine are "
        "imported, and what was found where is said.",
    ),
    "export": (
        "_interop",
        "export",
        "Export the session at PATH for sharing: a Markdown or self-contained HTML transcript, "
        "the neutral JSON history, an OpenAI / Anthropic request body, or an agent trace "
        "(ATIF, OpenTelemetry).",
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
    "serve": (
        "_serve",
        "serve",
        "Browse, search and follow sessions in a web browser: a local server over the index.",
    ),
    # Listed once its module exists (another part of issue 12).
    "redact": (
        "_git_check",
        "redact",
        "Write a copy of SRC to DST with every secret the secret rules find masked.",
    ),
}


def _usage_line(exc: click.UsageError) -> CliError:
    """A click usage error as one line: ``<what> (see 'jsonltape CMD --help')``, exit 2."""
    what = exc.format_message().strip().rstrip(".")
    if what[:1].isupper() and what[1:2].islower():
        what = what[0].lower() + what[1:]
    where = exc.ctx.command_path if exc.ctx is not None else "jsonltape"
    return CliError(f"{what} (see '{where} --help')", 2)


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
        except KeyboardInterrupt:
            # click would say "Aborted!" and exit 1, which `verify` uses for a torn tail: a
            # script must tell Ctrl-C apart (128 + SIGINT, as shells do)
            _interrupted()


def _interrupted() -> NoReturn:
    click.echo("jsonltape: interrupted", err=True)
    sys.exit(130)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="jsonltape")
def cli() -> None:
    """Crash-safe, append-only JSONL session logs for AI agents.

    Every line of a session file is an event with a dense seq and a CRC; `verify` tells a clean
    file from a torn tail or corruption, `repair` fixes a crash without losing a byte.
    """


#: Container objects a command may allocate (net) before the collector first runs. Start-up
#: makes only objects that live until exit (modules, classes, functions: ~19k tracked ones at
#: the end of `append`), which every collection on the way traced for nothing (3-4% of an
#: append's or a cat's CPU); the first collection past this many puts Python's own thresholds
#: back for the rest of the run.
_FIRST_COLLECTION = 50_000


def _defer_first_collection() -> None:
    """Raise the collector's first threshold to :data:`_FIRST_COLLECTION` until it first runs."""
    default = gc.get_threshold()
    restored = False

    def restore(phase: str, info: dict[str, int]) -> None:
        # Once, as the first collection starts, and off the list at once: a signal's handler
        # runs in the first Python code after the signal came, and a KeyboardInterrupt raised
        # in a collector's callback is printed and dropped ("Exception ignored in"). Run at
        # every collection, or as the first one stops (a Ctrl-C during its milliseconds), it
        # lost Ctrl-C to an import one time in ten, which went on to exit 0.
        nonlocal restored
        if not restored:
            restored = True
            gc.set_threshold(*default)
            gc.callbacks.remove(restore)

    gc.callbacks.append(restore)
    gc.set_threshold(_FIRST_COLLECTION, *default[1:])


def main() -> None:
    """Console-script entry point."""
    _defer_first_collection()
    try:
        cli.main(prog_name="jsonltape")
    except KeyboardInterrupt:  # pragma: no cover - before or after a command runs
        _interrupted()
    finally:
        # The process is about to end: the interpreter's last collections would trace every
        # object the imports made (modules, classes, functions: ~19k for `append`), ~15 ms or
        # 17% of its CPU, to free memory the OS takes back anyway. Frozen objects are skipped;
        # atexit handlers still run (tapes close, locks release) and whatever is not in a
        # reference cycle is still freed as its module is cleared.
        gc.freeze()
