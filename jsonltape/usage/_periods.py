"""Days in a time zone, weeks and months: how reports bucket the index's 15-minute slots.

The index sums usage per 15-minute slot (UTC). A day in a time zone is a run of whole slots,
since every zone's offset is a multiple of 15 minutes; which day a slot is in depends only on
the offset in force at that slot, so the index computes days itself from a short list of
*shifts* -- ``(first slot, offset ms)`` for each offset in force in the span asked for -- and
returns sums per day, not per slot.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidArgumentError
from ._rules import SLOT_MS

__all__ = ["DAY_MS", "Zone", "bounds", "day_label", "month_label", "parse_day", "week_label"]

DAY_MS = 86_400_000
_DATE = re.compile(r"^(\d{4})-?(\d{2})-?(\d{2})$")


class Zone:
    """A time zone for reports: an IANA name, or the machine's local zone (None: the C
    library's rules, as ``time.localtime`` applies them, DST included)."""

    def __init__(self, name: str | None = None) -> None:
        self.tz: dt.tzinfo | None = None
        if name is None:
            self.name = _local_name()
            return
        try:
            self.tz = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidArgumentError(
                f"unknown time zone {name!r} (an IANA name: UTC, Europe/Paris, Asia/Tokyo)",
                field="timezone",
            ) from None
        self.name = name

    def offset_ms(self, ms: int) -> int:
        """The zone's offset from UTC at ``ms``, in milliseconds."""
        if self.tz is None:
            return time.localtime(ms // 1000).tm_gmtoff * 1000
        when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).astimezone(self.tz)
        off = when.utcoffset()
        return int(off.total_seconds() * 1000) if off is not None else 0

    def shifts(self, lo_slot: int, hi_slot: int) -> list[tuple[int, int]]:
        """``(first slot, offset ms)`` of each offset in force from slot ``lo_slot`` to
        ``hi_slot``: probed once a day, each change found to the slot by bisection (a zone
        never changes its offset twice in a day)."""
        lo, hi = lo_slot * SLOT_MS, hi_slot * SLOT_MS
        out = [(lo_slot, self.offset_ms(lo))]
        t = lo
        while t < hi:
            nxt = min(t + DAY_MS, hi)
            if self.offset_ms(nxt) != out[-1][1]:
                a, b = t // SLOT_MS, nxt // SLOT_MS  # offset(a) is the old one, offset(b) new
                while b - a > 1:
                    mid = (a + b) // 2
                    if self.offset_ms(mid * SLOT_MS) == out[-1][1]:
                        a = mid
                    else:
                        b = mid
                out.append((b, self.offset_ms(b * SLOT_MS)))
            t = nxt
        return out

    def day_start_ms(self, day: dt.date) -> int:
        """The first millisecond of ``day`` in this zone."""
        if self.tz is None:
            return int(time.mktime((day.year, day.month, day.day, 0, 0, 0, 0, 0, -1)) * 1000)
        local = dt.datetime(day.year, day.month, day.day, tzinfo=self.tz)
        return int(local.timestamp() * 1000)


def _local_name() -> str:
    """The local zone's IANA name when it can be known ($TZ, /etc/localtime), else its
    abbreviation."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz:
        return tz
    target = os.path.realpath("/etc/localtime")
    if "/zoneinfo/" in target:
        return target.split("/zoneinfo/", 1)[1]
    return time.tzname[0] or "local"


def parse_day(text: str, what: str) -> dt.date:
    """A date given as ``YYYY-MM-DD`` or ``YYYYMMDD`` (ccusage's form)."""
    m = _DATE.match(text.strip())
    try:
        if m is None:
            raise ValueError
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        raise InvalidArgumentError(
            f"cannot read {what} {text!r}: a date, 2026-05-09 or 20260509", field=what
        ) from None


def day_label(day: int) -> str:
    """``YYYY-MM-DD`` of a day number (days since 1970-01-01 in the report's zone)."""
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


def week_label(day: int, start: int) -> str:
    """The first day (``YYYY-MM-DD``) of the week holding ``day``; weeks start on weekday
    ``start`` (0 = Monday ... 6 = Sunday)."""
    date = dt.date(1970, 1, 1) + dt.timedelta(days=day)
    return (date - dt.timedelta(days=(date.weekday() - start) % 7)).isoformat()


def month_label(day: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()[:7]


def bounds(
    zone: Zone, since: dt.date | None, until: dt.date | None
) -> tuple[int | None, int | None]:
    """The slots of a report's ``--since``/``--until`` days: the first slot of ``since``, the
    first slot after ``until`` (both inclusive days)."""
    lo = zone.day_start_ms(since) // SLOT_MS if since is not None else None
    hi = None
    if until is not None:
        hi = zone.day_start_ms(until + dt.timedelta(days=1)) // SLOT_MS
    return lo, hi
