"""Go regular expressions (RE2 syntax, as gitleaks writes its rules) as Python ``re`` patterns.

The rules come from gitleaks unchanged; this is the one place that knows where the two dialects
differ, and it translates only what it must (the pattern is then compiled with ``re.ASCII``,
which gives ``\\w``, ``\\d`` and ``\\b`` Go's ASCII meaning):

* an inline flag group in the middle, ``p8e-(?i)[a-z0-9]{32}``: Go applies it to the rest of the
  enclosing group, every later alternative included; Python takes flags only at the very start
  (3.11 refuses them elsewhere), so the rest of each alternative becomes ``(?i:…)``;
* ``$`` outside a class without ``(?m)``: the end of the text only in Go, where Python's also
  matches before a final newline: ``(?!(?s:.))``; ``\\z`` is Python's ``\\Z``;
* ``\\s`` is ``[\\t\\n\\f\\r ]`` in Go (no vertical tab) and ``\\S`` its complement;
* POSIX classes in a class, ``[[:alnum:]]``;
* a ``{`` that does not start a repeat is a literal in Go (``{,n}`` is one, where Python 3.11
  reads a repeat); in a class, ``[``, ``&``, ``~``, ``|`` and a second ``-`` are escaped, which
  Python would warn about as possible set operations.

Anything else that differs (``\\p{…}`` classes, ``\\Q…\\E``, the ungreedy flag ``U``, ``\\C``,
``\\x{…}``, backreferences, lookaround syntax Go refuses anyway) raises :class:`Untranslatable`:
``scripts/refresh_gitleaks.py`` reports such a rule and leaves it out.
"""

from __future__ import annotations

import re

__all__ = ["Untranslatable", "translate"]


class Untranslatable(ValueError):
    """A Go pattern this translator does not carry over exactly."""


_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_REPEAT = re.compile(r"\{(\d+)(?:,(\d*))?\}")
_FLAGS = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?([:)])")
_NAMED = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")
_SPACE = "\\t\\n\\f\\r "
#: Python's ``\S`` under re.ASCII leaves out the vertical tab, which Go's includes.
_NOT_SPACE = "\\S\\x0b"
_END = "(?!(?s:.))"
_CLASS_ESCAPED = frozenset("[&~|")


class _Group:
    """An open group: whether ``(?m)`` holds in it, and the flag groups opened in it that the
    next ``|`` and its ``)`` must close (and ``|`` reopen)."""

    __slots__ = ("multiline", "wraps")

    def __init__(self, multiline: bool) -> None:
        self.multiline = multiline
        self.wraps: list[str] = []


def translate(go: str) -> str:
    """The Python pattern (to compile with ``re.ASCII``) that matches what the Go pattern
    ``go`` matches; :class:`Untranslatable` when there is none this translator knows."""
    out: list[str] = []
    stack = [_Group(False)]
    i, n = 0, len(go)
    while i < n:
        c = go[i]
        if c == "\\":
            i = _escape(go, i, out, in_class=False)
        elif c == "[":
            i = _class(go, i, out)
        elif c == "(":
            i = _open(go, i, out, stack)
        elif c == ")":
            out.append(")" * len(stack[-1].wraps))
            stack.pop()
            if not stack:
                raise Untranslatable("an unbalanced ')'")
            out.append(")")
            i += 1
        elif c == "|":
            wraps = stack[-1].wraps
            out.append(")" * len(wraps) + "|" + "".join(f"(?{f}:" for f in wraps))
            i += 1
        elif c == "{":
            m = _REPEAT.match(go, i)
            if m is None:
                out.append("\\{")  # a literal in Go
                i += 1
            else:
                if int(m.group(1)) > 1000 or (m.group(2) and int(m.group(2)) > 1000):
                    raise Untranslatable("a repeat count over 1000 (Go refuses it)")
                out.append(m.group(0))
                i = m.end()
        elif c == "$":
            out.append("$" if stack[-1].multiline else _END)
            i += 1
        else:
            out.append(c)
            i += 1
    if len(stack) != 1:
        raise Untranslatable("an unbalanced '('")
    out.append(")" * len(stack[0].wraps))
    return "".join(out)


