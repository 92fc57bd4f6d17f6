"""What every importer shares: event specs in a virtual seq space, per-session state, turns,
tool-call bookkeeping, closers, branches, compaction and growable assistant messages.

A mapper reads a foreign file line by line and emits :class:`Spec` s, jsonltape events whose
seqs (in ``surface``, ``sources`` and the data members named in ``refs``) are *virtual*: the
position of the spec in its target session's stream, counting from 1. Writing maps them to
real seqs (a fresh session gets exactly those seqs; checkpoints shift later ones); the
read-only API uses them as they are.

The mapping is a pure function of the source lines plus the points where an earlier import
stopped (``eof``), so a re-import replays it and only appends what is new: every spec carries
a provenance key (``<source>:<file>:<line>[:<tag>]``) and specs whose key is already in the
session are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from .._gate import MAX_DEPTH
from .._repair import NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT
from ..errors import JsonltapeError
from ..events import Replace, Retract
from ..fold import (
    FileLedger,
    extract_ops,
    merge_ledgers,
    message_text,
    render_ledger,
)
from ._model import (
    MAPPER_VERSION,
    Group,
    Out,
    Spec,
    Target,
    call_ids,
    line_kind,
    safe_id,
    title_of,
)
from ._source import SourceLine

__all__ = ["MAPPER_VERSION", "Group", "Mapper", "Out", "Spec", "Target", "safe_id", "title_of"]


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


class Mapper:
    """Base class of the importers. Subclasses implement :meth:`handle` (and :meth:`sniff`)."""

    source = ""
    #: Source line types that map to nothing on purpose (kept as ``import/raw``, not unknown);
    #: a name ending in ``/`` covers all its subtypes (``event_msg/`` → ``event_msg/*``).
    known_raw: frozenset[str] = frozenset()
    #: The source never marks the end of a turn (Claude Code): a finished source whose last
    #: turn ends with a reply and no unanswered call completed it; else it was interrupted.
    implicit_end = False

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self.specs: list[Spec] = []
        self.outs: dict[str, Out] = {}
        self.line: SourceLine | None = None
        self._claimed = True
        self.time = 0
        #: type -> count of lines kept only as import/raw, and of unknown types among them.
        self.raw_counts: dict[str, int] = {}
        self.unknown: dict[str, int] = {}
        self.problems: list[tuple[int, str]] = []
        self.sanitized = 0

    # -- subclass interface -------------------------------------------------------------

    def sniff(self, value: dict[str, Any]) -> str | None:
        """None if the first JSON line looks like this format, else why not."""
        return None

    def handle(self, value: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def new_out(self, name: str, session_id: str, meta: dict[str, Any]) -> Out:
        out = Out(Target(name, session_id, meta))
        self.outs[name] = out
        return out

    # -- driving ------------------------------------------------------------------------

    def feed(self, line: SourceLine) -> None:
        self.line = line
        self._claimed = False
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

    def eof(self, settled: bool) -> None:
        """The source ends here (for now): emit what is pending; if the source is finished
        (``settled``), close turns it left open the way repair closes a crashed turn."""
        for out in list(self.outs.values()):
            self.flush_group(out, keep=True)  # it may still grow: later lines revise it
            if settled:
                self.end_compaction(out, "SUMMARY_MISSING", "the source ends before the summary")
                if out.turn is None:
                    continue
                nodes = out.surface.nodes
                last = out.types.get(nodes[-1]) if nodes else None
                if self.implicit_end and not out.pending and last == "assistant/message":
                    self.end_turn(out, "completed", tag="eof:end")  # it ended with a reply
                else:
                    self.close_interrupted(out, "eof")

    def take(self) -> list[Spec]:
        specs, self.specs = self.specs, []
        return specs

    # -- building blocks ----------------------------------------------------------------

    @property
    def n(self) -> int:
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
        data = within_depth(data)
        vid = out.next_vid
        op: Replace | Retract | str | None = None
        if surface is not None:
            op = (Replace if surface[0] == "replace" else Retract)(surface[1], surface[2])
        elif type_ in ("user/message", "assistant/message", "tool/result"):
            op = "append"
        changes = out.surface.apply_parts(vid, type_, op, sources, data)
        out.next_vid += 1
        for s, status in changes:
            if status == "current":
                out.data[s] = data
                out.types[s] = type_
            else:
                out.data.pop(s, None)
                out.types.pop(s, None)
                out.ledgers.pop(s, None)
        t = self.time if time is None else time
        out.last_time = max(out.last_time, t)
        spec = Spec(out.target.name, vid, type_, data, key, t)
        spec.surface, spec.sources, spec.refs, spec.ignorable = surface, sources, refs, ignorable
        self.specs.append(spec)
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

    # -- turns and tools ----------------------------------------------------------------

    def start_turn(self, out: Out, *, raw: bool = False) -> None:
        if out.turn is not None:
            self.end_turn(out, "completed")
        self.flush_group(out)
        out.turn = self.emit(out, "turn/start", {"import": self.imp(raw=raw)}, self.key("turn"))

    def end_turn(
        self,
        out: Out,
        reason: str,
        error: dict[str, Any] | None = None,
        tag: str = "end",
        *,
        raw: bool = False,
    ) -> None:
        if out.turn is None:
            return
        self.flush_group(out)
        if out.pending and reason == "completed":
            self.close_interrupted(out, tag)
            return
        data: dict[str, Any] = {"turn": out.turn, "reason": reason}
        if error is not None:
            data["error"] = error
        data["import"] = self.imp(raw=raw)
        self.emit(out, "turn/end", data, self.key(tag), refs=("turn",))
        out.turn = None
        out.pending.clear()

    def close_interrupted(self, out: Out, tag: str) -> None:
        """Close the open turn like repair does: an error result for each unanswered call
        (outcome unknown if a tool/call was recorded), then turn/end ``interrupted``."""
        self.flush_group(out)
        for i, (call_id, call_vid) in enumerate(list(out.pending.items())):
            recorded = call_vid is not None
            text = OUTCOME_UNKNOWN_TEXT if recorded else NOT_STARTED_TEXT
            code = "TOOL_OUTCOME_UNKNOWN" if recorded else "TOOL_NOT_STARTED"
            part: dict[str, Any] = {"type": "tool_call_response", "id": call_id}
            part.update(response=text, is_error=True)
            data: dict[str, Any] = {
                "call_id": call_id,
                "message": {"id": f"interrupted-{call_id}", "role": "tool", "parts": [part]},
                "error": {"code": code, "message": text},
                "synthetic": True,
                "import": self.imp(raw=False),
            }
            sources = [call_vid] if call_vid is not None else None
            self.emit(
                out, "tool/result", data, self.key(f"{tag}:closer:{i}"), sources=sources,
                time=out.last_time,
            )  # fmt: skip
        data = {"turn": out.turn, "reason": "interrupted", "synthetic": True}
        data["import"] = self.imp(raw=False)
        self.emit(out, "turn/end", data, self.key(f"{tag}:interrupted"), refs=("turn",))
        out.turn = None
        out.pending.clear()

    def tool_calls(self, out: Out, parts: list[dict[str, Any]], first: int) -> None:
        """A ``tool/call`` for each tool_call part not recorded yet (the source ran them)."""
        group = out.group
        for p in parts:
            if p.get("type") != "tool_call":
                continue
            call_id = p["id"]
            if group is not None and call_id in group.calls:
                continue
            data: dict[str, Any] = {"call_id": call_id, "name": p["name"]}
            if p.get("arguments") is not None:
                data["arguments"] = p["arguments"]
            refs: tuple[str, ...] = ()
            if out.turn is not None:
                data["turn"] = out.turn
                refs = ("turn",)
            data["import"] = self.imp(raw=False, lines=self._group_lines(out))
            key = self.key(f"call:{call_id}", n=first)
            vid = self.emit(out, "tool/call", data, key, refs=refs)
            if group is not None:
                group.calls.add(call_id)
            if out.turn is not None:
                out.pending[call_id] = vid
            self.after_tool_call(out, p, data["import"], first)

    def after_tool_call(
        self, out: Out, part: dict[str, Any], imp: dict[str, Any], first: int
    ) -> None:
        """Hook: extra events for a tool call (Claude Code's TodoWrite gives a todo/write)."""

    def _group_lines(self, out: Out) -> list[int]:
        return list(out.group.lines) if out.group is not None else [self.n]

    def tool_result(
        self,
        out: Out,
        call_id: str,
        response: Any,
        *,
        is_error: bool,
        msg_id: str,
        tag: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        self.flush_group(out)
        part: dict[str, Any] = {"type": "tool_call_response", "id": call_id, "response": response}
        if is_error:
            part["is_error"] = True
        data: dict[str, Any] = {
            "call_id": call_id,
            "message": {"id": msg_id, "role": "tool", "parts": [part]},
        }
        if extra:
            data.update(extra)
        data["import"] = self.imp()
        return self.emit(out, "tool/result", data, self.key(tag))

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
        data = dict(new)
        data["import"] = self.imp(raw=raw, lines=None if n is None else [n])
        self.emit(out, "request/header", data, self.key("request", n=n))

    # -- growable assistant messages ----------------------------------------------------

    def group_for(self, out: Out, msg_id: str) -> Group:
        """The open group with this message id, or a new one (closing the previous)."""
        g = out.group
        if g is not None and g.msg_id == msg_id:
            return g
        self.flush_group(out)
        g = Group(out, msg_id, self.time)
        out.group = g
        return g

    def add_line(self, g: Group, source_id: str | None = None) -> None:
        g.lines.append(self.n)
        raw = self.claim()
        if raw is not None:
            g.raw[str(self.n)] = raw
        if source_id:
            g.ids.append(source_id)

    def flush_group(self, out: Out, *, keep: bool = False) -> None:
        """Emit the open group's message (or a revision of the version emitted at an earlier
        end of the source) and its tool calls; ``keep`` leaves the group open to growth."""
        g = out.group
        if g is None:
            return
        out.group = None
        if g.vid is not None and g.emitted_lines == len(g.lines):
            if keep:
                out.group = g
            return  # nothing new since the version on the surface
        first = g.lines[0]
        if g.model is not None:
            self.set_request(out, model=g.model, n=first)
        data: dict[str, Any] = {"message": {"id": g.msg_id, "role": "assistant", "parts": g.parts}}
        if g.model is not None:
            data["model"] = g.model
        if g.usage is not None:
            data["usage"] = g.usage
        refs: tuple[str, ...] = ()
        if out.turn is not None:
            data["turn"] = out.turn
            refs = ("turn",)
        info: dict[str, Any] = {"source": self.source, "lines": list(g.lines)}
        if g.raw:
            info["raw"] = dict(g.raw)
            g.raw.clear()
        if g.ids:
            info["ids"] = list(g.ids)
        info.update(g.extra)
        info["time"] = g.time
        data["import"] = info
        if g.vid is None or not out.surface.is_current(g.vid):
            vid = self.emit(out, "assistant/message", data, self.key(n=first), refs=refs)
        else:  # the source grew a message emitted at an earlier end: revise it in place
            key = f"{self.key(n=first)}+{g.lines[-1]}"
            vid = self.emit(
                out, "assistant/message", data, key, surface=("replace", g.vid, g.vid),
                sources=[g.vid], refs=refs,
            )  # fmt: skip
        g.vid, g.emitted_lines = vid, len(g.lines)
        for call_id in call_ids(g.parts):
            if call_id not in g.calls and out.turn is not None:
                out.pending.setdefault(call_id, None)
        out.group = g  # tool_calls reads the group's lines and recorded calls
        self.tool_calls(out, g.parts, first)
        out.group = g if keep else None

    # -- branches -------------------------------------------------------------------------

    def branch_to(
        self, out: Out, parent: str | None, entry: str | None, *, message: bool = True
    ) -> None:
        """Track the entry tree; when a message continues from an earlier entry instead of
        the leaf (a rewind or a pi ``/tree`` branch), retract the abandoned messages."""
        if entry is None:
            return
        out.parent_of.setdefault(entry, parent)
        leaf, out.leaf = out.leaf, entry
        if not message or parent is None or parent == leaf or parent not in out.parent_of:
            return
        if out.group is not None and out.entry_group.get(entry) is not out.group:
            self.flush_group(out)  # the reply being assembled belongs to the branch left
        anchor: int | None = None
        p: str | None = parent
        seen = 0
        while p is not None and seen < 100_000:
            seen += 1
            vid = self._entry_node(out, p)
            if vid is not None and out.surface.is_current(vid):
                anchor = vid
                break
            p = out.parent_of.get(p)
        nodes = out.surface.nodes
        after = nodes[nodes.index(anchor) + 1 :] if anchor is not None else nodes
        if not any(out.types.get(v) != "tool/result" for v in after):
            return  # only results of the anchor's own calls follow: parallel results
        op = Retract(after[0], after[-1])
        try:
            out.surface.removed_by("surface/retract", op)
        except JsonltapeError:
            return  # the source's tree does not fit the surface rules: keep appending
        data = {"reason": "branch", "import": self.imp(raw=False)}
        self.emit(
            out, "surface/retract", data, self.key("branch"),
            surface=("retract", after[0], after[-1]),
        )  # fmt: skip

    def _entry_node(self, out: Out, entry: str) -> int | None:
        g = out.entry_group.get(entry)
        if g is not None:
            return g.vid
        return out.entry_vid.get(entry)

    # -- compaction ---------------------------------------------------------------------

    def start_compaction(
        self, out: Out, reason: str | None, tokens: int | None, *, end: int | None = None
    ) -> bool:
        """``compaction/start`` over the surface from its first node through ``end`` (default:
        the last); False if there is nothing to compact."""
        self.flush_group(out)
        self.end_compaction(out, "SUMMARY_MISSING", "a new compaction started first")
        nodes = out.surface.nodes
        if not nodes:
            return False
        s, e = nodes[0], nodes[-1] if end is None else end
        data: dict[str, Any] = {"start": s, "end": e}
        if reason:
            data["reason"] = reason
        data["import"] = self.imp()
        vid = self.emit(
            out, "compaction/start", data, self.key("compaction"), refs=("start", "end")
        )
        out.compaction = (vid, s, e, tokens)
        return True

    def finish_compaction(
        self, out: Out, summary: str, msg_id: str, *, tag: str = ""
    ) -> int | None:
        """Summary, the replacing user message and ``compaction/end`` of the started one;
        returns the summary message's vid (None if there was nothing to finish)."""
        if out.compaction is None:
            return None
        n, s, e, tokens = out.compaction
        if not summary.strip(" \t\n\r"):
            self.end_compaction(out, "EMPTY_SUMMARY", "the source's summary is empty")
            return None
        try:
            shadowed = out.surface.removed_by("user/message", Replace(s, e), None, {"message": {}})
        except JsonltapeError as exc:
            self.end_compaction(out, "SURFACE_CHANGED", exc.message)
            return None
        ledger = self._ledger(out, shadowed)
        rendered = render_ledger(ledger)
        data: dict[str, Any] = {
            "compaction": n,
            "summary": summary,
            "start": s,
            "end": e,
            "count": len(shadowed),
            "chars": len(summary),
            "shadowed_chars": sum(len(message_text(out.data.get(v, {}))) for v in shadowed),
        }
        if tokens is not None:
            data["tokens"] = tokens
        if rendered:
            data["ledger"] = msgspec.to_builtins(ledger)
        data["import"] = self.imp(raw=False)
        refs = ("compaction", "start", "end")
        sv = self.emit(out, "compaction/summary", data, self.key(f"{tag}summary"), refs=refs)
        parts = [{"type": "text", "content": summary}]
        if rendered:
            parts.append({"type": "text", "content": rendered})
        mdata = {"message": {"id": msg_id, "role": "user", "parts": parts}, "import": self.imp()}
        mv = self.emit(
            out, "user/message", mdata, self.key(tag or None), surface=("replace", s, e),
            sources=[sv, *shadowed],
        )  # fmt: skip
        out.ledgers[mv] = ledger
        end = {"compaction": n, "message": mv, "import": self.imp(raw=False)}
        self.emit(
            out,
            "compaction/end",
            end,
            self.key(f"{tag}compaction-end"),
            refs=("compaction", "message"),
        )
        out.compaction = None
        return mv

    def end_compaction(self, out: Out, code: str, message: str) -> None:
        if out.compaction is None:
            return
        n = out.compaction[0]
        data = {"compaction": n, "error": {"code": code, "message": message}}
        data["import"] = self.imp(raw=False)
        self.emit(out, "compaction/end", data, self.key("compaction-error"), refs=("compaction",))
        out.compaction = None

    def _ledger(self, out: Out, shadowed: list[int]) -> FileLedger:
        calls: list[tuple[str, str, Any]] = []
        failed: set[str] = set()
        previous = [out.ledgers[v] for v in shadowed if v in out.ledgers]
        for v in shadowed:
            data = out.data.get(v, {})
            parts = (data.get("message") or {}).get("parts") or []
            if out.types.get(v) == "assistant/message":
                for p in parts:
                    if isinstance(p, dict) and p.get("type") == "tool_call":
                        calls.append((p["id"], p["name"], p.get("arguments")))
            elif out.types.get(v) == "tool/result" and any(
                isinstance(p, dict) and p.get("is_error") is True for p in parts
            ):
                failed.add(str(data.get("call_id")))
        return merge_ledgers(previous, extract_ops(calls, failed))

    # -- small helpers ------------------------------------------------------------------

    def note_title(self, out: Out, text: Any) -> None:
        """Take a session title from the first prompt if the source gives none."""
        if out.target.title is None and isinstance(text, str) and text.strip():
            out.target.title = title_of(text)
