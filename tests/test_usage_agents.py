"""Usage of the sessions the Qwen Code, Kimi CLI, Factory Droid, OpenHands, Amp, Copilot CLI,
Copilot Chat in VS Code, Continue, Aider, Cline / Roo Code / Kilo Code, Goose and Crush
importers write (spec Appendix B.12), checked on their
fixtures against the totals the source's own records give, each response keyed by its own id
where the source has one; and their sub-agent sessions rolled into their parents' in the
index's session report."""

from __future__ import annotations

import glob
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.mirror import Mirror
from jsonltape_daemon.search.reader import open_reader
from jsonltape_daemon.target import SqliteTarget

import jsonltape
from jsonltape.interop.aider import usage_of as aider_usage_of
from jsonltape.interop.copilot_vscode import replay
from jsonltape.usage import Tokens, report, response_of

from . import _agents, _agents_b
from ._importers import FIXTURES, age, copy_tree

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
    elif agent in _agents_b.AGENTS:
        src = _agents_b.tree(agent, tmp_path / "src")
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


# -- importer branch B: Aider, Cline / Roo Code / Kilo Code, Goose, Crush -----------------------


def test_aider_usage_is_each_tokens_report_keyed_by_its_run_and_reply_line(tmp_path: Path) -> None:
    """Aider prints ``Tokens: <sent> sent, <received> received.`` after a reply (``sent`` the
    whole prompt, its cache hits and writes included): one response per report, the reply
    before it; Aider logs no id, so a reply is its run (session) and first line."""
    src, root = _import("aider", tmp_path)
    own: list[Tokens] = []
    for f in sorted(src.rglob(".aider.chat.history.md")):
        for line in f.read_text().splitlines():
            if line.startswith("> Tokens: "):
                sent, received = line.removeprefix("> Tokens: ").split(" received.")[0].split(", ")
                own.append(Tokens(input=int(sent.removesuffix(" sent").replace(",", "")),
                                  output=int(received.replace(",", ""))))  # fmt: skip
    assert len(own) >= 2
    got = _counted(_rows(root))
    assert sorted(got.values()) == sorted(own)
    sessions = {jsonltape.header(p).id for p in root.rglob("*.jsonl")}
    for key in got:
        source, session, line = key.split(":")
        assert source == "aider" and session in sessions and line.isdigit()


def test_aiders_sent_count_includes_its_cache_hits_and_writes() -> None:
    """A report with cache writes and hits (Anthropic through LiteLLM): the prompt is ``sent``,
    not ``sent`` plus the cache again."""
    report = "Tokens: 12k sent, 2.0k cache write, 9.5k cache hit, 300 received. Cost: $0.01 message"
    usage = aider_usage_of(report)
    assert usage is not None
    data = {"message": {"id": "aider-7"}, "usage": usage,
            "import": {"source": "aider", "lines": [7]}}  # fmt: skip
    r = response_of("aider-s", False, "assistant/message", 3, 0, "00000000", data)
    assert r is not None and r.rkey == "aider:aider-s:7"
    assert r.tokens == Tokens(input=500, output=300, cache_5m=2000, cache_read=9500)


def _whole(prompt: int, output: int, read: int, written: int) -> Tokens:
    """A response whose input count is its whole prompt, split as billed (a part larger than
    what is left of the prompt capped at it, spec B.12)."""
    read = min(read, prompt)
    written = min(written, prompt - read)
    return Tokens(input=prompt - read - written, output=output, cache_5m=written, cache_read=read)


def test_cline_usage_is_each_requests_tokens_by_the_responses_id(tmp_path: Path) -> None:
    """A Cline task's request usage is its ``api_req_started`` (``tokensIn`` Anthropic's, the
    cache apart), keyed by the provider's response id the API history keeps; a Cline 4
    session's ``metrics`` count the whole prompt in ``inputTokens`` (the cache read is taken out,
    not billed twice), keyed by the message id; a session's responses add up to its metrics."""
    src, root = _import("cline", tmp_path)
    own: dict[str, Tokens] = {}
    for task in sorted((src / "tasks").iterdir()):
        api = json.loads((task / "api_conversation_history.json").read_text())
        ui = json.loads((task / "ui_messages.json").read_text())
        started = [json.loads(m["text"]) for m in ui if m.get("say") == "api_req_started"]
        replies = [m for m in api if m["role"] == "assistant"]
        for reply, u in zip(replies, started, strict=True):
            own[f"cline:{reply['id']}"] = _named(
                u,
                input="tokensIn",
                output="tokensOut",
                cache_5m="cacheWrites",
                cache_read="cacheReads",
            )
    spent: dict[str, int] = {}
    for f in sorted(src.glob("sessions/*/*.messages.json")):
        for m in json.loads(f.read_text())["messages"]:
            u = m.get("metrics")
            if m["role"] == "assistant" and isinstance(u, dict):
                own[f"cline:{m['id']}"] = _whole(
                    u["inputTokens"], u["outputTokens"], u["cacheReadTokens"], u["cacheWriteTokens"]
                )
                spent[f.parent.name] = spent.get(f.parent.name, 0) + u["inputTokens"]
    assert len(own) >= 10 and any(t.cache_read for t in own.values())
    got = _counted(_rows(root))
    assert got == own
    for path in root.rglob("*.jsonl"):
        sid = jsonltape.header(path).id.removeprefix("cline-")
        if sid in spent:
            assert sum(t.prompt for t in _counted(_rows_of(path)).values()) == spent[sid]


