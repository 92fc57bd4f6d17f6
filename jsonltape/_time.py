"""Epoch milliseconds as text people read, total over every value a reader may meet.

The format bounds ``time`` and ``created`` to 0 … :data:`MAX_TIME` (spec §6), but renderers
also meet values from data members and foreign files, so nothing here raises: a value no
calendar can show is rendered as a placeholder that still carries the raw number.
"""

from __future__ import annotations

import datetime as _dt

from ._limits import MAX_TIME

__all__ = ["MAX_TIME", "format_ms"]


def format_ms(ms: object, *, utc: bool = True, seconds: bool = True) -> str:
    """``2026-12-01 09:44:05Z`` (UTC) or ``2026-12-01 10:44:05`` (local time) for epoch ms.

    Anything that is not an integer in the format's range comes back as ``<time ...>``.
    """
    if type(ms) is not int or not 0 <= ms <= MAX_TIME:
        return f"<time {ms!r}>"
    try:
        when = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
        if not utc:
            when = when.astimezone()  # local: can leave the calendar near its ends
    except (OverflowError, OSError, ValueError):
        return f"<time {ms}>"
    if utc:
        return when.strftime("%Y-%m-%d %H:%M:%SZ" if seconds else "%Y-%m-%d %H:%MZ")
    return when.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
