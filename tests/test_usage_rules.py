"""The per-source rules of usage (spec Appendix B.12): how each dialect's usage is read into the
six billed counts, which id names a response, how sessions hang in sub-agent trees; and every
importer's usage checked on its fixtures against the totals the source's own records give."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape.interop import import_file, import_paths
from jsonltape.usage import (
    Links,
    Tokens,
    load_prices,
    read_tokens,
    response_of,
    session_links,
    tier_of,
)

from .conftest import SAMPLES

FIX = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("usage", "source", "want"),
    [
        # Claude Code: input without the cache, writes split by duration when it says
        (
            {"input_tokens": 4, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 7,
             "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
             "output_tokens": 263, "service_tier": "standard"},
            "claude-code",
            Tokens(input=4, output=263, cache_5m=100, cache_1h=200, cache_read=7),
        ),
        # a split that names less than the total: the rest is 5-minute
        (
            {"cache_creation_input_tokens": 50,
             "cache_creation": {"ephemeral_1h_input_tokens": 20}},
            None,
            Tokens(cache_5m=30, cache_1h=20),
        ),
        # Codex (OpenAI Responses): input includes the cached, output the reasoning
        (
            {"input_tokens": 42772, "cached_input_tokens": 3456, "output_tokens": 204,
             "reasoning_output_tokens": 124, "total_tokens": 42976},
            "codex",
            Tokens(input=39316, output=80, cache_read=3456, reasoning=124),
        ),
        # the Responses API's own detail objects, in a native session
        (
            {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60},
             "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 10}},
            None,
            Tokens(input=40, output=20, cache_read=60, reasoning=10),
        ),
        # Gemini CLI: input includes the cached content, tool-use prompts are input
        (
            {"input_tokens": 1000, "output_tokens": 50, "cache_read_input_tokens": 400,
             "reasoning_tokens": 30, "tool_use_prompt_tokens": 5, "total_tokens": 1085},
            "gemini-cli",
            Tokens(input=605, output=50, cache_read=400, reasoning=30),
        ),
        # OpenCode: input without the cache, reasoning apart from output
        (
            {"input_tokens": 1200, "output_tokens": 80, "reasoning_tokens": 16,
             "cache_read_input_tokens": 900, "cache_creation_input_tokens": 40},
            "opencode",
            Tokens(input=1200, output=80, cache_5m=40, cache_read=900, reasoning=16),
        ),
        # LangChain usage_metadata: input includes cache reads and writes
        (
            {"input_tokens": 350, "output_tokens": 240, "total_tokens": 590,
             "input_token_details": {"cache_read": 100, "cache_creation": 200},
             "output_token_details": {"reasoning": 200}},
            None,
            Tokens(input=50, output=40, cache_5m=200, cache_read=100, reasoning=200),
        ),
        # OpenAI Chat Completions
        (
            {"prompt_tokens": 90, "completion_tokens": 20,
             "prompt_tokens_details": {"cached_tokens": 64},
             "completion_tokens_details": {"reasoning_tokens": 8}},
            None,
            Tokens(input=26, output=12, cache_read=64, reasoning=8),
        ),
        # what is not a count is no count: negatives, booleans, strings, floats
        (
            {"input_tokens": -5, "output_tokens": True, "cache_read_input_tokens": "9",
             "reasoning_tokens": 1.5},
            None,
            Tokens(),
        ),
        # a part larger than its total is capped at it
        ({"input_tokens": 10, "cached_input_tokens": 99}, "codex", Tokens(cache_read=10)),
    ],
)  # fmt: skip
def test_each_dialect_is_read_into_the_billed_counts(
    usage: dict[str, Any], source: str | None, want: Tokens
) -> None:
    assert read_tokens(usage, source) == want


def _data(usage: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "message": {"id": extra.pop("mid", "a1"), "role": "assistant", "parts": []},
        "model": "m",
        "usage": usage,
        **extra,
    }


U = {"input_tokens": 5, "output_tokens": 1}


@pytest.mark.parametrize(
    ("data", "fork", "key", "want"),
    [
        (_data(U, mid="msg_01", **{"import": {"source": "claude-code", "lines": [3, 4]}}),
         False, None, "claude-code:msg_01"),
        (_data(U, mid="g-1", **{"import": {"source": "gemini-cli", "lines": [4]}}),
         False, None, "gemini-cli:g-1"),
        (_data(U, mid="msg_a002", **{"import": {"source": "opencode", "lines": [2]}}),
         False, None, "opencode:msg_a002"),
        (_data(U, mid="codex-14", **{"import": {"source": "codex", "lines": [14, 16],
                                                "ids": ["rs_1", "msg_2", "resp_9"]}}),
         False, None, "codex:resp_9"),
        (_data(U, mid="codex-14", **{"import": {"source": "codex", "lines": [14],
                                                "ids": ["rs_1"]}}),
         False, None, "codex:rs_1"),
        (_data(U, mid="codex-14", **{"import": {"source": "codex", "lines": [14, 16]}}),
         False, None, "codex:s:14"),
        (_data(U, mid="1a2b3c4d", **{"import": {"source": "pi", "lines": [7], "time": 99}}),
         False, None, "pi:1a2b3c4d:99"),
        (_data(U, mid="pi-7", **{"import": {"source": "pi", "lines": [7], "time": 99}}),
         False, None, "pi:s:7"),
        (_data(U, origin={"session": "f", "seq": 4}), False, None, "f:4"),
        (_data(U), False, None, "s:9:abcd0123"),
        (_data(U), True, None, "s:9"),
        (_data(U), False, "branch:0badf00d:5", "s:5:0badf00d"),
    ],
)  # fmt: skip
def test_a_response_is_keyed_by_its_own_id_as_its_source_defines_it(
    data: dict[str, Any], fork: bool, key: str | None, want: str
) -> None:
    r = response_of("s", fork, "assistant/message", 9, 1000, "abcd0123", data, key)
    assert r is not None and r.rkey == want


@pytest.mark.parametrize("seq", ["\u00b2", "1" * 4301, "", "5x"])
def test_a_key_that_only_looks_like_a_branch_records_is_the_lines_own(seq: str) -> None:
    """A ``branch:`` key whose seq is not ASCII digits ``int`` takes (a superscript digit, more
    than 4,300 digits: ``str.isdigit`` takes them) is a key like any other, and the response is
    the line's own (a ValueError that left the whole file out of the index)."""
    r = response_of(
        "s", False, "assistant/message", 9, 1000, "abcd0123", _data(U), f"branch:ff:{seq}"
    )
    assert r is not None and r.rkey == "s:9:abcd0123"


