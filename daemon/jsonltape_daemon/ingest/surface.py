"""``jsonltape.fold.SurfaceFold.apply``, one event at a time, over the ``messages`` table.

The index keeps the fold's state in rows instead of memory, so an append to a session of a
million events costs the same as to a small one: current nodes are the rows with status
``current`` and their ``anchor`` (the same anchor scheme, so surface order is ``ORDER BY
anchor``), tool results carry their ``call_id``, assistant messages their declared calls
(``calls``, and the ``tool_calls`` table to find them by id). A range operation looks up only
the nodes and calls it touches. The rules are the fold's (a test holds every status to
``SurfaceFold``): both range ends current and in order; only ``surface/retract`` retracts; a
tool result is replaced only in place, by a result for the same call; removing the last
declaration of an answered call removes its results too (a replace must list them in
``sources``); removing every result of a call that stays declared is refused; a replacement
whose sources name a compaction, prune or handoff event compacts, any other supersedes. A
message event whose operation is refused is stored as ``rejected``.
"""

from __future__ import annotations

from jsonltape.events import SURFACE_TYPES, Event, Replace, Retract
from jsonltape.fold import tool_call_ids
from jsonltape_daemon.ingest.rows import MessageRow, Node, Store
from jsonltape_daemon.text.extract import message_fields

__all__ = ["SurfaceMirror", "message_row"]


def message_row(sid: int, event: Event, status: str, anchor: int | None) -> MessageRow:
    t = event.type
    role, text, truncated = message_fields(t, event.data)
    return MessageRow(
        sid,
        event.seq,
        t,
        role,
        event.time,
        status,
        anchor,
        str(event.data.get("call_id")) if t == "tool/result" else None,
        tool_call_ids(event.data) if t == "assistant/message" else (),
        text,
        truncated,
    )


class SurfaceMirror:
    def __init__(self, store: Store) -> None:
        self.store = store

    def apply(self, sid: int, event: Event, pending: list[MessageRow]) -> int:
        """Fold one ``SURFACE_TYPES`` or ``surface/retract`` event. New rows go to ``pending``
        (inserted by the caller, or here before a look-up); returns how many were added."""
        is_message = event.type in SURFACE_TYPES
        surface = event.surface
        if surface is None or surface == "append":
            if not is_message:
                return 0  # a retract without a range: refused, and not a message
            pending.append(message_row(sid, event, "current", event.seq))
            return 1
        if not isinstance(surface, (Replace, Retract)):  # pragma: no cover - decoder guarantees
            return 0
        self.store.add_messages(pending)  # look-ups below must see earlier rows
        pending.clear()
        plan = self._plan(sid, event, surface)
        if plan is None:
            if is_message:
                pending.append(message_row(sid, event, "rejected", None))
            return int(is_message)
        anchor, removed, status = plan
        self.store.set_status(sid, removed, status)
        if isinstance(surface, Replace):
            pending.append(message_row(sid, event, "current", anchor))
            return 1
        return 0

    def _plan(
        self, sid: int, event: Event, op: Replace | Retract
    ) -> tuple[int, list[int], str] | None:
        """``(anchor of the range, seqs taken off the surface, their status)``, or None if the
        fold would refuse the operation."""
        store = self.store
        t = event.type
        first = store.current(sid, op.start)
        last = store.current(sid, op.end)
        if first is None or last is None or first[0] > last[0]:
            return None
        nodes = store.current_between(sid, first[0], last[0])
        sources = set(event.sources or ())
        new_calls: tuple[str, ...] = ()
        answer: str | None = None
        if isinstance(op, Retract):
            if t != "surface/retract":
                return None
            status = "retracted"
        else:
            if t == "surface/retract" or not self._result_rule(event, nodes):
                return None
            compacted = store.has_compaction(sid, sources, event.seq)
            status = "compacted" if compacted else "superseded"
            if t == "assistant/message":
                new_calls = tool_call_ids(event.data)
            elif t == "tool/result":
                answer = str(event.data.get("call_id"))
        cascade = self._pairing(sid, nodes, new_calls, answer)
        if cascade is None:
            return None
        removed = [n.seq for n in nodes] + cascade
        if isinstance(op, Replace) and any(s not in sources for s in removed):
            return None
        return first[0], removed, status

    @staticmethod
    def _result_rule(event: Event, nodes: list[Node]) -> bool:
        """A tool result is revised only in place, by a result for the same call."""
        t = event.type
        results = [n for n in nodes if n.type == "tool/result"]
        if t != "tool/result" and not results:
            return True
        if t != "tool/result" or len(nodes) != 1 or not results:
            return not (t == "tool/result" or len(nodes) == 1)
        return results[0].call_id == str(event.data.get("call_id"))

    def _pairing(
        self, sid: int, nodes: list[Node], new_calls: tuple[str, ...], answer: str | None
    ) -> list[int] | None:
        """Results that go with their removed calls, or None if a removal would leave a
        declared call unanswered."""
        store = self.store
        gone = {n.seq for n in nodes}
        lost: dict[str, int] = {}
        for n in nodes:
            for c in n.calls:
                lost[c] = lost.get(c, 0) + 1
        declared: dict[str, int] = {}
        answers: dict[str, list[tuple[int, int]]] = {}

        def declared_after(c: str) -> bool:
            if c not in declared:
                declared[c] = store.declared(sid, c)
            return declared[c] - lost.get(c, 0) + (c in new_calls) > 0

        def answers_of(c: str) -> list[tuple[int, int]]:
            if c not in answers:
                answers[c] = store.answers(sid, c)
            return answers[c]

        for n in nodes:
            call = n.call_id if n.type == "tool/result" else None
            if call is None or call == answer or not declared_after(call):
                continue
            if all(seq in gone for seq, _a in answers_of(call)):
                return None
        cascade: dict[int, int] = {}
        for c in lost:
            if not declared_after(c):
                cascade.update((seq, a) for seq, a in answers_of(c) if seq not in gone)
        return [seq for seq, _a in sorted(cascade.items(), key=lambda kv: kv[1])]
