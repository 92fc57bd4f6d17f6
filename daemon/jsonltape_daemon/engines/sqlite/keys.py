"""The time-ordered keys of new messages (``messages.tkey``, the full-text tables' rowid).

The rule: a message of time ``t`` and id ``i`` takes its preferred key ``tkey_base(t) + i %
TKEY_SPAN`` (its second, then a slot chosen by the id) when it is free, else the first free key
above it. A key is taken while a message has it or it is in ``dead_keys``, so the keys depend
only on the messages added (their ids and times, in order) and the sessions dropped, never on how
they were cut into transactions or syncs, nor on the process that added them.

A second with more messages than slots (a burst: a bulk ``append -``, a converted log without
times, a fast multi-agent run) fills the seconds after its own, so the first free key can lie far
above a message's preferred one. Finding it key by key cost each batch the whole burst again
(100k messages in one second: quadratic). Every stretch of taken keys that a search for a free
key crossed is kept as a *run*, ``[lo, hi]``, in ``key_runs`` (schema step 9) and in memory, and
the next search jumps it whole: a burst costs O(1) per message. Runs are only a shortcut: every
key in one is taken, so the first free key is the same with or without them. Only runs of
:data:`RUN_MIN` keys or more are kept (a shorter crossing is as cheap as reading a run), so the
table holds about one row per dense stretch of the archive. ``index optimize`` frees the dead
keys and empties ``key_runs`` with them (:meth:`Keys.forget`).
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Sequence

from jsonltape_daemon.engines.sqlite.schema import TKEY_SPAN, tkey_base

__all__ = ["RUN_MIN", "WINDOW", "Keys"]

#: The fewest keys a run must span to be kept.
RUN_MIN = TKEY_SPAN
#: Keys whose takenness one query reads while searching for a free key.
WINDOW = 16 * TKEY_SPAN
#: Preferred keys checked by one query (two lists of bound parameters each).
_CHECK_STEP = 15_000


class Keys:
    """The key rule over the store's current connection (passed to every call); the runs are
    read from ``key_runs`` when first needed and after :meth:`reset`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget what is in memory (after a rollback, or when the connection changes)."""
        self._los: list[int] | None = None  # sorted starts of the runs
        self._his: dict[int, int] = {}  # a run's start -> its end
        self._changed: set[int] = set()  # starts of runs to write
        self._gone: set[int] = set()  # starts of runs to delete

    def forget(self, con: sqlite3.Connection) -> None:
        """Drop every run (some of their keys were freed: ``index optimize``)."""
        con.execute("DELETE FROM key_runs")
        self.reset()

    def assign(
        self, con: sqlite3.Connection, ids: Sequence[int], times: Sequence[int]
    ) -> list[int]:
        """The keys of new messages with these ids and times, in order (see the module docs);
        the runs crossed are written in the caller's transaction."""
        keys = [tkey_base(t) + i % TKEY_SPAN for i, t in zip(ids, times, strict=True)]
        taken = _taken(con, keys)
        if not taken and len(set(keys)) == len(keys):
            return keys
        # ``taken`` grows with the keys given in this batch, and with the index's keys of
        # every window read (``window // WINDOW``) while searching.
        read: set[int] = set()
        out: list[int] = []
        for k in keys:
            if k in taken:
                k = self._first_free(con, k, taken, read)
            taken.add(k)
            out.append(k)
        self._write(con)
        return out

    def _first_free(
        self, con: sqlite3.Connection, start: int, taken: set[int], read: set[int]
    ) -> int:
        """The first free key above ``start`` (taken); the keys crossed become a run."""
        los, his = self._runs(con)
        at = bisect.bisect_right(los, start) - 1  # the run that may hold a key, or the one below
        k = start
        while True:
            if at >= 0 and his[los[at]] >= k:
                k = his[los[at]] + 1  # every key in a run is taken
            else:
                if k // WINDOW not in read:
                    _read_window(con, k // WINDOW, taken)
                    read.add(k // WINDOW)
                if k not in taken:
                    break
                k += 1
            if at + 1 < len(los) and los[at + 1] <= k:
                at += 1
        self._add_run(start, k)  # start..k-1 were taken, and k is now
        return k

    def _runs(self, con: sqlite3.Connection) -> tuple[list[int], dict[int, int]]:
        if self._los is None:
            self._his = dict(con.execute("SELECT lo, hi FROM key_runs"))
            self._los = sorted(self._his)
        return self._los, self._his

    def _add_run(self, lo: int, hi: int) -> None:
        """Keep ``[lo, hi]`` (every key taken) as a run, joined with the runs it touches."""
        assert self._los is not None
        los, his = self._los, self._his
        at = bisect.bisect_right(los, hi + 1)
        first = at
        while first > 0 and his[los[first - 1]] >= lo - 1:
            first -= 1
        if first == at:  # alone
            if hi - lo + 1 < RUN_MIN:
                return  # and short: crossing it again costs less than keeping it
        elif first + 1 == at and los[first] <= lo:  # one run, grown at its end (a burst)
            if hi > his[los[first]]:
                his[los[first]] = hi
                self._changed.add(los[first])
            return
        else:  # runs that overlap [lo, hi] or touch it (disjoint, so in one slice)
            lo = min(lo, los[first])
            hi = max(hi, his[los[at - 1]])
            for old in los[first:at]:
                del his[old]
                self._gone.add(old)
                self._changed.discard(old)
            del los[first:at]
        los.insert(first, lo)
        his[lo] = hi
        self._gone.discard(lo)
        self._changed.add(lo)

    def _write(self, con: sqlite3.Connection) -> None:
        if self._gone:
            con.executemany("DELETE FROM key_runs WHERE lo = ?", [(lo,) for lo in self._gone])
        if self._changed:
            con.executemany(
                "INSERT OR REPLACE INTO key_runs (lo, hi) VALUES (?, ?)",
                [(lo, self._his[lo]) for lo in self._changed],
            )
        self._gone.clear()
        self._changed.clear()


def _read_window(con: sqlite3.Connection, window: int, taken: set[int]) -> None:
    """Add the index's keys of a window (dead ones too) to ``taken``."""
    lo, hi = window * WINDOW, (window + 1) * WINDOW
    taken.update(
        r[0]
        for r in con.execute(
            "SELECT tkey FROM messages WHERE tkey >= ?1 AND tkey < ?2 UNION ALL "
            "SELECT tkey FROM dead_keys WHERE tkey >= ?1 AND tkey < ?2",
            (lo, hi),
        )
    )


def _taken(con: sqlite3.Connection, keys: list[int]) -> set[int]:
    """Which of ``keys`` are in the index already, or were (dead keys)."""
    found: set[int] = set()
    for at in range(0, len(keys), _CHECK_STEP):
        part = keys[at : at + _CHECK_STEP]
        marks = ", ".join("?" * len(part))
        found.update(
            k
            for (k,) in con.execute(
                f"SELECT tkey FROM messages WHERE tkey IN ({marks}) UNION ALL "
                f"SELECT tkey FROM dead_keys WHERE tkey IN ({marks})",
                part + part,
            )
        )
    return found
