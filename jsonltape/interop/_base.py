"""The base class of the importers, put together from one module per job:

* :mod:`._core`: specs in a virtual seq space, per-session state, feeding lines, provenance
  (keys, ``import`` info, raw text), ``import/raw``, user messages, request headers;
* :mod:`._tools`: ``tool/call`` per call, pending calls, ``tool/result``;
* :mod:`._groups`: growable assistant messages (one model response over several lines);
* :mod:`._turns`: turns, and closing the ones the source left open;
* :mod:`._branches`: the entry tree and retracting abandoned branches;
* :mod:`._compaction`: compactions with their file ledger;
* :mod:`._parts`: the parts, media and usage a source's content maps to.

A new importer is a :class:`Mapper` subclass that sets ``source`` (and ``known_raw``,
``implicit_end``), reads one line in :meth:`~._core.MapperCore.handle` and builds its parts with
:mod:`._parts`; what it decides is only what its lines mean::

    class FooMapper(Mapper):
        source = "foo"

        def __init__(self, name: str, path: str, session_id: str) -> None:
            super().__init__(name, path)
            self.main = self.new_out("", session_id, {})

        def handle(self, v: dict[str, Any]) -> None:
            if v.get("role") == "user":
                self.start_turn(self.main)
                parts = parts_of(v.get("content"), foo_block)
                self.message(self.main, "user/message", "user", parts, v["id"])
            # a line nothing claims is kept as import/raw

Everything an importer emits goes through these methods, so the event shapes, provenance and
closing rules are the same for every source.
"""

from __future__ import annotations

from ..errors import FormatError
from ._branches import BranchesMixin
from ._compaction import CompactionMixin
from ._groups import GroupsMixin
from ._model import MAPPER_VERSION, Group, Out, Spec, Target, safe_id, source_lines, title_of
from ._turns import TurnsMixin

__all__ = ["MAPPER_VERSION", "Group", "Mapper", "Out", "Spec", "Target", "safe_id", "title_of"]


class Mapper(TurnsMixin, BranchesMixin, CompactionMixin, GroupsMixin):
    """Base class of the importers. Subclasses implement :meth:`handle` (and :meth:`sniff`)."""

    def rewrite(self, k: int) -> None:
        """The source was rewritten from its record ``k`` on (:mod:`._rewrite`; this line is
        the first of the new version): each session's open turn ends, and what the records
        from ``k`` on put on its surface is retracted (reason ``rewritten``), so that the
        surface is what the version up to ``k`` gives; :meth:`rewound` then resets what the
        subclass keeps. A cut the surface rules refuse is a problem, and nothing is retracted."""
        cut = self.doc_lines[k] if k < len(self.doc_lines) else None
        del self.doc_lines[k:]
        if cut is None:
            return
        for out in list(self.outs.values()):
            self.flush_group(out)
            self.end_turn(out, "completed", tag="rewrite:end")
            self.end_compaction(out, "REWRITTEN", "the source was rewritten before the summary")
            self._request_at(out, cut)
            nodes = out.surface.nodes
            at = next(
                (
                    i
                    for i, v in enumerate(nodes)
                    if min(source_lines(out.data.get(v)), default=0) >= cut
                ),
                len(nodes),
            )
            run = nodes[at:]
            if not run:
                continue
            if any(
                min(source_lines(out.data.get(v)), default=cut) < cut
                or out.covered.get(v, cut) < cut
                for v in run
            ):
                # a summary made after the cut replaced earlier messages (its own lines may all
                # be after the cut), which a retraction cannot bring back: no surface of these
                # events is the rewritten version's
                raise FormatError(
                    f"rewritten from record {k} on, before a compaction that summarized it: "
                    "the compacted messages cannot be taken back; import it into a new root "
                    "to read its new version",
                    path=self.path,
                )
            refused = self.refusal(out, run)
            if refused is not None:
                self.problems.append((self.n, f"rewrite: not retracted: {refused.message}"))
                continue
            self.retract(out, run, "rewritten", "rewrite", raw=False)
        self.rewound(k)

    def _request_at(self, out: Out, cut: int) -> None:
        """The request state as the lines before ``cut`` left it, again (a model change the
        rewrite dropped no longer applies)."""
        kept = [entry for entry in out.request_log if entry[0] < cut]
        state = kept[-1][1] if kept else {}
        del out.request_log[len(kept) :]
        if state == out.request:
            return
        out.request = state
        out.request_log.append((self.n, state))
        data = {**state, "import": self.imp(raw=False)}
        self.emit(out, "request/header", data, self.key("rewrite:request"))

    def rewound(self, k: int) -> None:
        """Hook: forget what the subclass kept about records ``k`` on (after :meth:`rewrite`)."""

    def close_open(self, out: Out, tag: str) -> None:
        """Close what a finished source (or a finished part of one: an Aider run) left open
        in ``out``: a compaction without its summary; the open turn the way repair closes a
        crashed one, or, for a source that never marks a turn's end, as completed when it
        ended with a reply and no unanswered call."""
        self.end_compaction(out, "SUMMARY_MISSING", "the source ends before the summary")
        if out.turn is None:
            return
        nodes = out.surface.nodes
        last = out.types.get(nodes[-1]) if nodes else None
        if self.implicit_end and not out.pending and last == "assistant/message":
            self.end_turn(out, "completed", tag=f"{tag}:end")  # it ended with a reply
        else:
            self.close_interrupted(out, tag)

    def eof(self, settled: bool) -> None:
        """The source ends here (for now): emit what is pending; if the source is finished
        (``settled``), close turns it left open the way repair closes a crashed turn (or, for
        a source that never marks a turn's end, as completed when it ended with a reply).
        :attr:`closed` then counts the turns closed, by the reason their ``turn/end`` gives."""
        self.closed.clear()
        first = len(self.specs)
        for out in list(self.outs.values()):
            self.flush_group(out, keep=True)  # it may still grow: later lines revise it
            if settled:
                self.close_open(out, "eof")
        for spec in self.specs[first:]:
            if spec.type == "turn/end":
                reason = str(spec.data.get("reason"))
                self.closed[reason] = self.closed.get(reason, 0) + 1
        # Where a run stops its sessions may be written (an import creates a session at its
        # last write at the latest): their headers are what is known here, and a title the
        # source gives later is a session/title, as after any fixed header.
        for out in self.outs.values():
            if out.next_vid > 1:
                out.target.fix()
        self._unfixed.clear()
