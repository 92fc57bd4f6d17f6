"""Usage of the sessions the Qwen Code, Kimi CLI, Factory Droid, OpenHands, Amp, Copilot CLI,
Copilot Chat in VS Code and Continue importers write (spec Appendix B.12), checked on their
fixtures against the totals the source's own records give, each response keyed by its own id
where the source has one; and their sub-agent sessions rolled into their parents' in the
index's session report."""

from __future__ import annotations

import glob
import json
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import SqliteTarget

import jsonltape
from jsonltape.interop.copilot_vscode import replay
from jsonltape.usage import Tokens, report, response_of

from . import _agents
from ._importers import FIXTURES, copy_tree

#: The fixture trees of the importers main gained last, and where each agent keeps them.
_TREES = {
    "copilot-cli": ("copilot-cli/built-from-schema/session-state", ".copilot/session-state"),
    "copilot-vscode": ("copilot-vscode/built-from-writer", "User"),
    "continue": ("continue/built-from-writer/.continue/sessions", ".continue/sessions"),
}


def _import(agent: str, tmp_path: Path) -> tuple[Path, Path]:
    """The agent's fixture tree (as the agent lays it out) and the jsonltape root imported from
    it."""
    if agent in _TREES:
        fixture, layout = _TREES[agent]
        src = copy_tree(FIXTURES / fixture, tmp_path / "src" / layout)
    else:
        src = _agents.tree(agent, tmp_path / "src")
    root = tmp_path / "root"
    _agents.imported(_agents.run(agent, src, root))
    return src, root


def _rows(root: Path) -> list[Any]:
    """The usage rows of every session under ``root``: what the index would store."""
    return [r for path in sorted(root.rglob("*.jsonl")) for r in _rows_of(path)]


def _counted(rows: list[Any]) -> dict[str, Tokens]:
    """Tokens per key, every key once (what the index counts); a key two rows share must be
    the same response (equal tokens), else the rule merged two responses."""
    found: dict[str, Tokens] = {}
    for r in rows:
        assert found.setdefault(r.rkey, r.tokens) == r.tokens, r.rkey
    return found


def _named(usage: dict[str, Any], **names: str) -> Tokens:
    """The counts of a source's own usage record: each field of :class:`Tokens` from the
    member ``names`` gives it (0 when the record has none)."""
    return Tokens(**{field: usage.get(name, 0) for field, name in names.items()})


def _lines(pattern: str) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(glob.glob(pattern, recursive=True))
            for line in Path(f).read_text().splitlines() if line.strip()]  # fmt: skip


def test_qwen_code_usage_is_each_records_usage_metadata_by_its_uuid(tmp_path: Path) -> None:
    """Qwen Code writes Gemini's ``usageMetadata``: the prompt count includes the cached
    content (read apart, not twice), thoughts are counted apart from the candidates."""
    src, root = _import("qwen-code", tmp_path)
    own = {
        v["uuid"]: v["usageMetadata"]
        for v in _lines(f"{src}/**/*.jsonl")
        if v.get("type") == "assistant" and isinstance(v.get("usageMetadata"), dict)
    }
    assert any(u.get("cachedContentTokenCount") for u in own.values())
    got = _counted(_rows(root))
    assert sorted(got) == sorted(f"qwen-code:{uuid}" for uuid in own)
    for uuid, u in own.items():
        t = got[f"qwen-code:{uuid}"]
        assert t.input + t.cache_read == u["promptTokenCount"] + u.get("toolUsePromptTokenCount", 0)
        assert t.cache_read == u.get("cachedContentTokenCount", 0)
        assert t.output == u["candidatesTokenCount"]
        assert t.reasoning == u.get("thoughtsTokenCount", 0)
        assert t.total == u["totalTokenCount"]


def test_kimi_cli_usage_is_each_status_updates_tokens_by_its_message_id(tmp_path: Path) -> None:
    """Kimi CLI's ``StatusUpdate`` gives a step's tokens and the provider's response id; a
    sub-agent's steps are in its own wire file (its parent's only mentions them)."""
    src, root = _import("kimi-cli", tmp_path)
    own = {
        p["message_id"]: p["token_usage"]
        for v in _lines(f"{src}/**/wire.jsonl")
        if (p := (v.get("message") or {}).get("payload") or {})
        and isinstance(p.get("token_usage"), dict) and v["message"]["type"] == "StatusUpdate"
    }  # fmt: skip
    assert len(own) >= 3
    got = _counted(_rows(root))
    assert got == {
        f"kimi-cli:{mid}": _named(u, input="input_other", output="output",
                                  cache_5m="input_cache_creation", cache_read="input_cache_read")
        for mid, u in own.items()
    }  # fmt: skip


