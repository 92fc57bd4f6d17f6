"""The writers of one import: the target sessions of one source file, each created once its
header is fixed (several at once), the mapped specs resolved to seqs and appended in batches,
and the sessions closed together (see :mod:`._engine`, which drives it)."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from ..errors import InvalidEventError
from ..events import ParentRef
from ..writer import Tape, close_all, remove_stale_temps
from ..writer import open as open_tape
from ._base import MAPPER_VERSION, Mapper, Spec, Target
from ._discover import SourceError
from ._inputs import Input
from ._model import unique_key
from ._state import State as _State

__all__ = ["MARK", "Sink"]

#: The spec of every ``import/sync`` marker (:func:`._engine._mark` queues them).
MARK = Spec("", 0, "import/sync", {}, "", 0)

#: The directories this process swept of dead imports' temp files (:meth:`Sink._sweep`).
_SWEPT: set[Path] = set()


class Sink:
    """Resolves virtual seqs and appends new specs, one writer per target session."""

    def __init__(
        self, root: Path, source: str, mapper: Mapper, states: dict[str, _State], inp: Input
    ) -> None:
        self.inp = inp
        self.dir = root / source
        self.source = source
        self.mapper = mapper
        self.states = states
        self.tapes: dict[str, Tape] = {}
        self.seq_of: dict[str, list[int]] = {}
        self.seen: dict[str, dict[str, int]] = {}
        self.batch: dict[str, list[tuple[dict[str, Any], Spec]]] = {}
        self.created: list[str] = []
        self.appended = 0
        #: the time of each session's first event this run (its creation time, else)
        self.first: dict[str, int] = {}

    def path_of(self, target: Target) -> Path:
        return self.dir / f"{target.session_id}.jsonl"

    def state(self, name: str) -> _State:
        st = self.states.get(name)
        if st is None:
            st = _State(self.path_of(self.mapper.outs[name].target))
            self.states[name] = st
        return st

    def add(self, spec: Spec) -> None:
        name = spec.target
        spec.key = unique_key(self.seen.setdefault(name, {}), spec.key)
        seq_of = self.seq_of.setdefault(name, [0])
        assert len(seq_of) == spec.vid, "specs of a target come in vid order"
        existing = self.state(name).keys.get(spec.key)
        if existing is not None:
            seq_of.append(existing)
            return
        batch = self.batch.setdefault(name, [])
        self.first.setdefault(name, spec.time)  # the session may be created for this event
        seq_of.append(self._next_seq(name) + len(batch))
        batch.append((spec.resolved(seq_of.__getitem__), spec))

    def _next_seq(self, name: str) -> int:
        """The seq the next appended event gets. A session not yet created is created only once
        its header is fixed (see :meth:`Target.fix`), or at the end: its first event is 1. It is
        created when its events are written (:meth:`write`), with the others ready then."""
        if name not in self.tapes and not self.state(name).exists:
            return 1
        return self._tape(name).next_seq

    def _ready(self, name: str, final: bool) -> bool:
        """Whether the session may be written now: it exists, or its header is fixed (and so
        is its parent's, which a child's creation writes first), or nothing more comes."""
        if final or name in self.tapes or self.state(name).exists:
            return True
        target = self.mapper.outs[name].target
        if target.header is target:
            return False
        return not target.child_of_main or self._ready("", final)

    def _tape(self, name: str) -> Tape:
        tape = self.tapes.get(name)
        if tape is None:
            tape = self._opened(name, self._opener(name)())
        return tape

    def _sweep(self) -> None:
        """Once per process and directory, before creating sessions there: remove what an
        import that died left of its staged sessions (temp files no live writer holds)."""
        if self.dir not in _SWEPT:
            _SWEPT.add(self.dir)
            remove_stale_temps(self.dir)

    def open_all(self, names: list[str]) -> None:
        """Open the writers of ``names`` as :meth:`_tape` does (the sessions a write creates:
        a source of many runs has dozens). One after the other: a session this import creates
        is staged, so its creation syncs nothing and there are no syncs to share (threads
        only cost here: 8-15 % of an Aider import's time). Every one that opened is kept, to
        be closed, when another fails."""
        if "" in names:
            self._tape("")  # a child session's header names the main one's: it comes first
        failed: Exception | None = None
        for name in dict.fromkeys(names):
            if name in self.tapes:
                continue
            try:
                self._opened(name, self._opener(name)())
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed

    def _opener(self, name: str) -> Callable[[], Tape]:
        """What opens the writer of ``name``: its session, or a new one (with the main session
        opened first when it is the parent: its header crc is referenced)."""
        target = self.mapper.outs[name].target.header
        st = self.state(name)
        if st.exists:
            return partial(open_tape, st.path, durability="manual")
        self._sweep()
        if target.child_of_main:
            self._tape("")
        return partial(
            open_tape,
            st.path,
            create=True,
            session_id=target.session_id,
            title=target.title,
            cwd=target.cwd,
            agent=target.agent,
            parent=self._parent(target),
            meta=self._meta(target),
            created=self._created(name, target),
            durability="manual",
            staged=True,  # written in one go: named, whole and synced once, at close
        )

    def _opened(self, name: str, tape: Tape) -> Tape:
        st = self.state(name)
        if not st.exists:  # named as the report names its sessions (the root as given)
            self.created.append(str(st.path))
        self.tapes[name] = tape
        return tape

    def _created(self, name: str, target: Target) -> int | None:
        """The header's creation time: the source's, else its first event's, else when the
        source last changed; never the import's clock (an old session would look new)."""
        if target.created and target.created > 0:
            return target.created
        if self.first.get(name, 0) > 0:
            return self.first[name]
        mtime_ms = self.inp.stat()[1] // 1_000_000
        return mtime_ms if mtime_ms > 0 else None

    @cached_property
    def _provenance(self) -> dict[str, Any]:
        """What every session this import creates says of the source: the same for all of
        them, so read once (its first line's SHA was read again, with the file opened, for
        each of a multi-run source's sessions)."""
        return {
            "source": self.source,
            "file": os.path.abspath(self.inp.path),
            "name": self.inp.name,
            "first_line_sha256": self.inp.first_line_sha(),
            "mapper": MAPPER_VERSION,
        }

    def _parent(self, target: Target) -> ParentRef | None:
        if not target.child_of_main:
            return None
        main = self.mapper.outs[""].target
        mpath = self.path_of(main)
        st = self.state("")
        if st.crc0 is None:  # created by this import (staged: it has no name before close)
            st.crc0 = self._tape("").header_crc
        return ParentRef(session=main.session_id, seq=0, path=mpath.name, crc=st.crc0)

    def _meta(self, target: Target) -> dict[str, Any]:
        meta = dict(target.meta)
        info = dict(meta.get("import") or {})
        info.update(self._provenance)
        if target.created is not None:
            info["created"] = target.created
        meta["import"] = info
        return meta

    def write(self, *, final: bool = False) -> None:
        """Append the batched specs; a session whose header is not fixed yet waits (``final``:
        nothing more comes, write everything)."""
        ready = [n for n, items in self.batch.items() if items and self._ready(n, final)]
        self.open_all(ready)
        for name in ready:
            items = self.batch[name]
            tape = self._tape(name)
            expected = tape.next_seq
            try:
                events = tape.append_batch([item for item, _spec in items])
            except InvalidEventError as exc:
                spec = items[exc.batch_item or 0][1]
                raise SourceError(
                    f"cannot map line(s) {spec.data.get('import', {}).get('lines')} to a valid "
                    f"{spec.type} event ({exc}); nothing more is written for this file",
                    path=self.mapper.path,
                ) from None
            if [e.seq for e in events] != list(range(expected, expected + len(items))):
                raise SourceError("internal error: seqs moved under the import", path=tape.path)
            self.appended += len(items)
            items.clear()

    def finish(self) -> None:
        """Write everything and close every writer (the sessions created, staged, get their
        names), the file's own session's ``import/sync`` marker last of all. A re-import trusts
        that marker for where the source was imported up to, so what it covers must be saved
        before it is: the other sessions are closed first, and a kill in between leaves a
        source a re-import maps again (its sessions' keys make that add nothing twice)."""
        main = self.batch.get("")
        marker = main.pop() if main and main[-1][1] is MARK else None
        self.write(final=True)
        if marker is not None and self.tapes.keys() - {""}:  # every batch has its tape now
            if "" in self.tapes:
                self.tapes[""].flush()  # a staged main session gets its name: children name it
            close_all([t for n, t in self.tapes.items() if n])
        if marker is not None:
            self.batch.setdefault("", []).append(marker)
            self.write(final=True)
        self.close()

    def close(self) -> None:
        """Close every writer (idempotent; :meth:`finish` is the orderly end)."""
        close_all(self.tapes.values())  # a multi-run source's sessions sync together

    def abandon(self) -> None:
        """After a failure: close every writer, keeping what reached a session (the next import
        goes on from it), and leave nothing of a session this run was creating that nothing of
        the source reached: unnamed, it is dropped without ever getting its name; named early
        (a main session, for its children), it is removed. One that never got its name because
        another writer took it is that writer's, not this run's to remove."""
        for tape in self.tapes.values():
            if tape.staged and tape.next_seq <= 1 and not tape.closed:
                tape.discard()
        try:
            self.close()
        finally:
            for name, tape in self.tapes.items():
                made = str(self.state(name).path)
                if made not in self.created:
                    continue
                named = tape.durable_seq >= 0
                if named and tape.next_seq > 2:
                    continue  # something of the source reached it: kept
                if named:
                    try:
                        os.unlink(tape.path)
                    except FileNotFoundError:
                        pass
                self.created.remove(made)
                self.states.pop(name, None)
