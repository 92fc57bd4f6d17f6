"""What a usage report asks of an index (``UsageSource``): the readers of ``jsonltape_daemon``
implement it. A module of its own, light: the index's reader protocol extends it, and
``jsonltape search`` must not load the reports to start."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol

__all__ = ["SessionNode", "SumRow", "UsageSource"]

#: A sum row from the index: (bucket, model, tier, fast, *dimension values, responses, *tokens).
SumRow = tuple[Any, ...]


class SessionNode(NamedTuple):
    """A session as the index knows it, for the session report and the sub-agent roll-up."""

    key: Any  #: the index's key of the session (opaque)
    id: str
    path: str
    title: str | None
    cwd: str | None
    agent: str | None
    updated: int
    origin: str
    name: str  #: ``id:<session id>``
    alias: str | None  #: ``src:<source>:<source session id>``
    up: str | None  #: the parent's name or alias


class UsageSource(Protocol):
    """What a report asks of an index. Every sum counts each response once (its key's one
    counted row); slots are 15 minutes (``SLOT_MS``); ``origins`` empty means all."""

    name: str

    def usage_check(self) -> None:
        """Raise a :class:`~jsonltape.errors.JsonltapeError` saying why, when the index cannot
        give complete usage right now (one written before usage was counted, not synced since)."""
        ...

    def usage_span(self, origins: Sequence[str]) -> tuple[int, int] | None:
        """The first and last slot holding usage, or None when there is none."""
        ...

    def usage_days(
        self,
        shifts: Sequence[tuple[int, int]],
        lo: int | None,
        hi: int | None,
        dims: Sequence[str],
        origins: Sequence[str],
    ) -> Iterable[SumRow]:
        """Sums per (day, model, tier, fast, *dims) of the slots in ``[lo, hi)``; a slot's day
        is ``(slot * SLOT_MS + offset) // DAY_MS`` with the offset of the last shift
        ``(first slot, offset)`` at or before it. ``dims`` are ``agent`` (the name before a
        ``/``), ``project`` (the cwd), ``origin``."""
        ...

    def usage_by_session(
        self,
        lo: int | None,
        hi: int | None,
        origins: Sequence[str],
        keys: Sequence[Any] | None = None,
    ) -> Iterable[SumRow]:
        """Sums per (session key, model, tier, fast) of the slots in ``[lo, hi)``; of the
        sessions with these index keys only, when ``keys`` is given (a page of a list)."""
        ...

    def usage_sessions(self, origins: Sequence[str]) -> Iterable[SessionNode]:
        """Every session with usage, and every session such a session hangs under."""
        ...

    def usage_responses(
        self, lo: int | None, hi: int | None, origins: Sequence[str]
    ) -> Iterable[tuple[int, str, int, bool, int, int, int, int, int, int]]:
        """Each counted response in ``[lo, hi)`` ms, in time order: (time, model, tier, fast,
        *tokens)."""
        ...
