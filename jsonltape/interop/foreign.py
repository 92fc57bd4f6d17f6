"""Read-only mapping: a foreign session file as jsonltape events, without writing anything.

This is the same mapping ``jsonltape import`` writes, so an indexer (``jsonltape sync --source
claude-code:PATH``) can treat Claude Code, Codex and pi files as if they were jsonltape sessions::

    from jsonltape.interop import foreign

    for session_id, event in foreign.scan("claude-code", "~/.claude/projects/x/abc.jsonl"):
        ...  # event: a jsonltape.Event; seq 0 is the session header, then 1, 2, 3 ...

    for m in foreign.messages("codex", path):
        print(m.session, m.seq, m.role, m.status, m.text)

Events of one file can belong to several sessions (Claude Code sidechains); each session's
header (seq 0) comes right before its first event. Seqs are dense per session, exactly the
seqs a fresh ``jsonltape import`` gives (it adds checkpoint lines after them). ``time`` is the
source's own timestamp (epoch ms). Every event's ``data["import"]`` holds its provenance:
``source``, ``lines`` (1-based source line numbers), ``raw`` (those lines' verbatim text, on the
one event that carries each line; pass ``raw=False`` to leave it out), ``time`` and source ids.

Reading is one pass over the file in memory proportional to the surface; a file that changed
is simply scanned again (the mapping is deterministic: the same lines give the same events).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NamedTuple

from ..errors import FormatError
from ..events import Event, Replace, Retract
from ..fold import SurfaceFold, message_changes
from ._base import Mapper, Spec
from ._engine import (
    FileReport,
    Torn,
    as_input,
    display_path,
    mapper_for,
    session_id_for,
    tail_kind,
)
from ._inputs import Input
from ._model import unique_key
from ._source import Unit

__all__ = ["ForeignMessage", "messages", "scan", "scan_file"]


class ForeignMessage(NamedTuple):
    """A message of a foreign session as an indexer needs it (see :func:`messages`)."""

    session: str
    seq: int
    status: str
    type: str | None
    role: str | None
    text: str | None
    time: int
    source_ids: tuple[str, ...]


class ForeignScan:
    """One pass over a foreign file; iterate :meth:`events`, then read :attr:`report`."""

    def __init__(
        self, source: str, path: str | os.PathLike[str] | Unit | Input, *, raw: bool = True
    ) -> None:
        self.input = path if isinstance(path, Input) else as_input(source, path)
        self.path = self.input.path
        self.source = source
        self.raw = raw
        self.report = FileReport(source=source, path=display_path(self.input))
        self.session_id = session_id_for(source, self.input.name)
        self._seen: dict[str, dict[str, int]] = {}
        #: specs of a session whose header is not fixed yet (see ``Target.fix``)
        self._waiting: dict[str, list[Spec]] = {}

    def data(self) -> bytes | None:
        """The lines mapped, when they are not a file's (a unit's rendering)."""
        return self.input.data()

    def events(self) -> Iterator[tuple[str, Event]]:
        mapper = mapper_for(self.source, self.path, self.session_id, self.input.name)
        mapper.source_title(self.input.title())
        mapper.source_created(self.input.created())
        # A unit is mapped whole: nothing is held back, as a re-scan after any change maps it
        # again from its start (an indexer reingests what a rewrite revised).
        src = self.input.reader(settled=True)
        started: set[str] = set()
        self._seen.clear()
        self._waiting.clear()
        checked = False
        fallback = 0
        for line in src.read(mapper.follow):
            if not checked and line.value is not None:
                why = mapper.sniff(line.value)
                if why is not None:
                    raise FormatError(why, path=self.path, line=line.n, offset=line.offset)
                checked = True
            if not fallback:
                fallback = src.mtime_ns // 1_000_000
            mapper.feed(line)
            yield from self._drain(mapper, started, fallback)
        mapper.eof(False)
        yield from self._drain(mapper, started, fallback or 0, final=True)
        r = self.report
        r.lines = src.lines
        if src.torn is not None:
            setattr(r, tail_kind(self.input), Torn(*src.torn))
        r.raw, r.unknown, r.problems = mapper.raw_counts, mapper.unknown, mapper.problems
        r.sanitized = mapper.sanitized
        r.sessions = [o.target.session_id for o in mapper.outs.values()]
        r.open_turn = any(o.turn is not None for o in mapper.outs.values())

    def _drain(
        self, mapper: Mapper, started: set[str], fallback: int, *, final: bool = False
    ) -> Iterator[tuple[str, Event]]:
        """The events of the specs mapped so far; a session's header comes before its first
        event, once it is fixed (as an import writes it) or at the end."""
        for spec in mapper.take(final_time=fallback if final else None):
            self._waiting.setdefault(spec.target, []).append(spec)
        for name in list(self._waiting):
            target = mapper.outs[name].target
            if not final and name not in started and target.header is target:
                continue
            specs = self._waiting.pop(name)
            sid = target.session_id
            if name not in started:
                started.add(name)
                yield sid, self._header(mapper, name, specs[0].time or fallback)
            for spec in specs:
                spec.key = unique_key(self._seen.setdefault(name, {}), spec.key)
                yield sid, self._event(spec, fallback)

    def _header(self, mapper: Mapper, name: str, time: int) -> Event:
        target = mapper.outs[name].target.header
        data: dict[str, Any] = {
            "format": "jsonltape",
            "version": 1,
            "minor": 0,
            "id": target.session_id,
            "created": target.created or time,
        }
        for k in ("title", "cwd", "agent"):
            if getattr(target, k) is not None:
                data[k] = getattr(target, k)
        if target.child_of_main:
            main = mapper.outs[""].target.session_id
            data["parent"] = {"session": main, "seq": 0, "path": f"{main}.jsonl"}
        meta = dict(target.meta)
        info = dict(meta.get("import") or {})
        info.update(source=self.source, file=str(self.path.absolute()), name=self.input.name)
        meta["import"] = info
        data["meta"] = meta
        return Event(0, "session/start", time, data)

    def _event(self, spec: Spec, fallback: int) -> Event:
        item = spec.resolved(_identity)
        data = item["data"]
        if not self.raw and isinstance(data.get("import"), dict) and "raw" in data["import"]:
            data = dict(data)
            data["import"] = {k: v for k, v in data["import"].items() if k != "raw"}
        surface = item.get("surface")
        return Event(
            seq=spec.vid,
            type=spec.type,
            time=spec.time or fallback,
            data=data,
            surface=surface
            if isinstance(surface, (Replace, Retract)) or surface is None
            else "append",
            sources=item.get("sources"),
            key=spec.key,
            ignorable=bool(spec.ignorable),
        )


def _identity(vid: int) -> int:
    return vid


def scan(
    source: str, path: str | os.PathLike[str] | Unit, *, raw: bool = True
) -> Iterator[tuple[str, Event]]:
    """Yield ``(session_id, event)`` for a foreign file, headers first (see the module doc).

    Raises :class:`~jsonltape.FormatError` if the file is not of that source's format; bad
    lines inside it are yielded as ``import/raw`` events, never raised.
    """
    return ForeignScan(source, path, raw=raw).events()


def scan_file(source: str, path: str | os.PathLike[str] | Unit, *, raw: bool = True) -> ForeignScan:
    """Like :func:`scan`, but returns the scan so its ``report`` can be read afterwards."""
    return ForeignScan(source, path, raw=raw)


def messages(source: str, path: str | os.PathLike[str] | Unit) -> Iterator[ForeignMessage]:
    """Yield every message change of a foreign file in order: a new message with its role and
    searchable text (status ``current``), and later status changes of earlier ones
    (``superseded``, ``compacted``, ``retracted``) with ``type``/``role``/``text`` None."""
    folds: dict[str, SurfaceFold] = {}
    for sid, event in scan(source, path, raw=False):
        if event.seq == 0:
            folds[sid] = SurfaceFold()
            continue
        for change in message_changes(folds[sid], event):
            info = event.data.get("import") or {}
            ids = info.get("ids") or ()
            yield ForeignMessage(
                sid,
                change.seq,
                change.status,
                change.type,
                change.role,
                change.text,
                int(info.get("time") or event.time),
                tuple(str(i) for i in ids),
            )
