"""Parity with ccusage itself: the npm package ``ccusage`` (pinned, its native binary run through
its node launcher) reads the same Claude Code trees offline; its daily and weekly token totals,
per day and per model, equal ours, and its costs are ours within a cent when both are given the
same prices (ccusage through its ``pricingOverrides``, ours through ``--prices``).

Where the two differ on purpose, a test names the case and spec Appendix B.12 says why:
a request whose prompt passes a long-context threshold (we bill the whole request at the tier's
rates; ccusage splits each category's own count at 200k) and a model no price table knows (we
report it unpriced; ccusage counts it $0).

ccusage comes from npm: ``$JSONLTAPE_CCUSAGE`` (a directory ``npm install --prefix`` filled,
as .ci/run does), else it is installed into a cache directory on first use. Without node or
npm's network the tests skip, saying so -- except where ``CI`` or ``JSONLTAPE_REQUIRE_CCUSAGE``
is set: there they fail.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import SqliteTarget

from jsonltape.usage import Report, load_prices, report

from .conftest import SAMPLES

CCUSAGE = "20.0.24"
FIX = Path(__file__).parent / "fixtures"
#: The rates both tools are given (LiteLLM's names; ccusage gets the same numbers). The 1-hour
#: cache write is twice the input rate, as ccusage bills it, and as the table says.
PRICES = {
    "claude-sonnet-4-20250514": (3e-06, 1.5e-05, 3.75e-06, 3e-07),
    "claude-sonnet-4-5": (3e-06, 1.5e-05, 3.75e-06, 3e-07),
    "claude-haiku-4-5-20251001": (1e-06, 5e-06, 1.25e-06, 1e-07),
    "claude-opus-4-1": (1.5e-05, 7.5e-05, 1.875e-05, 1.5e-06),
}


def _required() -> bool:
    return bool(os.environ.get("CI") or os.environ.get("JSONLTAPE_REQUIRE_CCUSAGE"))


def _unavailable(reason: str) -> None:
    if _required():
        pytest.fail(reason + " (CI or JSONLTAPE_REQUIRE_CCUSAGE is set: this is a failure)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def ccusage() -> list[str]:
    """The command that runs ccusage ``CCUSAGE``: node and the package's launcher."""
    node, npm = shutil.which("node"), shutil.which("npm")
    given = os.environ.get("JSONLTAPE_CCUSAGE")
    prefix = Path(given) if given else Path(tempfile.gettempdir()) / f"jsonltape-ccusage-{CCUSAGE}"
    cli = prefix / "node_modules" / "ccusage" / "src" / "cli.js"
    if node is None:
        _unavailable("node is not installed: the ccusage parity tests need it")
    if not cli.exists():
        if npm is None:
            _unavailable("npm is not installed: cannot install ccusage")
        prefix.mkdir(parents=True, exist_ok=True)
        with open(prefix / ".lock", "w") as lock:  # two test workers: one installs
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not cli.exists():
                r = subprocess.run(
                    [str(npm), "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                     f"ccusage@{CCUSAGE}"],
                    capture_output=True, text=True, timeout=600, check=False,
                )  # fmt: skip
                if r.returncode != 0 or not cli.exists():
                    _unavailable(f"npm could not install ccusage@{CCUSAGE}: {r.stderr[-300:]}")
    version = subprocess.run(
        [str(node), str(cli), "--version"], capture_output=True, text=True, timeout=60
    )
    if version.returncode != 0 or CCUSAGE not in version.stdout:
        _unavailable(f"ccusage@{CCUSAGE} does not run here: {version.stderr[-300:]}")
    return [str(node), str(cli)]


# -- Claude Code trees ----------------------------------------------------------------------


class Transcript:
    """Claude Code lines as it writes them: a user prompt, then an assistant response as one
    line per content block, each repeating the usage with ``output_tokens`` still growing."""

    def __init__(self, session: str, cwd: str = "/home/ada/app") -> None:
        self.session, self.cwd = session, cwd
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.n = 0

    def _base(self, kind: str, ts: str, sidechain: bool) -> dict[str, Any]:
        self.n += 1
        uuid = f"{self.session[:8]}-{self.n:04d}"
        line = {
            "parentUuid": self.parent, "isSidechain": sidechain, "userType": "external",
            "cwd": self.cwd, "sessionId": self.session, "version": "2.1.258", "type": kind,
            "uuid": uuid, "timestamp": ts,
        }  # fmt: skip
        self.parent = uuid
        return line

    def user(self, text: str, ts: str, sidechain: bool = False) -> None:
        line = self._base("user", ts, sidechain)
        line["message"] = {"role": "user", "content": text}
        self.lines.append(line)

    def reply(
        self,
        mid: str,
        model: str,
        ts: list[str],
        usage: dict[str, Any],
        outputs: list[int],
        sidechain: bool = False,
        request: str | None = None,
    ) -> None:
        for i, (when, out) in enumerate(zip(ts, outputs, strict=True)):
            line = self._base("assistant", when, sidechain)
            line["requestId"] = request or f"req_{mid}"
            line["message"] = {
                "id": mid, "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": f"part {i} of {mid}"}],
                "stop_reason": None, "usage": {**usage, "output_tokens": out},
            }  # fmt: skip
            self.lines.append(line)

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # compact, as Claude Code writes it (ccusage looks for the bytes '"usage":{')
        path.write_text(
            "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in self.lines)
        )


