"""The screen: which lines of raw JSONL text can hold a secret at all, and which rules to try.

A rule is only tried on a text that holds one of its keywords (gitleaks' prefilter, lowercased),
so a line whose bytes hold none of any rule's keywords holds no secret in its strings as written.
A literal of a decoded string is in the raw bytes as it is, except through an escape: a ``\\u``
escape (any rule may match: every rule is tried) or an escaped character (``\\"``, ``\\/``).
And what a reader sees of a string differs from it where the string holds a JSON escape of its
own (the line a ``\\\\``), a character NFKC changes or an invisible one (the line a byte over
0x7f): such a line is marked :data:`VIEW`, so its strings' views are scanned with every rule.

The keywords are found together (:class:`~jsonltape.interop._needles.Needles`: one regex pass
per rarest byte of theirs, not one ``bytes.find`` per keyword).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ._needles import Needles
from ._secret_rules import rules
from ._secret_scan import ANY

__all__ = ["VIEW", "may_hold_secret", "screen"]

#: In a screen's kinds: the line's strings have a view that differs from them (scan it).
VIEW = "view"
#: One hit per line at most (the rest of the line is taken with it).
_RAW: list[tuple[re.Pattern[bytes], tuple[str, ...]]] = [
    # Any rule: a keyword may hide behind a \u escape (not one of a control character, which
    # no keyword holds: tools' colour codes, \u001b, are everywhere in terminal output).
    (re.compile(rb"\\u(?!00[01][0-9a-fA-F])[^\n]*"), (ANY,)),
    (re.compile(rb"(?:\\\\|[\x80-\xff])[^\n]*"), (VIEW,)),  # an escape or non-ASCII
]
_KEYWORDS: tuple[Needles[bytes], list[tuple[str, ...]]] | None = None


def _keywords() -> tuple[Needles[bytes], list[tuple[str, ...]]]:
    global _KEYWORDS
    if _KEYWORDS is None:
        kinds: dict[str, set[str]] = {}
        for rule in rules():
            for k in rule.keywords:
                kinds.setdefault(k, set()).add(rule.kind)
        _KEYWORDS = (Needles(list(kinds), b""), [tuple(sorted(v)) for v in kinds.values()])
    return _KEYWORDS


def screen(buf: bytes) -> list[tuple[int, tuple[str, ...]]]:
    """``(offset, kinds)`` in ``buf`` (raw JSONL text) where a rule of those kinds may match
    (``"*"``: any; :data:`VIEW`: the strings' views must be scanned); none found means no
    string of any line in ``buf`` holds a secret."""
    hits: list[tuple[int, tuple[str, ...]]] = []
    for regex, kinds in _RAW:
        hits += [(m.start(), kinds) for m in regex.finditer(buf)]
    needles, kinds_of_needle = _keywords()
    hits += [(at, kinds_of_needle[n]) for at, n in needles.find(buf.lower())]
    return hits


def kinds_of(hits: Iterable[tuple[int, tuple[str, ...]]]) -> frozenset[str]:
    return frozenset(k for _at, kinds in hits for k in kinds)


def may_hold_secret(line: bytes) -> frozenset[str] | None:
    """The kinds of rule that may match in a string of the JSON text ``line`` (``"*"``: any;
    :data:`VIEW`: scan the strings' views), or None when none can."""
    hits = screen(line)
    return kinds_of(hits) if hits else None
