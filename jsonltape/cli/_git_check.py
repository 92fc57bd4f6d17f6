"""``jsonltape git textconv``, ``git pre-commit``, ``git check`` and ``jsonltape redact``.

Thin: parse, call :mod:`jsonltape.git._textconv`, :mod:`jsonltape.git._check` or
:mod:`jsonltape.interop._redact_copy`, print. The guard's exit codes: 0 nothing to refuse,
1 refused (one line per problem on stderr), 2 bad input (not a git work tree, no such file, a
``.jsonltape-allow`` that is a symlink, a FIFO, a directory or larger than 4 MiB).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ._base import CliError, one_line

if TYPE_CHECKING:
    from ..git._check import Problem

__all__ = ["check", "pre_commit", "redact", "textconv"]


@click.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def textconv(path: Path) -> None:
    """Print the committed events of PATH as a transcript for git diff (textconv).

    One line per event (seq, UTC time, role or type, text on one line, tool calls with short
    arguments); no CRCs or offsets. A torn or corrupt file prints its good lines and one line
    saying where it is damaged, and still exits 0, so `git diff` never fails on it. Set up by
    `jsonltape git install` as diff.jsonltape.textconv.
    """
    from ..git._textconv import textconv as convert

    out = sys.stdout.buffer
    convert(path, out)
    out.flush()


_allow = click.option(
    "--allow-secrets",
    is_flag=True,
    help="Accept every secret (this run only). One known false positive is accepted by its "
    "fingerprint in .jsonltape-allow or `git config --add jsonltape.allowSecret FP`.",
)


def _report(found: Sequence[Problem], what: str) -> None:
    """A note (``jsonltape: warning: …``) as it is, then one line per problem on stderr (and a
    summary line when there are several), then exit 1 when there is any."""
    for p in found:
        if not p.refuses:
            click.echo(one_line(f"jsonltape: warning: {p.what}"), err=True)
    problems = [p for p in found if p.refuses]
    if not problems:
        return
    hint = (
        " (commit a masked copy instead: `jsonltape redact SRC -o DST`, a new session; or "
        "accept a false positive by listing its fingerprint in .jsonltape-allow)"
    )
    secrets = any(p.kind == "secret" for p in problems)
    for p in problems:
        tail = hint if secrets and len(problems) == 1 else ""
        click.echo(one_line(f"jsonltape: error: {what}: {p.path}: {p.what}{tail}"), err=True)
    if len(problems) > 1:
        files = len({p.path for p in problems})
        summary = f"jsonltape: error: {what}: {len(problems)} problems in {files} files"
        click.echo(summary + (hint if secrets else ""), err=True)
    sys.exit(1)


@click.command("pre-commit")
@_allow
def pre_commit(allow_secrets: bool) -> None:
    """Check the staged session files before a commit: torn, corrupt, secrets, rewritten history.

    Reads the staged blobs (not the work tree) of the session files in the index: those whose
    merge or diff attribute is jsonltape, and any staged *.jsonl starting with a jsonltape
    header. Exit 0 when nothing is refused, 1 when the commit is refused (one line per problem
    on stderr). A session file without the merge=jsonltape attribute is named in one warning,
    with the `git install --pattern` to add; it does not refuse the commit. Installed as a
    pre-commit hook by `jsonltape git install`.
    """
    from ..git._check import check_staged

    _report(check_staged(".", allow_secrets=allow_secrets), "commit refused")


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--staged", is_flag=True, help="Check the staged blobs of PATHS, not the files.")
@_allow
def check(paths: tuple[Path, ...], staged: bool, allow_secrets: bool) -> None:
    """Check session files (or staged blobs) for what the pre-commit hook refuses.

    PATHS are session files (with --staged, paths whose staged blobs are checked). Each file
    is checked whole, and, inside a git work tree, against HEAD's version of it
    (rewritten history). Exit 0 when nothing would be refused, 1 otherwise.
    """
    from ..git._check import check_paths, check_staged_paths

    if staged:
        problems = check_staged_paths(list(paths), ".", allow_secrets=allow_secrets)
    else:
        problems = check_paths(list(paths), allow_secrets=allow_secrets)
    _report(problems, "would be refused")


@click.command()
@click.argument("src", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    "dst",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The new file to write (never overwritten).",
)
def redact(src: Path, dst: Path) -> None:
    """Write a copy of SRC to DST with every secret the secret rules find masked.

    The copy is a valid session with a new id (SRC's id + ".redacted"; its header's meta
    names SRC's id): the same events, seqs and structure, every secret (gitleaks' rules and a
    supplement; in any member, as written or as a reader sees it, split across message parts
    or stream chunks) replaced by [REDACTED:<rule>], CRCs and checkpoints recomputed. DST is
    created 0600 and never replaces a file; SRC is only read. A torn tail of SRC is left out.
    """
    from ..interop._redact_copy import redact_copy

    if src.resolve() == dst.resolve():
        raise CliError("the destination is the source; redact writes a new file", 2)
    report = redact_copy(src, dst)
    click.echo(one_line(f"{dst}: session {report.id} ({report.events} events)"))
    click.echo(one_line(report.summary()), err=True)
    if report.torn_bytes:
        click.echo(
            f"jsonltape: the torn tail of {one_line(str(src))} ({report.torn_bytes} bytes) was "
            "not committed and is not in the copy",
            err=True,
        )
