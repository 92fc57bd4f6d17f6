"""Folds: everything derived from the event log (surface, messages, compaction, forks, ...)."""

from __future__ import annotations

from ._surface import COMPACTION_SOURCES, Status, SurfaceFold

__all__ = ["COMPACTION_SOURCES", "Status", "SurfaceFold"]
