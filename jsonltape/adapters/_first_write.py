"""One write to an adapter's session, such that a refused first write leaves no file.

The writer creates a session (its header) before any event is offered, so a framework's first
``add_items``/``add_messages``/``append_messages`` that was refused (an item that cannot be
stored) would leave a session holding only a header, and its lock file, although the call
wrote nothing. So a session that does not exist yet is built aside: in a private directory
beside it (``.<name>.<random>.tmp/``, 0700; the git integration's ignore pattern
``.*.jsonl.*.tmp`` and the index's walk, which skips dot names, both leave it alone) the whole
operation runs on a new session of that name; once it succeeded and is durable (the tape is
closed: synced and checkpointed), the file gets its real name with a hard link, which never
replaces a file, and the directory is synced. A refused operation removes the private directory
with all in it, so nothing is left; if another writer created the session meanwhile, the
operation runs again on that one (its events are the same: a valid batch is valid there too).

The session file therefore appears complete or not at all, even when the process is killed during
its first write; such a kill may leave the private directory behind (never anything at the
session's name).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .. import _fs, writer
from .._session import check_header_args, check_lock_timeout, storage_error
from ..errors import JsonltapeError, SessionExistsError
from ..ids import validate_session_id

__all__ = ["write"]

_T = TypeVar("_T")


def write(
    path: Path,
    fn: Callable[[writer.Tape], _T],
    *,
    session_id: str | None = None,
    title: str | None = None,
    agent: str | None = None,
    lock_timeout: float,
) -> _T:
    """Run ``fn`` on the session at ``path`` opened for writing (``durability="manual"``), then
    close it (flushed and synced); a session that does not exist yet is created only if ``fn``
    returns. ``session_id``, ``title`` and ``agent`` go into the header of a session made here.
    """
    if os.path.lexists(path):
        return _on(path, fn, lock_timeout)
    # What the writer would refuse, refused before anything is made.
    if session_id is not None:
        validate_session_id(session_id)
    check_header_args(title=title, cwd=None, agent=agent, parent=None, meta=None)
    check_lock_timeout(lock_timeout)
    try:
        _fs.make_dirs(path.parent)
    except OSError as exc:
        raise storage_error(exc, "cannot create the session's directory", path) from exc
    _fs.check_dir(path.parent)
    try:
        aside = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as exc:
        raise storage_error(exc, "cannot create a temporary directory beside it", path) from exc
    try:
        built = aside / path.name
        try:
            tape = writer.open(
                built,
                create=True,
                session_id=session_id,
                title=title,
                agent=agent,
                durability="manual",  # one flush, at close
                lock_timeout=lock_timeout,
            )
            with tape:
                result = fn(tape)
        except JsonltapeError as exc:
            if exc.path == str(built):  # the caller knows the session by its own name
                raise exc.at(path=path) from exc.__cause__
            raise
        try:
            _fs.publish(built, path)
        except SessionExistsError:  # another writer created it meanwhile: write there
            return _on(path, fn, lock_timeout)
        except OSError as exc:
            raise storage_error(exc, "cannot give the new session its name", path) from exc
        _fs.fsync_dir(path.parent)
        return result
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def _on(path: Path, fn: Callable[[writer.Tape], _T], lock_timeout: float) -> _T:
    tape = writer.open(path, durability="manual", lock_timeout=lock_timeout)
    with tape:
        return fn(tape)
