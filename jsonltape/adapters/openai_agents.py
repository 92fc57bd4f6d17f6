"""An OpenAI Agents SDK session (``agents.memory.SessionABC``) stored as a jsonltape session.

::

    from agents import Agent, Runner
    from jsonltape.adapters.openai_agents import JsonltapeSession

    session = JsonltapeSession("support-42", root="sessions")   # sessions/support-42.jsonl
    result = await Runner.run(agent, "hello", session=session)

One file per session id under ``root`` (``<root>/<session_id>.jsonl``, created 0600 by the first
``add_items`` that succeeds: a refused one leaves no file). Each item is one model-visible event
keeping the item verbatim in ``data.openai_agents.items`` (the consecutive items of one model
response share one ``assistant/message``; :mod:`._openai_agents_map`). ``get_items`` reads the
fold's current surface; ``pop_item`` and ``clear_session`` append ``surface/retract`` events,
or a revision of a response's message without its last item (nothing is removed from the file).

Durability: when ``add_items``, ``pop_item`` or ``clear_session`` returns, what it did is on
disk (synced and checkpointed); a crash or SIGKILL after that loses none of it. One that raises
wrote nothing, unless the process died in the middle of its write: then a prefix of its items
(whole items, never a torn one) may be there after reopening. The first ``add_items`` of a
session is all or nothing even then: its file appears only once the items are durable.

Concurrency, as the SDK's ``SQLiteSession`` on a file: every operation runs in a worker thread
(the event loop is never blocked on a lock, a write or an fsync), and operations on one
session are serialized, between session objects in one process (a process-wide lock per file)
and between processes (the session's writer lock, held for one operation only and waited for
up to ``lock_timeout`` seconds; after that, :class:`jsonltape.LockedError`). A mutation the
caller cancels still completes before the cancellation is raised, as ``SQLiteSession`` does.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)
from agents.version import __version__ as _sdk_version

from .. import writer
from ..errors import SurfaceError
from ..events import Replace, Retract
from ..fold import Node, fold_file
from ..ids import validate_session_id
from ._first_write import write
from ._openai_agents_map import events_of, items_of

__all__ = ["DEFAULT_ROOT", "JsonltapeSession"]

#: Where sessions live by default (relative to the working directory): the place the git
#: integration's default pattern ``**/.jsonltape/sessions/**/*.jsonl`` covers.
DEFAULT_ROOT = ".jsonltape/sessions"
_T = TypeVar("_T")
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(str(path), threading.Lock())


class JsonltapeSession(SessionABC):
    """Conversation history of one Agents SDK session, in ``<root>/<session_id>.jsonl``.

    :param session_id: the SDK's session id, also the jsonltape session id (1-128 characters
        of ``A-Z a-z 0-9 . _ -``, starting with a letter or digit; else
        :class:`jsonltape.InvalidSessionIdError`).
    :param root: the directory of the session files (created 0700 when missing).
    :param session_settings: as ``SQLiteSession``'s: ``limit`` is the default of ``get_items``.
    :param lock_timeout: seconds to wait for another process's operation on this session.
    """

    def __init__(
        self,
        session_id: str,
        root: str | os.PathLike[str] = DEFAULT_ROOT,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        lock_timeout: float = 5.0,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.path = Path(root).expanduser().absolute() / f"{session_id}.jsonl"
        self.lock_timeout = lock_timeout
        self._lock = _lock_for(self.path)

    # -- the SessionABC interface ---------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The current items, oldest first; with ``limit`` N > 0 the latest N, 0 none, and a
        negative limit all of them (``SQLiteSession``'s semantics)."""
        n = resolve_session_limit(limit, self.session_settings)
        return await asyncio.to_thread(self._locked, lambda: self._items(n))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` as one batch; returns once they are durable. An item that cannot
        be stored (not a JSON object, beyond the format's limits) raises
        :class:`jsonltape.InvalidEventError` naming it, and none of the batch is written."""
        if not items:
            return
        events = events_of(items)
        await _complete(asyncio.to_thread(self._write, lambda tape: tape.append_batch(events)))

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the latest item and return it (None when the session is empty)."""
        return await _complete(asyncio.to_thread(self._write, self._pop, create=False))

    async def clear_session(self) -> None:
        """Retract every item (the events stay in the file)."""
        await _complete(asyncio.to_thread(self._write, self._clear, create=False))

    # -- in the worker thread ---------------------------------------------------------------

    def _locked(self, fn: Callable[[], _T]) -> _T:
        with self._lock:
            return fn()

    def _write(self, fn: Callable[[writer.Tape], Any], create: bool = True) -> Any:
        """Run ``fn`` with the session open for writing, then close it (flush, checkpoint); a
        session created here appears only if ``fn`` returns (``_first_write``)."""
        with self._lock:
            if not create and not os.path.lexists(self.path):
                return None
            return write(
                self.path,
                fn,
                session_id=self.session_id,
                agent=f"openai-agents/{_sdk_version}",
                lock_timeout=self.lock_timeout,
            )

    def _nodes(self) -> list[Node]:
        if not os.path.lexists(self.path):
            return []
        return fold_file(self.path).current()

    def _node_items(self, node: Node) -> list[dict[str, Any]]:
        return items_of(node.type, json.loads(node.data), node.seq, str(self.path))

    def _items(self, limit: int | None) -> list[Any]:
        nodes = self._nodes()
        if limit is None or limit < 0:
            return [item for node in nodes for item in self._node_items(node)]
        # Only the nodes the latest ``limit`` items come from are read back.
        tail: list[Any] = []
        for node in reversed(nodes):
            if len(tail) >= limit:
                break
            tail[:0] = self._node_items(node)
        return tail[len(tail) - limit :] if limit else []

    def _pop(self, tape: writer.Tape) -> dict[str, Any] | None:
        fold = fold_file(self.path)
        nodes = fold.current()
        if not nodes:
            return None
        last = nodes[-1]
        data = json.loads(last.data)
        items = items_of(last.type, data, last.seq, str(self.path))
        if len(items) > 1:  # one of a response's items: revise its message without it
            (event,) = events_of(items[:-1])
            event["data"]["message"]["id"] = data["message"]["id"]  # a revision keeps its id
            op = Replace(start=last.seq, end=last.seq)
            gone = fold.surface.removed_by(event["type"], op, None, event["data"])
            replace = {"op": "replace", "start": last.seq, "end": last.seq}
            tape.append_batch([{**event, "surface": replace, "sources": gone}])
            return items[-1]
        # Retracting a tool result alone is refused while its call stays (spec §8.7.2): take
        # the range back to its call, and append the nodes in between again (a restore, §8.7.3).
        # (Retracting everything is always allowed: no call stays behind.)
        start = next(i for i in range(len(nodes) - 1, -1, -1) if self._can_retract(fold, nodes[i:]))
        batch: list[dict[str, Any]] = [_retract(nodes[start].seq, last.seq, "pop_item")]
        batch += [
            {"type": n.type, "data": json.loads(n.data), "sources": [n.seq]}
            for n in nodes[start:-1]
        ]
        tape.append_batch(batch)
        return items[-1]

    @staticmethod
    def _can_retract(fold: Any, tail: list[Node]) -> bool:
        """True when retracting ``tail`` removes exactly it: not refused (a result whose call
        stays), and no earlier node goes along (a result placed before its call)."""
        try:
            removed = fold.surface.removed_by(
                "surface/retract", Retract(start=tail[0].seq, end=tail[-1].seq)
            )
        except SurfaceError:
            return False
        return set(removed) <= {n.seq for n in tail}

    def _clear(self, tape: writer.Tape) -> None:
        nodes = fold_file(self.path).current()
        if nodes:
            tape.append_batch([_retract(nodes[0].seq, nodes[-1].seq, "clear_session")])


def _retract(start: int, end: int, reason: str) -> dict[str, Any]:
    return {
        "type": "surface/retract",
        "data": {"reason": f"openai-agents:{reason}"},
        "surface": {"op": "retract", "start": start, "end": end},
    }


async def _complete(awaitable: Awaitable[_T]) -> _T:
    """Await a mutation to its end even if the caller is cancelled meanwhile (the thread
    cannot be stopped); then raise the cancellation. ``SQLiteSession`` does the same."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved
        raise cancelled
    return task.result()
