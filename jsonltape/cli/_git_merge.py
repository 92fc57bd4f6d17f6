"""``jsonltape git merge-driver`` (git's merge driver for session files) and ``git adopt``.

Thin: :mod:`jsonltape.git._merge` merges the three versions in memory; this writes the result
to CURRENT (``%A``) as git's contract says — exit 0 when merged, 1 on a conflict with CURRENT
left as it was and one line on stderr saying why.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from ._base import one_line
from ._params import SECONDS, SEQ

__all__ = ["adopt", "merge_driver"]

_file = click.Path(dir_okay=False, path_type=Path)


def _source(pathname: str | None) -> str | None:
    """Where theirs came from: the branch name git puts in a ``GITHEAD_<sha>`` variable for
    the other side (ours is named ``HEAD``), else the path being merged."""
    names = sorted(
        v for k, v in os.environ.items() if k.startswith("GITHEAD_") and v and v != "HEAD"
    )
    if len(names) == 1:
        return names[0]
    return pathname


def _write_over(path: Path, data: bytes) -> None:
    """Replace the file ``path`` by ``data`` at once (a temporary file beside it, synced,
    then renamed), keeping its mode."""
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@click.command("merge-driver")
@click.argument("ancestor", type=_file)
@click.argument("current", type=_file)
@click.argument("other", type=_file)
@click.argument("pathname", required=False)
def merge_driver(ancestor: Path, current: Path, other: Path, pathname: str | None) -> None:
    """Merge three versions of a session file for git (result in CURRENT; exit 1 on conflict).

    git runs it as `jsonltape git merge-driver %O %A %B %P` (set up by `jsonltape git
    install`): ANCESTOR is the common version, CURRENT ours (the result is written there),
    OTHER theirs, PATHNAME the file's path in the repository. One side appended: the result
    is that side, byte for byte. Both appended: ours as it was, then the events of theirs
    that ours does not hold byte for byte, recorded as a branch (a branch/start receipt and
    branch/event lines, off the surface) that `jsonltape messages PATH --branch SEQ` shows and
    `jsonltape git adopt` makes current. A side that is torn, corrupt (a malformed branch
    record included), not a session, or lacks a line of ANCESTOR (a rewritten history, or
    the parent of a cherry-picked commit as ANCESTOR: pick the commits before it too) is a
    conflict: CURRENT is left as it was.
    """
    from ..git._merge import Conflict, merge_files

    name = pathname or str(current)
    got = merge_files(ancestor, current, other, source=_source(pathname))
    if isinstance(got, Conflict):
        click.echo(one_line(f"jsonltape: error: merge {name}: conflict: {got.line}"), err=True)
        raise SystemExit(1)
    if got.outcome == "ours":
        return
    _write_over(current, got.result)
    if got.outcome == "branch":
        click.echo(
            one_line(
                f"jsonltape: merge {name}: both sides appended; theirs ({got.recorded} events) "
                f"recorded as branch {got.receipt}: `jsonltape messages {name} --branch "
                f"{got.receipt}` shows it, `jsonltape git adopt {name} --branch "
                f"{got.receipt}` makes it current"
            ),
            err=True,
        )


@click.command()
@click.argument("path", type=_file)
@click.option(
    "--branch",
    "branch",
    type=SEQ,
    required=True,
    help="The seq of the branch/start receipt (the merge driver names it).",
)
@click.option("--wait", type=SECONDS, default=0.0, help="Seconds to wait for another writer.")
def adopt(path: Path, branch: int, wait: float) -> None:
    """Make the version a merge recorded as branch SEQ of PATH the current one (appends only).

    Our messages after the fork point are retracted (they stay in the file and can be
    restored) and theirs are appended, each keyed by its origin; adopting again adds nothing.
    """
    from ..git._branch import adopt as run_adopt

    done = run_adopt(path, branch, lock_timeout=wait)
    if not done.retracted and not done.appended:
        click.echo(f"branch {branch} is current already; nothing written")
        return
    click.echo(
        f"adopted branch {branch}: {len(done.retracted)} retracts, "
        f"{len(done.appended)} messages appended"
        + (f" (seqs {done.appended[0]}..{done.appended[-1]})" if done.appended else "")
    )
