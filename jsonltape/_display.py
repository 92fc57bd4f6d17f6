"""Text from sessions made safe to show on a terminal: the one rule every human-readable
output follows (diagnostics, ``search``, ``sessions``, ``show``, snippets, the interactive
search).

A character that is not printable (``str.isprintable``: controls such as ESC, BEL and the
C1 range, bidi overrides such as U+202E, other format characters) is shown as Python escapes
it (``\\x1b``, ``\\u202e``), so no escape sequence, title change or reordering kept in an
agent's output reaches the terminal, and what was there stays visible. Message texts (a
snippet, a transcript) may instead drop whole terminal sequences (colours, a window title: a
tool's formatting, not its words); names and paths never do, they must be read exactly.
"""

from __future__ import annotations

import re

__all__ = ["shown"]

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
    return "".join(c if c.isprintable() or c in keep else ascii(c)[1:-1] for c in text)