def test_a_branch_record_is_the_response_it_records() -> None:
    line = {"seq": 5, "type": "assistant/message", "time": 777, "data": _data(U), "crc": "0badf00d"}
    data = {"branch": 4, "origin": {"seq": 5, "crc": "0badf00d"}, "line": line}
    r = response_of("s", False, "branch/event", 12, 1000, "ffffffff", data)
    assert r is not None and (r.rkey, r.time, r.tokens) == ("s:5:0badf00d", 777, Tokens(5, 1))
    assert response_of("s", False, "branch/event", 12, 1000, "ff", {"line": "x"}) is None


def test_what_is_no_response_gives_no_row() -> None:
    assert response_of("s", False, "user/message", 1, 0, "c", _data(U)) is None
    assert response_of("s", False, "assistant/message", 1, 0, "c", {"usage": "x"}) is None
    zero = _data({"input_tokens": 0, "output_tokens": 0}, model="<synthetic>")
    assert response_of("s", False, "assistant/message", 1, 0, "c", zero) is None
    fast = response_of("s", False, "assistant/message", 1, 0, "c", _data({**U, "speed": "fast"}))
    assert fast is not None and fast.fast


def test_the_tier_counts_the_thresholds_a_prompt_passed() -> None:
    assert [tier_of(p) for p in (0, 32_000, 32_001, 200_000, 200_001, 10**6)] == [0, 0, 1, 3, 4, 7]


@pytest.mark.parametrize(
    ("parent", "imp", "want"),
    [
        (None, None, Links("id:s", None, None)),
        ("p", None, Links("id:s", None, "id:p")),
        (None, {"source": "claude-code", "session": "u1"},
         Links("id:s", "src:claude-code:u1", None)),
        ("m", {"source": "claude-code", "session": "u1", "sidechain": "r"},
         Links("id:s", None, "id:m")),
        (None, {"source": "claude-code", "session": "u1", "sidechain_of": "u1"},
         Links("id:s", None, "src:claude-code:u1")),
        (None, {"source": "opencode", "session": "ses_c", "parent": "ses_p"},
         Links("id:s", None, "src:opencode:ses_p")),
        (None, {"source": "gemini-cli", "session": "g2",
                "file": "/h/.gemini/tmp/p/chats/g1/s.jsonl"},
         Links("id:s", None, "src:gemini-cli:g1")),
        (None, {"source": "gemini-cli", "session": "g1",
                "file": "/h/.gemini/tmp/p/chats/s.jsonl"},
         Links("id:s", "src:gemini-cli:g1", None)),
    ],
)  # fmt: skip
def test_sessions_hang_under_the_session_that_spawned_them(
    parent: str | None, imp: dict[str, Any] | None, want: Links
) -> None:
    assert session_links("s", parent, {"import": imp} if imp else None) == want


