"""Fold a session file into its surface and state, in one pass, as of any seq.

Memory stays proportional to the surface: only the current message events are held (as raw
JSON bytes), plus small maps for compactions, retractions and fork receipts. Replaced content,
tool calls, streaming chunks and checkpoints are read and dropped. With ``versions=True`` every
message event is kept as well (the caller asked for all of them).

A fork (its header names a ``parent``) folds its parent's prefix through the fork seq first;
those inherited nodes come before the fork's own nodes and cannot be changed by the fork.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from .. import _framing, _fs, _records
from .._scan import too_deep
from .._surface import Status, SurfaceFold
from ..errors import (
    ConcurrentModificationError,
    FoldError,
    FormatError,
    InvalidEventError,
    JsonltapeError,
    SessionNotFoundError,
    UnknownEventTypeError,
)
from ..events import (
    CORE_TYPES,
    SURFACE_TYPES,
    BranchOrigin,
    Event,
    HeaderData,
    Replace,
    validate_data,
)
from ._stream import Row, header_of, line_data, raw_data, rows

__all__ = [
    "BranchVersion",
    "FoldError",
    "Node",
    "RecordedSource",
    "SessionFold",
    "Source",
    "Version",
    "fold_file",
    "walk",
]

#: How many ancestors a fork may have (a loop in hand-edited headers must not recurse forever).
MAX_FORK_DEPTH = 64
_json = msgspec.json.Decoder()
# Types whose data the fold reads; every other known type is passed over without decoding.
_INTERPRETED = SURFACE_TYPES | {
    "surface/retract",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "compaction/prune",
    "handoff/anchor",
    "fork/merge",
    "fork/discard",
    "todo/write",
    "request/header",
}

#: Known types whose data the fold never reads.
_PASSED = frozenset(CORE_TYPES) - _INTERPRETED - {"session/start"}


class Source:
    """The file a fold's message events live in: their data is read back from it when it is
    shown, so a fold holds where each message is, not its body (memory follows the number of
    messages on the surface, not their size)."""

    __slots__ = ("__weakref__", "_fd", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def data(self, seq: int, offset: int, size: int) -> bytes:
        """The ``data`` JSON of the line of ``seq`` at ``offset``; the line must be the one
        folded (same length, a valid frame, the same seq), or the file changed underneath."""
        if self._fd is None:
            self._fd = _fs.open_for_read(Path(self.path))
            weakref.finalize(self, os.close, self._fd)
        raw = os.pread(self._fd, size, offset)
        try:
            got = line_data(raw) if len(raw) == size and _framing.frame_ok(raw) else None
        except msgspec.DecodeError:
            got = None
        if got is None or got.seq != seq:
            raise ConcurrentModificationError(
                f"the line of seq {seq} changed while the session was being read",
                path=self.path,
                line=seq + 1,
                offset=offset,
            )
        return bytes(got.data)


class RecordedSource(Source):
    """A :class:`Source` whose lines at the offsets in ``recorded`` (offset -> size) are
    ``branch/event`` lines (spec §8.7.14): a node there reads the data of the line it records.
    The node's seq is the holder's (an ``--all-versions`` entry) or the recorded line's (a
    rebuilt version)."""

    __slots__ = ("recorded",)

    def __init__(self, path: str, recorded: dict[int, int]) -> None:
        super().__init__(path)
        self.recorded = recorded

    def data(self, seq: int, offset: int, size: int) -> bytes:
        held = self.recorded.get(offset)
        if held is None:
            return super().data(seq, offset, size)
        raw = self._read(offset, held)
        try:
            good = len(raw) == held and _framing.frame_ok(raw)
            holder = line_data(raw).seq if good else None
            line = line_data(_records.recorded(raw).line) if good else None
        except msgspec.DecodeError:
            holder = line = None
        if line is None or seq not in (holder, line.seq):
            raise ConcurrentModificationError(
                f"the branch event holding seq {seq} changed while the session was being read",
                path=self.path,
                offset=offset,
            )
        return bytes(line.data)

    def _read(self, offset: int, size: int) -> bytes:
        if self._fd is None:
            self._fd = _fs.open_for_read(Path(self.path))
            weakref.finalize(self, os.close, self._fd)
        return os.pread(self._fd, size, offset)


class Node(NamedTuple):
    """A message event: its seq, time and type, where its line is, and the session holding it
    (None for the folded session's own events, else the ancestor's id). :attr:`data` reads
    the event's ``data`` JSON back from the file."""

    seq: int
    time: int
    type: str
    offset: int
    size: int
    source: Source
    session: str | None = None

    @property
    def data(self) -> bytes:
        """The raw ``data`` JSON of the event, as stored."""
        return self.source.data(self.seq, self.offset, self.size)


