"""Finding secrets in text: the rules of :mod:`._secret_rules` over a string as written and over
what a reader sees of it, and over pieces a reader sees joined.

**Where a rule can match.** Trying a regex at every character of a text costs a regex step per
character per rule; but a rule can only match where one of its keywords is in the text (gitleaks'
own prefilter) and only at a start its anchors allow: every match holds one of the rule's anchor
literals (``sk_live_``, ``ghp_``, ``adafruit``) at a known distance from its start, or after a
lazy run of identifier characters (gitleaks' semi-generic rules, ``[\\w.-]{0,50}?adafruit…``:
the match starts where that run starts, at most N characters back). So the keywords and the
literals of the rules chosen for a text are found together (:class:`~._needles.Needles`; the
case-insensitive ones in the lowercased text), and each rule with a keyword there is tried only
at the starts its anchors allow, left to right, resuming after each match: exactly the matches
``finditer`` finds (tests/test_redaction_fast.py holds them equal over random texts), since a
start without an anchor cannot match and ``match(text, pos)`` is the same attempt as a search's
at ``pos``. A rule whose matches start with no literal is searched whole, when a keyword is there.

**What a reader sees** (:class:`View`): the text with JSON escapes taken (``{\\"password\\":
\\"…\\"}`` written into a string, up to three levels deep), each non-ASCII character in its NFKC
form (full-width ``ｓｋ＿ｌｉｖｅ`` is ``sk_live``) and invisible format characters removed
(zero-width space and joiner, soft hyphen, bidi controls: Unicode category Cf, and the
variation selectors). A secret found there is masked in the text as written over the characters
it came from. Pieces a reader sees as one text (the parts of a message, a run of stream chunks)
are joined and scanned too; a secret that spans pieces is masked in each piece it covers.

The text is scanned as written and as seen, so a secret found either way is masked; where two
found spans overlap they are masked as one, named by the first rule in :func:`rules` order. A
view made only by JSON escapes other than ``\\u`` holds the keywords its source holds, so it is
tried with the rules chosen for the source; any other view, with every rule.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Collection, Iterator, Sequence
from typing import NamedTuple

from ._needles import Needles
from ._secret_rules import Anchor, Rule, rules, secret_span

__all__ = [
    "ANY",
    "Found",
    "Span",
    "View",
    "find",
    "find_pieces",
    "keywords_of",
    "lowered",
    "matches",
    "merged",
    "rules_for",
    "spans",
    "views",
]

ANY = "*"  #: In ``kinds``: every rule.
_DOTLESS = "\u0130"  # lowercases to two characters; the ASCII rules never fold it anyway
#: Where the run of ``run`` characters ending at a position starts (the last other one).
_BREAKERS: dict[str, re.Pattern[str]] = {}
_JSON_ESCAPE = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})')
_ESCAPED = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: Format characters (Cf, Unicode 15.1; a test checks it covers the running Python's),
#: variation selectors and the combining grapheme joiner: invisible, removed in a view.
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufe00-\ufe0f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)
_SPECIAL = re.compile(r'\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|[^\x00-\x7f]+')
_MAX_DEPTH = 3


class Found(NamedTuple):
    """A secret: where it is in the text, and the rule that found it."""

    start: int
    end: int
    rule: Rule


def lowered(text: str) -> str:
    """``text.lower()`` with every position kept (a ``İ``, which lowercases to two characters,
    becomes NUL: no rule's ASCII-only case folding matches it anyway)."""
    if not text.isascii() and _DOTLESS in text:
        text = text.replace(_DOTLESS, "\0")
    return text.lower()


_RUN_CHARS: dict[str, re.Pattern[str]] = {}


def _in_run(run: str, ch: str) -> bool:
    """Whether ``ch`` is one of the class ``run``."""
    one = _RUN_CHARS.get(run)
    if one is None:
        one = _RUN_CHARS[run] = re.compile(run, re.ASCII)
    return one.match(ch) is not None


def _run_start(text: str, at: int, lo: int, run: str) -> int:
    """Where the run of ``run`` characters ending at ``at`` starts (not before ``lo``)."""
    breaker = _BREAKERS.get(run)
    if breaker is None:
        breaker = _BREAKERS[run] = re.compile(r"(?s).*[^" + run[1:-1] + "]", re.ASCII)
    while True:
        start = max(lo, at - 64)
        m = breaker.match(text, start, at)
        if m is not None:
            return m.end()
        if start == lo:
            return lo
        at = start


def matches(
    rule: Rule, text: str, low: str, hits: list[tuple[int, Anchor]] | None = None
) -> Iterator[re.Match[str]]:
    """The matches of ``rule.regex`` in ``text`` exactly as ``finditer`` gives them, tried only
    where the rule's anchors allow (``low``: :func:`lowered` ``text``; ``hits``: where its
    anchors are, when the caller found them already).

    Each anchor found puts the earliest start a match through it can have: ``back`` characters
    before it, or where the run of identifier characters before it starts (at most ``prefix``
    back). In order of those starts, a search that resumed at ``resume`` after the last match
    tries each that is not before ``resume`` (one whose run reaches past ``resume`` from there).
    """
    if rule.anchors is None:
        yield from rule.regex.finditer(text)
        return
    if hits is None:
        hits = _chosen((rule.kind,)).hits(text, low).get(0, [])
    if not hits:
        return
    starts: list[tuple[int, int]] = []  # (earliest start, the anchor's position or -1)
    for at, anchor in hits:
        if anchor.prefix:
            lo = 0 if anchor.prefix < 0 else max(0, at - anchor.prefix)
            # Usually no run comes before the anchor (a blank or quote precedes it).
            run = at > lo and _in_run(rule.run, text[at - 1])
            starts.append((_run_start(text, at, lo, rule.run) if run else at, at))
        else:
            lo_back, hi_back = anchor.back
            starts += [(at - b, -1) for b in range(lo_back, hi_back + 1) if b <= at]
    starts.sort()
    match = rule.regex.match
    resume, tried = 0, -1
    for earliest, at in starts:
        if earliest < resume:
            if at < resume:
                continue  # a start before the last match's end, or one inside it
            earliest = resume  # a run from before: from where the search resumed
        if earliest == tried:
            continue
        tried = earliest
        m = match(text, earliest)
        if m is not None:
            yield m
            resume = max(m.end(), m.start() + 1)


class _Chosen:
    """Some rules (those of some kinds), and the needles that tell which of them to try on a
    text and where: their keywords and folded anchors (found in the lowercased text), their
    exact anchors (found in the text)."""

    __slots__ = ("_exact", "_folded", "always", "keywords", "rules")

    def __init__(self, chosen: tuple[Rule, ...]) -> None:
        self.rules = chosen
        # needle -> (the rules it is a keyword of, the (rule, anchor) pairs it is the text of)
        folded: dict[str, tuple[list[int], list[tuple[int, Anchor]]]] = {}
        exact: dict[str, list[tuple[int, Anchor]]] = {}
        for i, r in enumerate(chosen):
            for k in r.keywords:
                folded.setdefault(k, ([], []))[0].append(i)
            for a in r.anchors or ():
                if a.folded:
                    folded.setdefault(a.text, ([], []))[1].append((i, a))
                else:
                    exact.setdefault(a.text, []).append((i, a))
        self.always = tuple(i for i, r in enumerate(chosen) if not r.keywords)
        self.keywords = tuple(dict.fromkeys(k for r in chosen for k in r.keywords))
        self._folded = (Needles(list(folded), ""), [v for v in folded.values()])
        self._exact = (Needles(list(exact), ""), list(exact.values()))

    def hits(
        self, text: str, low: str, keyed: set[int] | None = None
    ) -> dict[int, list[tuple[int, Anchor]]]:
        """Rule index -> where its anchors are in ``text``; the rules whose keywords ``text``
        holds are added to ``keyed``."""
        at_needle: dict[int, list[int]] = {}
        needles, rules_of = self._folded
        for at, n in needles.find(low):
            at_needle.setdefault(n, []).append(at)
        out: dict[int, list[tuple[int, Anchor]]] = {}
        for n, where in at_needle.items():
            keyers, anchored = rules_of[n]
            if keyed is not None:
                keyed.update(keyers)
            for i, anchor in anchored:
                out.setdefault(i, []).extend((at, anchor) for at in where)
        needles_exact, exact_of = self._exact
        for at, n in needles_exact.find(text):
            for i, anchor in exact_of[n]:
                out.setdefault(i, []).append((at, anchor))
        return out


_CHOSEN: dict[frozenset[str], _Chosen] = {}


def keywords_of(kinds: Collection[str] | None) -> tuple[str, ...]:
    """The keywords of the rules of ``kinds``, each once."""
    return _chosen(kinds).keywords


def rules_for(kinds: Collection[str] | None) -> tuple[Rule, ...]:
    """The rules of ``kinds`` (None or ``"*"``: all), in order."""
    return _chosen(kinds).rules


def _chosen(kinds: Collection[str] | None) -> _Chosen:
    key = frozenset((ANY,) if kinds is None else kinds)
    found = _CHOSEN.get(key)
    if found is None:
        found = _Chosen(rules() if ANY in key else tuple(r for r in rules() if r.kind in key))
        if len(_CHOSEN) < 4096:  # a few sets recur (the screen's, line after line)
            _CHOSEN[key] = found
    return found


def find(text: str, kinds: Collection[str] | None = None) -> list[Found]:
    """Every secret of the rules of ``kinds`` in ``text`` as written (not merged): each rule
    one of whose keywords the text holds, tried where its anchors are."""
    if not text:
        return []
    low = lowered(text)
    chosen = _chosen(kinds)
    keyed: set[int] = set(chosen.always)
    hits = chosen.hits(text, low, keyed)
    out: list[Found] = []
    for i in sorted(keyed):
        rule = chosen.rules[i]
        if rule.anchors is not None and i not in hits:
            continue
        for m in matches(rule, text, low, hits.get(i)):
            span = secret_span(rule, m)
            if span is not None and span[0] < span[1]:
                out.append(Found(span[0], span[1], rule))
    return out


# -- what a reader sees -----------------------------------------------------------------------


class View:
    """The text a reader sees of ``source`` (see the module doc), and the way back: each run
    of the view either copies the source one to one or stands for a span of it (worked out
    only when a secret found in the view is to be mapped back)."""

    __slots__ = ("_map", "parent", "source", "text")

    def __init__(self, source: str) -> None:
        self.source = source
        self.text = _SPECIAL.sub(_seen, source)
        self.parent: View | None = None
        self._map: tuple[list[int], list[int], list[int], list[bool]] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The source span that the view's ``[start, end)`` came from."""
        if self._map is None:
            self._map = _runs(self.source)
        at, frm, to, ident = self._map
        i = bisect.bisect_right(at, start) - 1
        j = bisect.bisect_right(at, max(start, end - 1)) - 1
        a = frm[i] + (start - at[i] if ident[i] else 0)
        b = frm[j] + (end - at[j]) if ident[j] else to[j]
        if self.parent is not None:
            return self.parent.span(a, b)
        return a, b


def _seen(m: re.Match[str]) -> str:
    """What a reader sees of one escape or one run of non-ASCII characters."""
    token = m.group(0)
    if token[0] == "\\":
        return _unescape(token)
    if _INVISIBLE.search(token) is None and unicodedata.is_normalized("NFKC", token):
        return token
    return "".join(norm for _pos, _ch, norm in _normalized(token, 0))


def _runs(source: str) -> tuple[list[int], list[int], list[int], list[bool]]:
    """The runs of the view of ``source``: where each starts in the view, the source span it
    came from, and whether it copies that span one to one."""
    at = [0]
    frm: list[int] = []
    to: list[int] = []
    ident: list[bool] = []
    size = 0
    last = 0

    def add(view_text: str, start: int, end: int, same: bool) -> None:
        nonlocal size
        if same and ident and ident[-1] and to[-1] == start:
            to[-1] = end  # extend the copied run
        else:
            if frm:
                at.append(size)
            frm.append(start)
            to.append(end)
            ident.append(same)
        size += len(view_text)

    for m in _SPECIAL.finditer(source):
        if m.start() > last:
            add(source[last : m.start()], last, m.start(), True)
        token = m.group(0)
        if token[0] == "\\":
            add(_unescape(token), m.start(), m.end(), False)
        else:
            for pos, ch, norm in _normalized(token, m.start()):
                add(norm, pos, pos + len(ch), norm == ch)
        last = m.end()
    if last < len(source) or not frm:
        add(source[last:], last, len(source), True)
    return at, frm, to, ident


def _normalized(run: str, at: int) -> Iterator[tuple[int, str, str]]:
    """``(where, characters, what a reader sees of them)`` for a run of non-ASCII characters
    at ``at``: stretches NFKC leaves alone in one piece, the others one character at a time
    (invisible ones as nothing)."""
    whole = unicodedata.normalize("NFKC", run)
    if len(whole) == len(run) and _INVISIBLE.search(run) is None:
        # Usually each character stands for one: compare them, and check the ones that differ.
        last = 0
        for i, (a, b) in enumerate(zip(run, whole, strict=True)):
            if a != b:
                if unicodedata.normalize("NFKC", a) != b:
                    break  # not one for one after all (composition): character by character
                if i > last:
                    yield at + last, run[last:i], run[last:i]
                yield at + i, a, b
                last = i + 1
        else:
            if last < len(run):
                yield at + last, run[last:], run[last:]
            return
        run, at = run[last:], at + last
    for i, ch in enumerate(run):
        yield at + i, ch, "" if _INVISIBLE.match(ch) else unicodedata.normalize("NFKC", ch)


def _unescape(token: str) -> str:
    c = token[1]
    if c == "u":
        return chr(int(token[2:], 16))
    return _ESCAPED.get(c, c)


def _needs_view(text: str) -> bool:
    if "\\" in text:
        return _JSON_ESCAPE.search(text) is not None
    if text.isascii():
        return False
    return not unicodedata.is_normalized("NFKC", text) or _INVISIBLE.search(text) is not None


def views(text: str) -> Iterator[View]:
    """The views of ``text`` that differ from it: one, and again while escapes remain (JSON
    written into a string written into JSON), at most three deep."""
    source = text
    parent: View | None = None
    for _ in range(_MAX_DEPTH):
        if not _needs_view(source):
            return
        view = View(source)
        view.parent = parent
        if view.text == source:
            return
        yield view
        source, parent = view.text, view


# -- text and pieces ---------------------------------------------------------------------------


class Span(NamedTuple):
    """A span to mask (merged), the rule it is named by."""

    start: int
    end: int
    rule: Rule


def merged(spans: Sequence[Span]) -> list[Span]:
    """``spans`` with overlapping ones as one, named by the first rule (in :func:`rules`
    order) among them."""
    return _merged([(s.start, s.end, _order(s.rule), s.rule) for s in spans])


def _merged(found: list[tuple[int, int, int, Rule]]) -> list[Span]:
    out: list[Span] = []
    found.sort(key=lambda f: (f[0], f[2]))
    for start, end, order, rule in found:
        if out and start < out[-1].end:
            last = out[-1]
            keep = last.rule if _order(last.rule) <= order else rule
            out[-1] = Span(last.start, max(last.end, end), keep)
        else:
            out.append(Span(start, end, rule))
    return out


_ORDER: dict[int, int] = {}


def _order(rule: Rule) -> int:
    if not _ORDER:
        _ORDER.update((id(r), i) for i, r in enumerate(rules()))
    return _ORDER[id(rule)]


def spans(text: str, kinds: Collection[str] | None = None) -> list[Span]:
    """The spans of ``text`` to mask: the secrets of the rules of ``kinds`` in the text as
    written, and of every rule in what a reader sees of it, merged."""
    found = [(f.start, f.end, _order(f.rule), f.rule) for f in find(text, kinds)]
    for view in views(text):
        kinds = _view_kinds(view, kinds)  # a view of a view: from what the one below needs
        for f in find(view.text, kinds):
            a, b = view.span(f.start, f.end)
            if a < b:
                found.append((a, b, _order(f.rule), f.rule))
    return _merged(found)


def _view_kinds(view: View, kinds: Collection[str] | None) -> Collection[str] | None:
    """The rules that may find something in ``view`` that ``kinds`` are tried for in its
    source. Taking an escape other than ``\\u`` only removes a backslash before ``"``,
    ``\\``, ``/`` or a control character, none of which a keyword or anchor holds but
    ``://``: the view holds the keywords its source does (so ``kinds``, and the URL rule).
    Any other change (a ``\\u`` escape, NFKC, an invisible character removed) may make a
    keyword: every rule."""
    source = view.source
    if kinds is None or "\\u" in source or not source.isascii():
        return None
    return (*kinds, "url-password") if "\\/" in source else kinds


class Joined(NamedTuple):
    """A secret of pieces joined: its kind, its text, and the pieces it covers."""

    kind: str
    text: str
    pieces: tuple[int, ...]


class PieceSpans(NamedTuple):
    """What :func:`find_pieces` found: per piece, the spans of it that a secret covers; and
    the secrets, each once."""

    per_piece: list[list[Span]]
    secrets: list[Joined]


def find_pieces(pieces: Sequence[str], kinds: Collection[str] | None = None) -> PieceSpans:
    """For pieces a reader sees joined (a message's parts, a run of stream chunks): the secrets
    of the joined text (as written, with the rules of ``kinds``, and as seen), each mapped back
    onto the pieces it covers."""
    bounds = [0]
    for p in pieces:
        bounds.append(bounds[-1] + len(p))
    per: list[list[Span]] = [[] for _ in pieces]
    joined = "".join(pieces)
    secrets = []
    for s in spans(joined, kinds):
        covered = []
        i = bisect.bisect_right(bounds, s.start) - 1
        while i < len(pieces) and bounds[i] < s.end:
            a, b = max(s.start, bounds[i]) - bounds[i], min(s.end, bounds[i + 1]) - bounds[i]
            if a < b:
                per[i].append(Span(a, b, s.rule))
                covered.append(i)
            i += 1
        secrets.append(Joined(s.rule.kind, joined[s.start : s.end], tuple(covered)))
    return PieceSpans(per, secrets)