def _usage(inp: int, cw: int, cr: int, one_hour: int = 0) -> dict[str, Any]:
    u: dict[str, Any] = {"input_tokens": inp, "cache_creation_input_tokens": cw,
                         "cache_read_input_tokens": cr, "service_tier": "standard"}  # fmt: skip
    if one_hour:
        u["cache_creation"] = {
            "ephemeral_5m_input_tokens": cw - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        }
    return u


def generated_tree(projects: Path, *, replay: bool = True) -> None:
    """Sessions over several days and models, with what trips usage counters up: streamed
    responses (usage repeated, output growing: 2 on the first line, 91 on the last), a resumed
    session copying the earlier one's responses, a sub-agent file replaying a parent message
    under a new request id, 1-hour cache writes, a synthetic reply, a day boundary."""
    a = Transcript("aaaaaaaa-0000-4000-8000-000000000001")
    a.user("fix the migration", "2026-03-01T23:58:00.000Z")
    a.reply("msg_a1", "claude-sonnet-4-5", ["2026-03-01T23:58:05.000Z", "2026-03-01T23:58:09.000Z",
            "2026-03-02T00:00:02.000Z"], _usage(4, 18764, 0), [2, 40, 91])  # fmt: skip
    a.user("and the tests", "2026-03-02T00:05:00.000Z")
    a.reply("msg_a2", "claude-haiku-4-5-20251001", ["2026-03-02T00:05:03.000Z"],
            _usage(7, 2255, 18764, one_hour=2000), [302])  # fmt: skip
    a.reply("msg_a3", "claude-sonnet-4-5", ["2026-03-02T00:06:00.000Z",
            "2026-03-02T00:06:01.000Z"], _usage(9, 0, 21019), [5, 77])  # fmt: skip
    a.reply("msg_synth", "<synthetic>", ["2026-03-02T00:06:30.000Z"], _usage(0, 0, 0), [0])
    a.write(projects / "-home-ada-app" / f"{a.session}.jsonl")
    # resumed: a new file copying the earlier responses (same ids), then a new one
    b = Transcript("bbbbbbbb-0000-4000-8000-000000000002")
    b.lines = [dict(line, sessionId=b.session) for line in a.lines[:5]]
    b.parent = b.lines[-1]["uuid"]
    b.user("one more thing", "2026-03-04T10:00:00.000Z")
    b.reply("msg_b1", "claude-opus-4-1", ["2026-03-04T10:00:04.000Z", "2026-03-04T10:00:09.000Z"],
            _usage(12, 5000, 21019, one_hour=5000), [10, 640])  # fmt: skip
    b.write(projects / "-home-ada-app" / f"{b.session}.jsonl")
    # a sub-agent's file: its own responses, and a replay of a parent message (new request id)
    s = Transcript(a.session)
    s.user("look up the schema", "2026-03-02T00:05:10.000Z", sidechain=True)
    s.reply("msg_s1", "claude-haiku-4-5-20251001", ["2026-03-02T00:05:12.000Z"],
            _usage(3, 1334, 11454), [179], sidechain=True)  # fmt: skip
    if replay:
        s.reply("msg_a1", "claude-sonnet-4-5", ["2026-03-02T00:05:20.000Z"], _usage(4, 18764, 0),
                [91], sidechain=True, request="req_replayed")  # fmt: skip
    s.write(projects / "-home-ada-app" / a.session / "subagents" / "agent-abc123.jsonl")