# -- every importer's usage, against the source's own records --------------------------------


def _rows(root: Path) -> dict[str, list[Any]]:
    """The usage rows of every session under ``root``: what the index would store."""
    out: dict[str, list[Any]] = {}
    for path in sorted(root.rglob("*.jsonl")):
        header = jsonltape.header(path)
        fork = header.parent is not None
        rows = []
        for ev in jsonltape.read(path):
            r = response_of(header.id, fork, ev.type, ev.seq, ev.time, ev.crc, ev.data, ev.key)
            if r is not None:
                rows.append(r)
        out[header.id] = rows
    return out


def _once(rows: dict[str, list[Any]]) -> dict[str, Any]:
    """One row per key over all sessions, the last version of each (what the index counts)."""
    found: dict[str, Any] = {}
    for session_rows in rows.values():
        for r in session_rows:
            found[r.rkey] = r
    return found


def _total(rows: Any) -> Tokens:
    total = Tokens()
    for r in rows:
        total = total.plus(r.tokens)
    return total


def _settled_copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    past = time.time() - 7200
    os.utime(dst, (past, past))
    return dst


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
@pytest.mark.parametrize("name", ["claude-code-v1.0.98-init", "claude-code-v1.0.108-japanese"])
def test_claude_code_usage_is_each_message_ids_last_line(tmp_path: Path, name: str) -> None:
    """Claude Code writes a line per content block of a streamed response and repeats the
    usage on each, output still growing: the response's usage is its last line's, once per
    ``message.id`` (the sidechain lines in the file included)."""
    src = _settled_copy(SAMPLES / f"{name}.jsonl", tmp_path / "src" / f"{name}.jsonl")
    last: dict[str, dict[str, Any]] = {}
    grew = 0
    for line in src.read_text().splitlines():
        v = json.loads(line)
        m = v.get("message") or {}
        if v.get("type") == "assistant" and isinstance(m.get("usage"), dict):
            if m["id"] in last and m["usage"]["output_tokens"] > last[m["id"]]["output_tokens"]:
                grew += 1
            last[m["id"]] = m["usage"]
    assert grew  # the samples do have responses whose output grows line by line
    assert import_file("claude-code", src, tmp_path / "root").status == "imported"
    rows = _once(_rows(tmp_path / "root"))
    assert sorted(rows) == sorted(f"claude-code:{mid}" for mid in last)
    assert _total(rows.values()) == _total(
        [type("R", (), {"tokens": read_tokens(u, "claude-code")}) for u in last.values()]
    )


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
def test_codex_usage_adds_up_to_the_rollouts_own_running_total(tmp_path: Path) -> None:
    """Codex's ``token_count`` events carry the session's running total: the responses'
    usage, read as billed, adds up to its last value."""
    src = _settled_copy(
        SAMPLES / "codex-0.104-rollout-complete.jsonl",
        tmp_path / "src" / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
    )
    final: dict[str, int] = {}
    for line in src.read_text().splitlines():
        p = json.loads(line).get("payload") or {}
        if p.get("type") == "token_count" and isinstance(p.get("info"), dict):
            final = p["info"]["total_token_usage"]
    assert import_file("codex", src, tmp_path / "root").status == "imported"
    got = _total(_once(_rows(tmp_path / "root")).values())
    assert got.input + got.cache_read == final["input_tokens"]
    assert got.cache_read == final["cached_input_tokens"]
    assert got.output + got.reasoning == final["output_tokens"]
    assert got.reasoning == final["reasoning_output_tokens"]
    assert got.total == final["total_tokens"]


