"""Branches: the source's entry tree (Claude Code ``parentUuid``, pi ``parentId``) and the
``surface/retract`` of the abandoned messages when the source continues from an earlier
entry, or of a response the source discarded to try again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import JsonltapeError
from ..events import Retract
from ._core import MapperCore
from ._model import Out
from ._raw import runs

__all__ = ["BranchesMixin"]


class BranchesMixin(MapperCore):
    """Follows the source's entry tree."""

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
        if self.refusal(out, after) is not None:
            return  # the source's tree does not fit the surface rules: keep appending
        self.retract(out, after, "branch", "branch", raw=False)

    @staticmethod
    def refusal(out: Out, nodes: Sequence[int]) -> JsonltapeError | None:
        """Why the surface rules refuse retracting the run ``nodes`` (None: they take it)."""
        try:
            out.surface.removed_by("surface/retract", Retract(nodes[0], nodes[-1]))
        except JsonltapeError as exc:
            return exc
        return None

    def retract(
        self, out: Out, nodes: Sequence[int], reason: str, tag: str, *, raw: bool = True
    ) -> None:
        """Retract the run ``nodes`` of the surface (:meth:`refusal` said it may)."""
        data = {"reason": reason, "import": self.imp(raw=raw)}
        self.emit(
            out, "surface/retract", data, self.key(tag),
            surface=("retract", nodes[0], nodes[-1]),
        )  # fmt: skip

    def drop_group(self, out: Out, kind: str) -> None:
        """The source discarded the response being assembled (a failed attempt it retries):
        its lines are kept as one ``import/raw`` (``kind``), and a version of it an earlier
        import emitted leaves the surface (with what followed it), when the surface rules
        take that."""
        g = out.group
        if g is None:
            return
        out.group = None
        if g.vid is not None and out.surface.is_current(g.vid):
            nodes = out.surface.nodes
            after = nodes[nodes.index(g.vid) :]
            if self.refusal(out, after) is None:
                self.retract(out, after, "retried", "retried", raw=False)
        if g.raw:
            info: dict[str, Any] = {"source": self.source, "lines": list(g.lines)}
            info["raw"] = runs(g.raw)
            info["time"] = g.time
            g.raw.clear()
            self.raw_counts[kind] = self.raw_counts.get(kind, 0) + 1
            data = {"kind": kind, "known": True, "import": info}
            self.emit(out, "import/raw", data, self.key("dropped", n=g.lines[0]), ignorable=True)

    def _entry_node(self, out: Out, entry: str) -> int | None:
        g = out.entry_group.get(entry)
        if g is not None:
            return g.vid
        return out.entry_vid.get(entry)
