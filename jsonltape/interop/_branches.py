"""Branches: the source's entry tree (Claude Code ``parentUuid``, pi ``parentId``) and the
``surface/retract`` of the abandoned messages when the source continues from an earlier
entry."""

from __future__ import annotations

from ..errors import JsonltapeError
from ..events import Retract
from ._core import MapperCore
from ._model import Out

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