def test_codex_015_usage_is_keyed_by_its_response_id(tmp_path: Path) -> None:
    src = _settled_copy(
        FIX / "codex15" / "rollout-0154.jsonl",
        tmp_path / "src" / "rollout-2026-11-20T09-00-00-019a8f00-1111-7000-8000-00000000c154.jsonl",
    )
    records = [
        json.loads(line)["payload"]
        for line in src.read_text().splitlines()
        if json.loads(line).get("type") == "token_usage_record"
    ]
    assert import_file("codex", src, tmp_path / "root").status == "imported"
    rows = _once(_rows(tmp_path / "root"))
    assert sorted(rows) == sorted(f"codex:{r['response_id']}" for r in records)
    thread = records[-1]["thread_token_usage"]
    got = _total(rows.values())
    assert (got.input + got.cache_read, got.output + got.reasoning) == (
        thread["input_tokens"],
        thread["output_tokens"],
    )


@pytest.mark.parametrize(
    "name", ["session-2026-03-02T10-00-4f1c2b9e.jsonl", "session-2026-03-03T09-00-7e3a9c21.jsonl"]
)
def test_gemini_usage_is_each_records_last_tokens(tmp_path: Path, name: str) -> None:
    """Gemini CLI appends a message again, whole, each time it changes: the last record of an
    id holds its tokens."""
    src = _settled_copy(FIX / "gemini" / name, tmp_path / "chats" / name)
    last: dict[str, dict[str, Any]] = {}
    for line in src.read_text().splitlines():
        v = json.loads(line)
        if v.get("type") == "gemini" and isinstance(v.get("tokens"), dict):
            last[v["id"]] = v["tokens"]
    assert import_file("gemini-cli", src, tmp_path / "root").status == "imported"
    rows = _once(_rows(tmp_path / "root"))
    assert sorted(rows) == sorted(f"gemini-cli:{i}" for i in last)
    got = _total(rows.values())
    assert got.input + got.cache_read == sum(
        t.get("input", 0) + t.get("tool", 0) for t in last.values()
    )
    assert got.cache_read == sum(t.get("cached", 0) for t in last.values())
    assert got.output == sum(t.get("output", 0) for t in last.values())
    assert got.reasoning == sum(t.get("thoughts", 0) for t in last.values())


def test_opencode_usage_is_each_messages_tokens(tmp_path: Path) -> None:
    store = FIX / "opencode" / "storage"
    tokens = {}
    for f in (store / "message").rglob("*.json"):
        info = json.loads(f.read_text())
        if info.get("role") == "assistant" and isinstance(info.get("tokens"), dict):
            tokens[info["id"]] = info["tokens"]
    reports = list(import_paths("opencode", [store], tmp_path / "root", settle=0))
    assert all(r.status == "imported" for r in reports), reports
    rows = _once(_rows(tmp_path / "root"))
    counted = {k.removeprefix("opencode:"): r.tokens for k, r in rows.items()}
    assert set(counted) <= set(tokens) and counted
    for mid, t in counted.items():
        src = tokens[mid]
        assert t == Tokens(
            input=src["input"],
            output=src["output"],
            cache_5m=src["cache"]["write"],
            cache_read=src["cache"]["read"],
            reasoning=src["reasoning"],
        )


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")
def test_pi_usage_and_cost_match_pis_own_records(tmp_path: Path) -> None:
    """pi records each reply's usage and the cost it computed: with the shipped table the
    tokens are its own and the cost of every priced reply is pi's to the micro-dollar."""
    src = _settled_copy(SAMPLES / "pi-v1-legacy-large-session.jsonl", tmp_path / "src" / "s.jsonl")
    own = Tokens()
    cost: dict[str, Fraction] = defaultdict(Fraction)
    for line in src.read_text().splitlines():
        m = json.loads(line).get("message") or {}
        if m.get("role") == "assistant" and isinstance(m.get("usage"), dict):
            u = m["usage"]
            own = own.plus(
                Tokens(input=u["input"], output=u["output"], cache_5m=u["cacheWrite"],
                       cache_read=u["cacheRead"])
            )  # fmt: skip
            cost[m["model"]] += Fraction(repr(float(u["cost"]["total"])))
    assert import_file("pi", src, tmp_path / "root").status == "imported"
    rows = _once(_rows(tmp_path / "root"))
    assert _total(rows.values()) == own
    table = load_prices()
    ours: dict[str, Fraction] = defaultdict(Fraction)
    for r in rows.values():
        ours[r.model] += table.cost(r.model, r.tokens, r.tier, r.fast).usd
    priced = [m for m in cost if m in table and cost[m]]
    assert priced
    for model in priced:
        assert abs(ours[model] - cost[model]) < Fraction(1, 10**6), model