def test_factory_droid_usage_is_each_messages_usage_keyed_within_its_session(
    tmp_path: Path,
) -> None:
    """Droid's message ids are unique only within a session file (``m1``, ``m2`` in each of
    the fixtures): the key names the session too, so two sessions' ``m2`` stay two."""
    src, root = _import("factory-droid", tmp_path)
    own: dict[tuple[str, str], dict[str, Any]] = {}
    for f in sorted(src.rglob("*.jsonl")):
        for v in _lines(str(f)):
            usage = (v.get("message") or {}).get("usage")
            if v.get("type") == "message" and isinstance(usage, dict):
                own[(f"factory-droid-{f.stem}", v["id"])] = usage
    assert own
    got = _counted(_rows(root))
    assert got == {
        f"factory-droid:{sid}:{mid}": _named(u, input="inputTokens", output="outputTokens",
                                             cache_5m="cacheCreationTokens",
                                             cache_read="cacheReadTokens")
        for (sid, mid), u in own.items()
    }  # fmt: skip
    # the same message id in two sessions is two responses
    data = {"message": {"id": "m2"}, "usage": {"input_tokens": 1},
            "import": {"source": "factory-droid", "lines": [3], "ids": ["m2"]}}  # fmt: skip
    a = response_of("factory-droid-a", False, "assistant/message", 3, 0, "00000000", data)
    b = response_of("factory-droid-b", False, "assistant/message", 3, 0, "00000000", data)
    assert a is not None and b is not None and a.rkey != b.rkey


def test_openhands_usage_adds_up_to_the_conversations_accumulated_usage(tmp_path: Path) -> None:
    """OpenHands records the usage accumulated per LLM after each call; each response carries
    what its call added (LiteLLM's names: the prompt includes the cached tokens) and is keyed
    by the LLM response id."""
    src, root = _import("openhands", tmp_path)
    conv = "5b2f0e3c9d1a4e7f8a6b1c2d3e4f5a6b"  # the conversation built whole (PROVENANCE.md)
    acc: dict[str, Any] = {}
    responses = set()
    for f in sorted((src / conv / "events").glob("*.json")):
        e = json.loads(f.read_text())
        if e.get("key") == "stats":
            acc = e["value"]["usage_to_metrics"]["default"]["accumulated_token_usage"]
        if e.get("kind") in ("ActionEvent", "MessageEvent") and e.get("llm_response_id"):
            responses.add(e["llm_response_id"])
    rows = [r for r in _rows(root) if r.rkey.removeprefix("openhands:") in responses]
    got = _counted(rows)
    assert sorted(got) == sorted(f"openhands:{r}" for r in responses)
    total = Tokens()
    for t in got.values():
        total = total.plus(t)
    assert total.input + total.cache_read + total.cache_5m == acc["prompt_tokens"]
    assert total.cache_read == acc["cache_read_tokens"]
    assert total.output + total.reasoning == acc["completion_tokens"]


def test_openhands_cache_writes_are_part_of_litellms_prompt_tokens() -> None:
    """LiteLLM counts Anthropic's cache writes in ``prompt_tokens`` and names them apart too:
    they are billed as writes, not again as input."""
    data = {
        "message": {"id": "resp-9"},
        "usage": {"prompt_tokens": 5000, "completion_tokens": 10,
                  "prompt_tokens_details": {"cached_tokens": 1000},
                  "cache_creation_input_tokens": 3000},
        "import": {"source": "openhands", "lines": [4], "ids": ["e-1", "resp-9"]},
    }  # fmt: skip
    r = response_of("openhands-c", False, "assistant/message", 4, 0, "00000000", data)
    assert r is not None and r.rkey == "openhands:resp-9"
    assert r.tokens == Tokens(input=1000, output=10, cache_5m=3000, cache_read=1000)


def test_amp_usage_is_each_messages_usage_by_its_thread_and_message(tmp_path: Path) -> None:
    """Amp records no response id: a message is named by its thread and index. A message's own
    ``usage`` wins over a ledger event that ends at it."""
    src, root = _import("amp", tmp_path)
    own: dict[str, Tokens] = {}
    for f in sorted(src.glob("*.json")):
        doc = json.loads(f.read_text())
        for k, m in enumerate(doc["messages"]):
            u = m.get("usage")
            if m.get("role") == "assistant" and isinstance(u, dict):
                t = _named(
                    u,
                    input="inputTokens",
                    output="outputTokens",
                    cache_5m="cacheCreationInputTokens",
                    cache_read="cacheReadInputTokens",
                )
                if t.total:
                    own[f"amp:{doc['id']}:{m.get('messageId', k)}"] = t
    assert len(own) >= 5
    assert _counted(_rows(root)) == own


