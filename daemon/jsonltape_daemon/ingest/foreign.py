"""Other agents' session files indexed in place, read-only, through the importer's mapping:
every agent the importers' registry marks in place (``AGENTS`` of ``jsonltape._index_api``; a
JSON document such as a Gemini CLI legacy ``.json`` chat through its records; daemon/FOREIGN.md
lists them).

A foreign file is not made of jsonltape lines, so this kind *synthesizes* them: the file is
mapped from its start (``jsonltape.interop.foreign.scan``, deterministic) and every mapped event
becomes a framed jsonltape line (whose crc ``events.crc`` stores). Nothing is ever written:
files are opened read-only and the mapping reads through its own read-only handle.

* Identity: the mapped header of the session (its id and the crc of the synthetic header line;
  the header records the source file's absolute path, so a moved file is a new session).
* Offsets: an event's *cursor* (where the engine's next read starts, ``files.offset``) is the
  end, in the source file, of the last source line that any event up to and including it was
  made from (a running maximum per session, at least the end of line 1). The header's cursor
  is 0. The
  engine stores ``cursor - len(line)`` as the event's offset: for foreign sessions
  ``events.offset`` is therefore *not* a byte offset into the source file
  (``json_extract(raw, '$.data.import.lines')`` gives the source line numbers).
* Continuity: the file is mapped again from its start; the engine's stored cursor, seq and crc
  must equal those of the event with that seq in the new mapping. An appended source line only
  adds events, except that a reply still streaming is revised: the revised event then covers a
  source line past the stored cursor, which moves the running maximum of every later event, so
  the check fails and the engine reingests the session -- the rows always equal a rebuild.
  ``intact`` (asked after a rewrite in place or a new inode) says no: such a file is reingested.
* Several sessions in one file (Claude Code sidechains): the first is the file's own session;
  every other one is a *member* at the virtual path ``FILE#SESSION-ID`` with its own registry
  row and session row. :class:`ForeignIngestor` syncs members together with their file.
* Damage: a last source line still being written is left for later (the session is
  ``torn-tail``); bad lines inside the file are mapped to ``import/raw`` events, never damage.
* Units of an agent that declares ``keyed`` (a database's sessions, a task folder: what the
  agent's ``units`` gives for a wanted file, whose own stat does not tell their changes): each
  is a session at its own registry path (``DB#SESSION-ID``
  for a database's, else the file), keyed by the unit's change counter (:class:`Stamp`) instead
  of the file's stat, mapped through its rendering and reingested at every change; a unit gone
  from its file is forgotten. A watcher event for a database's ``-wal`` or a task's other
  documents is taken as one for the wanted file (:meth:`ForeignIngestor.anchor`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import msgspec

from jsonltape._index_api import AGENTS, Unit, crc_of, encode_event, session_id_for
from jsonltape.errors import FormatError, JsonltapeError
from jsonltape.events import HeaderData, Line
from jsonltape.interop import foreign as mapping
from jsonltape_daemon.ingest.files import DATA_ERRORS, O_READ, Budget, Stat, SyncStats
from jsonltape_daemon.ingest.ingestor import Ingestor
from jsonltape_daemon.ingest.pace import Pace
from jsonltape_daemon.ingest.rows import FileRow, Store
from jsonltape_daemon.ingest.source import Damage, Header

__all__ = [
    "ForeignFiles",
    "ForeignIngestor",
    "engine_for",
    "member_path",
    "parse_source",
    "split_member",
]

MEMBER = "#"
_BUDGET = Budget()
#: Where SQLite writes a database's changes before the database file itself.
_JOURNALS = ("-wal", "-journal")


def member_path(path: str, session_id: str) -> str:
    """The virtual path of a session that is not the file's own (a Claude Code sidechain)."""
    return f"{path}{MEMBER}{session_id}"


def split_member(path: str) -> tuple[str, str | None]:
    """``(file, member session id or None)`` of a registry path."""
    base = os.path.basename(path)
    if MEMBER in base:
        head, _, sid = path.rpartition(MEMBER)
        return head, sid
    return path, None


