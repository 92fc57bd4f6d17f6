"""The core of every importer: event specs in a virtual seq space, per-session state,
provenance and the lines kept raw.

A mapper reads a foreign file line by line and emits :class:`Spec` s, jsonltape events whose
seqs (in ``surface``, ``sources`` and the data members named in ``refs``) are *virtual*: the
position of the spec in its target session's stream, counting from 1. Writing maps them to
real seqs (a fresh session gets exactly those seqs; checkpoints shift later ones); the
read-only API uses them as they are.

The mapping is a pure function of the source lines plus the points where an earlier import
stopped (``eof``), so a re-import replays it and only appends what is new: every spec carries
a provenance key (``<source>:<file>:<line>[:<tag>]``) and specs whose key is already in the
session are skipped.

The other jobs (tool calls, growable assistant messages, turns, branches, compaction) are
mixins over :class:`MapperCore`; :class:`~._base.Mapper` puts them together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import msgspec

from .._gate import MAX_DEPTH
from ..errors import JsonltapeError
from ..events import Replace, Retract
from ._model import Out, Spec, Target, line_kind, safe_id, source_lines, title_of
from ._source import SourceLine

__all__ = ["MapperCore", "within_depth"]


_encode = msgspec.json.Encoder().encode


def within_depth(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every array or object that would nest deeper than the format allows
    (spec §6) replaced by its JSON text: sources may nest deeper; the source line itself is
    kept verbatim in the session, so nothing is lost. Cheap when nothing is that deep.

    Iterative, so what is cut off is encoded from a shallow stack (msgspec shares Python's
    recursion limit); the caller's containers are copied, never changed.
    """
    try:
        encoded = _encode(data)
    except RecursionError:  # far deeper than the limit: certainly needs cutting
        encoded = b"[" * MAX_DEPTH
    if encoded.count(b"[") + encoded.count(b"{") < MAX_DEPTH - 1:
        return data  # fewer containers than levels: cannot nest too deep
    out = dict(data)
    # (container in the copy, depth of its children): data is at depth 2 inside the event.
    todo: list[tuple[dict[str, Any] | list[Any], int]] = [(out, 3)]
    while todo:
        node, depth = todo.pop()
        keys: Iterable[Any] = list(node) if isinstance(node, dict) else range(len(node))
        for k in keys:
            value = node[k]
            if not isinstance(value, (dict, list)):
                continue
            if depth > MAX_DEPTH:
                node[k] = _encode(value).decode()
                continue
            copy: dict[str, Any] | list[Any] = (
                dict(value) if isinstance(value, dict) else list(value)
            )
            node[k] = copy
            todo.append((copy, depth + 1))
    return out