def _trees(tmp_path: Path, *, replay: bool = True) -> Iterator[tuple[str, Path]]:
    """(name, a CLAUDE_CONFIG_DIR) for each tree: the samples, the fixtures, the generated."""
    if SAMPLES.is_dir():
        d = tmp_path / "samples"
        for name in ("claude-code-v1.0.98-init.jsonl", "claude-code-v1.0.108-japanese.jsonl"):
            (d / "projects" / "-path-to-Demo").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SAMPLES / name, d / "projects" / "-path-to-Demo" / name)
        yield "samples", d
    d = tmp_path / "fixtures"
    for src in (FIX / "claude21" / "streamed-tool-results.jsonl",
                FIX / "interop" / "claude-rewind-compact.jsonl"):  # fmt: skip
        (d / "projects" / "-work-demo").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, d / "projects" / "-work-demo" / src.name)
    yield "fixtures", d
    d = tmp_path / "generated"
    generated_tree(d / "projects", replay=replay)
    yield "generated", d


def _prices(tmp_path: Path, prices: dict[str, tuple[float, ...]]) -> tuple[Path, Path]:
    """The same prices for both: a LiteLLM-shaped file for us, a config file for ccusage."""
    ours, theirs = {}, {}
    for model, (i, o, cw, cr, *tier) in prices.items():
        ours[model] = {"input_cost_per_token": i, "output_cost_per_token": o,
                       "cache_creation_input_token_cost": cw,
                       "cache_creation_input_token_cost_above_1hr": 2 * i,
                       "cache_read_input_token_cost": cr}  # fmt: skip
        ti, to, tcw, tcr = tier or (i, o, cw, cr)  # no tier: the base rates above 200k too
        if tier:
            ours[model].update(
                input_cost_per_token_above_200k_tokens=ti,
                output_cost_per_token_above_200k_tokens=to,
                cache_creation_input_token_cost_above_200k_tokens=tcw,
                cache_read_input_token_cost_above_200k_tokens=tcr,
            )
        theirs[model] = {"inputCostPerToken": i, "outputCostPerToken": o,
                         "cacheCreationInputTokenCost": cw, "cacheReadInputTokenCost": cr,
                         "inputCostPerTokenAbove200kTokens": ti,
                         "outputCostPerTokenAbove200kTokens": to,
                         "cacheCreationInputTokenCostAbove200kTokens": tcw,
                         "cacheReadInputTokenCostAbove200kTokens": tcr}  # fmt: skip
    a, b = tmp_path / "prices.json", tmp_path / "ccusage.json"
    a.write_text(json.dumps(ours))
    b.write_text(json.dumps({"claude": {"defaults": {"pricingOverrides": theirs}}}))
    return a, b