#: Sources whose sessions are files of their own, which this kind can watch and map in place
#: (each importer declares it: :attr:`jsonltape.interop._agent.Agent.in_place`).
IN_PLACE = tuple(k for k, a in AGENTS.items() if a.in_place)


def parse_source(spec: str) -> tuple[str, str]:
    """``KIND:PATH`` (``claude-code:~/.claude/projects``) as ``(kind, absolute path)``."""
    kind, sep, path = spec.partition(":")
    agent = AGENTS.get(kind)
    if agent is not None and not agent.in_place and sep:
        # a database holds every session and its changes land in the -wal first (OpenCode,
        # Goose, Crush), or a session is whole-file JSON rewritten in place (Cline's task
        # folders), or a dot-file in a repository (Aider's history), which the index skips: not
        # a tree of files this kind can watch; importing it is incremental instead
        raise ValueError(
            f"{agent.label} sessions cannot be indexed in place: import them "
            f"(jsonltape import --from {kind} {path or 'PATH'}) and sync the import root"
        )
    if not sep or kind not in IN_PLACE or not path:
        raise ValueError(f"expected KIND:PATH with KIND one of {', '.join(IN_PLACE)}: {spec!r}")
    return kind, os.path.abspath(os.path.expanduser(path))


class _Mapped(NamedTuple):
    key: tuple[str, int, int, int, int]
    main: str
    sessions: dict[str, list[Line]]  #: session id -> synthetic lines, seq = index
    torn: tuple[int, int] | None  #: (source line, byte offset) of a line still being written
    unit: bool = False  #: a unit's rendering (``key[0]``: its registry path), not a file


class Stamp(NamedTuple):
    """A unit's stand-in for a file's stat (what the registry keeps as its hint): the device and
    inode of the file it lives in, and its own change counter (rows or bytes, newest change),
    the one the importer's re-import decides "unchanged" by."""

    st_dev: int
    st_ino: int
    st_size: int
    st_mtime_ns: int


def _int64(n: int) -> int:
    """A change counter as an index column holds it (a row's time past year 2262 in
    nanoseconds is not a time, only a mark): folded into 64 bits."""
    return n if -(2**63) <= n < 2**63 else n & (2**63 - 1)


def unit_path(anchor: str, unit: Unit, source: str) -> str:
    """The registry path of a unit met at ``anchor`` (a wanted file): a session of a database
    (its unit is named ``db-name#ID``) at ``DB#SESSION-ID``, the jsonltape session id the import
    gives it (validated: the database's own id may hold any character, a ``/`` included), any
    other unit at the anchor itself."""
    if MEMBER not in unit.name:
        return anchor
    return member_path(anchor, session_id_for(source, unit.name))


def _line_ends(data: bytes) -> list[int]:
    """End offset of each source line (1-based line n ends at ``ends[n - 1]``)."""
    ends: list[int] = []
    at = data.find(b"\n")
    while at >= 0:
        ends.append(at + 1)
        at = data.find(b"\n", at + 1)
    if data and not data.endswith(b"\n"):
        ends.append(len(data))  # a last line without its newline (yielded if it parses)
    return ends


