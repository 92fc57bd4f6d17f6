"""pi 0.87 sessions whose bodies a provider must accept (issue 32, fidelity defects 2, 3, 4, 6).

Hand-written from pi's own types and code:

* entries ``{type: "message", id, parentId, timestamp, message}`` (v3, badlogic/pi-mono
  packages/coding-agent/src/core/session-manager.ts at 83378aad); assistant messages ``{role,
  content, api, provider, model, usage, stopReason}``, tool results ``{role: "toolResult",
  toolCallId, toolName, content, isError}`` (packages/ai/src/types.ts);
* ``thinkingSignature``: what each provider adapter keeps there (packages/ai/src/providers at
  83378aad): ``anthropic.ts`` the API's signature (redacted thinking: its encrypted ``data``,
  with ``redacted: true``), ``openai-completions.ts`` the *name of the delta field* the
  reasoning came in (``reasoning_content`` for GLM and other OpenAI-compatible servers),
  ``openai-responses-shared.ts`` the reasoning item as JSON;
* pi 0.86 on keeps the system prompt and tools in the transcript: ``SystemMessage {role:
  "system", content, sections?, toolsAdded?, toolsRemoved?}``, replayed in order into the prompt
  and tools of every request (``getCurrentSystemMessage``, ``getCurrentTools`` in
  packages/ai/src/utils/transcript.ts, earendil-works/pi, pi-mono's home since, at
  342b110fe7826a4f8e3575ee947e15b187ced172; sections render after the content,
  ``getSystemMessageText``);
* an OpenAI-compatible server that numbers tool calls per response (``call_1``, ``call_2``,
  ...) gives the first call of every turn the same id.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import jsonltape
from jsonltape import fold
from jsonltape.cli import cli as main
from jsonltape.fold._valid import check_anthropic, check_kept, check_openai
from jsonltape.interop import export

from .helpers import import_finished

TS = "2026-11-20T10:00:{:02d}.000Z"
SID = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f1"
GLM = {"api": "openai-completions", "provider": "zai", "model": "glm-4.6"}
CLAUDE = {"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5"}
#: A real Anthropic signature's shape (base64); the value is made up.
SIGNATURE = "ErMCCkYICRgCKkBOdW1iZXJzIGFyZSBub3QgYSBzaWduYXR1cmUgYnV0IHRoZXkgbG9vayBsaWtlIG9uZQ=="


class Session:
    """A pi v3 session built entry by entry, each the child of the one before."""

    def __init__(self, **header: Any) -> None:
        self.entries: list[dict[str, Any]] = [
            {"type": "session", "version": 3, "id": SID, "timestamp": TS.format(0), "cwd": "/w",
             **header}
        ]  # fmt: skip
        self.last: str | None = None

    def add(self, message: dict[str, Any]) -> None:
        n = len(self.entries)
        eid = f"e{n:07d}"
        self.entries.append(
            {"type": "message", "id": eid, "parentId": self.last, "timestamp": TS.format(n),
             "message": {**message, "timestamp": 1_795_168_800_000 + n}}
        )  # fmt: skip
        self.last = eid

    def user(self, text: str) -> None:
        self.add({"role": "user", "content": text})

    def reply(self, *content: dict[str, Any], stop: str = "stop", via: Any = GLM) -> None:
        usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}
        self.add({"role": "assistant", "content": list(content), **via, "usage": usage,
                  "stopReason": stop})  # fmt: skip

    def result(self, call: str, text: str) -> None:
        self.add({"role": "toolResult", "toolCallId": call, "toolName": "read",
                  "content": [{"type": "text", "text": text}], "isError": False})  # fmt: skip

    def system(self, **message: Any) -> None:
        self.add({"role": "system", **message})

    def imported(self, tmp: Path) -> Path:
        src = tmp / "src" / f"2026-11-20T10-00-00-000Z_{SID}.jsonl"
        text = "".join(json.dumps(e) + "\n" for e in self.entries)
        report = import_finished("pi", src, text, tmp / "root")
        assert report.problems == [] and report.unknown == {}, (report.problems, report.unknown)
        return Path(report.sessions[0])


def _call(call: str, path: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": path}}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _thinking(text: str, signature: str, **extra: Any) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "thinkingSignature": signature, **extra}


def _problems(path: Path) -> list[str]:
    items = fold.messages(path)["messages"]
    found = []
    for fmt, check in (("openai", check_openai), ("anthropic", check_anthropic)):
        body = fold.messages(path, format=fmt)
        found += [f"{fmt}: {p}" for p in check(body) + check_kept(items, body)]
    return found


# -- defect 2: a call id used again in a later turn -----------------------------------------


def _reused(tmp: Path) -> Path:
    s = Session()
    for turn, name in enumerate(("README", "LICENSE"), 1):
        s.user(f"read the {name}")
        s.reply(_call("call_1", name), stop="toolUse")
        s.result("call_1", f"the {name} text")
        s.reply(_text(f"done {turn}"))
    return s.imported(tmp)


def test_a_call_id_used_again_in_a_later_turn_keeps_both_exchanges_in_both_bodies(
    tmp_path: Path,
) -> None:
    path = _reused(tmp_path)
    openai = fold.messages(path, format="openai")["messages"]
    calls = [(c["id"], c["function"]["arguments"]) for m in openai for c in m.get("tool_calls", ())]
    assert calls == [("call_1", '{"path":"README"}'), ("call_1", '{"path":"LICENSE"}')]
    assert [m["content"] for m in openai if m["role"] == "tool"] == [
        "the README text",
        "the LICENSE text",
    ]
    anthropic = fold.messages(path, format="anthropic")["messages"]
    blocks = [b for m in anthropic for b in m["content"]]
    assert [b["input"]["path"] for b in blocks if b["type"] == "tool_use"] == ["README", "LICENSE"]
    assert [b["content"] for b in blocks if b["type"] == "tool_result"] == [
        "the README text",
        "the LICENSE text",
    ]
    assert _problems(path) == []


def test_the_markdown_export_shows_each_result_under_its_own_call_only(tmp_path: Path) -> None:
    text = export(_reused(tmp_path), "markdown").text
    calls = text.split("<summary>Tool call:")[1:]
    assert len(calls) == 2
    for block, name in zip(calls, ("README", "LICENSE"), strict=True):
        body = block.split("</details>")[0]
        assert body.count("Result:") == 1 and f"the {name} text" in body
    assert "Result of call" not in text  # no result left standing alone


def _global_pairing(items: Any) -> Any:
    """The pairing a body lost calls with: one answer per call id for the whole history."""
    declared: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if item["type"] == "tool/result":
            if item["call_id"] not in declared or item["call_id"] in answered:
                continue
            answered.add(item["call_id"])
        elif item["type"] == "assistant/message":
            declared |= {p["id"] for p in item["message"]["parts"] if p["type"] == "tool_call"}
        yield item


def test_messages_check_finds_a_body_that_lost_an_exchange(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = _reused(tmp_path)
    ok = CliRunner().invoke(main, ["messages", str(path), "--check"])
    assert ok.exit_code == 0 and ok.output == ""
    # a mapping that pairs by call id alone drops the second turn's call and result: valid for
    # both providers, but the history lost what the model did, and --check says so
    monkeypatch.setattr("jsonltape.fold._convert.paired", _global_pairing)
    lost = CliRunner().invoke(main, ["messages", str(path), "--check"])
    assert lost.exit_code == 1
    lines = lost.output.splitlines()
    assert len(lines) == 2 and all("tool call 'call_1'" in line for line in lines)
    assert lines[0].startswith(f"{path}: openai:") and lines[1].startswith(f"{path}: anthropic:")


# -- defect 3: tool settings in request bodies ----------------------------------------------


def test_pis_thinking_level_stays_out_of_both_bodies(tmp_path: Path) -> None:
    s = Session(provider="zai", modelId="glm-4.6", thinkingLevel="high")
    s.add({"role": "user", "content": "hi"})
    s.reply(_text("hello"))
    path = s.imported(tmp_path)
    assert fold.messages(path)["header"]["params"] == {"thinking_level": "high"}
    for fmt in ("openai", "anthropic"):
        body = fold.messages(path, format=fmt)
        assert "thinking_level" not in body and body["model"] == "glm-4.6", fmt
    assert _problems(path) == []


# -- defect 4: a thinking signature only Anthropic issued -----------------------------------


def test_a_field_name_in_thinking_signature_is_no_anthropic_signature(tmp_path: Path) -> None:
    s = Session()
    s.user("why?")
    s.reply(_thinking("Because.", "reasoning_content"), _text("Because it is."))
    path = s.imported(tmp_path)
    (reasoning,) = [p for i in fold.messages(path)["messages"] for p in i["message"]["parts"]
                    if p["type"] == "reasoning"]  # fmt: skip
    assert reasoning == {"type": "reasoning", "content": "Because."}  # unsigned
    anthropic = fold.messages(path, format="anthropic")["messages"]
    assert anthropic[1]["content"] == [{"type": "text", "text": "Because it is."}]
    assert _problems(path) == []
    # the line keeps what pi wrote
    raw = [
        e.data["import"]["raw"] for e in jsonltape.read(path) if "raw" in e.data.get("import", {})
    ]
    assert any('"thinkingSignature": "reasoning_content"' in t for r in raw for t in r.values())


def test_only_a_signature_anthropic_issued_signs_thinking(tmp_path: Path) -> None:
    responses_item = json.dumps({"type": "reasoning", "id": "rs_1", "summary": []})
    s = Session()
    s.user("one")
    s.reply(_thinking("signed", SIGNATURE), _text("1"), via=CLAUDE)
    s.user("two")
    s.reply(_thinking("[Reasoning redacted]", SIGNATURE, redacted=True), _text("2"), via=CLAUDE)
    s.user("three")
    via = {"api": "openai-responses", "provider": "openai", "model": "gpt-5"}
    s.reply(_thinking("an OpenAI reasoning item", responses_item), _text("3"), via=via)
    path = s.imported(tmp_path)
    anthropic = fold.messages(path, format="anthropic")["messages"]
    thinking = [b for m in anthropic for b in m["content"] if b["type"] == "thinking"]
    assert thinking == [{"type": "thinking", "thinking": "signed", "signature": SIGNATURE}]
    assert _problems(path) == []


def test_check_refuses_a_signature_anthropic_cannot_have_issued() -> None:
    for forged in ("reasoning_content", '{"type":"reasoning","id":"rs_1"}', "sig-1", "abc"):
        body = {"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t",
                                               "signature": forged}]},
        ]}  # fmt: skip
        (problem,) = check_anthropic(body)
        assert "not a signature Anthropic issued" in problem, forged


# -- defect 6: the system prompt and tools in the transcript --------------------------------

READ = {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}
BASH = {"name": "bash", "description": "Run a command", "parameters": {"type": "object"}}


def test_system_messages_become_the_system_prompt_and_tools_of_both_bodies(
    tmp_path: Path,
) -> None:
    s = Session()
    s.system(content="You are pi.", sections={"rules": "<rules>be brief</rules>"},
             toolsAdded=[READ, BASH])  # fmt: skip
    s.user("list files")
    s.reply(_text("a.txt"))
    # a later system message patches a section and removes a tool, as pi replays it
    s.system(content="", sections={"rules": "<rules>be thorough</rules>", "env": "cwd: /w"},
             toolsRemoved=[{"name": "bash"}])  # fmt: skip
    s.user("and now?")
    s.reply(_text("b.txt"))
    path = s.imported(tmp_path)
    header = fold.messages(path)["header"]
    assert header["system"] == "You are pi.\n\n<rules>be thorough</rules>\n\ncwd: /w"
    assert header["tools"] == [READ]
    openai = fold.messages(path, format="openai")
    assert openai["messages"][0] == {"role": "system", "content": header["system"]}
    assert openai["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object"},
            },
        }
    ]
    anthropic = fold.messages(path, format="anthropic")
    assert anthropic["system"] == header["system"]
    assert anthropic["tools"] == [{"name": "read", "description": "Read a file",
                                   "input_schema": {"type": "object"}}]  # fmt: skip
    assert _problems(path) == []
    # the first version is on record too: the request/header each system message gave
    headers = [e.data for e in jsonltape.read(path) if e.type == "request/header"]
    assert next(h.get("system") for h in headers if "system" in h) == (
        "You are pi.\n\n<rules>be brief</rules>"
    )


def test_a_tree_move_back_before_a_system_message_takes_that_branchs_prompt(
    tmp_path: Path,
) -> None:
    s = Session()
    s.system(content="You are pi.", toolsAdded=[READ])
    s.user("first")
    fork_point = s.last
    s.reply(_text("1"))
    s.system(content="Also run commands.", toolsAdded=[BASH])
    s.user("second")
    s.reply(_text("2"))
    s.last = fork_point  # /tree: continue from the first prompt
    s.reply(_text("1 again"))
    path = s.imported(tmp_path)
    header = fold.messages(path)["header"]
    assert header["system"] == "You are pi." and header["tools"] == [READ]
    texts = [i["message"]["parts"][0]["content"] for i in fold.messages(path)["messages"]]
    assert texts == ["first", "1 again"]