class Version(NamedTuple):
    """A message event with its status and the seq of the event that changed it."""

    node: Node
    status: Status
    by: int | None


class BranchVersion(NamedTuple):
    """A message event recorded by a ``branch/event`` (spec §8.7.14), in ``--all-versions``:
    the node (its seq is the ``branch/event``'s), the receipt that recorded it and its origin
    in that version."""

    node: Node
    receipt: int
    origin: BranchOrigin


class _LineHead(msgspec.Struct):
    seq: int
    type: str
    time: int


_line_head = msgspec.json.Decoder(_LineHead).decode


class _Base(NamedTuple):
    nodes: list[Node]
    versions: list[Version]
    request: bytes | None
    todos: bytes | None
    chain: tuple[str, ...]


class SessionFold:
    """The folded state of one session: feed it rows in order with :meth:`apply`."""

    def __init__(
        self, path: str, header: HeaderData, base: _Base | None = None, *, versions: bool = False
    ) -> None:
        self.path = path
        self.source = Source(path)
        self.header = header
        self.base = base
        self.surface = SurfaceFold()
        self.nodes: dict[int, Node] = {}  # own current nodes
        self.last_seq = 0
        self.last_raw = b""
        self.request: bytes | None = None
        self.todos: bytes | None = None
        self.summaries: dict[int, bytes] = {}  # compaction/summary seq -> raw data
        self.summary_of: dict[int, int] = {}  # current summary message seq -> its summary seq
        self.prunes: set[int] = set()  # compaction/prune seqs
        self.pruned: set[int] = set()  # current prune stubs
        self.retracted_by: dict[int, int] = {}  # message seq -> surface/retract seq
        self.removed: dict[int, list[int]] = {}  # surface/retract seq -> what it removed
        self.copies: dict[int, int] = {}  # seq named in an appended message's sources -> it
        self.merged: dict[str, set[int]] = {}  # fork session id -> its seqs merged here
        self.receipts: dict[str, list[tuple[int, str, dict[str, Any]]]] = {}
        self.history: list[Node] | None = [] if versions else None
        #: With ``versions``: the message events recorded by branch events (spec §8.7.14),
        #: and the source their data is read from.
        self.branch_events: list[BranchVersion] | None = [] if versions else None
        self.recorded_source: RecordedSource | None = None
        self.status: dict[int, tuple[Status, int]] = {}  # only kept with versions

    # -- results ----------------------------------------------------------------------------

    @property
    def session(self) -> str:
        return self.header.id

    @property
    def last_crc(self) -> str | None:
        return _framing.crc_of(self.last_raw)

    def own_nodes(self) -> list[Node]:
        """This session's own current message events, in surface order."""
        return [self.nodes[s] for s in self.surface.nodes]

    def current(self) -> list[Node]:
        """The model-visible history: inherited nodes first, then this session's own."""
        inherited = self.base.nodes if self.base is not None else []
        return inherited + self.own_nodes()

    def versions(self) -> list[Version]:
        """Every message event (inherited first), each with its status."""
        out = list(self.base.versions) if self.base is not None else []
        for node in self.history or ():
            status, by = self.status.get(node.seq, ("current", 0))
            out.append(Version(node, status, by if status != "current" else None))
        return out

    def latest_request(self) -> bytes | None:
        """Raw data of the latest ``request/header`` (own, else inherited)."""
        if self.request is not None or self.base is None:
            return self.request
        return self.base.request

    def latest_todos(self) -> bytes | None:
        """Raw data of the latest ``todo/write`` (own, else inherited)."""
        if self.todos is not None or self.base is None:
            return self.todos
        return self.base.todos

    def request_header(self) -> dict[str, Any] | None:
        raw = self.latest_request()
        return None if raw is None else dict(_json.decode(raw))

    def todo_list(self) -> list[dict[str, Any]] | None:
        raw = self.latest_todos()
        return None if raw is None else list(_json.decode(raw)["todos"])

    # -- folding ----------------------------------------------------------------------------

    def apply(self, row: Row) -> None:
        """Fold one committed row (seq 0, the header, is skipped)."""
        h = row.event
        self.last_seq, self.last_raw = h.seq, row.raw
        if h.type in _PASSED and h.surface is None and h.seq:
            if h.type == "branch/event" and self.branch_events is not None:
                self._recorded_version(row, self.branch_events)
            return  # most lines: chunks, checkpoints, tool calls, turn boundaries
        if h.seq == 0:
            return
        t = h.type
        try:
            if t not in CORE_TYPES:
                if h.ignorable:
                    return
                raise UnknownEventTypeError(
                    f"unknown event type {t!r} is not marked ignorable; folding past it could "
                    "show a wrong history (a newer jsonltape may know it)",
                    type=t,
                    field="$.type",
                )
            if h.surface is not None and t not in SURFACE_TYPES and t != "surface/retract":
                raise InvalidEventError(
                    f"{t} is not model-visible and takes no surface", field="$.surface"
                )
            if t == "session/start":
                raise FormatError("session/start appears only as line 1", field="$.type")
            if t in _INTERPRETED:
                self._interpret(row, t)
        except JsonltapeError as exc:
            raise exc.at(
                path=exc.path if exc.path is not None else self.path,
                line=h.seq + 1,
                offset=row.offset,
            ) from exc.__cause__

    def _recorded_version(self, row: Row, out: list[BranchVersion]) -> None:
        """List the message event a ``branch/event`` row records (the scan checked its
        shape; a record of any other type is not a version)."""
        rec = _records.recorded(row.raw)
        line = _line_head(rec.line)
        if line.type not in SURFACE_TYPES:
            return
        src = self.recorded_source
        if src is None:
            src = self.recorded_source = RecordedSource(self.path, {})
        src.recorded[row.offset] = len(row.raw)
        node = Node(row.event.seq, line.time, line.type, row.offset, len(row.raw), src)
        out.append(BranchVersion(node, rec.branch, BranchOrigin(rec.seq, rec.crc.decode())))

    def _interpret(self, row: Row, t: str) -> None:
        h = row.event
        data = h.data
        validate_data(t, data)
        seq = h.seq
        if t in SURFACE_TYPES or t == "surface/retract":
            self._surface_event(row, t, data)
            return
        self.surface.apply_parts(seq, t, None, h.sources, data)
        if t == "compaction/summary":
            self.summaries[seq] = raw_data(row)
        elif t == "compaction/prune":
            self.prunes.add(seq)
        elif t == "todo/write":
            self.todos = raw_data(row)
        elif t == "request/header":
            self.request = raw_data(row)
        elif t in ("fork/merge", "fork/discard"):
            self.receipts.setdefault(data["fork"], []).append((seq, t, data))

    def _surface_event(self, row: Row, t: str, data: dict[str, Any]) -> None:
        h = row.event
        seq = h.seq
        changes = self.surface.apply_parts(seq, t, h.surface, h.sources, data)
        node: Node | None = None
        if t != "surface/retract":
            node = Node(seq, h.time, t, row.offset, len(row.raw), self.source)
            if self.history is not None:
                self.history.append(node)
        removed: list[int] = []
        for s, status in changes:
            if status == "current":
                assert node is not None
                self.nodes[s] = node
                continue
            del self.nodes[s]
            summary = self.summary_of.pop(s, None)
            if summary is not None:  # only current summary messages need their ledger
                self.summaries.pop(summary, None)
            self.pruned.discard(s)
            if status == "retracted":
                self.retracted_by[s] = seq
                removed.append(s)
            if self.history is not None:
                self.status[s] = (status, seq)
        if removed:
            self.removed[seq] = removed
        if node is None:
            return
        origin = data.get("origin")
        if (
            isinstance(origin, dict)
            and isinstance(origin.get("session"), str)
            and isinstance(origin.get("seq"), int)
        ):
            self.merged.setdefault(origin["session"], set()).add(origin["seq"])
        if h.sources:
            if isinstance(h.surface, Replace):
                for s in h.sources:
                    if s in self.summaries:
                        self.summary_of[seq] = s
                    if s in self.prunes:
                        self.pruned.add(seq)
            else:
                for s in h.sources:
                    self.copies[s] = seq


