"""Synthetic session trees for the importers of issue 32 (Continue, Copilot CLI, Copilot Chat in
VS Code), shaped as tests/fixtures/interop/<source>/ (built from each agent's writer): per turn a
prompt, a reply with reasoning and a tool call, the tool's result and a final reply with usage.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

T0 = 1_785_700_000_000
_OLD = 1_700_000_000  # every file settled (an hour old and more)


def _text(n: int, k: int) -> str:
    return f"turn {k} of session {n}: " + "lorem ipsum dolor sit amet " * 6


def _write(path: Path, data: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data, encoding="utf-8")
    os.utime(path, (_OLD, _OLD))


def continue_tree(root: Path, sessions: int, turns: int) -> None:
    """``~/.continue/sessions/<id>.json`` documents (``JSON.stringify(session, undefined, 2)``)."""
    for n in range(sessions):
        sid = f"00000000-0000-4000-8000-{n:012d}"
        history: list[dict[str, Any]] = []
        for k in range(turns):
            call = f"toolu_{n}_{k}"
            fn = {"name": "ls", "arguments": json.dumps({"dirPath": f"src/{k}"})}
            history += [
                {"message": {"role": "user", "content": _text(n, k), "id": f"u{k}"},
                 "contextItems": []},
                {"message": {"role": "thinking", "content": "Look first.", "id": f"t{k}"},
                 "contextItems": []},
                {"message": {"role": "assistant", "content": "", "id": f"a{k}",
                             "toolCalls": [{"id": call, "type": "function", "function": fn}],
                             "usage": {"completionTokens": 40, "promptTokens": 1800 + k}},
                 "contextItems": [],
                 "toolCallStates": [{"toolCallId": call, "status": "done",
                                     "toolCall": {"id": call, "type": "function", "function": fn},
                                     "output": [{"name": "ls", "content": _text(n, k)}]}]},
                {"message": {"role": "tool", "content": "x", "toolCallId": call, "id": f"r{k}"},
                 "contextItems": []},
                {"message": {"role": "assistant", "content": _text(n, k), "id": f"b{k}",
                             "usage": {"completionTokens": 12, "promptTokens": 1900 + k}},
                 "contextItems": []},
            ]  # fmt: skip
        doc = {"sessionId": sid, "title": f"session {n}", "workspaceDirectory": "file:///w",
               "history": history, "mode": "agent"}  # fmt: skip
        _write(root / f"{sid}.json", json.dumps(doc, indent=2))


def copilot_cli_tree(root: Path, sessions: int, turns: int) -> None:
    """``~/.copilot/session-state/<id>/events.jsonl`` logs with their ``workspace.yaml``."""
    for n in range(sessions):
        sid = f"00000000-0000-4000-8000-{n:012d}"
        seq = 0

        def ev(type_: str, data: dict[str, Any]) -> str:
            nonlocal seq
            seq += 1
            stamp = f"2026-06-18T19:{(seq // 60) % 60:02d}:{seq % 60:02d}.000Z"
            return json.dumps({"type": type_, "data": data, "id": f"e-{seq}",
                               "timestamp": stamp, "parentId": f"e-{seq - 1}"})  # fmt: skip

        lines = [ev("session.start", {"sessionId": sid, "version": 1, "producer": "copilot-agent",
                                      "copilotVersion": "1.0.63", "selectedModel": "gpt-5.4",
                                      "startTime": "2026-06-18T19:00:00.000Z",
                                      "context": {"cwd": "/w"}})]  # fmt: skip
        for k in range(turns):
            call = f"call_{k}"
            args = {"command": f"ls src/{k}", "description": "List files"}
            lines += [
                ev("user.message", {"content": _text(n, k), "attachments": []}),
                ev("assistant.turn_start", {"turnId": str(k)}),
                ev("assistant.reasoning", {"reasoningId": f"rs-{k}", "content": "Look first."}),
                ev("assistant.message", {"messageId": f"m-{k}", "content": "Listing.",
                                         "toolRequests": [{"toolCallId": call, "name": "bash",
                                                           "arguments": args}],
                                         "outputTokens": 24}),
                ev("tool.execution_start", {"toolCallId": call, "toolName": "bash",
                                            "arguments": args}),
                ev("tool.execution_complete", {"toolCallId": call, "success": True,
                                               "result": {"content": _text(n, k)}}),
                ev("assistant.message", {"messageId": f"f-{k}", "content": _text(n, k),
                                         "toolRequests": [], "outputTokens": 11}),
                ev("assistant.turn_end", {"turnId": str(k)}),
            ]  # fmt: skip
        folder = root / sid
        _write(folder / "workspace.yaml", f"id: {sid}\nname: session {n}\nuser_named: false\n")
        _write(folder / "events.jsonl", "".join(x + "\n" for x in lines))


def copilot_vscode_tree(root: Path, sessions: int, turns: int) -> None:
    """``<User>/workspaceStorage/<hash>/chatSessions/<id>.jsonl`` operation logs (an initial
    entry, then per request a push of it, pushes of its response and a set of its result)."""
    ws = root / "workspaceStorage" / ("0" * 32)
    _write(ws / "workspace.json", json.dumps({"folder": "file:///w"}))
    for n in range(sessions):
        sid = f"00000000-0000-4000-8000-{n:012d}"
        head = {"version": 3, "sessionId": sid, "creationDate": T0, "initialLocation": "panel",
                "responderUsername": "GitHub Copilot", "requests": []}  # fmt: skip
        entries: list[dict[str, Any]] = [{"kind": 0, "v": head}]
        for k in range(turns):
            call = f"toolu_{k}"
            request = {"requestId": f"request_{k}", "timestamp": T0 + k * 1000,
                       "message": {"text": _text(n, k), "parts": []}, "response": [],
                       "responseId": f"response_{k}", "modelId": "copilot/claude-sonnet-4.5",
                       "agent": {"id": "github.copilot.editsAgent"}}  # fmt: skip
            rounds = [
                {"id": f"round-{k}-a", "response": "", "thinking": {"text": ["Look first."]},
                 "toolCalls": [{"name": "run_in_terminal", "id": call,
                                "arguments": json.dumps({"command": f"ls src/{k}"})}]},
                {"id": f"round-{k}-b", "response": _text(n, k), "toolCalls": []},
            ]  # fmt: skip
            meta = {"toolCallRounds": rounds, "resolvedModel": "claude-sonnet-4-5",
                    "toolCallResults": {call: {"content": [{"value": _text(n, k)}]}},
                    "promptTokens": 9000 + k, "outputTokens": 240}  # fmt: skip
            entries += [
                {"kind": 2, "k": ["requests"], "v": [request]},
                {"kind": 2, "k": ["requests", k, "response"], "v": [{"value": _text(n, k)}]},
                {"kind": 1, "k": ["requests", k, "result"], "v": {"metadata": meta}},
                {"kind": 1, "k": ["requests", k, "modelState"], "v": {"value": 1}},
            ]
        entries.append({"kind": 1, "k": ["customTitle"], "v": f"session {n}"})
        path = ws / "chatSessions" / f"{sid}.jsonl"
        _write(path, "".join(json.dumps(e) + "\n" for e in entries))
