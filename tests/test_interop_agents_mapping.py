"""What the Qwen Code, Kimi CLI, Factory Droid, OpenHands and Amp importers map (spec Appendix
B.7-B.11), each expectation read from the agent's own records in the fixture: every model
response's usage counted once under the response id the source gives (else the record's own
id), titles as the agent shows them, sub-agents linked to their parent, compactions and
condensations as the history the agent continues from, reasoning never signed by a provider
the source does not name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ._agents import FIXTURES, events, imported, run, shown_title, tree


def _sessions(agent: str, tmp_path: Path) -> dict[str, Path]:
    found = imported(run(agent, tree(agent, tmp_path / "src"), tmp_path / "root"))
    return {s.stem: s for s in found}


def _responses(session: Path) -> dict[str, dict[str, Any]]:
    """Message id -> the data of the latest ``assistant/message`` with it (a revision in
    place replaces the earlier one)."""
    out: dict[str, dict[str, Any]] = {}
    for e in events(session):
        if e.type == "assistant/message":
            out[e.data["message"]["id"]] = e.data
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _reasoning(session: Path) -> list[dict[str, Any]]:
    return [
        p
        for data in _responses(session).values()
        for p in data["message"]["parts"]
        if p["type"] == "reasoning"
    ]


# -- Qwen Code ------------------------------------------------------------------------------

_QWEN_TOKENS = {
    "promptTokenCount": "input_tokens",
    "candidatesTokenCount": "output_tokens",
    "cachedContentTokenCount": "cache_read_input_tokens",
    "thoughtsTokenCount": "reasoning_tokens",
    "totalTokenCount": "total_tokens",
}


def test_qwen_code_usage_titles_subagents_and_compression(tmp_path: Path) -> None:
    sessions = _sessions("qwen-code", tmp_path)
    for f in sorted((FIXTURES / "qwen-code").glob("*.jsonl")):
        records = _lines(f)
        main = sessions[f"qwen-code-{f.stem}"]
        got = _responses(main)
        for sid, s in sessions.items():
            if sid.startswith(f"qwen-code-{f.stem}.sidechain-"):
                got.update(_responses(s))
        for r in records:
            if r["type"] != "assistant" or "usageMetadata" not in r:
                continue
            assert r["uuid"] in got, (f.name, r["uuid"])  # the record's uuid is the message id
            meta = r["usageMetadata"]
            want = {ours: meta[k] for k, ours in _QWEN_TOKENS.items() if k in meta}
            usage = got[r["uuid"]]["usage"]
            assert {k: usage.get(k) for k in want} == want, r["uuid"]
        titles = [
            r["systemPayload"]["customTitle"]
            for r in records
            if r.get("subtype") == "custom_title" and not r.get("isSidechain")
        ]
        if titles:
            assert shown_title(main) == titles[-1]  # the latest custom_title
        else:
            first = next(r for r in records if r["type"] == "user" and "subtype" not in r)
            typed = (first.get("systemPayload") or {}).get("displayText")
            parts = first["message"]["parts"]
            assert shown_title(main) == (typed or "".join(p.get("text", "") for p in parts))
        parent = [r for r in records if r.get("subtype") == "parent_session"]
        if parent:
            info = events(main)[0].data["meta"]["import"]
            assert info["sidechain_of"] == parent[0]["systemPayload"]["parentSessionId"]
    agents = {
        r["agentId"]
        for f in (FIXTURES / "qwen-code").glob("*.jsonl")
        for r in _lines(f)
        if r.get("isSidechain") is True and r.get("agentId")
    }
    side = [s for sid, s in sessions.items() if ".sidechain-" in sid]
    assert agents and {events(s)[0].data["meta"]["import"]["agent_id"] for s in side} == agents
    for s in side:
        parent = events(s)[0].data["parent"]
        assert parent["seq"] == 0 and s.stem.startswith(parent["session"] + ".sidechain-")
    # after a chat_compression the history is the compressed one, then what followed
    compressed = [
        (f, r)
        for f in sorted((FIXTURES / "qwen-code").glob("*.jsonl"))
        for r in _lines(f)
        if r.get("subtype") == "chat_compression"
    ]
    assert compressed
    for f, r in compressed:
        written = events(sessions[f"qwen-code-{f.stem}"])
        kinds = [e.type for e in written]
        assert {"compaction/start", "compaction/summary", "compaction/end"} <= set(kinds)
        summary = next(e for e in written if e.type == "compaction/summary").data["summary"]
        for content in r["systemPayload"]["compressedHistory"]:
            for part in content["parts"]:
                if part.get("text"):
                    assert part["text"] in summary


# -- Kimi CLI -------------------------------------------------------------------------------

_KIMI_TOKENS = {
    "input_other": "input_tokens",
    "output": "output_tokens",
    "input_cache_read": "cache_read_input_tokens",
    "input_cache_creation": "cache_creation_input_tokens",
}


def test_kimi_cli_usage_under_the_providers_response_id_titles_and_subagents(
    tmp_path: Path,
) -> None:
    sessions = _sessions("kimi-cli", tmp_path)
    wires = sorted((FIXTURES / "kimi-cli" / "sessions").rglob("wire.jsonl"))
    assert len(wires) >= 3
    for wire in wires:
        sub = wire.parent.parent.name == "subagents"
        folder = wire.parent.parent.parent if sub else wire.parent
        sid = f"kimi-cli-{folder.name}" + (f".subagent-{wire.parent.name}" if sub else "")
        got = _responses(sessions[sid])
        updates = [
            m["message"]["payload"]
            for m in _lines(wire)
            if m.get("message", {}).get("type") == "StatusUpdate"
            and m["message"]["payload"].get("token_usage")
        ]
        assert updates, wire
        for p in updates:
            data = got[p["message_id"]]  # the provider's response id is the message id
            assert data["import"]["ids"] == [p["message_id"]]
            want = {ours: p["token_usage"][k] for k, ours in _KIMI_TOKENS.items()}
            assert data["usage"] == want
        with_usage = [d for d in got.values() if "usage" in d]
        assert len(with_usage) == len(updates)  # each response's usage once
        header = events(sessions[sid])[0].data
        if sub:
            assert header["meta"]["import"]["sidechain_of"] == folder.name
        else:
            state = json.loads((folder / "state.json").read_text())
            first = next(
                m["message"]["payload"]["user_input"]
                for m in _lines(wire)
                if m.get("message", {}).get("type") == "TurnBegin"
            )
            assert shown_title(sessions[sid]) == (state["custom_title"] or first)
        assert all("signature" not in p for p in _reasoning(sessions[sid]))
    compacted = [
        s for s in sessions.values() if any(e.type == "compaction/start" for e in events(s))
    ]
    assert compacted
    for s in compacted:
        end = next(e for e in events(s) if e.type == "compaction/end")
        assert end.data["error"]["code"] == "SUMMARY_MISSING"


# -- Factory Droid --------------------------------------------------------------------------


def test_factory_droid_titles_usage_per_line_id_and_unsigned_reasoning(tmp_path: Path) -> None:
    sessions = _sessions("factory-droid", tmp_path)
    files = sorted((FIXTURES / "factory-droid").rglob("*.jsonl"))
    signed = 0
    for f in files:
        lines = _lines(f)
        s = sessions[f"factory-droid-{f.stem}"]
        start = lines[0]
        assert start["type"] == "session_start"
        if start.get("title"):
            assert shown_title(s) == start["title"]
        assert events(s)[0].data["cwd"] == start["cwd"]
        got = _responses(s)
        for line in lines:
            msg: dict[str, Any] = line.get("message") or {}
            if line["type"] != "message" or msg.get("role") != "assistant":
                continue
            assert line["id"] in got
            usage = msg.get("usage")
            if usage:
                assert got[line["id"]]["usage"]["input_tokens"] == usage["inputTokens"]
                assert got[line["id"]]["usage"]["output_tokens"] == usage["outputTokens"]
            else:
                assert "usage" not in got[line["id"]]
            content = msg["content"] if isinstance(msg["content"], list) else []
            signed += sum(1 for b in content if b.get("signature"))
        assert all("signature" not in p for p in _reasoning(s))
    assert signed  # the fixtures carry signatures Droid does not say Anthropic issued


# -- OpenHands ------------------------------------------------------------------------------


def _stats(ev: dict[str, Any]) -> dict[str, Any] | None:
    if ev.get("kind") != "ConversationStateUpdateEvent" or ev.get("key") != "stats":
        return None
    llms = ev["value"]["usage_to_metrics"]
    return {name: m["accumulated_token_usage"] for name, m in llms.items()}


def test_openhands_usage_is_what_each_call_added_under_its_response_id(tmp_path: Path) -> None:
    sessions = _sessions("openhands", tmp_path)
    folders = sorted((FIXTURES / "openhands" / "conversations").iterdir())
    checked = 0
    for folder in folders:
        files = sorted((folder / "events").glob("event-*.json"), key=lambda p: p.name)
        evs = [json.loads(p.read_text()) for p in files]
        s = sessions[f"openhands-{folder.name}"]
        got = _responses(s)
        responses = {e["llm_response_id"] for e in evs if e.get("llm_response_id")}
        responses -= {e["llm_response_id"] for e in evs if e.get("kind") == "Condensation"}
        assert responses <= set(got), folder.name
        for rid in responses:
            assert rid in got[rid]["import"]["ids"]
        # usage: the prompt tokens the stats update before a response adds to the last one
        before: dict[str, Any] = {}
        added: dict[str, int] = {}
        for e in evs:
            now = _stats(e)
            if now is not None:
                added = {
                    n: u["prompt_tokens"] - before.get(n, {}).get("prompt_tokens", 0)
                    for n, u in now.items()
                }
                before = now
            elif e.get("llm_response_id") in got and e.get("kind") != "Condensation":
                usage = got[e["llm_response_id"]].get("usage")
                total = sum(added.values(), 0)
                if usage is not None and total:
                    assert usage["prompt_tokens"] == total, e["id"]
                    checked += 1
                added = {}
        condensed = [e for e in evs if e.get("kind") == "Condensation" and e.get("summary")]
        if condensed:
            summaries = [e.data["summary"] for e in events(s) if e.type == "compaction/summary"]
            assert [c["summary"] for c in condensed] == summaries
        prompts = [e for e in evs if e.get("kind") == "MessageEvent" and e["source"] == "user"]
        meta = folder / "meta.json"  # an agent server's title
        named = json.loads(meta.read_text()).get("title") if meta.exists() else None
        if named or prompts:
            assert shown_title(s) == (named or prompts[0]["llm_message"]["content"][0]["text"])
    assert checked >= 3


# -- Amp ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "amp").glob("*.json")))
def test_amp_titles_usage_and_message_ids(tmp_path: Path, name: str) -> None:
    thread = json.loads((FIXTURES / "amp" / name).read_text())
    sessions = _sessions("amp", tmp_path)
    tid = thread["id"]
    (s,) = [p for p in sessions.values() if events(p)[0].data["meta"]["import"]["session"] == tid]
    if thread.get("title"):
        assert shown_title(s) == thread["title"]
    got = _responses(s)
    ledger = (thread.get("usageLedger") or {}).get("events", [])
    for k, m in enumerate(thread["messages"]):
        if m["role"] != "assistant":
            continue
        mid = f"{tid}:{m.get('messageId', k)}"
        assert mid in got, mid
        usage = got[mid].get("usage")
        if isinstance(m.get("usage"), dict):
            assert usage is not None and usage["input_tokens"] == m["usage"]["inputTokens"]
            assert usage["output_tokens"] == m["usage"]["outputTokens"]
            if m["usage"].get("model"):
                assert got[mid]["model"] == m["usage"]["model"]
        elif any(e.get("toMessageId") == m.get("messageId", k) for e in ledger):
            tokens = next(e for e in ledger if e.get("toMessageId") == m.get("messageId", k))
            assert usage is not None and usage["input_tokens"] == tokens["tokens"]["input"]
    assert all("signature" not in p for p in _reasoning(s))
