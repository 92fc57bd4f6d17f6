"""Model-based test of usage reports: random sessions across agents, projects, sub-agents and
forks, with responses in every usage dialect, the same response logged several times (a
resumed session's copies, revisions of a streamed reply, a fork's responses merged into its
parent), then syncs (a bulk load, appends, a deleted file). After every sync, every report
equals a brute-force sum over the generator's own list of distinct responses, and the index
equals a rebuild from the files.

The model knows each response's true, disjoint tokens; the files hold them encoded in the
dialect of the source (Codex's ``input_tokens`` include the cached ones...), so a report that
matches decoded every dialect, counted every response once and bucketed it by the right day of
the right time zone.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import SqliteTarget

import jsonltape
from jsonltape.events import ParentRef
from jsonltape.usage import THRESHOLDS, Tokens, load_prices, report

from .test_index_helpers import dump, rebuild

T0 = 1_772_755_200_000  # 2026-03-06T00:00Z: the sessions cross the US DST change (03-08)
MODELS = ("claude-sonnet-4-5", "gpt-5", "gemini-2.5-pro", "no-such-model")
AGENTS = ("claude-code/2.1.0", "codex/0.150", "my-agent")
PROJECTS = ("/home/ada/app", "/home/ada/lib")
ZONES = ("UTC", "Asia/Kolkata", "America/New_York", "Asia/Kathmandu")


def _encode(dialect: str, t: Tokens) -> dict[str, Any]:
    """The usage object a source of ``dialect`` writes for the true tokens ``t`` (the inverse
    of the reading rules of spec Appendix B.12, written out independently)."""
    if dialect == "openai-responses":
        return {
            "input_tokens": t.input + t.cache_read,
            "cached_input_tokens": t.cache_read,
            "output_tokens": t.output + t.reasoning,
            "reasoning_output_tokens": t.reasoning,
            "total_tokens": t.input + t.cache_read + t.output + t.reasoning,
        }
    if dialect == "chat-completions":
        return {
            "prompt_tokens": t.input + t.cache_read,
            "prompt_tokens_details": {"cached_tokens": t.cache_read},
            "completion_tokens": t.output + t.reasoning,
            "completion_tokens_details": {"reasoning_tokens": t.reasoning},
        }
    if dialect == "langchain":
        return {
            "input_tokens": t.input + t.cache_read + t.cache_5m,
            "output_tokens": t.output + t.reasoning,
            "total_tokens": t.total,
            "input_token_details": {"cache_read": t.cache_read, "cache_creation": t.cache_5m},
            "output_token_details": {"reasoning": t.reasoning},
        }
    out: dict[str, Any] = {  # Anthropic's names
        "input_tokens": t.input,
        "output_tokens": t.output,
        "cache_creation_input_tokens": t.cache_5m + t.cache_1h,
        "cache_read_input_tokens": t.cache_read,
    }
    if t.cache_1h:
        out["cache_creation"] = {
            "ephemeral_5m_input_tokens": t.cache_5m,
            "ephemeral_1h_input_tokens": t.cache_1h,
        }
    if t.reasoning:
        out["reasoning_tokens"] = t.reasoning
    return out


#: What each dialect can carry: the tokens the generator may give a response in it.
_CARRIES = {
    "anthropic": ("input", "output", "cache_5m", "cache_1h", "cache_read", "reasoning"),
    "openai-responses": ("input", "output", "cache_read", "reasoning"),
    "chat-completions": ("input", "output", "cache_read", "reasoning"),
    "langchain": ("input", "output", "cache_5m", "cache_read", "reasoning"),
}


@dataclass
class Resp:
    """A distinct response of the model: where it is counted and what it cost."""

    session: str  # the session whose copy is counted
    time: int
    model: str
    tokens: Tokens


@dataclass
class Sess:
    id: str
    path: Path
    agent: str
    cwd: str
    created: int
    parent: str | None = None
    #: every copy of a response in the file, in order: (model key, time, model, tokens)
    claims: list[tuple[str, int, str, Tokens]] = field(default_factory=list)


class World:
    """Sessions and the responses they hold (the model)."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root, self.rng = root, rng
        self.sessions: dict[str, Sess] = {}
        self.pool: list[tuple[str, dict[str, Any], int, Tokens, str]] = []  # replies to copy
        self.merges: list[tuple[str, str, int, dict[str, Any], int, Tokens]] = []
        self.n = 0
        self.tag = ""  # in the replies' ids: another machine's world has other replies

    def responses(self) -> dict[str, Resp]:
        """The copy of each response that counts: in the session created first (then by id),
        the latest version there."""
        out: dict[str, tuple[tuple[int, str], Resp]] = {}
        for sess in self.sessions.values():
            rank = (sess.created, sess.id)
            for key, time, model, tokens in sess.claims:
                have = out.get(key)
                if have is None or rank <= have[0]:
                    out[key] = (rank, Resp(sess.id, time, model, tokens))
        return {k: r for k, (_rank, r) in out.items()}

    def _tokens(self, dialect: str) -> Tokens:
        rng = self.rng
        big = rng.random() < 0.15  # a long-context prompt (a tier past 200k)
        vals = {
            name: (
                rng.choice([0, rng.randint(1, 900), rng.randint(1000, 250_000 if big else 9_000)])
                if name in _CARRIES[dialect]
                else 0
            )
            for name in Tokens._fields
        }
        if not any(vals.values()):
            vals["output"] = 1
        return Tokens(**vals)

    def new_session(self) -> Sess:
        self.n += 1
        rng = self.rng
        parent = None
        if self.sessions and rng.random() < 0.35:  # a sub-agent / fork of an earlier one
            parent = rng.choice(sorted(self.sessions))
        s = Sess(
            id=f"s{self.n:03d}",
            path=self.root / rng.choice(("a", "b")) / f"s{self.n:03d}.jsonl",
            agent=rng.choice(AGENTS),
            cwd=rng.choice(PROJECTS),
            created=T0 + self.n * 14 * 3_600_000 + rng.randint(0, 59) * 60_000,
            parent=parent,
        )
        s.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        parent_ref = None
        if parent is not None:
            p = self.sessions[parent]
            parent_ref = ParentRef(session=p.id, seq=0, path=str(p.path))
        with jsonltape.open(
            s.path, create=True, session_id=s.id, title=f"title {s.id}", cwd=s.cwd,
            agent=s.agent, parent=parent_ref, created=s.created, durability="manual",
        ):  # fmt: skip
            pass
        self.sessions[s.id] = s
        return s

    def add_responses(self, sess: Sess, n: int) -> None:
        rng = self.rng
        with jsonltape.open(sess.path, durability="manual") as tape:
            for _ in range(n):
                seq = tape.next_seq
                time = sess.created + rng.randint(0, 40 * 3_600_000)
                model = rng.choice(MODELS)
                kind = rng.random()
                if kind < 0.3 and self.pool:  # a copy of a reply logged elsewhere (a resume)
                    mid, usage, time, tokens, model = rng.choice(self.pool)
                    data = _message(model, usage, {"source": "claude-code", "lines": [seq]}, mid)
                    tape.append("assistant/message", data, surface="append", time=time)
                    sess.claims.append((f"cc:{mid}", time, model, tokens))
                elif kind < 0.55:  # a Claude Code reply by its message id, maybe revised
                    tokens = self._tokens("anthropic")
                    mid = f"msg_{self.tag}{self.n}_{seq}"
                    usage = _encode("anthropic", tokens)
                    data = _message(model, usage, {"source": "claude-code", "lines": [seq]}, mid)
                    if rng.random() < 0.3:  # streamed: an earlier version with less output
                        early = dict(usage, output_tokens=max(1, tokens.output // 3))
                        first = _message(model, early, {"source": "claude-code"}, mid)
                        node = tape.append("assistant/message", first, surface="append", time=time)
                        early_t = Tokens(*tokens[:1], max(1, tokens.output // 3), *tokens[2:])
                        sess.claims.append((f"cc:{mid}", time, model, early_t))
                        tape.append(
                            "assistant/message", data, time=time, sources=[node.seq],
                            surface={"op": "replace", "start": node.seq, "end": node.seq},
                        )  # fmt: skip
                    else:
                        tape.append("assistant/message", data, surface="append", time=time)
                    self.pool.append((mid, usage, time, tokens, model))
                    sess.claims.append((f"cc:{mid}", time, model, tokens))
                else:  # a native reply, in any dialect
                    dialect = rng.choice(sorted(_CARRIES))
                    tokens = self._tokens(dialect)
                    data = _message(model, _encode(dialect, tokens), None, "m")
                    ev = tape.append("assistant/message", data, surface="append", time=time)
                    if sess.parent is None:
                        sess.claims.append((f"{sess.id}:{ev.seq}:{ev.crc}", time, model, tokens))
                    else:
                        sess.claims.append((f"{sess.id}:{ev.seq}", time, model, tokens))
                        if rng.random() < 0.5:  # merged into the parent (spec §8.7.9)
                            self.merges.append((sess.parent, sess.id, ev.seq, data, time, tokens))
            tape.flush()
        self._merge()

    def _merge(self) -> None:
        """Copies of forks' responses appended to their parents, as a merge writes them."""
        for parent, fork, seq, data, time, tokens in self.merges:
            p = self.sessions.get(parent)
            if p is None:
                continue
            copy = dict(data, origin={"session": fork, "seq": seq})
            with jsonltape.open(p.path, durability="manual") as tape:
                tape.append("assistant/message", copy, surface="append", time=time)
            p.claims.append((f"{fork}:{seq}", time, data["model"], tokens))
        self.merges = []

    def delete(self, sid: str) -> None:
        """Delete a session file: its copies count no more (other copies do)."""
        self.sessions.pop(sid).path.unlink()


def _message(
    model: str, usage: dict[str, Any], imp: dict[str, Any] | None, mid: str
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "message": {"id": mid, "role": "assistant", "parts": [{"type": "text", "content": "ok"}]},
        "model": model,
        "usage": usage,
    }
    if imp is not None:
        data["import"] = imp
    return data


def _day(ms: int, zone: str) -> str:
    when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).astimezone(ZoneInfo(zone))
    return when.date().isoformat()


def _root_of(world: World, sid: str) -> str:
    while world.sessions[sid].parent is not None and world.sessions[sid].parent in world.sessions:
        sid = world.sessions[sid].parent  # type: ignore[assignment]
    return sid


def _expected(world: World, zone: str, key: Any) -> dict[Any, tuple[int, Tokens, Fraction, int]]:
    """Responses, tokens, exact cost in dollars and unpriced tokens, per ``key`` of each
    distinct response: each priced on its own (the report prices sums of them)."""
    table = load_prices()
    out: dict[Any, list[Any]] = defaultdict(lambda: [0, Tokens(), Fraction(0), 0])
    for r in world.responses().values():
        k = key(r)
        acc = out[k]
        tier = sum(1 for t in THRESHOLDS if r.tokens.prompt > t)
        cost = table.cost(r.model, r.tokens, tier, False)
        acc[0] += 1
        acc[1] = acc[1].plus(r.tokens)
        acc[2] += cost.usd
        acc[3] += cost.unpriced
    return {k: tuple(v) for k, v in out.items()}  # type: ignore[misc]


def _micros(x: Fraction) -> int:
    return int((x * 1_000_000 + Fraction(1, 2)).__floor__())


def _got_tokens(line: Any) -> Tokens:
    c = line.tokens
    return Tokens(c.input, c.output, c.cache_write_5m, c.cache_write_1h, c.cache_read, c.reasoning)


def _check(world: World, index: Path, zone: str) -> None:
    reader = open_reader(SqliteTarget(index))
    try:
        daily = report(reader, "daily", timezone=zone, by=["agent", "project"])
        want = _expected(
            world,
            zone,
            lambda r: (
                _day(r.time, zone),
                world.sessions[r.session].agent.split("/")[0],
                world.sessions[r.session].cwd,
            ),
        )
        got = {
            (line.period, line.by["agent"], line.by["project"]): (
                line.responses, _got_tokens(line), line.cost_micros, line.unpriced_tokens
            )
            for line in daily.lines
        }  # fmt: skip
        assert got == {k: (n, t, _micros(c), u) for k, (n, t, c, u) in want.items()}
        total = _expected(world, zone, lambda r: "all").get("all", (0, Tokens(), Fraction(0), 0))
        assert (daily.total.responses, _got_tokens(daily.total)) == total[:2]
        assert daily.total.cost_micros == _micros(total[2])
        monthly = report(reader, "monthly", timezone=zone, by=["model"])
        want_m = _expected(world, zone, lambda r: (_day(r.time, zone)[:7], r.model))
        got_m = {
            (line.period, line.by["model"]): (line.responses, _got_tokens(line))
            for line in monthly.lines
        }
        assert got_m == {k: v[:2] for k, v in want_m.items()}
        sessions = report(reader, "session", timezone=zone, breakdown=True)
        want_s = _expected(world, zone, lambda r: _root_of(world, r.session))
        got_s = {line.period: (line.responses, _got_tokens(line)) for line in sessions.lines}
        assert got_s == {k: v[:2] for k, v in want_s.items()}
        for line in sessions.lines:  # the sub-sessions add up to the tree's total
            subs = line.subsessions or [line]
            assert sum(s.responses for s in subs) == line.responses
        blocks = report(reader, "blocks", timezone=zone)
        assert sum(b.responses for b in blocks.lines) == daily.total.responses
        assert _got_tokens(blocks.total) == _got_tokens(daily.total)
    finally:
        reader.close()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), zone=st.sampled_from(ZONES))
def test_every_report_equals_a_brute_force_sum_over_the_distinct_responses(
    tmp_path_factory: pytest.TempPathFactory, seed: int, zone: str
) -> None:
    tmp = tmp_path_factory.mktemp("usage")
    root, index = tmp / "root", tmp / "index.db"
    root.mkdir(mode=0o700)
    rng = random.Random(seed)
    world = World(root, rng)
    for _ in range(rng.randint(2, 6)):
        world.add_responses(world.new_session(), rng.randint(0, 5))
    store = SqliteStore(index)
    try:
        Mirror(store, str(root)).rescan()  # a bulk load
        _check(world, index, zone)
        for _ in range(rng.randint(1, 3)):  # appends, new sessions: incremental syncs
            if rng.random() < 0.5:
                world.add_responses(world.new_session(), rng.randint(1, 4))
            else:
                world.add_responses(world.sessions[rng.choice(sorted(world.sessions))], 2)
            Mirror(store, str(root)).rescan()
            _check(world, index, zone)
        if len(world.sessions) > 1:  # a file gone: another copy of its responses counts now
            world.delete(rng.choice(sorted(world.sessions)))
            Mirror(store, str(root)).rescan()
            _check(world, index, zone)
        assert dump(store.con) == rebuild(root)
    finally:
        store.close()


def test_a_counted_copy_moves_when_its_session_goes(tmp_path: Path) -> None:
    """Two sessions hold one response (a resumed session's copy): the one created first counts
    it; delete that file and the other copy counts it, on the other session's day and
    project; bring the file back and the first counts it again."""
    root = tmp_path / "r"
    usage = {"input_tokens": 10, "output_tokens": 5}
    for name, created, cwd in (("first", T0, "/a"), ("second", T0 + 86_400_000 * 3, "/b")):
        with jsonltape.open(
            root / f"{name}.jsonl", create=True, session_id=name, cwd=cwd, created=created
        ) as tape:
            data = _message("gpt-5", usage, {"source": "claude-code", "lines": [1]}, "msg_shared")
            tape.append("assistant/message", data, surface="append", time=created)
    index = tmp_path / "i.db"
    store = SqliteStore(index)

    def projects() -> dict[str, int]:
        reader = open_reader(SqliteTarget(index))
        try:
            r = report(reader, "daily", by=["project"], timezone="UTC")
            return {line.by["project"]: line.responses for line in r.lines}
        finally:
            reader.close()

    try:
        Mirror(store, str(root)).rescan()
        assert projects() == {"/a": 1}
        keep = (root / "first.jsonl").read_bytes()
        (root / "first.jsonl").unlink()
        Mirror(store, str(root)).rescan()
        assert projects() == {"/b": 1}
        (root / "first.jsonl").write_bytes(keep)
        (root / "first.jsonl").chmod(0o600)
        Mirror(store, str(root)).rescan()
        assert projects() == {"/a": 1}
        assert dump(store.con) == rebuild(root)
        slots = store.con.execute("SELECT count(*), sum(responses) FROM usage_slots").fetchone()
        assert slots == (1, 1)
    finally:
        store.close()


@pytest.mark.parametrize("zone", ["America/New_York", "Europe/London", "Australia/Lord_Howe"])
def test_the_machines_own_zone_keeps_its_summer_time(
    monkeypatch: pytest.MonkeyPatch, zone: str
) -> None:
    """Without a zone named, days are the machine's: over a year its offsets change (Lord Howe
    by half an hour), as they do for the zone by name -- not the offset of today."""
    import time

    from jsonltape.usage._periods import Zone

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        lo = T0 // 900_000
        hi = lo + 365 * 96
        local, named = Zone(), Zone(zone)
        assert local.name == zone
        assert local.shifts(lo, hi) == named.shifts(lo, hi)
        assert len(named.shifts(lo, hi)) == 3  # summer time starts and ends within the year
        day = dt.date(2026, 7, 1)
        assert local.day_start_ms(day) == named.day_start_ms(day)
    finally:
        monkeypatch.undo()
        time.tzset()