class ForeignFiles:
    """The :class:`~jsonltape_daemon.ingest.source.FileKind` of one foreign source (``claude-code``,
    ``codex`` or ``pi``). Stateful: ``header`` maps the file, the calls that follow on the same
    descriptor read that mapping (the engine is single-threaded)."""

    def __init__(self, source: str) -> None:
        if source not in IN_PLACE:
            raise ValueError(f"unknown source {source!r}; use one of {', '.join(IN_PLACE)}")
        self.source = source
        self.last: _Mapped | None = None
        #: the file whose members are being synced: they take its mapping just made, whatever
        #: the file grew since (``ForeignIngestor._sync_path``)
        self.pinned: str | None = None
        self._fd = -1
        self._lines: list[Line] = []
        self._member: str | None = None

    def wants(self, path: str) -> bool:
        if MEMBER in os.path.basename(path):
            return False
        agent, p = AGENTS[self.source], Path(path)
        # what `jsonltape import` takes from a tree: the agent's session files, less those it
        # leaves out on purpose (a Gemini CLI legacy chat that Gemini CLI migrated to JSONL)
        return agent.wanted(p) and (agent.skip is None or agent.skip(p) is None)

    # -- the mapping ---------------------------------------------------------------------

    def mapped(self, fd: int, path: str) -> _Mapped:
        """The mapping of the file open at ``fd`` (cached while its stat is unchanged, and for
        the :attr:`pinned` file while it is the same inode)."""
        st = os.fstat(fd)
        key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        last = self.last
        if last is not None and (
            last.key == key or (path == self.pinned and last.key[:3] == key[:3])
        ):
            return last
        scan = mapping.scan_file(self.source, path, raw=False)
        rendered = scan.data()  # a unit (a Gemini CLI legacy .json chat): its JSONL rendering
        return self._map(
            key, scan, lambda: rendered if rendered is not None else os.pread(fd, st.st_size, 0),
            False,
        )  # fmt: skip

    def drop(self, path: str) -> None:
        """Forget the mapping of ``path`` kept from an earlier sync."""
        if self.last is not None and self.last.key[0] == path:
            self.last = None

    def pinned_stat(self, path: str) -> Stamp | None:
        """The stat the mapping of the pinned ``path`` was made at: its members are synced as
        of that (the registry keeps it, so a file that grew since is synced again)."""
        last = self.last
        if path != self.pinned or last is None or last.key[0] != path or last.unit:
            return None
        return Stamp(*last.key[1:])

    def mapped_unit(self, vpath: str, unit: Unit, stamp: Stamp) -> _Mapped:
        """The mapping of a unit (cached while its stamp is unchanged); ``header`` and the calls
        that follow read it for ``vpath`` and its members."""
        key = (vpath, *stamp)
        if self.last is not None and self.last.key == key:
            return self.last
        scan = mapping.scan_file(self.source, unit, raw=False)
        return self._map(key, scan, lambda: scan.data() or b"", True)

    def _map(
        self,
        key: tuple[str, int, int, int, int],
        scan: mapping.ForeignScan,
        data: Callable[[], bytes],
        unit: bool,
    ) -> _Mapped:
        sessions: dict[str, list[Line]] = {}
        reach: dict[str, int] = {}  # per session: a line of another one moves no cursor
        try:
            ends = _line_ends(data())
            for sid, event in scan.events():
                out = sessions.setdefault(sid, [])
                if event.seq == 0:
                    cursor = 0
                else:
                    info = event.data.get("import")
                    lines = info.get("lines") if isinstance(info, dict) else None
                    top = max((int(n) for n in lines or ()), default=0)
                    if top > len(ends):
                        break  # the file grew after fstat: the rest waits for the next sync
                    cursor = max(reach.get(sid, ends[0]), ends[top - 1] if top else 0)
                    reach[sid] = cursor
                if event.seq != len(out):
                    raise FormatError(f"mapping gave seq {event.seq}, expected {len(out)}")
                raw, ev = encode_event(
                    event.seq, event.type, event.time, event.data, event.surface,
                    event.sources, event.key, event.ignorable,
                )  # fmt: skip
                out.append(Line(cursor - len(raw), raw, ev))
        except OSError as exc:
            raise FormatError(exc.strerror or str(exc), path=key[0]) from None
        sessions = {sid: lines for sid, lines in sessions.items() if lines}
        torn = scan.report.torn
        self.last = _Mapped(
            key,
            scan.session_id,  # as the input names it (Kimi CLI's wire.jsonl: its session)
            sessions,
            (torn.line, torn.offset) if torn is not None else None,
            unit,
        )
        return self.last

    # -- FileKind ------------------------------------------------------------------------

    def header(self, fd: int, path: str) -> Header:
        m = self.last
        if m is not None and m.unit and path == m.key[0]:
            real, member = path, None  # a unit, mapped by the ingestor before it asks
        elif m is not None and m.unit and split_member(path)[0] == m.key[0]:
            real, member = split_member(path)
        else:
            real, member = split_member(path)
            m = None
        self._fd, self._lines, self._member = -1, [], member
        try:
            m = m or self.mapped(fd, real)
        except JsonltapeError as exc:
            raise FormatError(exc.message, path=real) from None
        lines = m.sessions.get(member or m.main)
        if not lines:
            raise FormatError(f"no {self.source} session {member or m.main} here", path=real)
        first = lines[0]
        data = msgspec.convert(first.event.data, type=HeaderData)
        self._fd, self._lines = fd, lines
        return Header(data, first.offset + len(first.raw), crc_of(first.raw) or "")

    def _current(self, fd: int) -> list[Line]:
        assert fd == self._fd, "header() maps the file before its lines are read"
        return self._lines

    def lines(
        self, fd: int, start: int, end: int, seq: int, room: Callable[[], int]
    ) -> Iterator[list[Line] | Damage]:
        lines = self._current(fd)
        while seq < len(lines):
            n = room()
            yield lines[seq : seq + n]
            seq += n
        torn = self.last.torn if self.last is not None else None
        if torn is not None and self._member is None:
            at = lines[-1].offset + len(lines[-1].raw) if lines else 0
            yield Damage(at, f"source line {torn[0]} (byte {torn[1]}) is incomplete")

    def continues(self, fd: int, end: int, seq: int, crc: str | None, stop: int) -> bool:
        lines = self._current(fd)
        if self.last is not None and self.last.unit:
            # a unit's rows change in place (a database row updated, a document rewritten
            # whole): the last event being the same says nothing of the ones before it
            return False
        if not 0 <= seq < len(lines):
            return False
        off, raw, _event = lines[seq]
        return off + len(raw) == end and crc_of(raw) == crc

    def intact(
        self, fd: int, start: int, end: int, ingested: Iterable[tuple[int, int, str]]
    ) -> bool:
        return False  # rewritten in place or replaced: reingest (rows equal a rebuild)

    def corrupt_after(self, fd: int, start: int, end: int) -> bool:
        return False  # only a last line still being written is damage


