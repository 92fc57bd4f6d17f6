"""The 5-hour billing blocks, as ccusage defines them.

Responses are taken in time order. A block starts at the hour (UTC) of its first response and
lasts five hours; a response more than five hours after the block's start, or more than five
hours after the previous response, starts a new block (a gap of more than five hours is shown
as a gap). A block is *active* when its last response is less than five hours old and the
block has not ended: its burn rate is its tokens and cost per minute between its first and last
response, and its projection adds that rate over the minutes left.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ._rules import Tokens

__all__ = ["BLOCK_MS", "Block", "blocks_of"]

BLOCK_MS = 5 * 3_600_000
_HOUR_MS = 3_600_000


class Block(NamedTuple):
    start: int  #: ms, an hour
    end: int  #: start + 5 h (a gap: the next block's start)
    first: int  #: the first response's time (a gap: 0)
    last: int  #: the last response's time (a gap: 0)
    gap: bool
    items: list[tuple[int, str, int, bool, Tokens]]  #: (time, model, tier, fast, tokens)


def blocks_of(responses: Iterable[tuple[int, str, int, bool, Tokens]]) -> list[Block]:
    """The blocks and gaps of ``responses`` (in time order)."""
    out: list[Block] = []
    cur: list[tuple[int, str, int, bool, Tokens]] = []
    start = 0
    for r in responses:
        t = r[0]
        if cur:
            last = cur[-1][0]
            if t - start > BLOCK_MS or t - last > BLOCK_MS:
                out.append(Block(start, start + BLOCK_MS, cur[0][0], last, False, cur))
                if t - last > BLOCK_MS:
                    out.append(Block(last + BLOCK_MS, t, 0, 0, True, []))
                cur = []
        if not cur:
            start = t - t % _HOUR_MS
        cur.append(r)
    if cur:
        out.append(Block(start, start + BLOCK_MS, cur[0][0], cur[-1][0], False, cur))
    return out
