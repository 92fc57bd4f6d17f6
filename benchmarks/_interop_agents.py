"""Synthetic source trees of the Qwen Code, Kimi CLI, Factory Droid, OpenHands and Amp
importers for bench_interop.py: the shapes of their test fixtures (tests/fixtures/interop/<agent>,
PROVENANCE.md there) scaled up to ``sessions`` sessions of ``turns`` turns, laid out as each
agent lays out its data. Per turn: a prompt, a response with reasoning, text and a tool call
(with its usage and response id where the agent records them), the tool's result, a reply.

* Qwen Code: ``<cwd>/chats/<session>.jsonl`` records chained by ``parentUuid``;
* Kimi CLI: ``<md5>/<session>/wire.jsonl`` (protocol 1.10: turn and step markers, streamed
  ``ContentPart`` deltas, ``StatusUpdate`` usage) with its ``state.json``;
* Factory Droid: ``<cwd>/<session>.jsonl`` (``session_start``, Anthropic-shaped ``message``
  lines) with its ``.settings.json``;
* OpenHands: ``<hex>/base_state.json`` and one ``events/event-NNNNN-<id>.json`` per event
  (messages, actions, observations, cumulative ``stats`` updates);
* Amp: ``T-<uuid>.json``, one document per thread.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

from _interop_trees import T0, _iso, text

__all__ = ["amp_tree", "droid_tree", "kimi_tree", "openhands_tree", "qwen_tree"]


def _line(v: dict[str, Any]) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(_line(v) + "\n" for v in lines), encoding="utf-8")


def _path(t: int) -> str:
    return f"src/mod_{t % 17}.py"


# -- Qwen Code ------------------------------------------------------------------------------


def _qwen_session(s: int, sid: str, turns: int) -> list[dict[str, Any]]:
    base = {"sessionId": sid, "cwd": f"/home/ada/p{s}", "version": "0.22.2", "gitBranch": "main"}
    out: list[dict[str, Any]] = []

    def add(kind: str, extra: dict[str, Any]) -> None:
        n = len(out)
        rec = {"uuid": f"{s:08x}-{n:04x}-4000-8000-{n:012x}"}
        rec["parentUuid"] = out[-1]["uuid"] if out else None
        rec.update(base, timestamp=_iso(T0 + s * 3_600_000 + n * 1000), type=kind, **extra)
        out.append(rec)

    def model(parts: list[dict[str, Any]], t: int) -> dict[str, Any]:
        usage = {"promptTokenCount": 1000 + t, "candidatesTokenCount": 40}
        msg = {"role": "model", "parts": parts}
        return {"model": "qwen3-coder-plus", "message": msg, "usageMetadata": usage}

    for t in range(turns):
        call = f"call_{t}"
        add("user", {"message": {"role": "user", "parts": [{"text": text(t, 30)}]}})
        fc = {"id": call, "name": "read_file", "args": {"path": _path(t)}}
        parts = [{"text": text(t + 1, 40), "thought": True}, {"text": text(t + 2, 60)}]
        add("assistant", model([*parts, {"functionCall": fc}], t))
        fr = {"id": call, "name": "read_file", "response": {"output": text(t + 3, 200)}}
        msg = {"role": "user", "parts": [{"functionResponse": fr}]}
        add(
            "tool_result", {"message": msg, "toolCallResult": {"callId": call, "status": "success"}}
        )
        add("assistant", model([{"text": text(t + 4, 80)}], t))
    return out


def qwen_tree(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        sid = str(uuid.UUID(int=(1 << 64) + s))
        _write(root / f"-home-ada-p{s}" / "chats" / f"{sid}.jsonl", _qwen_session(s, sid, turns))


# -- Kimi CLI -------------------------------------------------------------------------------


def _kimi_wire(s: int, turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "metadata", "protocol_version": "1.10"}]
    clock = (T0 + s * 3_600_000) / 1000

    def add(kind: str, payload: dict[str, Any]) -> None:
        stamp = round(clock + len(out) * 0.1, 3)
        out.append({"timestamp": stamp, "message": {"type": kind, "payload": payload}})

    usage = {"input_other": 1000, "output": 40, "input_cache_read": 0, "input_cache_creation": 0}
    for t in range(turns):
        call = f"ReadFile:{t}"
        add("TurnBegin", {"user_input": text(t, 30)})
        add("StepBegin", {"n": 1})
        add("ContentPart", {"type": "think", "think": text(t + 1, 40), "encrypted": None})
        add("ContentPart", {"type": "text", "text": text(t + 2, 30)})
        add("ContentPart", {"type": "text", "text": " " + text(t + 5, 30)})
        fn = {"name": "ReadFile", "arguments": json.dumps({"path": _path(t)})}
        add("ToolCall", {"type": "function", "id": call, "function": fn, "extras": None})
        add("StatusUpdate", {"token_usage": usage, "message_id": f"chatcmpl-{s}-{t}a"})
        value = {"is_error": False, "output": text(t + 3, 200), "message": "", "display": []}
        add("ToolResult", {"tool_call_id": call, "return_value": value})
        add("StepBegin", {"n": 2})
        add("ContentPart", {"type": "text", "text": text(t + 4, 80)})
        add("StatusUpdate", {"token_usage": usage, "message_id": f"chatcmpl-{s}-{t}b"})
        add("TurnEnd", {})
    return out


def kimi_tree(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        work = hashlib.md5(f"/home/ada/p{s}".encode()).hexdigest()  # Kimi CLI's folder name
        d = root / work / str(uuid.UUID(int=(2 << 64) + s))
        _write(d / "wire.jsonl", _kimi_wire(s, turns))
        state = {"version": 1, "custom_title": None, "title_generated": False, "todos": []}
        (d / "state.json").write_text(json.dumps(state), encoding="utf-8")


# -- Factory Droid --------------------------------------------------------------------------


def _droid_session(s: int, sid: str, turns: int) -> list[dict[str, Any]]:
    start = {"type": "session_start", "id": sid, "title": text(s, 6), "owner": "ada"}
    out: list[dict[str, Any]] = [{**start, "version": 2, "cwd": f"/home/ada/p{s}"}]

    def add(role: str, content: list[dict[str, Any]], **extra: Any) -> None:
        n = len(out)
        rec: dict[str, Any] = {"type": "message", "id": f"m{n}"}
        rec["timestamp"] = _iso(T0 + s * 3_600_000 + n * 1000)
        if n > 1:
            rec["parentId"] = f"m{n - 1}"
        rec["message"] = {"role": role, "content": content, **extra}
        out.append(rec)

    usage = {"inputTokens": 1000, "outputTokens": 40, "cacheCreationTokens": 0}
    reply = {"model": "claude-sonnet-4-5", "usage": {**usage, "cacheReadTokens": 0}}
    for t in range(turns):
        call = f"toolu_{s}_{t}"
        add("user", [{"type": "text", "text": text(t, 30)}])
        think = {"type": "thinking", "thinking": text(t + 1, 40), "signature": "c2ln"}
        use = {"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": _path(t)}}
        add("assistant", [think, {"type": "text", "text": text(t + 2, 60)}, use], **reply)
        result = [{"type": "text", "text": text(t + 3, 200)}]
        add("user", [{"type": "tool_result", "tool_use_id": call, "content": result}])
        add("assistant", [{"type": "text", "text": text(t + 4, 80)}], **reply)
    return out


def droid_tree(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        sid = str(uuid.UUID(int=(3 << 64) + s))
        d = root / f"-home-ada-p{s}"
        _write(d / f"{sid}.jsonl", _droid_session(s, sid, turns))
        settings = {"model": "claude-sonnet-4-5", "tokenUsage": {"inputTokens": 0}}
        (d / f"{sid}.settings.json").write_text(json.dumps(settings), encoding="utf-8")


# -- OpenHands ------------------------------------------------------------------------------


def _content(t: str) -> list[dict[str, Any]]:
    return [{"cache_prompt": False, "type": "text", "text": t}]


def _openhands_events(s: int, turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, source: str, body: dict[str, Any]) -> str:
        n = len(out)
        eid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"openhands/{s}/{n}"))
        stamp = _iso(T0 + s * 3_600_000 + n * 1000)[:-1] + "000"  # ISO without a zone
        out.append({"id": eid, "timestamp": stamp, "source": source, **body, "kind": kind})
        return eid

    prompt = {"cache_prompt": False, "type": "text", "text": "You are OpenHands agent."}
    tool = {"name": "terminal", "description": "Run a shell command.", "kind": "TerminalTool"}
    add("SystemPromptEvent", "agent", {"system_prompt": prompt, "tools": [tool]})
    inputs = outputs = 0
    for t in range(turns):
        call = f"toolu_{s}_{t}"
        msg = {"role": "user", "content": _content(text(t, 30)), "thinking_blocks": []}
        extra = {"activated_skills": [], "extended_content": []}
        add("MessageEvent", "user", {"llm_message": msg, **extra})
        command = f"cat {_path(t)}"
        action = {"command": command, "is_input": False, "reset": False, "kind": "TerminalAction"}
        args = json.dumps({"command": command})
        tc = {"id": call, "name": "terminal", "arguments": args, "origin": "completion"}
        reason = {"reasoning_content": text(t + 1, 40), "thinking_blocks": []}
        body = {"thought": _content(text(t + 2, 60)), **reason, "action": action}
        body.update(tool_name="terminal", tool_call_id=call, tool_call=tc)
        body.update(llm_response_id=f"resp-{t}a", security_risk="LOW", summary=command)
        act = add("ActionEvent", "agent", body)
        inputs, outputs = inputs + 1000, outputs + 40
        usage = {"model": "m", "prompt_tokens": inputs, "completion_tokens": outputs}
        usage.update(cache_read_tokens=0, cache_write_tokens=0, reasoning_tokens=0)
        metrics = {"model_name": "m", "accumulated_cost": 0.0, "accumulated_token_usage": usage}
        stats = {"usage_to_metrics": {"default": metrics}}
        add("ConversationStateUpdateEvent", "environment", {"key": "stats", "value": stats})
        obs = {"content": _content(text(t + 3, 200)), "is_error": False, "command": command}
        obs.update(exit_code=0, kind="TerminalObservation")
        body = {"tool_name": "terminal", "tool_call_id": call, "observation": obs}
        add("ObservationEvent", "environment", {**body, "action_id": act})
        msg = {"role": "assistant", "content": _content(text(t + 4, 80)), "thinking_blocks": []}
        add("MessageEvent", "agent", {"llm_message": msg, "llm_response_id": f"resp-{t}b", **extra})
    return out


def openhands_tree(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        hexid = uuid.uuid5(uuid.NAMESPACE_URL, f"openhands/{s}").hex  # OpenHands: uuid4().hex
        d = root / hexid
        (d / "events").mkdir(parents=True)
        for n, ev in enumerate(_openhands_events(s, turns)):
            (d / "events" / f"event-{n:05d}-{ev['id']}.json").write_text(_line(ev))
        workspace = {"working_dir": f"/home/ada/p{s}", "kind": "LocalWorkspace"}
        state = {"id": str(uuid.UUID(hexid)), "workspace": workspace}
        state.update(execution_status="finished", stats={"usage_to_metrics": {}})
        (d / "base_state.json").write_text(json.dumps(state), encoding="utf-8")


# -- Amp ------------------------------------------------------------------------------------


def _amp_messages(s: int, created: int, turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(role: str, content: list[dict[str, Any]], **extra: Any) -> None:
        out.append({"role": role, "messageId": len(out), "content": content, **extra})

    for t in range(turns):
        call = f"toolu_{s}_{t}"
        at = created + t * 10_000
        add("user", [{"type": "text", "text": text(t, 30)}], meta={"sentAt": at})
        usage = {"model": "claude-sonnet-4-5", "inputTokens": 1000, "outputTokens": 40}
        usage.update(cacheCreationInputTokens=0, cacheReadInputTokens=0)
        think = {"type": "thinking", "thinking": text(t + 1, 40), "signature": "c2ln"}
        use = {"type": "tool_use", "id": call, "name": "Read", "input": {"path": _path(t)}}
        content = [think, {"type": "text", "text": text(t + 2, 60)}, {**use, "complete": True}]
        state = {"type": "complete", "stopReason": "tool_use"}
        add("assistant", content, state=state, usage={**usage, "timestamp": _iso(at + 1000)})
        run = {"status": "done", "result": text(t + 3, 200)}
        add("user", [{"type": "tool_result", "toolUseID": call, "run": run}])
        state = {"type": "complete", "stopReason": "end_turn"}
        reply = [{"type": "text", "text": text(t + 4, 80)}]
        add("assistant", reply, state=state, usage={**usage, "timestamp": _iso(at + 3000)})
    return out


def amp_tree(root: Path, sessions: int, turns: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for s in range(sessions):
        tid = f"T-{uuid.UUID(int=(6 << 64) + s)}"
        created = T0 + s * 3_600_000
        messages = _amp_messages(s, created, turns)
        thread = {"v": len(messages), "id": tid, "created": created, "title": text(s, 6)}
        thread["messages"] = messages
        (root / f"{tid}.json").write_text(json.dumps(thread), encoding="utf-8")
