"""Compaction: ``compaction/start``, the summary with the file ledger of what it replaces,
the summary ``user/message`` replacing the surface, and ``compaction/end`` (or its error)."""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import JsonltapeError
from ..events import Replace
from ..fold import FileLedger, extract_ops, merge_ledgers, message_text, render_ledger
from ._core import MapperCore
from ._model import Out

__all__ = ["CompactionMixin"]


class CompactionMixin(MapperCore):
    """Maps a source's compaction onto the surface."""

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
        self, out: Out, summary: str, msg_id: str, *, tag: str = "", shown: str | None = None
    ) -> int | None:
        """Summary, the replacing user message and ``compaction/end`` of the started one;
        returns the summary message's vid (None if there was nothing to finish). ``shown``:
        the replacing message's text when the source frames the summary for the model."""
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
        parts = [{"type": "text", "content": summary if shown is None else shown}]
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