@pytest.mark.parametrize("agent", ["roo-code", "kilo-code"])
def test_roo_and_kilo_usage_counts_an_openai_requests_cache_inside_its_tokens_in(
    tmp_path: Path, agent: str
) -> None:
    """Roo Code and Kilo Code name a request's protocol: sent by the OpenAI protocol, its
    ``tokensIn`` is the whole prompt, the cache reads and writes inside it. A reply is the
    provider's response id the API history keeps, else (Kilo Code keeps none) its session and
    line."""
    src, root = _import(agent, tmp_path)
    own: list[Tokens] = []
    ids: list[str | None] = []
    for task in sorted((src / "tasks").iterdir()):
        ui = json.loads((task / "ui_messages.json").read_text())
        for m in ui:
            if m.get("say") == "api_req_started":
                u = json.loads(m["text"])
                assert u["apiProtocol"] == "openai"
                own.append(_whole(u["tokensIn"], u["tokensOut"], u["cacheReads"], u["cacheWrites"]))
        api = json.loads((task / "api_conversation_history.json").read_text())
        ids += [m.get("id") for m in api if m["role"] == "assistant"]
    got = _counted(_rows(root))
    assert sorted(got.values()) == sorted(own)
    for key, rid in zip(sorted(got), ids, strict=True):
        assert key == f"{agent}:{rid}" if rid else key.startswith(f"{agent}:{agent}-")


def test_a_cline_reply_in_two_sessions_is_counted_once() -> None:
    """A reply keyed by its response id is one response wherever it is (a task folder copied
    with the editor's storage and imported from both places); a task-folder reply sent by
    Anthropic's protocol keeps its cache apart."""
    data = {"message": {"id": "msg_7mYEbh8N"}, "usage": {"input_tokens": 500,
            "cache_read_input_tokens": 400, "output_tokens": 9},
            "import": {"source": "cline", "lines": [3], "ids": ["msg_7mYEbh8N"],
                       "input_includes_cache": True}}  # fmt: skip
    a = response_of("cline-one", False, "assistant/message", 5, 0, "00000000", data)
    b = response_of("cline-two", False, "assistant/message", 9, 0, "11111111", data)
    assert a is not None and b is not None and a.rkey == b.rkey == "cline:msg_7mYEbh8N"
    assert a.tokens == Tokens(input=100, output=9, cache_read=400)
    del data["import"]["input_includes_cache"]  # type: ignore[attr-defined]
    c = response_of("cline-task", False, "assistant/message", 5, 0, "00000000", data)
    assert c is not None and c.tokens == Tokens(input=500, output=9, cache_read=400)


def test_goose_usage_is_each_ledger_rows_tokens_by_its_message_id(tmp_path: Path) -> None:
    """Goose's ``usage_ledger`` row of a model call gives the call's tokens; its
    ``input_tokens`` are the whole prompt (Goose adds Anthropic's cache reads and writes into
    it), so the cache is taken out once. The response is the message's own id."""
    src = _agents_b.tree("goose", tmp_path / "src")
    db = sqlite3.connect(src / "sessions.db", isolation_level=None)
    try:  # a call that read and wrote the cache, as Goose records it
        db.execute("UPDATE usage_ledger SET input_tokens = 5000, cache_read_tokens = 3000,"
                   " cache_write_tokens = 1500, total_tokens = 5050")  # fmt: skip
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        ledger = db.execute(
            "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
            " total_tokens FROM usage_ledger WHERE NOT is_compaction"
        ).fetchall()
        # the fixture's one call, and the assistant message it answered with (the turn's last)
        replies = db.execute("SELECT message_id FROM messages WHERE role = 'assistant' ORDER BY"
                             " created_timestamp DESC, id DESC LIMIT 1").fetchall()  # fmt: skip
    finally:
        db.close()
    age(src.rglob("*"))
    root = tmp_path / "root"
    _agents.imported(_agents.run("goose", src, root))
    own = {
        f"goose:{mid}": _whole(inp, out, read, written)
        for (mid,), (inp, out, read, written, _total) in zip(replies, ledger, strict=True)
    }
    assert all(t.total == total for t, (*_, total) in zip(own.values(), ledger, strict=True))
    assert _counted(_rows(root)) == own


def test_crush_sessions_count_no_response(tmp_path: Path) -> None:
    """Crush keeps a session's tokens and cost only as the session's totals, never per
    message: no response of an imported Crush session is counted (none is made up)."""
    src, root = _import("crush", tmp_path)
    db = sqlite3.connect(f"file:{src / '.crush' / 'crush.db'}?mode=ro", uri=True)
    try:
        totals = db.execute(
            "SELECT sum(prompt_tokens + completion_tokens) FROM sessions"
        ).fetchone()
    finally:
        db.close()
    assert totals[0] > 0 and list(root.rglob("*.jsonl"))
    assert _rows(root) == []
