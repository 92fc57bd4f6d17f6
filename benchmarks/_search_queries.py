"""The queries of the search benchmark: frequency ranks of the corpus's vocabulary, a phrase,
substrings, CJK terms and a prefix; the filters each runs under; and every hit counted from
whole match sets, the brute force the hit-count column reports."""

from __future__ import annotations

import sqlite3
import time

import _search_corpus as corpus
from jsonltape_daemon.engines.sqlite.search import (
    Filters,
    _passes,
    filter_sql,
    parse_query,
    trigram_expr,
)
from jsonltape_daemon.engines.sqlite.texts import Texts
from jsonltape_daemon.text.cjk import match_expr

__all__ = ["FILTERS", "Query", "count_hits", "filters_for", "queries"]

DAY_MS = 86_400_000
FILTERS = ("none", "role", "session", "since", "until", "type", "path", "paths")


class Query:
    def __init__(self, cls: str, text: str, must_hit: bool = True) -> None:
        self.cls, self.text, self.must_hit = cls, text, must_hit


def queries(m: dict[str, object]) -> list[Query]:
    words: list[str] = m["words"]  # type: ignore[assignment]
    counts: list[int] = m["counts"]  # type: ignore[assignment]
    rarest = max(i for i, c in enumerate(counts) if c > 0)
    out = [Query(f"rank {r}", words[r]) for r in (0, 10, 100, 1000)]
    out.append(Query(f"rarest (rank {rarest})", words[rarest]))
    out += [
        Query("phrase", '"most recent call last"'),
        Query("substring 3", "Fou"),  # inside FileNotFoundError
        Query("substring 4", "ound"),
        Query("substring 6", "NotFou"),
        Query("CJK 1", "京"),
        Query("CJK 2", "天气"),
        Query("CJK 3", "数据库"),
        Query("CJK 4", "ファイル"),
        # as typed in `search -i`: one, two, three letters of a word, and a longer prefix
        Query("prefix 1", "c*"),
        Query("prefix 2", "co*"),
        Query("prefix 3", "con*"),
        Query("prefix 4", "migr*"),
    ]
    return out


def filters_for(name: str, m: dict[str, object]) -> tuple[Filters, list[str]]:
    """A filter and the same as ``jsonltape search`` options."""
    if name == "role":
        return Filters(roles=("user",)), ["--role", "user"]
    if name == "session":
        sid = f"bench-{int(m['sessions']) // 2:06d}"  # type: ignore[call-overload]
        return Filters(session=sid), ["--session", sid]
    if name == "since":
        since = corpus.T_END - 30 * DAY_MS
        day = time.strftime("%Y-%m-%d", time.gmtime(since / 1000))
        return Filters(since=since), ["--since", day]
    if name == "until":  # the oldest month: every newer match is outside it
        until = corpus.T_END - corpus.SPAN_MS + 30 * DAY_MS
        day = time.strftime("%Y-%m-%d", time.gmtime(until / 1000))
        # `--until DAY` takes that whole day
        return Filters(until=until // DAY_MS * DAY_MS + DAY_MS), ["--until", day]
    if name == "type":
        return Filters(types=("tool/*",)), ["--type", "tool/*"]
    if name == "path":  # one project directory of 40: its sessions spread over the archive
        return Filters(path="*/p00/*"), ["--path", "*/p00/*"]
    if name == "paths":  # the first 100 sessions by name, written first: the oldest
        return Filters(path="*/s0000??.jsonl"), ["--path", "*/s0000??.jsonl"]
    return Filters(), []


def count_hits(con: sqlite3.Connection, q: str, f: Filters) -> int:
    """Every message the query matches (word pass, then the substring pass), counted from
    whole match sets, texts read back from the files where the text decides. A term of one or
    two characters is also found anywhere in a text by the search's last pass, a scan, which
    this count leaves out (it would read every text): for ``c*`` and ``co*`` it counts the
    word matches."""
    where, params = filter_sql(f)
    terms = parse_query(q)
    base = "SELECT m.tkey FROM messages m JOIN sessions s ON s.sid = m.sid WHERE " + where

    def keys(extra: str, args: list[object]) -> set[int]:
        return {r[0] for r in con.execute(base + extra, [*params, *args])}

    def checked(cands: set[int], checks: list[tuple[str, bool]]) -> set[int]:
        if not checks:
            return cands
        with Texts(con) as texts:
            out = set()
            for k, t in texts.iter(sorted(cands)):
                if t is not None and _passes(t, checks):
                    out.add(k)
            return out

    words = [t for t in terms if t.wordy]
    found: set[int] = set()
    if words:
        match = " ".join(
            '"' + t.text.replace('"', '""') + '"' + ("*" if t.prefix else "") for t in words
        )
        found = keys(
            " AND m.tkey IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)", [match]
        )
        found = checked(found, [(t.text.lower(), False) for t in terms if not t.wordy])
    checks = [(t.text.lower(), t.trigram_ok) for t in terms]
    tri = [t for t in terms if t.trigram_ok]
    cjk = [t for t in terms if t.cjk]
    if tri:
        c = keys(
            " AND m.tkey IN (SELECT rowid FROM messages_trigram WHERE messages_trigram MATCH ?)",
            [" ".join(trigram_expr(t.text) for t in tri)],
        )
    elif cjk:
        c = keys(
            " AND m.tkey IN (SELECT rowid FROM messages_cjk WHERE messages_cjk MATCH ?)",
            [" AND ".join(match_expr(t.text) for t in cjk)],
        )
    else:
        c = set()
    return len(found | checked(c - found, checks))
