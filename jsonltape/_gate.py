"""The lossless-JSON gate: data goes into a session only if it reads back exactly as given.

The fast path is one msgspec encode, one decode and a C-level equality check, which catches
sets, tuples, bytes, datetimes, non-str keys, NaN and infinities (they read back different).
Two things equality cannot see are checked on the encoded bytes: integers outside the
interoperable range (|n| > 2**53 - 1, JavaScript's safe integers) and negative zero. Only when
something looks wrong does the slow path walk the value to name the exact field and reason.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from .errors import NotLosslessError

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "check_lossless",
    "encode_error",
    "encoder",
    "explain",
    "outside_strings",
    "suspect",
]

MAX_SAFE_INT = 2**53 - 1
encoder = msgspec.json.Encoder()
# 16+ digit runs may exceed 2**53-1; "-0.0"/"-0e.." is negative zero. Both may also sit inside
# strings, so a hit only sends the value to the precise slow path. A regex for digit runs costs
# ~5 µs on a 400-byte line; mapping every digit to "0" and looking for sixteen of them in a row
# costs well under one.
# The same pass maps "[" to "{", so one count bounds the nesting depth: a line with fewer than
# MAX_DEPTH openers cannot nest deeper than MAX_DEPTH.
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789[", b"0000000000{")
_SIXTEEN_DIGITS = b"0" * 16
#: The deepest nesting of arrays and objects a line may have, its envelope object counting as
#: one (spec §6): parsers in other languages stop at 128 (serde_json) or less, and a Python
#: reader needs a stack frame per level.
MAX_DEPTH = 128
_NEG_ZERO = re.compile(rb"-0(?:\.0+)?(?:[eE][-+]?\d+)?(?![\d.eE])")


def suspect(encoded: bytes) -> bool:
    """True when ``encoded`` (msgspec's encoding of a value) may hold an unsafe integer, a
    negative zero or nesting deeper than :data:`MAX_DEPTH` (then look closer).

    A hit is looked at again with the strings cut out (:func:`outside_strings`): sixteen
    digits, brackets and ``-0`` inside strings are text (an import's ``mtime_ns`` and keys, a
    reply full of code), and sending such a line to :func:`explain` walked every string of it.
    """
    return _hit(encoded) and _hit(outside_strings(encoded))


def _hit(encoded: bytes) -> bool:
    mapped = encoded.translate(_DIGITS_AS_ZERO)
    if _SIXTEEN_DIGITS in mapped:
        return True
    # Each opener needs its closer: a line shorter than 2 * MAX_DEPTH cannot nest that deep.
    if len(encoded) >= 2 * MAX_DEPTH and mapped.count(b"{") >= MAX_DEPTH:
        return True
    # msgspec writes a negative zero as "-0.0" and nothing else: the regex below took 2 µs a
    # kilobyte on every line holding a date ("2024-08-10"). A one-byte search is memchr, a
    # longer needle costs several times as much: it runs only when there is a minus sign.
    return b"-" in encoded and b"-0.0" in encoded and _NEG_ZERO.search(encoded) is not None


def outside_strings(text: bytes) -> bytes:
    """JSON ``text`` with its strings cut out, quotes and all: what is left are its numbers,
    literals, brackets, commas and colons (``replace`` and ``split`` passes, at C speed)."""
    if b"\\" in text:  # an escaped backslash, then an escaped quote: neither ends a string
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(text.split(b'"')[::2])


def check_lossless(
    value: Any, encoded: bytes, decoded: Any, where: str = "$", outer: int = 0
) -> None:
    """Raise :class:`NotLosslessError` unless ``value`` survives the JSON round trip exactly.

    ``encoded`` holds the encoding of ``value`` (alone or inside the envelope) and ``decoded``
    what a reader decodes from it; callers have both already, so the gate costs one compare.
    ``outer``: the arrays and objects around ``value`` in the line (1 for an event's data).
    """
    if decoded == value and not suspect(encoded):
        return
    problem = explain(value, where, outer)
    if problem is not None:
        raise NotLosslessError(problem[1], field=problem[0])
    if decoded != value:
        raise NotLosslessError("data does not read back unchanged from JSON", field=where)


def encode_error(value: Any, where: str = "$", outer: int = 0) -> NotLosslessError:
    """The error for a value msgspec refused to encode (or decode back) at all."""
    problem = explain(value, where, outer) or (where, "data is not JSON-serializable")
    return NotLosslessError(problem[1], field=problem[0])


def explain(value: Any, where: str = "$", outer: int = 0) -> tuple[str, str] | None:
    """Walk ``value`` and return ``(field_path, reason)`` for the first non-JSON part, or None.

    ``outer`` counts the arrays and objects around ``value`` towards :data:`MAX_DEPTH`.
    """
    on_path: set[int] = set()  # containers on the current path: a repeat is a cycle
    stack: list[tuple[str | None, Any]] = [(where, value)]  # path None: leaving a container
    while stack:
        path, v = stack.pop()
        if path is None:
            on_path.discard(v)
            continue
        t: type[Any] = type(v)
        # Subclasses of the scalar types (IntEnum, str enums) encode as their plain value.
        for base in (bool, int, str, float):
            if isinstance(v, base):
                t = base
                break
        if v is None or t is bool or t is str:
            if t is str:
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return path, "string contains a lone surrogate and is not valid UTF-8"
            continue
        if t is int:
            if abs(v) > MAX_SAFE_INT:
                return path, (
                    f"integer {v} is outside the interoperable range ±(2**53-1); "
                    "store it as a string"
                )
            continue
        if t is float:
            if math.isnan(v) or math.isinf(v):
                return path, f"{v!r} is not valid JSON"
            if v == 0.0 and math.copysign(1.0, v) < 0:
                return path, "negative zero does not survive JSON readers in other languages"
            continue
        if t is dict or t is list:
            if id(v) in on_path:
                return path, f"cycle: this {t.__name__} contains itself"
            if outer + len(on_path) + 1 > MAX_DEPTH:
                return path, (
                    f"arrays and objects nest deeper than {MAX_DEPTH} levels here (the event "
                    "counts as one); JSON parsers in other languages refuse that"
                )
            on_path.add(id(v))
            stack.append((None, id(v)))
            if t is dict:
                items = list(v.items())
                for k, _ in items:
                    if type(k) is not str:
                        return path, f"object key {k!r} is a {type(k).__name__}, not a string"
                    try:
                        k.encode("utf-8")
                    except UnicodeEncodeError:
                        return path, (
                            f"object key {k!r} contains a lone surrogate and is not valid UTF-8"
                        )
                for k, item in reversed(items):
                    stack.append((_child(path, k), item))
            else:
                for i in range(len(v) - 1, -1, -1):
                    stack.append((f"{path}[{i}]", v[i]))
            continue
        return (
            path,
            f"a {t.__name__} is not a JSON value (use str, int, float, bool, None, list, dict)",
        )
    return None


def _child(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{encoder.encode(key).decode()}]"
