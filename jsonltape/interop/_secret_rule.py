"""What a secret rule is: :class:`Rule` (a kind, a regex, how a match is judged), the
:class:`Anchor` literals its matches start from, and an allowlist. The rules themselves, gitleaks'
and the supplement's, are in :mod:`._secret_rules` and :mod:`._secret_extra`, which both build on
this module (it loads nothing)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ._re2 import translate

__all__ = ["Allow", "Anchor", "Judge", "Rule"]


class Anchor(NamedTuple):
    """A literal every match of a rule (or of one of its alternatives) holds, and where the
    match starts relative to it: up to ``prefix`` characters (-1: any number) before it, where
    the run of the rule's ``run`` characters that ends there starts; with no prefix, ``back[0]``
    to ``back[1]`` characters before it."""

    text: str  #: lowercased when ``folded``
    folded: bool  #: compared case-insensitively (found in the lowercased text)
    prefix: int = 0
    back: tuple[int, int] = (0, 0)


class Allow:
    """One allowlist: regexes on the secret, the match or its line, and stopwords."""

    __slots__ = ("_compiled", "both", "patterns", "stopwords", "target")

    def __init__(
        self, both: bool, target: str, patterns: Sequence[str], stopwords: Sequence[str]
    ) -> None:
        self.both = both  #: condition AND: the regexes and the stopwords must both accept
        self.target = target  #: secret, match or line
        self.patterns = tuple(patterns)
        self.stopwords = tuple(stopwords)
        self._compiled: tuple[re.Pattern[str], ...] | None = None

    def _regex_accepts(self, text: str) -> bool:
        if self._compiled is None:
            self._compiled = tuple(re.compile(translate(p), re.ASCII) for p in self.patterns)
        return any(r.search(text) is not None for r in self._compiled)

    def accepts(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        by_regex = bool(self.patterns) and self._regex_accepts(target)
        low = secret.lower()
        by_word = any(w in low for w in self.stopwords)
        if self.both:
            return (by_regex or not self.patterns) and (by_word or not self.stopwords)
        return by_regex or by_word


#: ``judge(match) -> (start, end)`` of the secret in the text, or None when it is none.
Judge = Callable[[re.Match[str]], "tuple[int, int] | None"]


class Rule:
    """One rule: what it is called (its ``kind``), where it comes from, and how a match of its
    regex is judged. The regex is compiled on first use."""

    __slots__ = (
        "_compiled",
        "allow",
        "anchors",
        "entropy",
        "exact",
        "folded",
        "generic",
        "judge",
        "keywords",
        "kind",
        "pattern",
        "run",
        "secret_group",
        "source",
        "whole",
    )

    def __init__(
        self,
        kind: str,
        pattern: str,
        *,
        source: str,
        keywords: Sequence[str],
        anchors: Sequence[Anchor] | None,
        run: str = r"[\w.-]",
        secret_group: int = 0,
        entropy: float = 0.0,
        allow: Sequence[Allow] = (),
        judge: Judge | None = None,
    ) -> None:
        self.kind = kind
        self.source = source
        self.pattern = pattern
        self.keywords = tuple(keywords)
        self.anchors = None if anchors is None else tuple(anchors)
        #: The anchors' texts, those compared as they are and those in the lowercased text.
        self.exact = tuple(dict.fromkeys(a.text for a in self.anchors or () if not a.folded))
        self.folded = tuple(dict.fromkeys(a.text for a in self.anchors or () if a.folded))
        #: The characters of the run an anchor's ``prefix`` may start before it.
        self.run = run
        self.secret_group = secret_group
        self.entropy = entropy
        self.allow = tuple(allow)
        self.judge = judge
        self.generic = "generic" in kind or kind == "assignment"
        self.whole = False
        self._compiled: re.Pattern[str] | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        if self._compiled is None:
            # gitleaks' patterns are Go syntax, translated when first used (most never are)
            pattern = translate(self.pattern) if self.source == "gitleaks" else self.pattern
            self._compiled = re.compile(pattern, re.ASCII)
            groups = self._compiled.groups
            self.whole = groups > 0 and len(self._compiled.groupindex) == groups
        return self._compiled

    def __repr__(self) -> str:
        return f"Rule({self.kind!r}, {self.source})"