def _theirs(cmd: list[str], tree: Path, config: Path, kind: str) -> dict[str, Any]:
    home = tree / "home"
    home.mkdir(exist_ok=True)
    r = subprocess.run(
        [*cmd, "claude", kind, "--offline", "--json", "--mode", "calculate", "-z", "UTC",
         "--config", str(config)],
        capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home),
             "CLAUDE_CONFIG_DIR": str(tree), "TZ": "UTC", "NO_COLOR": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def _ours(tree: Path, tmp: Path, prices: Path, kind: str) -> Report:
    index, root = tmp / "index.db", tmp / "root"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    store = SqliteStore(index)
    try:
        Mirror(store, str(root), [("claude-code", str(tree / "projects"))]).rescan()
    finally:
        store.close()
    reader = open_reader(SqliteTarget(index))
    try:
        by = ["model"] if kind in ("daily", "weekly", "monthly") else []
        return report(reader, kind, timezone="UTC", by=by, prices=load_prices(prices))  # type: ignore[arg-type]
    finally:
        reader.close()


def _per_model(r: Report) -> dict[tuple[str, str], tuple[int, int, int, int, float]]:
    return {
        (line.period, line.by["model"]): (
            line.tokens.input, line.tokens.output + line.tokens.reasoning,
            line.tokens.cache_write_5m + line.tokens.cache_write_1h, line.tokens.cache_read,
            line.cost_micros / 1e6,
        )
        for line in r.lines
    }  # fmt: skip


def _their_per_model(doc: dict[str, Any], kind: str) -> dict[tuple[str, str], tuple[Any, ...]]:
    key = {"daily": "date", "weekly": "week", "monthly": "month"}[kind]
    return {
        (row[key], m["modelName"]): (
            m["inputTokens"], m["outputTokens"], m["cacheCreationTokens"], m["cacheReadTokens"],
            m["cost"],
        )
        for row in doc[kind]
        for m in row["modelBreakdowns"]
        if m["inputTokens"] + m["outputTokens"] + m["cacheCreationTokens"] + m["cacheReadTokens"]
    }  # fmt: skip


@pytest.mark.parametrize("kind", ["daily", "weekly", "monthly"])
def test_tokens_per_day_and_model_equal_ccusage_and_costs_within_a_cent(
    ccusage: list[str], tmp_path: Path, kind: str
) -> None:
    prices, config = _prices(tmp_path, PRICES)
    compared = 0
    # ccusage's weekly and monthly reports count a sub-agent's replay of its parent's message
    # again (the named difference below): those trees leave the replay out
    for name, tree in _trees(tmp_path, replay=kind == "daily"):
        mine = _per_model(_ours(tree, tmp_path / name, prices, kind))
        theirs = _their_per_model(_theirs(ccusage, tree, config, kind), kind)
        assert sorted(mine) == sorted(theirs), name
        for key, (i, o, cw, cr, cost) in mine.items():
            ti, to, tcw, tcr, tcost = theirs[key]
            assert (i, o, cw, cr) == (ti, to, tcw, tcr), (name, key)
            assert abs(cost - tcost) < 0.01, (name, key, cost, tcost)
        compared += len(mine)
    assert compared >= 6


def test_named_difference_a_sub_agents_replay_counts_once_in_every_report(
    ccusage: list[str], tmp_path: Path
) -> None:
    """A sub-agent's file (``/btw`` side questions) replays a parent message under its own
    request id. ccusage's README and its daily report drop the replay; its weekly, monthly
    and session reports (another loader) count it again. Every report of ours counts the
    response once, by its message id: all of them equal ccusage's daily totals."""
    prices, config = _prices(tmp_path, PRICES)
    tree = tmp_path / "t"
    generated_tree(tree / "projects")
    daily = _theirs(ccusage, tree, config, "daily")["totals"]
    monthly = _theirs(ccusage, tree, config, "monthly")["totals"]
    assert monthly["inputTokens"] - daily["inputTokens"] == 4  # msg_a1, counted twice
    assert monthly["outputTokens"] - daily["outputTokens"] == 91
    for kind in ("daily", "weekly", "monthly", "session", "blocks"):
        mine = _ours(tree, tmp_path / kind, prices, kind)
        t = mine.total.tokens
        assert (t.input, t.output, t.cache_write_5m + t.cache_write_1h, t.cache_read) == (
            daily["inputTokens"],
            daily["outputTokens"],
            daily["cacheCreationTokens"],
            daily["cacheReadTokens"],
        ), kind