def test_a_response_without_the_sources_id_is_keyed_by_its_session_and_line() -> None:
    """An id the importer made up (no id in the source: not in ``import.ids``) names nothing
    outside its session: the key is the session's and the source line's."""
    for source in ("qwen-code", "kimi-cli", "openhands"):
        data = {"message": {"id": "line-7"}, "usage": {"input_tokens": 1},
                "import": {"source": source, "lines": [7]}}  # fmt: skip
        r = response_of(f"{source}-s", False, "assistant/message", 9, 0, "00000000", data)
        assert r is not None and r.rkey == f"{source}:{source}-s:7"


@pytest.mark.parametrize(
    ("agent", "parent", "children"),
    [
        ("kimi-cli", "kimi-cli-5e0d1f5c-0000-4000-8000-000000000002",
         ["kimi-cli-5e0d1f5c-0000-4000-8000-000000000002.subagent-a1b2c3"]),
        ("qwen-code", "qwen-code-7c0f1a2b-0000-4000-8000-00000000c0de",
         ["qwen-code-7c0f1a2b-0000-4000-8000-00000000c0de.sidechain-explore-7f3c",
          "qwen-code-7c0f1a2b-0000-4000-8000-00000000c0df"]),
        ("factory-droid", "factory-droid-abc12345-0000-4000-8000-000000000002",
         ["factory-droid-abc12345-0000-4000-8000-000000000003"]),
        ("copilot-cli", "copilot-cli-5e1f0c2a-0000-4000-8000-0000000000c2",
         ["copilot-cli-5e1f0c2a-0000-4000-8000-0000000000c2.sidechain-agent-7"]),
    ],
)  # fmt: skip
def test_sub_agent_sessions_roll_up_into_their_parent(
    tmp_path: Path, agent: str, parent: str, children: list[str]
) -> None:
    """Each sub-agent session (and a Qwen Code session continued from another) is counted in
    its parent's line, and listed apart under it with ``breakdown``."""
    _src, root = _import(agent, tmp_path)
    by_session: dict[str, Tokens] = {}
    for path in root.rglob("*.jsonl"):
        sid = jsonltape.header(path).id
        total = Tokens()
        for t in _counted(_rows_of(path)).values():
            total = total.plus(t)
        by_session[sid] = total
    assert all(c in by_session for c in children)
    index = tmp_path / "index.db"
    store = SqliteStore(index)
    try:
        Mirror(store, str(root), []).rescan()
    finally:
        store.close()
    reader = open_reader(SqliteTarget(index))
    try:
        r = report(reader, "session", timezone="UTC", breakdown=True)
    finally:
        reader.close()
    lines = {line.session.id: line for line in r.lines if line.session is not None}
    assert not set(children) & set(lines)  # no line of their own: inside their parent's
    line = lines[parent]
    assert line.tokens.total == sum(by_session[s].total for s in [parent, *children])
    apart = {s.session.id: s.tokens.total for s in line.subsessions or [] if s.session}
    spent = {s: by_session[s].total for s in [parent, *children] if by_session[s].total}
    assert apart == (spent if len(spent) > 1 else {})  # listed apart when there is more than one
    assert r.total.tokens.total == sum(t.total for t in by_session.values())


def _rows_of(path: Path) -> list[Any]:
    header = jsonltape.header(path)
    return [
        r
        for ev in jsonltape.read(path)
        if (r := response_of(header.id, header.parent is not None, ev.type, ev.seq, ev.time,
                             ev.crc, ev.data, ev.key)) is not None
    ]  # fmt: skip


# -- the importers main gained last: Copilot CLI, Copilot Chat in VS Code, Continue -------------


def test_copilot_cli_usage_is_each_model_calls_output_by_its_call_id(tmp_path: Path) -> None:
    """Copilot CLI persists a call's output tokens on its ``assistant.message`` chunks (its
    input tokens only in the ephemeral ``assistant.usage``); a response is the call's
    ``apiCallId`` (else the message's ``messageId``) in the main session and in the sub-agent's
    session alike, and the calls of a session without call ids add up to its
    ``session.shutdown`` metrics."""
    src, root = _import("copilot-cli", tmp_path)
    own: dict[str, Tokens] = {}
    for v in _lines(f"{src}/*/events.jsonl"):
        d = v.get("data") or {}
        if v["type"] == "assistant.message" and isinstance(d.get("outputTokens"), int):
            # the chunks of one call are one response: its last chunk's count (as imported)
            own[f"copilot-cli:{d.get('apiCallId') or d['messageId']}"] = Tokens(
                output=d["outputTokens"]
            )
    assert len(own) >= 8 and any(v.get("agentId") for v in _lines(f"{src}/*/events.jsonl"))
    got = _counted(_rows(root))
    assert got == own
    small = _lines(f"{src}/381474ec-*/events.jsonl")
    metrics = next(v["data"]["modelMetrics"] for v in small if v["type"] == "session.shutdown")
    assert sum(t.output for k, t in got.items() if k.startswith("copilot-cli:msg-")) == sum(
        m["usage"]["outputTokens"] for m in metrics.values()
    )


