"""Text from sessions made safe to show on a terminal: the one rule every human-readable
output follows (diagnostics, ``search``, ``sessions``, ``show``, snippets, the interactive
search, ``export`` and ``cat`` to a terminal, git's textconv).

Escaped, as Python escapes them (``\\x1b``, ``\\u202e``): control characters (ESC, BEL, the C1
range), surrogates, line and paragraph separators, and format characters — bidi controls that
reorder what follows, zero-width spaces, word joiners, tag characters that hide text — except
the three that are part of writing: the zero-width non-joiner and joiner (Persian and Indic
text, emoji sequences) and the soft hyphen. Everything else is text and stays as it is: every
kind of space (U+00A0, U+202F, U+3000), private-use characters and characters newer than this
Python's Unicode table, which terminals draw as glyphs. So no escape sequence, title change or
reordering kept in an agent's output reaches the terminal, and what was there stays visible.
Message texts (a snippet, a transcript) may instead drop whole terminal sequences (colours, a
window title: a tool's formatting, not its words); names and paths never do, they must be read
exactly.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["json_shown", "shown"]

#: Categories escaped: controls, surrogates, line and paragraph separators, format characters.
_ESCAPED = frozenset({"Cc", "Cs", "Zl", "Zp", "Cf"})
#: The format characters that are writing: ZWNJ, ZWJ, soft hyphen.
_WRITING = frozenset("\u200c\u200d\u00ad")

#: A CSI sequence (colours, cursor moves) or an OSC one (window title, hyperlink), whole and
#: terminated: a sequence start without its end is escaped, so what follows stays visible.
_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def shown(text: str, *, newlines: bool = False, sequences: bool = False) -> str:
    """``text`` with the characters of the module's rule escaped; with ``newlines``, line
    breaks and tabs are kept as they are (a transcript's lines), else escaped too; with
    ``sequences``, whole terminal sequences are dropped first."""
    if text.isprintable():
        return text
    if sequences:
        text = _SEQUENCE.sub("", text)
    keep = "\n\t" if newlines else ""
    return "".join(c if c.isprintable() or c in keep or _text(c) else ascii(c)[1:-1] for c in text)


def _text(c: str) -> bool:
    """A character ``str.isprintable`` refuses that is text all the same (see the module)."""
    return c in _WRITING or unicodedata.category(c) not in _ESCAPED


def json_shown(text: str) -> str:
    """JSON text (an encoder's output) with the characters of the rule written as ``\\u``
    escapes: the same JSON value, safe on a terminal (the encoder escapes only what JSON
    requires, below U+0020, and leaves U+202E or the C1 range raw). Such characters can only
    be inside strings, so the result is valid wherever the input was; its line breaks and
    tabs (a pretty-printer's) stay. A carriage return can only be whitespace between tokens
    (a line ``cat`` prints as it is stored may hold one): it becomes a space, the same JSON,
    since it would send the cursor back over what the line showed."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable() or c in "\n\t" or _text(c):
            out.append(c)
            continue
        if c == "\r":
            out.append(" ")
            continue
        code = ord(c)
        if code > 0xFFFF:  # a surrogate pair, as JSON writes a character outside the BMP
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)