class MapperCore:
    """State and event emission of one import; an importer implements :meth:`handle` (and
    :meth:`sniff`)."""

    source = ""
    #: Source line types that map to nothing on purpose (kept as ``import/raw``, not unknown);
    #: a name ending in ``/`` covers all its subtypes (``event_msg/`` → ``event_msg/*``).
    known_raw: frozenset[str] = frozenset()
    #: The source never marks the end of a turn (Claude Code): a finished source whose last
    #: turn ends with a reply and no unanswered call completed it; else it was interrupted.
    implicit_end = False
    #: The source rewrites its sessions in place (whole-file JSON saves, an edited request, a
    #: rewind): a version that is not the imported one grown is imported as a rewrite
    #: (:mod:`._rewrite`) instead of refused.
    rewrites = False
    #: Its events' data may hold what the source's records hold (JSON values, nested as deep
    #: as the source nests them): each is cut to the format's depth (:func:`within_depth`).
    #: A text source's mapper builds its data of strings alone, and says False.
    nested = True

    @staticmethod
    def rewrite_start(value: dict[str, Any]) -> bool:
        """Whether the mapping may start over at this record after a rewrite: a record that
        no assistant message spreads across (a prompt). Record 0 always may."""
        return False

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.specs: list[Spec] = []
        #: specs without a time yet (emitted before the first timed line), oldest first
        self._untimed: list[Spec] = []
        self.outs: dict[str, Out] = {}
        self.line: SourceLine | None = None
        self._claimed = True
        self.time = 0
        #: type -> count of lines kept only as import/raw, and of unknown types among them.
        self.raw_counts: dict[str, int] = {}
        self.unknown: dict[str, int] = {}
        self.problems: list[tuple[int, str]] = []
        self.sanitized = 0
        #: the turns the last ``eof`` closed, by the reason their ``turn/end`` gives
        self.closed: dict[str, int] = {}
        #: sessions with a message whose header is not fixed yet (see ``Target.fix``)
        self._unfixed: dict[Out, bool] = {}  # -> whether it has a reply yet
        #: where the source was rewritten: line -> the record of the version it starts
        self.rewrite_points: dict[int, int] = {}
        #: the line of each record of the version being read (with ``rewrites``)
        self.doc_lines: list[int] = []
        #: the sessions the current line gave an event (in order): only their titles can
        #: have changed (a source with a session per run has thousands of others)
        self._touched: dict[Out, None] = {}

    # -- subclass interface -------------------------------------------------------

    def sniff(self, value: dict[str, Any]) -> str | None:
        """None if the first JSON line looks like this format, else why not."""
        return None

    def handle(self, value: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def follow(self, texts: list[str], start: int, end: int, n: int) -> int:
        """For a text source (:attr:`SourceReader.text`), after a line was fed: how many of the
        lines that come next, ``texts[start:end]`` (numbered from ``n``), this mapper took at
        once, each exactly as :meth:`feed` would have handled it; those lines are read but not
        fed. A mapper takes only lines that emit nothing and change no title (the rest of
        :meth:`feed` is then a no-op for them), and never the stretch's last one, which is fed
        as usual (so :attr:`line` is the last line read whenever anything else runs). By
        default none (0)."""
        return 0

    def new_out(self, name: str, session_id: str, meta: dict[str, Any]) -> Out:
        out = Out(Target(name, session_id, meta))
        self.outs[name] = out
        return out

    # -- driving ------------------------------------------------------------------

    def feed(self, line: SourceLine) -> None:
        # Runs once per source line (an Aider history has 36 lines an event): what it does
        # for every line is kept to a few attribute reads when nothing happened.
        self.line = line
        self._claimed = False
        if self._touched:
            self._touched.clear()
        if self.rewrites:
            k = self.rewrite_points.get(line.n)
            if k is not None:
                self.rewrite(k)
            self.doc_lines.append(line.n)
        if line.sanitized:
            self.sanitized += 1
        if line.value is None:
            self.problems.append((line.n, line.error or "unreadable"))
            self.raw_line("malformed", known=False, error=line.error)
            return
        try:
            self.handle(line.value)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, JsonltapeError) as exc:
            self.problems.append((line.n, f"not mapped: {type(exc).__name__}: {exc}"))
            self._claimed = False
            self.raw_line(line_kind(line.value), known=False, error=f"{type(exc).__name__}: {exc}")
        if not self._claimed:
            kind = line_kind(line.value)
            known = kind in self.known_raw or kind.split("/")[0] + "/" in self.known_raw
            self.raw_line(kind, known=known)
        if self._unfixed:
            for out, replied in list(self._unfixed.items()):
                # after the whole line (its title, cwd, ... count): once the session has a
                # message and a title, or its first reply
                if replied or out.target.title is not None:
                    out.target.fix()
                    del self._unfixed[out]
        self._retitle(self.main_out())
        if self._touched:
            for out in list(self._touched):
                self._retitle(out)

    def _retitle(self, out: Out) -> None:
        target = out.target
        if target.header is not target and target.title not in (None, target.shown):
            # named after its header was fixed (a rename, a summary): the latest title wins
            target.shown = target.title
            self.emit(
                out, "session/title", {"title": target.title, "import": self.imp(raw=False)},
                self.key("title"), ignorable=True,
            )  # fmt: skip

    def take(self, *, final_time: int | None = None) -> list[Spec]:
        """The specs ready to be written, in order. An event without a time of its own (a
        source line before the first timed one: a Claude Code ``summary``) takes its nearest
        timed neighbour's, the next timed event's, never the import's clock (which would make
        time run backwards and an old session look new); until that event comes, it and what
        follows wait. ``final_time`` (the source's change time, epoch ms): nothing more comes;
        the ones still waiting take it."""
        if self._untimed and final_time is not None:
            for spec in self._untimed:
                spec.time = final_time
            self._untimed.clear()
        if self._untimed:
            first = self._untimed[0]
            cut = next(i for i, spec in enumerate(self.specs) if spec is first)
            ready, self.specs = self.specs[:cut], self.specs[cut:]
            return ready
        specs, self.specs = self.specs, []
        return specs

    # -- building blocks ----------------------------------------------------------

    @property
    def n(self) -> int:
        # derived, not kept: mappers that replay held lines set ``line`` back and forth
        return self.line.n if self.line is not None else 0

    def key(self, tag: str | None = None, n: int | None = None) -> str:
        base = f"{self.source}:{self.name}:{self.n if n is None else n}"
        return f"{base}:{tag}" if tag else base

    def imp(self, *, raw: bool = True, lines: Iterable[int] | None = None) -> dict[str, Any]:
        """Provenance of an event from the current line; ``raw`` claims the line's verbatim
        text for this event (each line's text is carried by exactly one event)."""
        info: dict[str, Any] = {"source": self.source}
        info["lines"] = list(lines) if lines is not None else [self.n]
        if raw and not self._claimed and self.line is not None:
            info["raw"] = {str(self.n): self.line.raw}
            self._claimed = True
        if self.time:
            info["time"] = self.time
        return info

    def claim(self) -> str | None:
        """Take the current line's raw text (for a group that carries it later)."""
        if self._claimed or self.line is None:
            return None
        self._claimed = True
        return self.line.raw

    def emit(
        self,
        out: Out,
        type_: str,
        data: dict[str, Any],
        key: str,
        *,
        surface: tuple[str, int, int] | None = None,
        sources: list[int] | None = None,
        refs: tuple[str, ...] = (),
        ignorable: bool | None = None,
        time: int | None = None,
    ) -> int:
        if self.nested:
            data = within_depth(data)
        self._touched[out] = None
        vid = out.next_vid
        op: Replace | Retract | str | None = None
        if surface is not None:
            op = (Replace if surface[0] == "replace" else Retract)(surface[1], surface[2])
        elif type_ in ("user/message", "assistant/message", "tool/result"):
            op = "append"
            if out.target.header is out.target and (
                type_ == "assistant/message" or out not in self._unfixed
            ):
                self._unfixed[out] = type_ == "assistant/message" or self._unfixed.get(out, False)
        changes = out.surface.apply_parts(vid, type_, op, sources, data)
        out.next_vid += 1
        replaced: list[int] = []  # the source lines of what a replacement takes off the surface
        for s, status in changes:
            if status == "current":
                out.data[s] = data
                out.types[s] = type_
            else:
                covered = out.covered.pop(s, None)
                if isinstance(op, Replace):
                    replaced += source_lines(out.data.get(s))
                    if covered is not None:
                        replaced.append(covered)
                out.data.pop(s, None)
                out.types.pop(s, None)
                out.ledgers.pop(s, None)
        if replaced:
            out.covered[vid] = min(replaced)
        t = self.time if time is None else time
        out.last_time = max(out.last_time, t)
        spec = Spec(out.target.name, vid, type_, data, key, t)
        spec.surface, spec.sources, spec.refs, spec.ignorable = surface, sources, refs, ignorable
        self.specs.append(spec)
        if t <= 0:
            self._untimed.append(spec)  # takes the next timed event's time (see take)
        elif self._untimed:
            for waiting in self._untimed:
                waiting.time = t
            self._untimed.clear()
        if type_ == "tool/result":
            out.pending.pop(str(data.get("call_id")), None)
        return vid

    def raw_line(self, kind: str, *, known: bool, error: str | None = None) -> None:
        """Keep the current line as an ignorable ``import/raw`` event of the main session."""
        out = self.main_out()
        self.raw_counts[kind] = self.raw_counts.get(kind, 0) + 1
        if not known:
            self.unknown[kind] = self.unknown.get(kind, 0) + 1
        data: dict[str, Any] = {"kind": kind, "known": known}
        if error is not None:
            data["error"] = error
        data["import"] = self.imp()
        self.emit(out, "import/raw", data, self.key("raw"), ignorable=True)

    def main_out(self) -> Out:
        return self.outs[""]

    def side_out(self, root: str, meta: dict[str, Any], prompt: str | None) -> Out:
        """A session of its own for a sub-agent whose records the source writes into the main
        file (a Claude Code or Qwen Code sidechain), named ``<main id>.sidechain-<root>``: forked
        from the main session at seq 0 (it inherits none of its messages), its
        ``meta.import`` ``{source, sidechain: root, **meta}``, titled by its first ``prompt``."""
        name = f"sidechain-{root}"
        main = self.main_out().target
        info: dict[str, Any] = {"source": self.source, "sidechain": root}
        info.update(meta)
        out = self.new_out(name, safe_id(f"{main.session_id}.{name}"), {"import": info})
        target = out.target
        target.child_of_main = True
        target.cwd = main.cwd
        target.agent = main.agent
        target.created = self.time or None
        if prompt is not None and prompt.strip():
            target.title = title_of(prompt)
        return out

    # -- messages -----------------------------------------------------------------

    def message(
        self,
        out: Out,
        type_: str,
        role: str,
        parts: list[dict[str, Any]],
        msg_id: str,
        *,
        tag: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Append a user (or system) message from the current line."""
        self.flush_group(out)
        data: dict[str, Any] = {"message": {"id": msg_id, "role": role, "parts": parts}}
        if extra:
            data.update(extra)
        data["import"] = self.imp()
        return self.emit(out, type_, data, self.key(tag))

    def set_request(
        self, out: Out, *, n: int | None = None, raw: bool = False, **changes: Any
    ) -> None:
        """Emit a ``request/header`` when model, provider, system or params change (the latest
        one wins, so each carries the whole state)."""
        new = dict(out.request)
        for k, v in changes.items():
            if v is None:
                continue
            if k == "params":
                params = dict(new.get("params") or {})
                params.update({pk: pv for pk, pv in v.items() if pv is not None})
                if params:
                    new["params"] = params
            else:
                new[k] = v
        if new == out.request:
            return
        out.request = new
        out.request_log.append((self.n if n is None else n, new))
        data = dict(new)
        data["import"] = self.imp(raw=raw, lines=None if n is None else [n])
        self.emit(out, "request/header", data, self.key("request", n=n))

    def source_title(self, title: str | None) -> None:
        """The title the source keeps for the session beside its records (what the agent's
        UI shows, :attr:`~._source.Unit.title`): the session's title; a prompt never is."""
        if title is not None and title.strip():
            self.main_out().target.title = title_of(title)

    def source_created(self, created: int | None) -> None:
        """The creation time the source keeps beside its records (:attr:`~._source.Unit.created`):
        the main session's, unless a record gives one."""
        target = self.main_out().target
        if created is not None and created > 0 and target.created is None:
            target.created = created

    def retitle(self, title: str, shown: str | None, time: int) -> None:
        """A ``session/title`` when the source's own title (:meth:`source_title`) is not the
        one the imported session shows (``shown``): the source renamed it since."""
        new = title_of(title)
        if not title.strip() or new == shown:
            return
        out = self.main_out()
        digest = hashlib.sha256(new.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        data = {"title": new, "import": self.imp(raw=False)}
        self.emit(
            out, "session/title", data, self.key(f"title:{digest}"), ignorable=True, time=time
        )

    def note_title(self, out: Out, text: Any) -> None:
        """Take a session title from the first prompt if the source gives none."""
        if out.target.title is None and isinstance(text, str) and text.strip():
            out.target.title = title_of(text)

    def rewrite(self, k: int) -> None:
        """The source was rewritten from its record ``k`` on (this line is the new one):
        :class:`~._base.Mapper` implements it."""
        raise NotImplementedError

    # -- the open assistant message -------------------------------------------------------

    def flush_group(self, out: Out, *, keep: bool = False) -> None:
        """Emit the open assistant message (every event of a later line comes after it);
        :class:`~._groups.GroupsMixin` implements it."""
        raise NotImplementedError
