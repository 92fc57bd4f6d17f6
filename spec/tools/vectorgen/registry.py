"""The case registry: every vector is a builder registered under its category and name.

A builder is named after its case (``n_crc_mismatch`` builds ``read/n_crc_mismatch``) and
registered by one of the decorators below, or as a row of :func:`table` when many cases share
one shape. Each entry remembers the module that defined it: the vectors README lists a
category's cases in the order of ``tree.MODULES``, and within a module top to bottom.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .common import Log
from .expect import Built, Expect, expect_fold, expect_repair, expect_session

Builder = Callable[[], Built]
Closers = list[dict[str, Any]]


@dataclass(frozen=True)
class Entry:
    """A registered case, not yet built."""

    category: str
    name: str
    doc: str
    build: Builder
    ext: str
    module: str


REGISTRY: list[Entry] = []


def register(
    category: str, name: str, doc: str, build: Builder, ext: str = "jsonl", *, module: str = ""
) -> None:
    """Register one case; ``module`` defaults to the module that defined ``build``."""
    REGISTRY.append(Entry(category, name, doc, build, ext, module or build.__module__))


def table(category: str, *rows: tuple[str, str, Builder]) -> None:
    """Register ``(name, doc, builder)`` rows: cases whose input is one call of a shared shape."""
    for name, doc, build in rows:
        register(category, name, doc, build)


def case(category: str, doc: str) -> Callable[[Builder], Builder]:
    """Register a builder returning ``(input, {cmd: expected})``; the case is its name."""

    def deco(fn: Builder) -> Builder:
        register(category, fn.__name__, doc, fn)
        return fn

    return deco


SessionFiller = Callable[[Log], None]


def session(
    category: str, state: str, doc: str, **log_kw: Any
) -> Callable[[SessionFiller], SessionFiller]:
    """Register ``fn(log)`` that fills a new ``Log(**log_kw)``; read and verify expect ``state``
    (clean, open-turn, torn-tail or corrupt) with the first bad line the log recorded."""

    def deco(fn: SessionFiller) -> SessionFiller:
        def build() -> Built:
            log = Log(**log_kw)
            fn(log)
            return log.data(), expect_session(log, state)

        register(category, fn.__name__, doc, build, module=fn.__module__)
        return fn

    return deco


RepairFiller = Callable[[Log], Closers]


def repair(state: str, doc: str, **log_kw: Any) -> Callable[[RepairFiller], RepairFiller]:
    """Register ``fn(log)`` that fills a new log and returns the closers repair must append;
    repair expects ``state``, the cut at the first bad line and the committed events kept."""

    def deco(fn: RepairFiller) -> RepairFiller:
        def build() -> Built:
            log = Log(**log_kw)
            closers = fn(log)
            return log.data(), expect_repair(log, state, closers)

        register("repair", fn.__name__, doc, build, module=fn.__module__)
        return fn

    return deco


FoldFiller = Callable[[Log], list[int]]


def fold(doc: str, **log_kw: Any) -> Callable[[FoldFiller], FoldFiller]:
    """Register ``fn(log)`` that fills a new log and returns the seqs of the messages the fold
    must hold, in surface order."""

    def deco(fn: FoldFiller) -> FoldFiller:
        def build() -> Built:
            log = Log(**log_kw)
            seqs = fn(log)
            return log.data(), expect_fold(log, seqs)

        register("fold", fn.__name__, doc, build, module=fn.__module__)
        return fn

    return deco


__all__ = ["Built", "Closers", "Expect", "case", "fold", "register", "repair", "session", "table"]
