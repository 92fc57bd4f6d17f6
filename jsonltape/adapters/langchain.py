"""jsonltape as a LangChain chat message history (``pip install 'jsonltape[langchain]'``).

::

    from jsonltape.adapters.langchain import JsonltapeChatMessageHistory

    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: JsonltapeChatMessageHistory.for_session("chats", session_id),
    )

:class:`JsonltapeChatMessageHistory` is a ``BaseChatMessageHistory`` over one session file.
Each :meth:`~JsonltapeChatMessageHistory.add_messages` call is one batch (all or nothing, in
one write) and is durable when it returns; :meth:`~JsonltapeChatMessageHistory.clear`
retracts everything (nothing is removed from the file); :attr:`messages` is the fold's
current surface, each message rebuilt from the verbatim copy LangChain serialized, so it
equals what was added. The mapping of message kinds to events is in ``_langchain_map``.

Concurrency is SQLite's: the history takes the session's writer lock for each write only,
waiting up to ``lock_timeout`` seconds for another writer (another instance, thread or
process) and failing with :class:`~jsonltape.LockedError` after that. Writes never
interleave; readers take no lock and see every acknowledged write.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from .. import reader, writer
from .._fs import session_path
from .._session import check_options
from ..errors import InvalidSessionIdError, SurfaceError
from ..fold import fold_file
from ..ids import validate_session_id
from ._first_write import write
from ._langchain_map import CLEAR, EXTENSION, from_event, to_event

__all__ = ["JsonltapeChatMessageHistory"]

_json = msgspec.json.Decoder()
_AGENT = "jsonltape.adapters.langchain"


class JsonltapeChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat message history stored in the jsonltape session at ``path``.

    The file is created (owner-only) by the first write that succeeds (a refused one leaves
    no file); until then :attr:`messages` is empty. ``session_id`` and ``title`` go into the
    header of a file this history creates; the session id defaults to the file name without
    ``.jsonl`` when that is a valid id.

    :param lock_timeout: seconds a write waits for another writer of the session.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        title: str | None = None,
        lock_timeout: float = 10.0,
    ) -> None:
        super().__init__()
        self.path: Path = session_path(path)
        if session_id is not None:
            validate_session_id(session_id)
        else:
            stem = self.path.name.removesuffix(".jsonl")
            try:
                session_id = validate_session_id(stem)
            except InvalidSessionIdError:  # a file name that is no id: the writer makes one
                session_id = None
        self.session_id = session_id
        self.title = title
        check_options(False, "manual", 1, 1.0, lock_timeout)
        self.lock_timeout = lock_timeout

    @classmethod
    def for_session(
        cls, root: str | os.PathLike[str], session_id: str, **kwargs: Any
    ) -> JsonltapeChatMessageHistory:
        """The history of ``session_id`` in ``root/<session_id>.jsonl``.

        For ``get_session_history`` factories, whose ids come from request configuration: the
        id is validated (``jsonltape.ids``), so it cannot name a path outside ``root``.
        """
        validate_session_id(session_id)
        return cls(Path(root) / f"{session_id}.jsonl", session_id=session_id, **kwargs)

    # -- BaseChatMessageHistory -------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The current history: the fold's surface plus the extension messages, in order."""
        if not os.path.lexists(self.path):
            return []
        fold = fold_file(self.path)
        extension = self._extension_messages(fold.last_seq)
        out: list[BaseMessage] = []
        path = str(self.path)
        k = 0  # extension messages go before the first node logged after them
        for node in fold.current():
            while k < len(extension) and extension[k][0] < node.seq:
                out.append(extension[k][1])
                k += 1
            data = _json.decode(node.data)
            out.append(from_event(node.type, data, path, node.seq))
        out.extend(message for _seq, message in extension[k:])
        return out

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` as one batch; durable (fsynced) when this returns. A batch that
        cannot be stored raises and writes nothing (nor creates the file)."""
        items = [to_event(m, i) for i, m in enumerate(messages)]
        if not items:
            return
        write(
            self.path,
            lambda tape: tape.append_batch(items),
            session_id=self.session_id,
            title=self.title,
            agent=_AGENT,
            lock_timeout=self.lock_timeout,
        )

    def clear(self) -> None:
        """Retract every message (one ``surface/retract`` and an ``x-langchain/clear``
        marker for extension messages); the file keeps them. Durable when this returns.

        A fork's inherited messages are its parent's: clearing a fork that has some is
        refused (:class:`~jsonltape.SurfaceError`) rather than done in part.
        """
        if not os.path.lexists(self.path):
            return
        with self._open() as tape:
            tape.drain()  # what opening wrote (closers of a crashed turn) is folded too
            fold = fold_file(self.path)  # under the lock: nothing moves meanwhile
            nodes = fold.own_nodes()
            inherited = len(fold.current()) - len(nodes)
            if inherited:
                raise SurfaceError(
                    f"this session is a fork: its {inherited} inherited messages belong to the "
                    "parent session and cannot be retracted here; nothing was cleared",
                    path=self.path,
                )
            items: list[dict[str, Any]] = []
            if nodes:
                items.append(
                    {
                        "type": "surface/retract",
                        "data": {"reason": "clear"},
                        "surface": {"op": "retract", "start": nodes[0].seq, "end": nodes[-1].seq},
                    }
                )
            items.append({"type": CLEAR, "data": {}, "ignorable": True})
            tape.append_batch(items)

    # -- internals --------------------------------------------------------------------------

    def _open(self) -> writer.Tape:
        # "manual": close() flushes and fsyncs before the lock is released, which is the
        # promise clear makes; nothing is synced twice.
        return writer.open(self.path, durability="manual", lock_timeout=self.lock_timeout)

    def _extension_messages(self, last_seq: int) -> list[tuple[int, BaseMessage]]:
        """The ``x-langchain/message`` events after the last clear, through ``last_seq``."""
        found: list[tuple[int, BaseMessage]] = []
        path = str(self.path)
        for event in reader.read(self.path):
            if event.seq > last_seq:
                break
            if event.type == EXTENSION:
                found.append((event.seq, from_event(event.type, event.data, path, event.seq)))
            elif event.type == CLEAR:
                found.clear()
        return found

    def __repr__(self) -> str:
        return f"JsonltapeChatMessageHistory({str(self.path)!r})"
