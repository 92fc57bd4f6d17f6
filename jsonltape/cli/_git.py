"""The ``git`` command group (install, status; the merge driver, textconv and commit guard load
from their own modules) and ``init``, which makes a project folder for sessions.

The git library (``jsonltape.git``) is imported inside the commands: ``jsonltape git --help``
loads none of it, nor the modules of the lazy subcommands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ._base import LazyCommands, one_line

if TYPE_CHECKING:
    from ..git._install import Item

__all__ = ["GIT_COMMANDS", "git", "init"]

_dir_arg = click.argument(
    "directory",
    required=False,
    metavar="[DIR]",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)


# name -> (module under jsonltape.cli, attribute, the first paragraph of its help); the text
# is the contract with those modules (tests/test_startup.py checks it).
GIT_COMMANDS: dict[str, tuple[str, str, str]] = {
    "textconv": (
        "_git_check",
        "textconv",
        "Print the committed events of PATH as a transcript for git diff (textconv).",
    ),
    "pre-commit": (
        "_git_check",
        "pre_commit",
        "Check the staged session files before a commit: torn, corrupt, secrets, rewritten "
        "history.",
    ),
    "check": (
        "_git_check",
        "check",
        "Check session files (or staged blobs) for what the pre-commit hook refuses.",
    ),
    "merge-driver": (
        "_git_merge",
        "merge_driver",
        "Merge three versions of a session file for git (result in CURRENT; exit 1 on conflict).",
    ),
    "adopt": (
        "_git_merge",
        "adopt",
        "Make the version a merge recorded as branch SEQ of PATH the current one (appends only).",
    ),
}


class _GitGroup(LazyCommands):
    table = GIT_COMMANDS


@click.group(cls=_GitGroup)
def git() -> None:
    """Keep session files in git: set-up, merge driver, readable diffs, commit guard.

    `jsonltape git install` sets a repository up once (a fresh clone needs it too: git does not
    clone config or hooks); `jsonltape git status` says what is and is not set up.
    """


def _show(items: Sequence[Item], width: int = 11) -> None:
    for item in items:
        detail = f": {item.detail}" if item.detail else ""
        click.echo(one_line(f"{item.state:<{width}} {item.what}{detail}"))


def _report_status(directory: Path | None, patterns: tuple[str, ...]) -> None:
    from ..git._install import status

    items = status(directory or Path.cwd(), patterns)
    _show(items)
    missing = [i for i in items if i.state == "missing"]
    if missing:
        click.echo(
            f"jsonltape: {len(missing)} of {len(items)} items missing; run `jsonltape git "
            "install` (once in every clone: git does not clone config or hooks)",
            err=True,
        )
        raise SystemExit(1)


@git.command()
@_dir_arg
@click.option(
    "--pattern",
    "patterns",
    multiple=True,
    metavar="GLOB",
    help="A .gitattributes pattern for session files (repeatable; default: "
    "**/.jsonltape/sessions/**/*.jsonl, the sessions of every project in the repository).",
)
@click.option("--check", is_flag=True, help="Change nothing: say what is set up, as `status`.")
def install(directory: Path | None, patterns: tuple[str, ...], check: bool) -> None:
    """Set up the git repository containing DIR (default: the current directory) for sessions.

    Adds `merge=jsonltape diff=jsonltape` lines to .gitattributes, ignores lock files and
    repair sidecars in .gitignore, points the local config's merge driver and textconv at this
    jsonltape (its absolute path: it works from a venv), chains a pre-commit hook and
    post-checkout/merge/rewrite hooks (owner-only modes back after git) to the hooks already
    there, and makes the session files already checked out owner-only. Installing again
    changes nothing. With --check, exit 1 when something is missing.
    """
    if check:
        _report_status(directory, patterns)
        return
    from ..git._install import install as run_install

    _show(run_install(directory or Path.cwd(), patterns))


@git.command()
@_dir_arg
def status(directory: Path | None) -> None:
    """Say what `jsonltape git install` set up in the repository containing DIR, and what not.

    One line per item, configured or missing; exit 1 when something is missing (as in a
    fresh clone, before `jsonltape git install`). Tracked session files (by their first line)
    that no pattern gives merge=jsonltape are missing too, with the --pattern to add.
    """
    _report_status(directory, ())


@git.command("fix-modes", hidden=True)
@_dir_arg
@click.option("--quiet", is_flag=True, help="Say nothing unless something went wrong.")
@click.option("--unless-rebasing", is_flag=True, help="Do nothing while a rebase is in progress.")
def fix_modes(directory: Path | None, quiet: bool, unless_rebasing: bool) -> None:
    """Make the session files of the work tree containing DIR owner-only (0600, folders 0700).

    The post-checkout, post-merge and post-rewrite hooks run it: git keeps no file modes.
    """
    from ..git._install import repository
    from ..git._modes import rebasing, scan_modes

    top = repository(directory or Path.cwd())
    if unless_rebasing and rebasing(top):
        return
    scan = scan_modes(top, fix=True)
    for error in scan.errors:
        click.echo(one_line(f"jsonltape: warning: {error}"), err=True)
    if not quiet:
        click.echo(
            f"{len(scan.files)} session files and {len(scan.dirs)} folders set to owner-only "
            f"({scan.sessions} session files)"
        )
    if scan.errors:
        raise SystemExit(1)


@click.command()
@_dir_arg
@click.option("--no-git", is_flag=True, help="Do not set up git, even in a git repository.")
def init(directory: Path | None, no_git: bool) -> None:
    """Create DIR/.jsonltape/sessions/ (0700) for a project's sessions; set up git there too.

    Commands that take a session root (sync, import -o, daemon) use the nearest .jsonltape/
    above the current directory, as git finds .git (a root named on the command line or in
    $JSONLTAPE_ROOT comes first). In a git repository `jsonltape git install` runs as well.
    """
    from .._project import init_project
    from ..git._run import toplevel

    where = directory or Path.cwd()
    sessions, created = init_project(where)
    click.echo(one_line(f"{sessions}: created (0700)" if created else f"{sessions}: already there"))
    if no_git or toplevel(where) is None:
        return
    from ..git._install import install as run_install

    _show(run_install(where))
