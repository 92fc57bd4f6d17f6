"""Masking secrets: the one rule for a text (:func:`mask_text`) and the one walk over a JSON value
(:func:`mask_value`), shared by ``--redact secrets``, ``jsonltape redact`` and the commit guard.

A text is scanned as written (with the rules the screen found keywords for) and as a reader sees
it (:mod:`._secret_scan`), and each secret becomes ``[REDACTED:<kind>]``. In a JSON value every
string is masked, object keys too; the text parts of a message (a ``parts`` list) are also
scanned joined, and a secret split across parts is masked in each part it covers and counted
once; a string under a secret's name (``{"DB_PASSWORD": "x"}``) is judged like the assignment
``DB_PASSWORD=x``. Each masked secret is reported as a :class:`Secret`: its kind, the text masked
(never printed: the guard shows a fingerprint) and where it was (``$.data.message.parts[0]
.content``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from ._secret_extra import SECRET_NAME
from ._secret_scan import ANY, Span, find_pieces, keywords_of, merged, spans
from ._secret_screen import may_hold_secret

__all__ = [
    "ANY",
    "Masker",
    "Path",
    "Secret",
    "find_secrets",
    "kinds_in",
    "mask_secrets",
    "mask_text",
    "mask_value",
    "where",
]

_enc = msgspec.json.Encoder()
#: Part types whose ``content`` is not text a reader reads (base64).
_NOT_TEXT = frozenset({"blob"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: A member's path in a JSON value: object keys and list indices, from the top.
Path = tuple[Any, ...]


class Secret(NamedTuple):
    """One masked secret: its kind (the rule's id), the text masked (never printed;
    :func:`jsonltape.interop._redact_copy.fingerprint` names it) and where it was."""

    kind: str
    matched: str
    where: str = ""


def where(path: Path, top: str = "$") -> str:
    """``$.data.message.parts[0].content`` for ``("data", "message", "parts", 0, "content")``;
    a name that holds a secret is shown masked (a path is printed, a secret never is)."""
    out = [top]
    for p in path:
        if isinstance(p, int):
            out.append(f"[{p}]")
        else:
            name = mask_text(str(p))
            if name == p and _NAME.match(name):
                out.append(f".{name}")
            else:
                out.append("[" + msgspec.json.encode(name).decode() + "]")
    return "".join(out)


def kinds_in(value: Any) -> frozenset[str] | None:
    """The kinds of rule that may match in a string of the JSON value ``value`` (see
    :func:`~jsonltape.interop._secret_screen.may_hold_secret`), or None when none can."""
    if isinstance(value, str):
        return may_hold_secret(value.encode("utf-8", "surrogatepass"))
    try:
        raw = _enc.encode(value)
    except (TypeError, msgspec.EncodeError):
        return frozenset({ANY})
    return may_hold_secret(raw)


def mask_secrets(text: str, counts: Counter[str] | None = None) -> str:
    """``text`` with every secret masked; ``counts`` (if given) counts them by kind."""
    found: list[Secret] = []
    text = mask_text(text, found)
    if counts is not None:
        counts.update(s.kind for s in found)
    return text


def find_secrets(text: str, kinds: Collection[str] | None = None) -> Iterator[Secret]:
    """Every secret :func:`mask_text` masks in ``text``, in order. ``kinds`` limits the rules
    tried on the text as written (``"*"``: all; None: those the screen finds)."""
    found: list[Secret] = []
    mask_text(text, found, kinds)
    return iter(found)


def mask_text(
    text: str,
    found: list[Secret] | None = None,
    kinds: Collection[str] | None = None,
    extra: Sequence[Span] = (),
    at: str | Callable[[], str] = "",
) -> str:
    """The one rule: ``text`` with every secret masked as ``[REDACTED:<kind>]``, and the
    ``extra`` spans too (the parts in it of secrets found in pieces joined with it, which
    whoever joined them reports). Each other secret is appended to ``found`` (``at``: where,
    or what says where when asked).
    ``kinds`` limits the rules tried on the text as written (``"*"``: all; None: those the
    screen finds in it); what a reader sees of it is scanned with all of them."""
    if kinds is None:
        kinds = kinds_in(text) or ()
    own = spans(text, kinds)
    masked = merged([*own, *extra]) if extra else own
    if found is not None:
        for s in masked:
            if not any(e.start < s.end and s.start < e.end for e in extra):
                here = at() if callable(at) else at
                found.append(Secret(s.rule.kind, text[s.start : s.end], here))
    return _masked(text, masked)


def _masked(text: str, masked: Sequence[Span]) -> str:
    """``text`` with each of the (sorted, disjoint) spans ``masked`` as ``[REDACTED:<kind>]``,
    once for each line the span covers: the mask keeps its line breaks, so the lines an import
    kept as one run (``data.import.raw``) still split back into their lines, each masked."""
    if not masked:
        return text
    pieces: list[str] = []
    last = 0
    for s in masked:
        mark = f"[REDACTED:{s.rule.kind}]"
        breaks = text.count("\n", s.start, s.end)
        pieces += (text[last : s.start], "\n".join([mark] * (breaks + 1)))
        last = s.end
    pieces.append(text[last:])
    return "".join(pieces)


def mask_value(
    value: Any, found: list[Secret] | None = None, kinds: Collection[str] | None = None
) -> Any:
    """The one walk (see the module doc): ``value`` with every secret masked, each appended to
    ``found``. ``kinds`` as for :func:`mask_text` (None: the screen runs once over the whole
    value)."""
    return Masker(found, kinds, value).value(value, ())


class Masker:
    """One walk's state: where secrets are reported, which rules run on text as written, and
    spans found elsewhere (in stream chunks joined) to mask at a path."""

    def __init__(
        self,
        found: list[Secret] | None,
        kinds: Collection[str] | None,
        value: Any = None,
        extras: Mapping[Path, Sequence[Span]] | None = None,
        top: str = "$",
        joined: Path | None = None,
    ) -> None:
        if kinds is None:
            # No keyword in the value's bytes: no rule runs on a string as written, but what
            # a reader sees of one (and parts joined) may still hold a secret.
            kinds = kinds_in(value) or ()
        self.found = found
        self.kinds = kinds
        self.extras = extras or {}
        self.top = top
        #: Strings under this path are read only joined with others (a stream chunk's deltas):
        #: only the spans found in the joined text are masked in them.
        self.joined = joined
        #: The keywords of the rules tried on text as written: a string holding none, with
        #: nothing a view would change, holds no secret (most strings of a line).
        self.keywords = keywords_of(kinds)

    def _clean(self, text: str) -> bool:
        if not text.isascii() or "\\" in text:
            return False  # (what a reader sees may differ)
        low = text.lower()
        return not any(k in low for k in self.keywords)

    def text(self, text: str, path: Path, extra: Sequence[Span] = ()) -> str:
        if not extra and not self.extras and self.joined is None and self._clean(text):
            return text
        extra = [*extra, *self.extras.get(path, ())]
        if self.joined is not None and path[: len(self.joined)] == self.joined:
            return _masked(text, merged(extra)) if extra else text
        return mask_text(text, self.found, self.kinds, extra, lambda: where(path, self.top))

    def value(self, value: Any, path: Path) -> Any:
        if isinstance(value, str):
            return self.text(value, path)
        if isinstance(value, list):
            return [self.value(x, (*path, i)) for i, x in enumerate(value)]
        if not isinstance(value, dict):
            return value
        out: dict[Any, Any] = {}
        joined = self._joined_parts(value.get("parts"), (*path, "parts"))
        for k, x in value.items():
            key = self.text(k, path) if isinstance(k, str) else k
            here = (*path, k)
            if k == "parts" and joined:
                out[key] = [self._part(p, (*here, i), joined.get(i, ())) for i, p in enumerate(x)]
            elif isinstance(k, str) and isinstance(x, str) and SECRET_NAME.search(k):
                out[key] = self._named(k, x, here)
            else:
                out[key] = self.value(x, here)
        return out

    def _named(self, name: str, value: str, path: Path) -> str:
        """A string under a secret's name: judged like the assignment ``NAME=value``."""
        probe = f"{name}={value}"
        judged = [s for s in spans(probe, ANY) if s.end > len(name) + 1]
        if not judged:
            return self.text(value, path)
        kind = judged[0].rule.kind
        if self.found is not None:
            self.found.append(Secret(kind, value, where(path, self.top)))
        return f"[REDACTED:{kind}]"

    def _joined_parts(self, parts: Any, path: Path) -> dict[int, list[Span]] | None:
        """For a message's parts: index -> the spans of its ``content`` that a secret of the
        parts' texts joined covers (None when fewer than two parts have text). The secrets of
        the joined text are reported here, once each, and not again by the part they are in."""
        if not isinstance(parts, list):
            return None
        texts = [
            (i, p["content"])
            for i, p in enumerate(parts)
            if isinstance(p, dict)
            and isinstance(p.get("content"), str)
            and p.get("type") not in _NOT_TEXT
        ]
        if len(texts) < 2:
            return None
        pieces = [t for _, t in texts]
        joined = find_pieces(pieces, kinds_in("".join(pieces)) or ())
        if self.found is not None:
            for secret in joined.secrets:
                indices = ",".join(str(texts[i][0]) for i in secret.pieces)
                at = where(path, self.top) + f"[{indices}].content"
                self.found.append(Secret(secret.kind, secret.text, at))
        return {i: s for (i, _), s in zip(texts, joined.per_piece, strict=True) if s}

    def _part(self, part: Any, path: Path, extra: Sequence[Span]) -> Any:
        if not extra or not isinstance(part, dict):
            return self.value(part, path)
        out = {}
        for k, x in part.items():
            key = self.text(k, path) if isinstance(k, str) else k
            if k == "content":
                out[key] = self.text(x, (*path, k), extra)
            else:
                out[key] = self.value(x, (*path, k))
        return out