def fold_file(
    path: str | os.PathLike[str],
    at: int | None = None,
    *,
    versions: bool = False,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
    _chain: tuple[str, ...] = (),
) -> SessionFold:
    """Fold the committed events of ``path`` through seq ``at`` (all of them if None).

    :param parents: session id -> path, for the ancestors of a fork (else the path hints in
        the fork headers are used, relative to the fork's directory).
    """
    p = _fs.given_path(path)
    if at is not None and (type(at) is not int or at < 0):
        raise FoldError(f"--at must be a seq (a non-negative integer), got {at!r}", path=p)
    fold: SessionFold | None = None
    for _event, folded in _folding(p, at, versions, parents, _chain):
        fold = folded
    assert fold is not None  # _folding yields the header's row or raises
    if at is not None and fold.last_seq < at:
        raise FoldError(
            f"the session ends at seq {fold.last_seq}; there is no seq {at} to fold to", path=p
        )
    return fold


def walk(
    path: str | os.PathLike[str],
    *,
    parents: Mapping[str, str | os.PathLike[str]] | None = None,
) -> Iterator[tuple[Event, SessionFold]]:
    """Fold ``path`` one committed event at a time, in one pass: yields each event (the
    header first) with the fold just after it was applied, so a caller sees the surface as of
    every seq (what ``fold_file(path, at=seq)`` gives, without folding the file once per seq).
    The fold is the same object each time: read it before taking the next event."""
    return _folding(_fs.given_path(path), None, False, parents, ())