class ForeignIngestor(Ingestor):
    """:class:`Ingestor` over a tree of one foreign source, that also syncs the *members* of a
    file (its further sessions, at ``FILE#SESSION-ID``) whenever the file itself changed."""

    kind: ForeignFiles

    def __init__(
        self,
        store: Store,
        root: str | os.PathLike[str],
        source: str,
        *,
        budget: Budget = _BUDGET,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int], None] | None = None,
        paced: bool = False,
    ) -> None:
        super().__init__(
            store,
            root,
            budget=budget,
            kind=ForeignFiles(source),
            should_stop=should_stop,
            progress=progress,
        )
        self.agent = AGENTS[source]
        # a dot-name on the way to where the agent keeps sessions inside a project (Crush's
        # .crush/crush.db, Aider's .aider.chat.history.md) is walked; other dot-names are not
        self.dotted = frozenset(
            part for where in self.agent.projects for part in where.split("/") if part[:1] == "."
        )
        self._done: set[str] = set()  #: files synced in this pass (with their members)
        #: a costly file is mapped again only so often while it grows, when ``paced`` (the
        #: daemon: it hints what is held back again, ``take_held``)
        self.pace = Pace(on=paced)

    # -- which paths ------------------------------------------------------------------------

    def rescan(self) -> SyncStats:
        self._done = set()
        return super().rescan()

    def sync_paths(self, paths: Iterable[str]) -> SyncStats:
        self._done = set()
        anchors = {self.anchor(os.path.abspath(p)) for p in paths}
        if any(self._skip_input(p) for p in anchors):
            return self.rescan()  # what `skip` says of any file of the tree may have changed
        return super().sync_paths(self.pace.ready(anchors))

    def take_held(self) -> dict[str, float]:
        return self.pace.take_held()

    def hinted(self, path: str) -> bool:
        anchor = self.anchor(path)
        return self._in_tree(anchor) or self._skip_input(anchor)

    def _skip_input(self, path: str) -> bool:
        """Whether ``path`` (an anchor) is a file outside the tree that the agent's ``skip``
        reads (:attr:`~jsonltape.interop._agent.Agent.skip_inputs`)."""
        inputs = self.agent.skip_inputs
        if inputs is None or self._in_tree(path):
            return False
        return any(path == str(p) for p in inputs())

    def anchor(self, path: str) -> str:
        """The wanted file a change of ``path`` is a change of: a database for its ``-wal`` or
        ``-journal`` (where SQLite writes first), the session's wanted file for a document
        beside it (:attr:`~jsonltape.interop._agent.Agent.documents`), else ``path``."""
        wants = self.kind.wants
        for suffix in _JOURNALS:
            if path.endswith(suffix) and wants(path[: -len(suffix)]):
                return path[: -len(suffix)]
        if os.path.basename(path) in self.agent.documents and not wants(path):
            for name in self.agent.documents:
                beside = os.path.join(os.path.dirname(path), name)
                if wants(beside):
                    return beside
        return path

    # -- one path ----------------------------------------------------------------------------

    def _sync_path(self, path: str, reg: FileRow | None) -> None:
        real, member = split_member(path)
        if member is not None:
            if real not in self._done and self.kind.wants(real) and os.path.lexists(real):
                self._sync_path(real, self.store.file(real))  # with its members and units
            if real not in self._done:
                self._sync_member(real, path, reg)  # its file is gone: forgotten
            return
        if not self.kind.wants(path) and os.path.lexists(path):
            # no longer one of the agent's files (Cline's UI messages once the API history is
            # written beside them): its rows go, with its members'
            self._forget_all(path)
            return
        if self.agent.keyed and self.agent.units is not None and os.path.lexists(path):
            self._done.add(path)
            try:
                units = self.agent.units(Path(path))
            except (OSError, JsonltapeError, *DATA_ERRORS) as exc:
                # not a database of the agent's (any more), or one that cannot be read now (a
                # checkpoint during each copy): the verdict is the file's, and its sessions go
                # as a rebuild would not have them; the next change lists it again
                msg = exc.message if isinstance(exc, JsonltapeError) else str(exc)
                self._forget_all(path)
                self._record(path, None, None, "error", msg)
                return
            if units is not None:
                self._sync_units(path, units)
                return
        self._done.add(path)
        with self.pace.timing(path):  # the file and its members: what a change costs
            # Only this sync's mapping of the file says what its members are: one left from
            # an earlier sync would keep them as they were when the file no longer maps.
            self.kind.drop(path)
            super()._sync_path(path, reg)
            if reg is not None and self.store.file(path) == reg and os.path.lexists(path):
                return  # unchanged: so are its members (they share its stat)
            known = self._rows_of(path)
            known.pop(path, None)
            m = self.kind.last
            if m is None or m.key[0] != path or m.unit:
                # not mapped (gone, not the agent's file, a mapping that failed): a rebuild
                # has none of its members
                for _p, r in sorted(known.items()):
                    self._forget(r)
                return
            found = {member_path(path, sid) for sid in m.sessions if sid != m.main}
            # A live agent appends while this runs: its members are synced from the mapping
            # just made, not from one more mapping of the whole file each.
            self.kind.pinned = path
            try:
                for vpath in sorted(found | set(known)):
                    self._sync_member(path, vpath, known.get(vpath))
            finally:
                self.kind.pinned = None

    def _rows_of(self, path: str) -> dict[str, FileRow]:
        """The registry rows of a file: its own, its members' and its units'."""
        prefix = path + MEMBER
        return {
            p: r
            for p, r in self.store.files(under=os.path.dirname(path)).items()
            if p == path or p.startswith(prefix)
        }

    def _forget_all(self, path: str) -> None:
        for _p, r in sorted(self._rows_of(path).items()):
            self._forget(r)

    # -- units: sessions keyed by their own change counter -------------------------------------

    def _sync_units(self, anchor: str, units: list[Unit]) -> None:
        """Sync the sessions a wanted file holds as units (every session of a database, a task
        folder): each by its unit's stamp, so a database whose ``-wal`` grew re-maps only the
        sessions whose rows changed; a session gone from it is forgotten."""
        found = {unit_path(anchor, u, self.kind.source): u for u in units}
        known = self._rows_of(anchor)
        for name in self.agent.documents:  # the session's rows when another file was its anchor
            beside = os.path.join(os.path.dirname(anchor), name)
            if beside != anchor:
                known.update(self._rows_of(beside))
        for p, r in sorted(known.items()):
            owner = p if p in found else split_member(p)[0]
            if owner not in found:
                self._forget(r)  # deleted from the database (or the anchor's old verdict)
        try:
            st = os.lstat(anchor)
        except OSError:
            return  # gone meanwhile: the next sync forgets it
        for vpath, unit in found.items():
            stamp = Stamp(st.st_dev, st.st_ino, _int64(unit.size), _int64(unit.mtime_ns))
            self._sync_unit(anchor, vpath, unit, stamp, known)

    def _sync_unit(
        self, anchor: str, vpath: str, unit: Unit, stamp: Stamp, known: dict[str, FileRow]
    ) -> None:
        reg = known.get(vpath)
        if reg is not None and (reg.dev, reg.ino, reg.size, reg.mtime_ns) == stamp:
            return  # unchanged: so are its members (they share its stamp)
        try:
            fd = os.open(anchor, O_READ)
        except OSError:
            return  # gone meanwhile: the next sync forgets it
        try:
            try:
                m = self.kind.mapped_unit(vpath, unit, stamp)
            except JsonltapeError as exc:
                # one verdict, kept until the unit changes (a row of the wrong type, a
                # document caught half-way through a rewrite), naming the file and row; the
                # next change maps it again
                self._record(vpath, reg, stamp, "error", str(exc))
                return
            self._stats.files += 1
            members = {member_path(vpath, sid) for sid in m.sessions if sid != m.main}
            members |= {p for p in known if split_member(p)[0] == vpath}
            for path in [vpath, *sorted(members)]:
                row = self.store.file(path)
                if path != vpath and split_member(path)[1] not in m.sessions:
                    if row is not None:
                        self._forget(row)  # that session is gone from the unit
                    continue
                self._sync_fd(fd, path, row, stamp)
        except OSError as exc:
            self._record(vpath, reg, None, "error", exc.strerror or str(exc))
        except (JsonltapeError, *DATA_ERRORS) as exc:
            # whatever a row holds (a time no index column can hold, a header value out of
            # range) is this session's verdict, said once: the rest is indexed
            self._record(vpath, reg, stamp, "error", f"cannot index this session: {exc}")
        finally:
            os.close(fd)

    def _sync_member(self, real: str, vpath: str, reg: FileRow | None) -> None:
        """``Ingestor._sync_path`` for a virtual path: stat and open the file it lives in."""
        try:
            st = os.lstat(real)
            fd = os.open(real, O_READ) if stat.S_ISREG(st.st_mode) else -1
        except OSError:
            fd = -1
        if fd < 0:
            if reg is not None:
                self._forget(reg)
            return
        try:
            st = os.fstat(fd)
            seen = self.kind.pinned_stat(real)
            if seen is not None and (seen.st_dev, seen.st_ino) != (st.st_dev, st.st_ino):
                seen = None  # replaced since its mapping: mapped anew
            hint: Stat = seen if seen is not None else st
            if reg is not None and (hint.st_dev, hint.st_ino, hint.st_size, hint.st_mtime_ns) == (
                reg.dev,
                reg.ino,
                reg.size,
                reg.mtime_ns,
            ):
                return
            m = self.kind.mapped(fd, real)
            if split_member(vpath)[1] not in m.sessions:
                if reg is not None:
                    self._forget(reg)  # that session is gone from the file
                return
            self._stats.files += 1
            self._sync_fd(fd, vpath, reg, seen)
        except (OSError, JsonltapeError) as exc:
            self._record(vpath, reg, None, "error", str(exc))
        finally:
            os.close(fd)


def engine_for(
    store: Store,
    root: str,
    *,
    budget: Budget = _BUDGET,
    should_stop: Callable[[], bool] = lambda: False,
    progress: Callable[[int], None] | None = None,
    paced: bool = False,
) -> Ingestor:
    """The engine for a root as ``meta.roots`` records it: a directory of jsonltape sessions,
    or ``KIND:PATH`` for a foreign tree (``paced``: see ``pace.py``)."""
    if not os.path.isabs(root):
        kind, path = parse_source(root)
        return ForeignIngestor(
            store,
            path,
            kind,
            budget=budget,
            should_stop=should_stop,
            progress=progress,
            paced=paced,
        )
    return Ingestor(store, root, budget=budget, should_stop=should_stop, progress=progress)
