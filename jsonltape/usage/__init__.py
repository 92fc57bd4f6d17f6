"""Token usage and cost reports: daily, weekly, monthly, per session, 5-hour blocks.

The index counts each response once when it ingests a session (:func:`response_of`: the
response's tokens as its source bills them and its own id, per source rule; spec Appendix
B.12); :func:`report` reads those sums through the index's reader and prices them with a table
shipped in the package (:func:`load_prices`, from LiteLLM) or given by the caller. The result
is data (:class:`Report`): the ``jsonltape usage`` command prints it, the web viewer charts
it::

    from jsonltape_daemon.api import open_reader, parse_target
    from jsonltape.usage import report

    reader = open_reader(parse_target("~/.local/share/jsonltape/index.db"))
    daily = report(reader, "daily", by=["model"], timezone="Europe/Paris")

This package never imports the index; names load on first use (the ingest needs only
:func:`response_of` and :func:`session_links`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._prices import Cost, ModelPrice, PriceInfo, PriceTable, load_prices
    from ._report import (
        DIMENSIONS,
        KINDS,
        BlockInfo,
        Counts,
        Line,
        ModelLine,
        Report,
        SessionInfo,
        report,
    )
    from ._rules import (
        SLOT_MS,
        THRESHOLDS,
        Links,
        Response,
        Tokens,
        read_tokens,
        response_of,
        session_links,
        tier_of,
    )
    from ._source import SessionNode, UsageSource

__all__ = [
    "DIMENSIONS",
    "KINDS",
    "SLOT_MS",
    "THRESHOLDS",
    "BlockInfo",
    "Cost",
    "Counts",
    "Line",
    "Links",
    "ModelLine",
    "ModelPrice",
    "PriceInfo",
    "PriceTable",
    "Report",
    "Response",
    "SessionInfo",
    "SessionNode",
    "Tokens",
    "UsageSource",
    "load_prices",
    "read_tokens",
    "report",
    "response_of",
    "session_links",
    "tier_of",
]

#: Where the names live, in the order they are looked for: a name of ``_rules`` loads only it.
_MODULES = ("_rules", "_source", "_prices", "_report")


def __getattr__(name: str) -> Any:
    if name in __all__:
        for home in _MODULES:
            module = importlib.import_module(f"{__name__}.{home}")
            if name in module.__all__:
                value = getattr(module, name)
                globals()[name] = value  # later look-ups skip this function
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
