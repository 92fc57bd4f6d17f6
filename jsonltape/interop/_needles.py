"""Finding many literal needles in one text: every occurrence of every needle, overlaps included.

``str.find`` runs at a few hundred MB/s for a short needle that starts with a common letter, and
a regex of alternatives tries each of them at every position; but a regex that starts with one
literal character is searched at about a GB/s, its rest checked in C where that character is.
So each needle is looked for from its rarest character (by the character frequencies of real
sessions), one regex per such lead character: the lead, then a lookahead that holds a trie of
what follows it in each needle (one compare rejects a branch), each branch ending with a
lookbehind over its whole needle and an empty group that names it. Only the lead is consumed,
so needles that overlap are all found; two needles that match at the same lead are both
reported (a needle held in another is known when the regex is built, one that overlaps it is
checked where the other is found).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["Needles"]

#: Printable ASCII (lowercase) from the rarest to the most common in real sessions.
_RARITY = "%^~<!@?$&'>|q+]j[*z`;#=w/xbv}{7y8_64-395kf)(21g.hu0pm,ld:ciro\\asn\"e t"
_RANK = {c: i for i, c in enumerate(_RARITY)}
T = TypeVar("T", str, bytes)
#: Below this length times the number of needles a text is searched needle by needle.
_SHORT = 2048


def _trie(branches: list[tuple[str, str]]) -> str:
    """A regex of ``(suffix, tail)`` branches that shares the suffixes' beginnings (each level
    starts with a literal character); at a suffix's end its ``tail`` is tried, longer suffixes
    first."""
    ends: list[str] = []
    nested: dict[str, list[tuple[str, str]]] = {}
    for suffix, tail in branches:
        if suffix:
            nested.setdefault(suffix[0], []).append((suffix[1:], tail))
        else:
            ends.append(tail)
    alts = [re.escape(c) + _trie(sub) for c, sub in sorted(nested.items())]
    alts += ends
    return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"


def _cost(needle: str, j: int) -> int:
    """How costly ``needle[j]`` is as the lead: how common it is, and more at the needle's
    end, where no literal follows to reject a branch at once (a lookbehind is tried)."""
    cost = _RANK.get(needle[j], len(_RARITY))
    return cost + 10 if j == len(needle) - 1 and len(needle) > 1 else cost


class Needles(Generic[T]):
    """The needles ``needles`` (ASCII), ready to be found in texts of the type of ``sample``
    (str, or bytes): :meth:`find` yields ``(position, needle index)``."""

    def __init__(self, needles: Sequence[str], sample: T) -> None:
        self.needles = list(needles)
        self._raw: list[bytes] | None = None
        if isinstance(sample, bytes):
            self._raw = [n.encode("ascii") for n in self.needles]
        by_lead: dict[str, list[tuple[int, int]]] = {}
        for n, needle in enumerate(self.needles):
            lead = min(range(len(needle)), key=lambda j: (_cost(needle, j), j))
            by_lead.setdefault(needle[lead], []).append((n, lead))
        #: Per lead character: its regex, and per branch the needles found there: (index,
        #: where it starts before the lead, whether it must be checked).
        self._groups: list[tuple[re.Pattern[T], dict[str, tuple[tuple[int, int, bool], ...]]]] = []
        for lead_char, items in sorted(by_lead.items()):
            items.sort(key=lambda x: -len(self.needles[x[0]]))
            branches: list[tuple[str, str]] = []
            found: dict[str, tuple[tuple[int, int, bool], ...]] = {}
            for n, i in items:
                needle = self.needles[n]
                name = f"n{n}"
                there = [(n, i, False)]
                for m, j in items:  # the others that may match at the same lead
                    other = self.needles[m]
                    start = i - j  # where ``other`` starts, relative to ``needle``
                    lo, hi = max(0, start), min(len(needle), start + len(other))
                    if m == n or needle[lo:hi] != other[lo - start : hi - start]:
                        continue  # they differ where they overlap: never both at one lead
                    inside = start >= 0 and start + len(other) <= len(needle)
                    there.append((m, j, not inside))
                found[name] = tuple(there)
                behind = "(?<=" + re.escape(needle) + ")" if len(needle) > 1 else ""
                branches.append((needle[i + 1 :], behind + f"(?P<{name}>)"))
            pattern = re.escape(lead_char) + "(?=" + _trie(branches) + ")"
            compiled = re.compile(pattern.encode("ascii") if self._raw is not None else pattern)
            self._groups.append((compiled, found))

    def find(self, hay: T) -> list[tuple[int, int]]:
        """Every ``(position, needle index)`` of a needle in ``hay``, in no order."""
        if len(hay) * len(self.needles) < _SHORT:
            return self._find_each(hay)
        return self._find_led(hay)

    def _find_each(self, hay: T) -> list[tuple[int, int]]:
        """A short text: each needle looked for (a call per needle costs less there than a
        regex pass per lead)."""
        out = []
        needles = self.needles if self._raw is None else self._raw
        for n, needle in enumerate(needles):
            at = hay.find(needle)  # type: ignore[arg-type]
            while at >= 0:
                out.append((at, n))
                at = hay.find(needle, at + 1)  # type: ignore[arg-type]
        return out

    def _find_led(self, hay: T) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        append = out.append
        needles = self.needles if self._raw is None else self._raw
        for regex, found in self._groups:
            for m in regex.finditer(hay):
                at = m.start()
                for n, back, check in found[m.lastgroup or ""]:
                    start = at - back
                    if not check or (start >= 0 and hay.startswith(needles[n], start)):  # type: ignore[arg-type]
                        append((start, n))
        return out
