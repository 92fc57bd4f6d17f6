"""Text from sessions made safe to show on a terminal: the one rule every human-readable
output follows (diagnostics, ``search``, ``sessions``, ``show``, snippets, the interactive
search).

A control character (ESC, BEL, the C1 range), a line or paragraph separator, a bidi control
(U+202E and its kin, which reorder what follows) or any other character that is not printable
is shown as Python escapes it (``\\x1b``, ``\\u202e``), so no escape sequence, title change
or reordering kept in an agent's output reaches the terminal, and what was there stays
visible. Other format characters are text and stay: the zero-width joiners of emoji sequences
and of Persian or Indic writing (U+200D, U+200C), a soft hyphen. Message texts (a
snippet, a transcript) may instead drop whole terminal sequences (colours, a window title: a
tool's formatting, not its words); names and paths never do, they must be read exactly.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["shown"]

#: The bidi controls (embeddings, overrides, isolates, marks): format characters that reorder.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

#: A CSI sequence (colours, cursor moves) or an OSC one (window title, hyperlink), whole.
_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def shown(text: str, *, newlines: bool = False, sequences: bool = False) -> str:
    """``text`` with every character that is not printable escaped; with ``newlines``, line
    breaks and tabs are kept as they are (a transcript's lines), else escaped too; with
    ``sequences``, whole terminal sequences are dropped first."""
    if text.isprintable():
        return text
    if sequences:
        text = _SEQUENCE.sub("", text)
    keep = "\n\t" if newlines else ""
    return "".join(c if c.isprintable() or c in keep or _text(c) else ascii(c)[1:-1] for c in text)


def _text(c: str) -> bool:
    """A format character that is part of writing, not a control: joiners, soft hyphen."""
    return unicodedata.category(c) == "Cf" and c not in _BIDI