def test_copilot_vscode_usage_is_each_requests_tokens_by_its_response_id(tmp_path: Path) -> None:
    """VS Code keeps a request's ``promptTokens`` and ``outputTokens`` in its result metadata
    (the prompt with its cache, which it does not name apart) and names the response
    ``responseId``: the same response in two session files (the fixture's flat ``.json`` and
    its operation log copy) is counted once."""
    src, root = _import("copilot-vscode", tmp_path)
    own: dict[str, Tokens] = {}
    files: dict[str, int] = {}
    for f in sorted(src.rglob("*.json*")):
        if f.name == "workspace.json":
            continue
        doc = replay(f) if f.suffix == ".jsonl" else json.loads(f.read_text())
        for r in doc.get("requests") or ():
            meta = (r.get("result") or {}).get("metadata") or {}
            t = _named(meta, input="promptTokens", output="outputTokens")
            if t.total and r.get("responseId"):
                own[f"copilot-vscode:{r['responseId']}"] = t
                files[r["responseId"]] = files.get(r["responseId"], 0) + 1
    assert len(own) >= 3 and max(files.values()) == 2  # one response in two files
    assert _counted(_rows(root)) == own


def test_continue_usage_is_each_replys_usage_by_its_item_id(tmp_path: Path) -> None:
    """Continue's ``completionTokens`` include the reasoning ones (counted apart, not twice);
    its Anthropic provider's ``promptTokens`` leave the cache out, its OpenAI-style providers'
    include it. Each reply is the history item that carries the usage, and a session's replies
    add up to the totals Continue keeps in the session's ``usage``."""
    src, root = _import("continue", tmp_path)
    own: dict[str, Tokens] = {}
    totals: dict[str, dict[str, int]] = {}
    for f in sorted(src.glob("*-*.json")):
        doc = json.loads(f.read_text())
        provider = None  # a reply without prompt logs: the provider of the one before
        for item in doc["history"]:
            logs = item.get("promptLogs") or []
            provider = logs[0]["modelProvider"] if logs else provider
            u = item["message"].get("usage")
            if not isinstance(u, dict):
                continue
            cached = (u.get("promptTokensDetails") or {}).get("cachedTokens", 0)
            written = (u.get("promptTokensDetails") or {}).get("cacheWriteTokens", 0)
            thought = (u.get("completionTokensDetails") or {}).get("reasoningTokens", 0)
            cache = 0 if provider == "anthropic" else cached + written
            own[f"continue:{item['message']['id']}"] = Tokens(
                input=u["promptTokens"] - cache, output=u["completionTokens"] - thought,
                cache_5m=written, cache_read=cached, reasoning=thought,
            )  # fmt: skip
        totals[f"continue-{doc['sessionId']}"] = doc["usage"]
    assert any(t.reasoning for t in own.values()) and any(t.cache_5m for t in own.values())
    assert _counted(_rows(root)) == own
    for path in root.rglob("*.jsonl"):
        spent = Tokens()
        for t in _counted(_rows_of(path)).values():
            spent = spent.plus(t)
        total = totals[jsonltape.header(path).id]
        assert spent.output + spent.reasoning == total["completionTokens"]


def test_copilot_vscode_and_continue_replies_without_an_id_stay_in_their_session() -> None:
    """A VS Code request without ``responseId`` and a Continue item without ``id`` (the
    importer's ``continue-<line>``) name nothing outside their session: two sessions' replies
    stay two responses, keyed by the session and the source line."""
    cases = {
        "copilot-vscode": {"message": {"id": "round-a"}, "import": {"lines": [7]}},
        "continue": {"message": {"id": "continue-7"}, "import": {"lines": [7],
                                                                 "ids": ["continue-7"]}},
    }  # fmt: skip
    for source, data in cases.items():
        data["usage"] = {"input_tokens": 1}
        data["import"]["source"] = source  # type: ignore[index]
        a = response_of(f"{source}-a", False, "assistant/message", 9, 0, "00000000", data)
        b = response_of(f"{source}-b", False, "assistant/message", 9, 0, "00000000", data)
        assert a is not None and a.rkey == f"{source}:{source}-a:7"
        assert b is not None and b.rkey != a.rkey
