"""The import engine: foreign files in, jsonltape sessions out, idempotent and incremental.

For each source file: derive the session id and path (``<root>/<source>/<id>.jsonl``), read
what an earlier import wrote (provenance keys, and the ``import/sync`` markers that say where
each earlier run stopped), skip the file if it has not changed, check that the part imported
before is still byte-identical, replay the mapping over the whole file (stopping at every
earlier end exactly as that run did) and append only the events whose key is new, then a new
``import/sync`` marker. Writers build their key index once; nothing is reopened per line.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec

from ..errors import FormatError, JsonltapeError
from ._agent import Agent
from ._base import MAPPER_VERSION, Mapper, safe_id
from ._discover import Item, SourceError, name_of
from ._discover import as_input as _as_input
from ._discover import discover as _discover
from ._inputs import FileInput, Input, LogInput, UnitInput
from ._one_import import one_import
from ._registry import AGENTS
from ._rewrite import continue_log, points_of
from ._sink import MARK, Sink
from ._source import SourceReader, Unit
from ._state import State as _State
from ._state import last_sync as _last_sync

__all__ = [
    "SOURCES",
    "FileReport",
    "SourceError",
    "agent_of",
    "as_input",
    "discover",
    "import_file",
    "mapper_for",
    "session_id_for",
]

#: Every source an import takes, by name: the importer of one of its sessions (the agents of
#: :mod:`._registry`).
SOURCES: dict[str, Callable[[str, str, str], Mapper]] = {n: a.mapper for n, a in AGENTS.items()}
#: Specs handed to the writer at a time (one write each; memory stays bounded).
CHUNK = 2000
#: Lines without a JSON object before a file is refused as not being of the format.
_SNIFF_LINES = 100
_UUID_TAIL = re.compile(
    r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$"
)


class Torn(msgspec.Struct):
    line: int
    offset: int
    bytes: int


class FileReport(msgspec.Struct):
    """What importing one source file did (``jsonltape import --json`` prints these)."""

    source: str
    path: str
    status: str = "imported"  # imported | unchanged | empty | error
    sessions: list[str] = msgspec.field(default_factory=list)
    created: list[str] = msgspec.field(default_factory=list)
    events: int = 0
    lines: int = 0
    raw: dict[str, int] = msgspec.field(default_factory=dict)
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    problems: list[tuple[int, str]] = msgspec.field(default_factory=list)
    torn: Torn | None = None
    #: a unit's records still changing (an OpenCode reply streaming), left for a later import
    held: Torn | None = None
    open_turn: bool = False
    #: whether this run closed turns the finished source left open (see ``closed``)
    closed_turns: bool = False
    #: the turns this run closed, by the reason their ``turn/end`` gives: ``interrupted``, or
    #: ``completed`` for a source that never marks a turn's end and ended with a reply
    closed: dict[str, int] = msgspec.field(default_factory=dict)
    sanitized: int = 0
    error: str | None = None


def session_id_for(source: str, path: str | os.PathLike[str]) -> str:
    """The id an imported file gets: ``<source>-<the file's session uuid>`` when its name ends
    in one (Claude Code, Codex and pi all name files after the session), else the file name
    (the name its agent declares: Copilot CLI's ``<id>/events.jsonl`` is ``<id>``)."""
    agent = AGENTS.get(source)
    name = Path(path).name if agent is None else name_of(agent, path)
    stem = name.rpartition("#")[2]  # ``opencode.db#ses_...``: the session
    for ext in (".jsonl", ".json"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    m = _UUID_TAIL.search(stem)
    if m is not None and not stem.startswith("agent-"):
        stem = m.group(1).lower()
    return safe_id(stem, "" if stem.startswith(f"{source}-") else f"{source}-")


def agent_of(source: str) -> Agent:
    """The declaration of the source named ``source`` (:class:`SourceError` if none)."""
    try:
        return AGENTS[source]
    except KeyError:
        raise SourceError(f"unknown source {source!r}; use one of {', '.join(AGENTS)}") from None


def as_input(source: str, item: str | os.PathLike[str] | Unit) -> Input:
    """The :class:`~._inputs.Input` of one item of ``source`` (a path stands for one session)."""
    return _as_input(agent_of(source), item)


def mapper_for(
    source: str, path: str | os.PathLike[str], session_id: str, name: str | None = None
) -> Mapper:
    return agent_of(source).mapper(name or Path(path).name, str(path), session_id)


def display_path(inp: Input) -> str:
    """How a report names an input: the file, or ``FILE#SESSION`` for one of several."""
    if isinstance(inp, FileInput) or "#" not in inp.name:  # a file of its own
        return str(inp.path)
    return f"{inp.path}#{inp.name.rpartition('#')[2]}"


# -- the import -----------------------------------------------------------------------------


def _settled(mtime_ns: int, settle: float | None, now: float) -> bool:
    return settle is not None and now - mtime_ns / 1e9 >= settle


def import_file(
    source: str,
    path: str | os.PathLike[str] | Unit,
    root: str | os.PathLike[str],
    *,
    settle: float | None = 3600.0,
    now: float | None = None,
    progress: Callable[[int], None] | None = None,
    waiting: Callable[[Path], None] | None = None,
) -> FileReport:
    """Import one foreign session (a file, or a :class:`Unit` from :func:`discover`) into
    ``root``; never raises for a bad source (the report says what went wrong). Another import
    of the same source into the same root is waited for (``waiting`` is told the lock file
    it waits on, once, before it does).

    :param settle: seconds after its last change when a source counts as finished: a turn it
        left open is then closed as interrupted (like ``repair`` closes a crashed turn). None
        never closes (the source may still be growing).
    """
    out = Path(os.path.expanduser(os.fspath(root)))
    if isinstance(path, Unit):
        p = Path(path.path)
        report = FileReport(source=source, path=display_path(UnitInput(path)))
    else:
        p = Path(os.path.expanduser(os.fspath(path)))
        report = FileReport(source=source, path=str(p))
    try:
        inp = as_input(source, path)
        report.path = display_path(inp)
        base_id = session_id_for(source, inp.name)
        with one_import(out / source, base_id, waiting=waiting):
            now = time.time() if now is None else now  # after a wait: what it found is later
            _import(source, inp, base_id, out, report, settle, now, progress)
    except (JsonltapeError, OSError, UnicodeError) as exc:
        report.status = "error"
        if isinstance(exc, JsonltapeError):
            report.error = str(exc) if exc.path else f"{p}: {exc}"
        else:
            report.error = f"{p}: {getattr(exc, 'strerror', None) or exc}"
    return report


def _import(
    source: str,
    inp: Input,
    base_id: str,
    root: Path,
    report: FileReport,
    settle: float | None,
    now: float,
    progress: Callable[[int], None] | None,
) -> None:
    p = inp.path
    sid = base_id
    for attempt in range(3):
        st = _State(root / source / f"{sid}.jsonl", load=False)
        if not st.exists or inp.same_source(st.meta):
            break
        # another file with the same name (or one rewritten from its first line on, as pi does
        # when it migrates a session): a session of its own
        where = os.path.join(os.path.abspath(p), inp.name) if inp.name != p.name else str(p)
        digest = hashlib.sha256(os.path.abspath(where).encode("utf-8", "surrogatepass")).hexdigest()
        sid = safe_id(f"{base_id}-{digest[: 10 + attempt]}")
    else:  # pragma: no cover - three distinct hash prefixes colliding
        raise SourceError("cannot find a free session name for this file", path=p)
    size, mtime_ns = inp.stat()
    settled = _settled(mtime_ns, settle, now)
    if st.exists:
        if st.meta.get("mapper") not in (None, MAPPER_VERSION):
            raise SourceError(
                f"{st.path} was imported by importer version {st.meta.get('mapper')}; this is "
                f"version {MAPPER_VERSION}: import into a new root",
                path=p,
            )
        last = _last_sync(st.path)
        if (
            last is not None
            and last.get("size") == size
            and last.get("mtime_ns") == str(mtime_ns)
            and not (
                settled and (last.get("open_turn") or last.get("held")) and not last.get("settled")
            )
        ):
            report.status = "unchanged"
            report.sessions = [
                str(root / source / f"{t}.jsonl") for t in last.get("targets", [sid])
            ]
            report.lines = int(last.get("lines", 0))
            for kind in ("torn", "held"):  # the tail held back then is still there, unchanged
                torn = last.get(kind)
                if isinstance(torn, dict):
                    t = Torn(int(torn["line"]), int(torn["offset"]), int(torn["bytes"]))
                    setattr(report, kind, t)
            return
    mapper = mapper_for(source, p, sid, inp.name)
    st.load(raws=mapper.rewrites)
    mapper.source_title(inp.title())
    mapper.source_created(inp.created())
    states: dict[str, _State] = {"": st}
    markers: list[dict[str, Any]] = list(st.markers)
    if st.exists:
        # the other sessions of this file: named in the markers, or (after a crash before the
        # main session's marker) found by name
        others = {root / source / f"{t}.jsonl" for m in markers for t in m.get("targets", ())}
        others |= set((root / source).glob(f"{sid}.sidechain-*.jsonl"))
        for other in sorted(others):
            if other == st.path or not other.exists():
                continue
            ost = _State(other, raws=mapper.rewrites)
            side = ost.meta.get("sidechain")
            if isinstance(side, str) and ost.meta.get("name") == inp.name:
                markers.extend(ost.markers)
                states[f"sidechain-{side}"] = ost
        if mapper.rewrites:
            inp = _continued(inp, mapper, states, markers)
        _check_prefix(inp, markers)
    stops = _stops(markers)
    sink = Sink(root, source, mapper, states, inp)
    src = inp.reader(settled=settled)
    try:
        unit = inp.data() is not None  # in memory: progress is the source's size at once
        done = _feed(mapper, src, sink, stops, None if unit else progress)
        if unit and progress is not None:
            progress(size)
        report.lines = src.lines
        if src.torn is not None:
            setattr(report, tail_kind(inp), Torn(*src.torn))
        if src.lines == 0 or not done:
            report.status = "empty"
            return
        final = (src.lines, settled)
        if final not in stops:
            mapper.eof(settled)
            report.closed = dict(mapper.closed)
            report.closed_turns = bool(report.closed)
        title = inp.title()
        if title is not None and st.exists:  # renamed in place since the session was written
            mapper.retitle(title, st.title, mtime_ns // 1_000_000)
        for spec in mapper.take(final_time=mtime_ns // 1_000_000):
            sink.add(spec)
        open_turn = any(o.turn is not None for o in mapper.outs.values())
        report.open_turn = open_turn
        # A sidechain's marker is a stop, but only the file's own marker says the source is
        # imported: a run killed between saving its sidechains and writing that marker left
        # the stop, and nothing else to append (the sessions are whole).
        if sink.appended or any(sink.batch.values()) or final not in _stops(st.markers):
            _mark(sink, mapper, src, (size, mtime_ns), settled, open_turn)
        sink.finish()
    except BaseException:
        sink.abandon()
        raise
    finally:
        sink.close()
    # a sidechain the source named but gave nothing to write has no session file
    paths = [sink.path_of(o.target) for o in mapper.outs.values()]
    report.sessions = [str(path) for path in paths if path.exists()]
    report.created = sink.created
    report.events = sink.appended
    report.raw, report.unknown = mapper.raw_counts, mapper.unknown
    report.problems, report.sanitized = mapper.problems, mapper.sanitized
    if sink.appended == 0 and not sink.created:
        report.status = "unchanged"


def tail_kind(inp: Input) -> str:
    """What a held-back tail is: a file's unfinished line, or a unit's records still changing."""
    return inp.tail


def _continued(
    inp: Input, mapper: Mapper, states: dict[str, _State], markers: list[dict[str, Any]]
) -> Input:
    """For a source that rewrites its sessions in place (:mod:`._rewrite`): the lines imported
    before, then the source's current version from where it differs; the rewrite points go to
    the mapper."""
    done = [
        m for m in markers if isinstance(m.get("bytes"), int) and isinstance(m.get("sha256"), str)
    ]
    if not done:
        return inp
    last = max(done, key=lambda m: int(m["bytes"]))
    raws: dict[int, str] = {}
    for state in states.values():
        raws.update(state.raws)
    records, held_from, tail = inp.records()
    cont = continue_log(
        raws, last, points_of(markers), records, held_from, tail, mapper.rewrite_start, inp.path
    )
    mapper.rewrite_points = dict(cont.points)
    return LogInput(inp, cont.data, cont.held)


def _check_prefix(inp: Input, markers: list[dict[str, Any]]) -> None:
    done = [
        m for m in markers if isinstance(m.get("bytes"), int) and isinstance(m.get("sha256"), str)
    ]
    if not done:
        return
    last = max(done, key=lambda m: int(m["bytes"]))
    if inp.prefix_sha(last["bytes"]) != last["sha256"]:
        raise SourceError(
            f"the source changed since it was imported (its first {last['bytes']} bytes, "
            f"{last.get('lines')} lines, are not the same); it was rewritten or replaced, not "
            "appended to: import it into a new root",
            path=inp.path,
        )


def _feed(
    mapper: Mapper,
    src: SourceReader,
    sink: Sink,
    stops: list[tuple[int, bool]],
    progress: Callable[[int], None] | None,
) -> bool:
    """Map every complete line, stopping where earlier imports stopped; False if the file held
    nothing to import."""
    checked = False
    i = 0
    reported = 0
    ends = [n for n, _ in stops]

    def follow(texts: list[str], start: int, end: int, n: int) -> int:
        if not checked:
            return 0
        # a stretch taken at once ends at the next stop: that line is fed, then its eof runs
        k = bisect.bisect_left(ends, n)
        if k < len(ends):
            end = min(end, start + ends[k] - n + 1)
        return mapper.follow(texts, start, end, n)

    for line in src.read(follow):
        if not checked:
            if line.value is None:
                if line.n >= _SNIFF_LINES:
                    raise FormatError(
                        f"not a {mapper.source} session: no JSON object in the first "
                        f"{_SNIFF_LINES} lines",
                        path=src.path,
                    )
            else:
                why = mapper.sniff(line.value)
                if why is not None:
                    raise FormatError(f"{why}", path=src.path, line=line.n, offset=line.offset)
                checked = True
        mapper.feed(line)
        while i < len(stops) and stops[i][0] == line.n:
            mapper.eof(stops[i][1])
            i += 1
        if checked and len(mapper.specs) >= CHUNK:
            for spec in mapper.take():
                sink.add(spec)
            sink.write()
            if progress is not None:
                progress(src.consumed - reported)
                reported = src.consumed
    if progress is not None:
        progress(src.size - reported)
    if not checked:
        if src.lines:
            raise FormatError(f"not a {mapper.source} session: no JSON object in it", path=src.path)
        return False
    return True


def _stops(markers: list[dict[str, Any]]) -> list[tuple[int, bool]]:
    """Where the runs that wrote ``markers`` stopped: (lines, settled), in order."""
    return sorted({(int(m["lines"]), bool(m.get("settled"))) for m in markers if "lines" in m})


def _mark(
    sink: Sink,
    mapper: Mapper,
    src: SourceReader,
    stat: tuple[int, int],
    settled: bool,
    open_turn: bool,
) -> None:
    """Append the ``import/sync`` marker: where this run stopped, and what the source was."""
    targets = [o.target.session_id for o in mapper.outs.values()]
    data: dict[str, Any] = {
        "source": mapper.source,
        "file": os.path.abspath(src.path),
        "name": mapper.name,
        "lines": src.lines,
        "bytes": src.consumed,
        "sha256": src.sha256,
        "size": stat[0],
        "mtime_ns": str(stat[1]),  # beyond 2**53: a string
        "settled": settled,
        "open_turn": open_turn,
        "mapper": MAPPER_VERSION,
        "targets": targets,
    }
    points = sorted((n, k) for n, k in mapper.rewrite_points.items() if n <= src.lines)
    if points:
        data["rewrites"] = [list(p) for p in points]
    if src.torn is not None:
        data[tail_kind(sink.inp)] = {
            "line": src.torn[0],
            "offset": src.torn[1],
            "bytes": src.torn[2],
        }
    key = f"{mapper.source}:{mapper.name}:sync:{src.lines}:{int(settled)}:{stat[1]}"
    names = [
        name
        for name in mapper.outs
        # not a sidechain with nothing written (and nothing to write), nor marked already
        if (name == "" or name in sink.tapes or sink.batch.get(name))
        and key not in sink.state(name).keys
    ]
    sink.open_all(names)
    # Only the file's own session lists the others: a re-import reads its marker alone, and a
    # list in every session's marker grew as the square of their number (an Aider history of
    # 1,133 runs: 39 of the import's 60 MB)
    rest = {k: v for k, v in data.items() if k != "targets"}
    for name in names:
        batch = sink.batch.setdefault(name, [])
        mark = data if name == "" else rest
        batch.append(({"type": "import/sync", "data": mark, "key": key, "ignorable": True}, MARK))


def discover(
    source: str, paths: Iterable[str | os.PathLike[str]], *, exclude: str | None = None
) -> tuple[list[Item], list[tuple[Path, str]]]:
    """What to import from SOURCE arguments: session files (a :class:`Path` each) and sessions
    that are not files of their own (a :class:`Unit` each: a Gemini CLI legacy ``.json`` chat,
    an OpenCode session); also files skipped on purpose, with why. Trees are walked without
    following symlinks; ``exclude`` is a tree left out (the import root)."""
    return _discover(agent_of(source), paths, exclude=exclude)