def _folding(
    p: Path,
    at: int | None,
    versions: bool,
    parents: Mapping[str, str | os.PathLike[str]] | None,
    chain: tuple[str, ...],
) -> Iterator[tuple[Event, SessionFold]]:
    fd = _fs.open_for_read(p)
    applying: Row | None = None  # the row being folded, for an error that names it
    try:
        it = rows(fd, str(p), at)
        first = next(it, None)
        if first is None:
            raise FormatError("not a jsonltape session: the file is empty", path=p)
        header = header_of(first, str(p))
        base = _base(p, header, parents, chain, versions) if header.parent else None
        fold = SessionFold(str(p), header, base, versions=versions)
        for row in itertools.chain((first,), it):
            applying = row
            fold.apply(row)
            applying = None
            yield row.event, fold
    except RecursionError:
        # Folding a row ran out of stack: a line the reader accepted but too deep to decode
        # again from here (only lines ~1,000 levels deep, far beyond the format's 128, spec
        # §6). Anywhere else it is not ours to explain.
        if applying is None:
            raise
        raise too_deep(str(p), applying.event.seq + 1, applying.offset) from None
    finally:
        os.close(fd)


def _base(
    path: Path,
    header: HeaderData,
    parents: Mapping[str, str | os.PathLike[str]] | None,
    chain: tuple[str, ...],
    versions: bool,
) -> _Base:
    ref = header.parent
    assert ref is not None
    if header.id in chain or len(chain) >= MAX_FORK_DEPTH:
        raise FormatError(
            f"fork chain {' -> '.join((*chain, header.id))} loops or is deeper than "
            f"{MAX_FORK_DEPTH}",
            path=path,
            line=1,
            field="$.data.parent",
        )
    if parents is not None and ref.session in parents:
        ppath = _fs.given_path(parents[ref.session], f"parents[{ref.session!r}]")
    elif ref.path is not None and "\x00" not in ref.path:  # NUL: no file system's name
        hint = Path(ref.path)
        ppath = hint if hint.is_absolute() else path.parent / hint
    else:
        raise SessionNotFoundError(
            f"this fork's parent session {ref.session} has no usable path hint; say where it is",
            path=path,
            line=1,
            field="$.data.parent.path",
        )
    try:
        parent = fold_file(
            ppath, ref.seq, versions=versions, parents=parents, _chain=(*chain, header.id)
        )
    except SessionNotFoundError as exc:
        if exc.path != str(ppath):
            raise
        raise SessionNotFoundError(
            f"parent session {ref.session} of this fork is missing: no session file at "
            f"{ppath} (the path hint in the header); say where it is",
            path=path,
            line=1,
            field="$.data.parent.path",
        ) from None
    except FoldError:
        why = f"it ends before seq {ref.seq}, where the fork was made"
        raise _changed(path, ref.session, why) from None
    if parent.session != ref.session:
        raise _changed(path, ref.session, f"{ppath} holds session {parent.session} instead")
    if ref.crc is not None and parent.last_crc != ref.crc:
        raise _changed(
            path,
            ref.session,
            f"its line at seq {ref.seq} has crc {parent.last_crc}; the fork recorded {ref.crc}",
        )
    sid = parent.session
    nodes = [n if n.session else n._replace(session=sid) for n in parent.current()]
    vers = [
        v if v.node.session else v._replace(node=v.node._replace(session=sid))
        for v in (parent.versions() if versions else ())
    ]
    return _Base(nodes, vers, parent.latest_request(), parent.latest_todos(), (*chain, sid))


def _changed(path: Path, session: str, why: str) -> FormatError:
    return FormatError(
        f"the parent session {session} of this fork has changed since the fork: {why}",
        path=path,
        line=1,
        field="$.data.parent",
    )
