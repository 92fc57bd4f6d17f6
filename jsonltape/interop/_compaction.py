"""Compaction: ``compaction/start``, the summary with the file ledger of what it replaces,
the summary ``user/message`` replacing the surface, and ``compaction/end`` (or its error); or,
when the source gives the history it continues from as messages, those messages in the
surface's place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from ..errors import JsonltapeError
from ..events import Replace, Retract
from ..fold import FileLedger, extract_ops, merge_ledgers, message_text, render_ledger
from ._core import MapperCore
from ._model import Out

__all__ = ["CompactionMixin"]

#: The message types that can take a compacted range's place.
_REPLACING = frozenset({"user/message", "assistant/message"})


class CompactionMixin(MapperCore):
    """Maps a source's compaction onto the surface."""

    def start_compaction(
        self,
        out: Out,
        reason: str | None,
        tokens: int | None,
        *,
        start: int | None = None,
        end: int | None = None,
    ) -> bool:
        """``compaction/start`` over the surface from ``start`` (default: its first node)
        through ``end`` (default: the last); False if there is nothing to compact."""
        self.flush_group(out)
        self.end_compaction(out, "SUMMARY_MISSING", "a new compaction started first")
        nodes = out.surface.nodes
        if not nodes:
            return False
        s = nodes[0] if start is None else start
        e = nodes[-1] if end is None else end
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
        self, out: Out, summary: str, msg_id: str, *, tag: str = "", shown: str | None = None
    ) -> int | None:
        """Summary, the replacing user message and ``compaction/end`` of the started one;
        returns the summary message's vid (None if there was nothing to finish). ``shown``:
        the replacing message's text when the source frames the summary for the model."""
        if out.compaction is None:
            return None
        _n, s, e, _tokens = out.compaction
        if not summary.strip(" \t\n\r"):
            self.end_compaction(out, "EMPTY_SUMMARY", "the source's summary is empty")
            return None
        try:
            shadowed = out.surface.removed_by("user/message", Replace(s, e), None, {"message": {}})
        except JsonltapeError as exc:
            self.end_compaction(out, "SURFACE_CHANGED", exc.message)
            return None
        sv = self._summary(out, summary, shadowed, tag)
        ledger = out.pending_ledger
        rendered = render_ledger(ledger) if ledger is not None else ""
        parts = [{"type": "text", "content": summary if shown is None else shown}]
        if rendered:
            parts.append({"type": "text", "content": rendered})
        mdata = {"message": {"id": msg_id, "role": "user", "parts": parts}, "import": self.imp()}
        mv = self.emit(
            out, "user/message", mdata, self.key(tag or None), surface=("replace", s, e),
            sources=[sv, *shadowed],
        )  # fmt: skip
        self._end(out, mv, tag)
        return mv

    def _summary(self, out: Out, summary: str, shadowed: list[int], tag: str) -> int:
        """``compaction/summary`` of the started compaction over ``shadowed``; its ledger waits
        in ``out.pending_ledger`` for the summary message."""
        assert out.compaction is not None
        n, s, e, tokens = out.compaction
        ledger = self._ledger(out, shadowed)
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
        if render_ledger(ledger):
            data["ledger"] = msgspec.to_builtins(ledger)
        data["import"] = self.imp(raw=False)
        refs = ("compaction", "start", "end")
        out.pending_ledger = ledger
        return self.emit(out, "compaction/summary", data, self.key(f"{tag}summary"), refs=refs)

    def _end(self, out: Out, mv: int, tag: str) -> None:
        """``compaction/end`` naming the summary message ``mv``, which carries the ledger."""
        assert out.compaction is not None
        if out.pending_ledger is not None:
            out.ledgers[mv] = out.pending_ledger
            out.pending_ledger = None
        end = {"compaction": out.compaction[0], "message": mv, "import": self.imp(raw=False)}
        self.emit(
            out,
            "compaction/end",
            end,
            self.key(f"{tag}compaction-end"),
            refs=("compaction", "message"),
        )
        out.compaction = None

    def begin_replacement(self, out: Out, summary: str) -> None:
        """The started compaction's summary, when the source gives the history it continues
        from as messages (Codex's ``replacement_history``): the next message emitted takes the
        compacted range's place (and ``compaction/end`` follows it), the ones after it append;
        :meth:`end_replacement` closes it. Nothing is added to those messages (no ledger text:
        the agent sends them as they are); the ledger is kept in ``compaction/summary``."""
        if out.compaction is None:
            return
        _n, s, e, _tokens = out.compaction
        if not summary.strip(" \t\n\r"):  # an encrypted summary only: say so (not model-visible)
            summary = "(the source's summary is not text)"
        try:
            shadowed = out.surface.removed_by("user/message", Replace(s, e), None, {"message": {}})
        except JsonltapeError as exc:
            self.end_compaction(out, "SURFACE_CHANGED", exc.message)
            return
        sv = self._summary(out, summary, shadowed, "")
        out.replacing = (sv, s, e)

    def replace_history(
        self, out: Out, reason: str, summary: str, items: Callable[[], None]
    ) -> None:
        """A compaction after which the source continues from the history it gives as messages
        (Codex's ``replacement_history``, Qwen Code's ``compressedHistory``): ``items`` maps
        them, and the first message it emits takes the surface's place
        (:meth:`begin_replacement`); with nothing to compact they are simply the history."""
        started = self.start_compaction(out, reason, None)
        if started:
            self.begin_replacement(out, summary)
        items()
        if started:
            self.end_replacement(out)
        else:
            self.flush_group(out)

    def end_replacement(self, out: Out) -> None:
        """Close :meth:`begin_replacement`: when no message took the range's place (the source
        continues from an empty history), the compaction ends with an error and the range is
        retracted, so the surface is what the agent continues from either way."""
        self.flush_group(out)
        if out.replacing is None:
            return
        _sv, s, e = out.replacing
        out.replacing = None
        self.end_compaction(out, "EMPTY_SUMMARY", "the replacement history holds no message")
        try:
            out.surface.removed_by("surface/retract", Retract(s, e))
        except JsonltapeError:
            return  # pragma: no cover - a range just compacted can always be retracted
        data = {"reason": "compacted", "import": self.imp(raw=False)}
        self.emit(out, "surface/retract", data, self.key("replaced"), surface=("retract", s, e))

    def emit(self, out: Out, type_: str, data: dict[str, Any], key: str, **kw: Any) -> int:
        """:meth:`MapperCore.emit`; the first message appended during a replacement (see
        :meth:`begin_replacement`) replaces the compacted range instead."""
        pending = out.replacing
        if pending is None or kw.get("surface") is not None or type_ not in _REPLACING:
            return super().emit(out, type_, data, key, **kw)
        out.replacing = None
        sv, s, e = pending
        shadowed = out.surface.removed_by(type_, Replace(s, e), None, data)
        kw.update(surface=("replace", s, e), sources=[sv, *shadowed])
        mv = super().emit(out, type_, data, key, **kw)
        self._end(out, mv, "")
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
