"""The single writer of a session: lock, create, append, durability and checkpoints.

Protocol (the spec's "writer" section, kept in this order on purpose):

1. Lock the session for the writer's lifetime: its lock file (``.<name>.lock`` beside it)
   and an flock on the session file itself, which deleting the lock file cannot undo (see
   ``_lock``). Arguments are checked before either is taken.
2. Create a session atomically: header into an owner-only temp file, fsync, ``link`` to the
   final name (never clobbers), fsync the directory. A *staged* session (``_staged``) is
   written whole in its temp file, flocked there, and gets its name at its first flush,
   after one fsync; it has no lock file. Opening an existing session reads only
   its tail: a torn tail is cut into a sidecar, a turn left open by a crash is closed. Both
   live in ``_session``, which hands the Tape its ``WriterState``.
3. Each append goes through one pipeline (``_prepare``: envelope, lossless gate, shape,
   frame; then the surface fold once one is kept), is encoded once, and is written with one
   ``write`` (a batch too).
4. ``flush``: sync, and only after it returned, a ``session/flush`` checkpoint line whose
   ``data.offset`` is its own offset. An fsync error poisons the writer for good.
5. ``close``: flush, then a final checkpoint with ``closed: true``, synced. That marker is how
   a later writer tells a deliberate open turn from one a crash left behind.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal

import msgspec

from . import _agent, _framing, _fs
from ._agent import TurnHandle
from ._commit import Committer
from ._lines import decode as decode_line
from ._prepare import check_key, now_ms, prepare_event, spec_of
from ._session import (
    Opened,
    check_header_args,
    check_options,
    create_session,
    lock_path,
    open_session,
    storage_error,
)
from ._staged import remove_stale_temps
from ._surface import SurfaceFold
from ._together import at_once
from .errors import InvalidArgumentError, InvalidEventError, JsonltapeError, SessionExistsError
from .events import Event, ParentRef, Replace, Retract

__all__ = [
    "Durability",
    "Tape",
    "TurnHandle",
    "close_all",
    "lock_path",
    "open",
    "remove_stale_temps",
]

Durability = Literal["always", "group", "manual"]
_decoder = msgspec.json.Decoder(Event)
#: Tapes still open, closed (flushed) at interpreter exit like Python's own files are: a script
#: that forgets close() must not lose its last group-commit window.
_OPEN: weakref.WeakSet[Tape] = weakref.WeakSet()


def _forget_parent_tapes() -> None:
    # A forked child inherits the parent's tapes (and their fds) but not its lock or its
    # thread: it must never write, flush or close them, least of all at its own exit. Its
    # copies of the descriptors are closed (never unlocked: the parent's lock is the same).
    for tape in list(_OPEN):
        tape._forget_in_child()
    _OPEN.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_tapes)


@atexit.register
def _close_open_tapes() -> None:
    for tape in list(_OPEN):
        try:
            tape.close()
        except Exception:
            pass


def open(
    path: str | os.PathLike[str],
    *,
    create: bool | Literal["if-missing"] = False,
    session_id: str | None = None,
    title: str | None = None,
    cwd: str | None = None,
    agent: str | None = None,
    parent: ParentRef | None = None,
    meta: Mapping[str, Any] | None = None,
    created: int | None = None,
    durability: Durability = "group",
    group_events: int = 1000,
    group_ms: float = 50.0,
    lock_timeout: float = 0.0,
    staged: bool = False,
) -> Tape:
    """Open a session for writing and return its :class:`Tape` (a context manager).

    :param create: ``False`` opens an existing session; ``True`` creates a new one and fails if
        the file exists; ``"if-missing"`` does whichever applies.
    :param durability: ``"group"`` (default) flushes every ``group_events`` events or
        ``group_ms`` milliseconds, whichever comes first; ``"always"`` flushes after every
        append; ``"manual"`` only on :meth:`Tape.flush`. Only a returned flush is a promise.
    :param lock_timeout: seconds to wait for another writer (finite, >= 0); 0 fails at once
        with :class:`LockedError`. A lock file that cannot be created is a
        :class:`StorageError`; wrong arguments are :class:`InvalidEventError` naming them, and
        nothing is created or locked then.
    :param created: the header's creation time in epoch ms (default now; an import passes the
        source session's).
    :param staged: with ``create=True`` and ``durability="manual"``: write the new session
        under a temporary name beside ``path``; it gets its name, every event in it and synced
        once, at :meth:`Tape.close` (or a first :meth:`Tape.flush`). Until then nobody sees
        it (:attr:`Tape.durable_seq` is -1), and a crash leaves only the temp file (see
        :mod:`jsonltape._staged`). For sessions written in one go, many at a time (an
        import): one sync each instead of four, no lock file, and :func:`close_all` syncs
        their directory once.
    """
    p = _fs.session_path(path)
    check_options(create, durability, group_events, group_ms, lock_timeout, staged)
    if create:
        check_header_args(title=title, cwd=cwd, agent=agent, parent=parent, meta=meta)
    if create == "if-missing" and os.path.lexists(p):
        create = False
    if create:
        try:
            return Tape(
                create_session(
                    p,
                    session_id=session_id,
                    title=title,
                    cwd=cwd,
                    agent=agent,
                    parent=parent,
                    meta=meta,
                    created=created,
                    durability=durability,
                    group_events=group_events,
                    group_ms=group_ms,
                    lock_timeout=lock_timeout,
                    staged=staged,
                )
            )
        except SessionExistsError:
            if create is True:
                raise
            # "if-missing" and another writer created it meanwhile: open what it created.
    return Tape(
        open_session(
            p,
            durability=durability,
            group_events=group_events,
            group_ms=group_ms,
            lock_timeout=lock_timeout,
        )
    )


class Tape:
    """An open session with its writer lock held. Thread-safe; one per session at a time.

    A facade over one :class:`~jsonltape._commit.WriterState` (``_s``): appends run the one
    pipeline (:func:`jsonltape._prepare.prepare_event`, then the surface fold when one is
    kept), and a :class:`~jsonltape._commit.Committer` (``_c``) writes, syncs and checkpoints.
    Made by :func:`open` from what :mod:`jsonltape._session` created or opened.
    """

    def __init__(self, opened: Opened) -> None:
        self.path = opened.state.path
        self.header = opened.header
        self._s = opened.state
        self._c = Committer(self._s)
        self._owner_pid = os.getpid()
        self._opened_from = opened.scan
        _OPEN.add(self)
        #: Synthetic events this writer appended on open to close a crashed turn.
        self.closers: list[Event] = opened.closers
        #: Where opening saved a torn tail it cut off, if it did.
        self.sidecar: Path | None = opened.sidecar

    # -- properties ----------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def header_crc(self) -> str:
        """The CRC of the header line (what a child session's ``parent.crc`` names)."""
        return decode_line(self._s.header_line).crc

    @property
    def next_seq(self) -> int:
        """The seq the next appended event will get."""
        return self._s.next_seq

    @property
    def durable_seq(self) -> int:
        """Every event with a seq up to this one is durable (covered by a checkpoint)."""
        return self._s.durable_seq

    @property
    def open_turn(self) -> int | None:
        """Seq of the ``turn/start`` of the turn currently open, if any."""
        turn = self._s.turn
        return turn.seq if turn is not None else None

    @property
    def closed(self) -> bool:
        return self._s.closed

    @property
    def staged(self) -> bool:
        """True while a staged session has no name yet (see :func:`open`)."""
        return self._s.staged is not None

    # -- appending -----------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: Mapping[str, Any] | None = None,
        *,
        surface: Any = None,
        sources: Iterable[int] | None = None,
        key: str | None = None,
        ignorable: bool | None = None,
        time: int | None = None,
    ) -> Event:
        """Validate and append one event; return it as written (with seq, time and crc).

        An event whose ``key`` is already in the session is not written again: the existing
        event is returned (safe retries). ``time`` (epoch ms) defaults to now; importers pass
        the source's time. Raises :class:`InvalidEventError` and writes nothing if the event
        breaks a rule.
        """
        if key is not None:
            item = {
                "type": type,
                "data": data,
                "surface": surface,
                "sources": sources,
                "key": key,
                "ignorable": ignorable,
                "time": time,
            }
            return self.append_batch([item])[0]
        s = self._s
        with s.mutex:
            if s.closed or s.failed is not None:
                self._c.check_usable()
            due = s.ckpt_due is not None  # a due checkpoint takes the next seq first
            try:
                line, event = prepare_event(
                    type,
                    data,
                    surface,
                    sources,
                    None,
                    ignorable,
                    s.next_seq + due,
                    now_ms() if time is None else time,
                )
                # Only a given surface can be a replace or retract; any other append just
                # keeps an already folded surface current.
                if s.surface is not None or (
                    surface is not None and isinstance(event.surface, (Replace, Retract))
                ):
                    fold = s.surface if s.surface is not None else self._fold_surface([])
                    fold.apply(event)  # validates first: on error the fold is unchanged
                    s.surface = fold
            except JsonltapeError as exc:
                if exc.path is None:
                    raise exc.at(path=self.path) from exc.__cause__
                raise
            if due:
                self._c.emit_due()
            self._c.commit_one(line, event)
            return event

    def append_batch(self, items: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Append several events at once: all are validated before any is written, and they
        reach the file in one write.

        Each item is a mapping with ``type`` and optional ``data``, ``surface``, ``sources``,
        ``key``, ``ignorable`` and ``time``. Items whose key already exists return the existing
        event.
        """
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
            raise InvalidEventError(
                f"append_batch takes a list of event mappings, not {type(items).__name__}",
                path=self.path,
            )
        s = self._s
        with s.mutex:
            self._c.check_usable()
            now = now_ms()
            prepared: list[tuple[bytes, Event]] = []
            results: list[Event | None] = []
            batch_keys: set[str] = set()
            due = s.ckpt_due is not None  # a due checkpoint takes the next seq first
            seq = s.next_seq + due
            surface = s.surface.clone() if s.surface is not None else None
            for i, item in enumerate(items):
                try:
                    spec = spec_of(item)
                    key = spec["key"]
                    if key is not None:
                        check_key(key)
                        if key in batch_keys:
                            raise InvalidEventError(
                                f"key {key!r} appears twice in this batch", field="$.key"
                            )
                        batch_keys.add(key)
                        existing = self._existing(key, spec)
                        if existing is not None:
                            results.append(existing)
                            continue
                    line = prepare_event(
                        spec["type"],
                        spec["data"],
                        spec["surface"],
                        spec["sources"],
                        key,
                        spec["ignorable"],
                        seq,
                        now if spec["time"] is None else spec["time"],
                    )
                    if surface is None and isinstance(line[1].surface, (Replace, Retract)):
                        surface = self._fold_surface(prepared)
                    if surface is not None:
                        surface.apply(line[1])
                except JsonltapeError as exc:
                    path = self.path if exc.path is None else exc.path
                    raise exc.at(batch_item=i, path=path) from exc.__cause__
                prepared.append(line)
                results.append(None)
                seq += 1
            if prepared:
                if due:
                    self._c.emit_due()
                self._c.stage(prepared)
                s.surface = surface
                self._c.after_append()
            fresh = iter(ev for _line, ev in prepared)
            return [r if r is not None else next(fresh) for r in results]

    def _fold_surface(self, pending: list[tuple[bytes, Event]]) -> SurfaceFold:
        """Fold the surface of everything written so far plus ``pending`` (this batch)."""
        self._c.drain()
        fold = SurfaceFold()
        for _off, raw in _framing.iter_lines(self._s.fd, 0, self._s.size):
            fold.apply(decode_line(raw))
        for _line, event in pending:
            fold.apply(event)
        return fold

    def _existing(self, key: str, spec: dict[str, Any]) -> Event | None:
        s = self._s
        if s.keys is None:
            self._c.drain()
            s.keys = _load_keys(s.fd, s.size)
        off = s.keys.get(key)
        if off is None:
            return None
        self._c.drain()
        event = decode_line(_read_line(s.fd, off))
        data = spec["data"] if spec["data"] is not None else {}
        if event.type != spec["type"] or event.data != data:
            raise InvalidEventError(
                f"key {key!r} is already used by seq {event.seq} ({event.type}) with different "
                "data",
                field="$.key",
            )
        return event

    # -- conveniences for agent authors (they all append through append) --------------------

    def user(
        self, content: str | list[dict[str, Any]], *, id: str | None = None, key: str | None = None
    ) -> Event:
        """Append a ``user/message`` with text or a list of content parts."""
        return self.append("user/message", _agent.user_data(content, id, self.path), key=key)

    def assistant(
        self,
        content: str | list[dict[str, Any]] = "",
        *,
        tool_calls: Iterable[Mapping[str, Any]] = (),
        model: str | None = None,
        usage: Mapping[str, Any] | None = None,
        id: str | None = None,
        key: str | None = None,
    ) -> Event:
        """Append an ``assistant/message``; ``tool_calls`` are ``{id?, name, arguments}``."""
        s = self._s
        turn = s.turn.seq if s.turn is not None else None
        data = _agent.assistant_data(content, tool_calls, model, usage, id, turn, s.step, self.path)
        return self.append("assistant/message", data, key=key)

    def tool_call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        key: str | None = None,
    ) -> Event:
        """Record that a tool call is about to run (``tool/call``), before running it."""
        s = self._s
        turn = s.turn.seq if s.turn is not None else None
        data = _agent.tool_call_data(name, arguments, call_id, turn, s.step)
        return self.append("tool/call", data, key=key)

    def tool_result(
        self, call_id: str, result: Any, *, is_error: bool = False, key: str | None = None
    ) -> Event:
        """Append the model-visible ``tool/result`` of call ``call_id``."""
        data = _agent.tool_result_data(call_id, result, is_error, self.path)
        return self.append("tool/result", data, key=key)

    def turn(self, input: Any = None) -> AbstractContextManager[TurnHandle]:
        """``turn/start`` now, ``turn/end`` when the block ends (``error`` if it raised)."""
        return _agent.turn(self, input)

    def step(self) -> AbstractContextManager[int]:
        """``step/start`` now and ``step/end`` when the block ends; yields the step's seq."""
        return _agent.step(self)

    # -- durability and lifetime ---------------------------------------------------------

    def flush(self) -> int:
        """Make every appended event durable and checkpoint it; return the durable seq."""
        with self._s.mutex:
            self._c.check_usable()
            self._c.flush()
            return self._s.durable_seq

    def drain(self) -> None:
        """Write queued events to the file now, without waiting for them to be durable.

        Readers in other processes see them at once; only :meth:`flush` makes them durable.
        """
        with self._s.mutex:
            self._c.check_usable()
            self._c.drain()

    @contextmanager
    def locked(self) -> Iterator[Tape]:
        """Hold the writer's in-process lock: no other thread appends until the block ends.

        For read-then-append sequences (fold, compact) whose appends name seqs they computed.
        Other processes are already kept out by the session's file lock.
        """
        with self._s.mutex:
            yield self

    def close(self) -> None:
        """Flush, release the lock. Idempotent.

        With a turn still open, the final checkpoint says ``closed: true`` so that the next
        writer leaves the turn open instead of closing it as interrupted.
        """
        s = self._s
        with s.mutex:
            if s.closed:
                return
            try:
                if s.failed is None:
                    # An open turn is deliberate: say so, or the next writer would take it
                    # for a crash and close it as interrupted.
                    marker = s.turn is not None and not self._ends_closed()
                    self._c.flush(marker=marker, final=True)
            finally:
                self._end()
        if s.flusher is not None and s.flusher is not threading.current_thread():
            s.flusher.join()

    def discard(self) -> None:
        """Close a staged session that has no name yet without giving it one: its temp file is
        removed and nothing of it is saved (a writer that gave up on what it was creating).
        Any other tape raises :class:`InvalidArgumentError` and stays as it was."""
        s = self._s
        with s.mutex:
            if s.staged is None or s.closed:
                raise InvalidArgumentError(
                    "only a staged session that has no name yet can be discarded",
                    field="staged",
                    path=self.path,
                )
            s.closed_why = "the tape was discarded"
            self._end()  # the hold removes the temp file: the session never had a name

    def _end(self) -> None:
        """Mark the tape closed and let go of its file and its lock (the mutex held)."""
        s = self._s
        s.closed = True
        _OPEN.discard(self)
        s.cond.notify_all()
        try:
            os.close(s.fd)
        finally:
            s.lock.release()

    def _forget_in_child(self) -> None:
        """In a forked child: refuse every further call and close this process's copies of
        the descriptors, without flushing or unlocking (they are the parent's)."""
        s = self._s
        s.closed = True
        s.closed_why = (
            f"this tape was opened by process {self._owner_pid}, and this is a forked child; "
            "open the session in the child itself (after the parent closed it)"
        )
        s.lock.forget()
        try:
            os.close(s.fd)
        except OSError:
            pass

    def _ends_closed(self) -> bool:
        """True when nothing was written since a closing checkpoint (keeps repair idempotent)."""
        if self._s.pending:
            return False
        scan = self._opened_from
        return scan is not None and scan.closed and scan.committed == self._s.size

    def __enter__(self) -> Tape:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Tape {str(self.path)!r} id={self.session_id} next_seq={self._s.next_seq}>"


def close_all(tapes: Iterable[Tape]) -> None:
    """Close several tapes, as :meth:`Tape.close` each (every one flushed and synced, then its
    final checkpoint synced), several at once (:func:`jsonltape._together.at_once`: their
    syncs share journal commits); the staged ones' directories are synced once each, after
    all of them have their names. Every tape is closed even when one fails; the first error
    is raised once all have returned."""
    tapes = list(tapes)
    staged = [t for t in tapes if t._s.staged is not None and not t._s.closed]
    for tape in staged:
        tape._s.sync_dir = False
    failed = [r for r in at_once([tape.close for tape in tapes]) if isinstance(r, Exception)]
    named = [t for t in staged if t._s.staged is None]
    for directory in dict.fromkeys(t.path.parent for t in named):
        try:
            _fs.fsync_dir(directory)
        except OSError as exc:
            failed.append(storage_error(exc, "cannot sync the new sessions' directory", directory))
            for tape in named:
                if tape.path.parent == directory:
                    tape._s.durable_seq = -1  # their names may not survive a power cut
    if failed:
        raise failed[0]


def _load_keys(fd: int, end: int) -> dict[str, int]:
    """Every key in the session and the offset of its line (the first, if repeated)."""
    keys: dict[str, int] = {}
    for off, raw in _framing.iter_lines(fd, 0, end):
        if b'"key":' in raw:
            event = _decoder.decode(raw)
            if event.key is not None:
                keys.setdefault(event.key, off)
    return keys


def _read_line(fd: int, off: int) -> bytes:
    for _off, raw in _framing.iter_lines(fd, off):
        return raw
    raise JsonltapeError("line vanished", offset=off)  # pragma: no cover