def test_a_streamed_response_counts_its_last_lines_output(
    ccusage: list[str], tmp_path: Path
) -> None:
    """Claude Code repeats a streamed response's usage on each content line with
    ``output_tokens`` still growing (2, 40, 91): the response's output is the last line's.
    Counting the first line per message id and request id, as ccusage once did, gave 2."""
    prices, config = _prices(tmp_path, PRICES)
    tree = tmp_path / "t"
    t = Transcript("cccccccc-0000-4000-8000-000000000003")
    t.user("go", "2026-03-05T10:00:00.000Z")
    t.reply("msg_x", "claude-sonnet-4-5", ["2026-03-05T10:00:01.000Z", "2026-03-05T10:00:02.000Z",
            "2026-03-05T10:00:03.000Z"], _usage(3, 0, 0), [2, 40, 91])  # fmt: skip
    t.write(tree / "projects" / "-p" / f"{t.session}.jsonl")
    mine = _ours(tree, tmp_path / "ours", prices, "daily")
    theirs = _theirs(ccusage, tree, config, "daily")
    assert mine.total.tokens.output == theirs["totals"]["outputTokens"] == 91


def test_named_difference_a_long_context_request_is_billed_whole_at_the_tier(
    ccusage: list[str], tmp_path: Path
) -> None:
    """A request whose prompt (input and cache) passes 200k: Anthropic bills all its tokens at
    the long-context rates; ccusage splits each category's own count at 200k (its cache read
    of 250k: 200k at the base rate, 50k at the tier's) and bills the rest at the base rate."""
    tiered = {
        "claude-sonnet-4-5": (3e-06, 1.5e-05, 3.75e-06, 3e-07, 6e-06, 2.25e-05, 7.5e-06, 6e-07)
    }
    prices, config = _prices(tmp_path, tiered)
    tree = tmp_path / "t"
    t = Transcript("dddddddd-0000-4000-8000-000000000004")
    t.user("go", "2026-03-05T10:00:00.000Z")
    t.reply("msg_long", "claude-sonnet-4-5", ["2026-03-05T10:00:09.000Z"],
            _usage(10, 1000, 250_000), [500])  # fmt: skip
    t.write(tree / "projects" / "-p" / f"{t.session}.jsonl")
    mine = _ours(tree, tmp_path / "ours", prices, "daily")
    theirs = _theirs(ccusage, tree, config, "daily")
    assert mine.total.tokens.total == theirs["totals"]["totalTokens"]
    whole = 10 * 6e-06 + 500 * 2.25e-05 + 1000 * 7.5e-06 + 250_000 * 6e-07
    split = 10 * 3e-06 + 500 * 1.5e-05 + 1000 * 3.75e-06 + 200_000 * 3e-07 + 50_000 * 6e-07
    assert mine.total.cost_micros == round(whole * 1e6)
    assert abs(theirs["totals"]["totalCost"] - split) < 1e-9


def test_named_difference_an_unknown_model_is_unpriced_not_zero(
    ccusage: list[str], tmp_path: Path
) -> None:
    prices, config = _prices(tmp_path, PRICES)
    tree = tmp_path / "t"
    t = Transcript("eeeeeeee-0000-4000-8000-000000000005")
    t.user("go", "2026-03-05T10:00:00.000Z")
    t.reply("msg_new", "claude-nobody-knows-9", ["2026-03-05T10:00:09.000Z"],
            _usage(10, 0, 0), [20])  # fmt: skip
    t.write(tree / "projects" / "-p" / f"{t.session}.jsonl")
    mine = _ours(tree, tmp_path / "ours", prices, "daily")
    theirs = _theirs(ccusage, tree, config, "daily")
    assert theirs["totals"]["totalTokens"] == mine.total.tokens.total == 30
    assert theirs["totals"]["totalCost"] == 0  # counted as free
    assert (mine.total.cost_micros, mine.total.unpriced_tokens) == (0, 30)
    assert mine.unpriced_models == ["claude-nobody-knows-9"]
