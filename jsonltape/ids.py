"""Session ids: generated ones sort by creation time; given ones use a safe character set."""

from __future__ import annotations

import os
import re
import time

from .errors import InvalidSessionIdError

__all__ = ["new_session_id", "validate_session_id"]

# Crockford base32: digits then letters without I, L, O, U, so ASCII order is time order.
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def new_session_id(now_ms: int | None = None) -> str:
    """A 26-character ULID-style id: 48 bits of epoch milliseconds, then 80 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is 1-128 chars of ``[A-Za-z0-9._-]``, first not a symbol."""
    if not isinstance(session_id, str) or _SAFE_ID.fullmatch(session_id) is None:
        raise InvalidSessionIdError(
            f"session id {session_id!r} must be 1-128 characters of A-Z a-z 0-9 . _ - "
            "and start with a letter or digit",
            field="$.data.id",
        )
    return session_id