def _open(go: str, i: int, out: list[str], stack: list[_Group]) -> int:
    outer = stack[-1]
    if not go.startswith("(?", i):
        out.append("(")
        stack.append(_Group(outer.multiline))
        return i + 1
    named = _NAMED.match(go, i)
    if named is not None:
        out.append(named.group(0))
        stack.append(_Group(outer.multiline))
        return named.end()
    m = _FLAGS.match(go, i)
    if m is None:
        raise Untranslatable(f"the group syntax {go[i : i + 4]!r}")
    on, off, end = m.group(1), m.group(2) or "", m.group(3)
    if "U" in on + off:
        raise Untranslatable("the ungreedy flag U")
    flags = on + (f"-{off}" if off else "")
    multiline = ("m" in on) or (outer.multiline and "m" not in off)
    if end == ":":
        out.append(f"(?{flags}:")
        stack.append(_Group(multiline))
    elif not out and len(stack) == 1 and not off:
        out.append(f"(?{on})")  # at the very start: Python takes global flags there
        outer.multiline = multiline
    elif flags:
        out.append(f"(?{flags}:")  # to the end of the alternative (and reopened after a |)
        outer.wraps.append(flags)
        outer.multiline = multiline
    return m.end()


def _escape(go: str, i: int, out: list[str], *, in_class: bool) -> int:
    if i + 1 >= len(go):
        raise Untranslatable("a trailing backslash")
    c = go[i + 1]
    if c == "z":
        if in_class:
            raise Untranslatable("\\z in a class")
        out.append("\\Z")
    elif c == "s":
        out.append(_SPACE if in_class else f"[{_SPACE}]")
    elif c == "S":
        out.append(_NOT_SPACE if in_class else f"[{_NOT_SPACE}]")
    elif c in "pPQEC" or (c == "x" and go.startswith("{", i + 2)):
        raise Untranslatable(f"the escape \\{c}")
    elif c.isdigit() and c != "0":
        raise Untranslatable("a backreference or an octal escape")
    elif c == "x":
        out.append(go[i : i + 4])
        return i + 4
    else:
        out.append(go[i : i + 2])
    return i + 2


def _class(go: str, i: int, out: list[str]) -> int:
    """Copy the class at ``go[i]``; every ``-`` that is not a range between two single
    characters (``a-z``) is escaped, as Python reads ``[\\w-\\-]`` as a bad range."""
    out.append("[")
    i += 1
    if go.startswith("^", i):
        out.append("^")
        i += 1
    first = True
    single = False  # the last thing copied was one character, which may start a range
    while True:
        if i >= len(go):
            raise Untranslatable("an unterminated class")
        c = go[i]
        if c == "]" and not first:
            out.append("]")
            return i + 1
        first = False
        if go.startswith("[:", i):
            end = go.find(":]", i + 2)
            name = go[i + 2 : end] if end >= 0 else ""
            if name not in _POSIX:
                raise Untranslatable(f"the class [:{name}:]")
            out.append(_POSIX[name])
            i, single = end + 2, False
        elif c == "-" and single and i + 1 < len(go) and go[i + 1] != "]":
            out.append("-")  # a range: its end follows, one character
            i = _class_char(go, i + 1, out)
            single = False
        elif c == "\\":
            before = len(out)
            i = _escape(go, i, out, in_class=True)
            # One escaped character (\\., \\x41), not a class of them (\\w, \\s).
            single = len(out) == before + 1 and (
                (len(out[-1]) == 2 and out[-1][1] not in "wWdDsSbB") or out[-1][:2] == "\\x"
            )
        else:
            i = _class_char(go, i, out)
            single = True


def _class_char(go: str, i: int, out: list[str]) -> int:
    """Copy one character of a class (escaped where Python would read more into it)."""
    if go[i] == "\\":
        return _escape(go, i, out, in_class=True)
    c = go[i]
    out.append("\\" + c if c in _CLASS_ESCAPED or c in "]-" else c)
    return i + 1
