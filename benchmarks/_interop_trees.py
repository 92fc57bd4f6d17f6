"""Synthetic source trees for bench_interop.py, shaped as each agent writes them.

* Codex: ``rollout-<ts>-<uuid>.jsonl`` under ``YYYY/MM/DD`` (session_meta, injected context,
  per turn a user message, reasoning, a function call and its output, a reply, token_count);
* Gemini CLI: ``chats/session-<time>-<id8>.jsonl`` (metadata, per turn a user record, the
  gemini record appended three times as it grows: text, tokens, tool calls with results) and
  the same conversations as legacy whole-file ``session-*.json`` chats;
* OpenCode: an ``opencode.db`` with OpenCode's tables (tests/fixtures/opencode/schema.sql),
  per turn a user message and an assistant message with reasoning, text, a tool part and
  step parts.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

WORDS = [
    "the", "migration", "adds", "a", "column", "users", "email", "default", "null", "index",
    "test", "fails", "because", "schema", "fixture", "設定", "ファイル", "cache", "retry",
    "timeout", "handler",
]  # fmt: skip
T0 = 1_757_000_000_000
SCHEMA = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "opencode" / "schema.sql"


def text(i: int, n: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(n))


def _iso(ms: int) -> str:
    import datetime as dt

    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        + "Z"
    )


def _enc(v: dict[str, Any]) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


# -- Codex ----------------------------------------------------------------------------------


def codex_tree(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        sid = str(uuid.UUID(int=s + 1))
        t = T0 + s * 3_600_000
        d = root / "2026" / "03" / f"{s % 28 + 1:02d}"
        d.mkdir(parents=True, exist_ok=True)
        out = [
            {"timestamp": _iso(t), "type": "session_meta", "payload": {
                "id": sid, "timestamp": _iso(t), "cwd": f"/home/ada/p{s}",
                "originator": "codex_cli", "cli_version": "0.150.0",
                "model_provider": "openai"}},
            {"timestamp": _iso(t), "type": "response_item", "payload": {
                "type": "message", "role": "user", "content": [{
                    "type": "input_text",
                    "text": "<environment_context>cwd</environment_context>"}]}},
        ]  # fmt: skip
        for k in range(turns):
            t += 10_000
            call = f"call_{s}_{k}"
            out += [
                {"timestamp": _iso(t), "type": "event_msg", "payload": {"type": "task_started"}},
                {"timestamp": _iso(t), "type": "response_item", "payload": {
                    "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": text(k, 12)}]}},
                {"timestamp": _iso(t + 1), "type": "response_item", "payload": {
                    "type": "reasoning", "summary": [{"type": "summary_text", "text": text(k, 8)}],
                    "encrypted_content": "gAAAA" + "x" * 40}},
                {"timestamp": _iso(t + 2), "type": "response_item", "payload": {
                    "type": "function_call", "name": "shell", "call_id": call,
                    "arguments": _enc({"command": ["bash", "-lc", "pytest -q"]})}},
                {"timestamp": _iso(t + 3), "type": "response_item", "payload": {
                    "type": "function_call_output", "call_id": call,
                    "output": _enc({"output": text(k + 1, 30), "metadata": {"exit_code": 0}})}},
                {"timestamp": _iso(t + 4), "type": "response_item", "payload": {
                    "type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": text(k + 2, 25)}]}},
                {"timestamp": _iso(t + 5), "type": "event_msg", "payload": {
                    "type": "token_count", "info": {"last_token_usage": {
                        "input_tokens": 1200, "cached_input_tokens": 800, "output_tokens": 90,
                        "reasoning_output_tokens": 20, "total_tokens": 1290}}}},
                {"timestamp": _iso(t + 6), "type": "event_msg", "payload": {
                    "type": "task_complete"}},
            ]  # fmt: skip
        name = f"rollout-2026-03-{s % 28 + 1:02d}T10-00-00-{sid}.jsonl"
        (d / name).write_text("".join(_enc(v) + "\n" for v in out), encoding="utf-8")


# -- Gemini CLI -----------------------------------------------------------------------------


def _gemini_records(s: int, turns: int) -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """The metadata and, per message, its successive records (the last one wins)."""
    t = T0 + s * 3_600_000
    meta = {"sessionId": str(uuid.UUID(int=s + 1)), "projectHash": "ab" * 32,
            "startTime": _iso(t), "lastUpdated": _iso(t)}  # fmt: skip
    messages: list[list[dict[str, Any]]] = []
    for k in range(turns):
        t += 10_000
        messages.append([{"id": f"u-{k}", "timestamp": _iso(t), "type": "user",
                          "content": [{"text": text(k, 12)}]}])  # fmt: skip
        base = {"id": f"g-{k}", "timestamp": _iso(t + 1), "type": "gemini",
                "content": text(k + 2, 25),
                "thoughts": [{"subject": "Plan", "description": text(k, 8), "timestamp": _iso(t)}],
                "tokens": None, "model": "gemini-2.5-pro"}  # fmt: skip
        tokens = {"input": 1200, "output": 90, "cached": 800, "thoughts": 20, "tool": 0,
                  "total": 1290}  # fmt: skip
        call = {"id": f"run_shell_command-{s}-{k}", "name": "run_shell_command",
                "args": {"command": "pytest -q"}, "status": "success", "timestamp": _iso(t + 2),
                "result": [{"functionResponse": {"id": f"run_shell_command-{s}-{k}",
                            "name": "run_shell_command",
                            "response": {"output": text(k + 1, 30)}}}]}  # fmt: skip
        messages.append(
            [base, {**base, "tokens": tokens}, {**base, "tokens": tokens, "toolCalls": [call]}]
        )
    return meta, messages


def gemini_tree(root: Path, sessions: int, turns: int, *, legacy: bool = False) -> None:
    chats = root / ("ab" * 32) / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    for s in range(sessions):
        meta, messages = _gemini_records(s, turns)
        stem = f"session-2026-03-{s % 28 + 1:02d}T10-00-{meta['sessionId'][-8:]}"
        if legacy:
            doc = {**meta, "messages": [m[-1] for m in messages], "summary": text(s, 5)}
            (chats / f"{stem}.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False))
            continue
        lines = [_enc(meta)]
        for records in messages:
            for r in records:
                lines.append(_enc(r))
                lines.append(_enc({"$set": {"lastUpdated": r["timestamp"]}}))
        (chats / f"{stem}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- OpenCode -------------------------------------------------------------------------------


def opencode_db(path: Path, sessions: int, turns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript(SCHEMA.read_text())
    con.execute("INSERT INTO project VALUES ('prj_1', '/home/ada', 'git', NULL, 1, 1, '[]')")
    model = {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}
    tokens = {"input": 1200, "output": 90, "reasoning": 20, "cache": {"read": 800, "write": 40}}
    for s in range(sessions):
        sid = f"ses_{s:06d}bench"
        t = T0 + s * 3_600_000
        con.execute(
            "INSERT INTO session (id, project_id, slug, directory, title, version, time_created,"
            " time_updated) VALUES (?, 'prj_1', ?, ?, ?, '1.2.10', ?, ?)",
            (sid, f"s{s}", f"/home/ada/p{s}", text(s, 5), t, t + turns * 10_000),
        )
        msgs: list[tuple[str, str, int, int, str]] = []
        parts: list[tuple[str, str, str, int, int, str]] = []
        for k in range(turns):
            t += 10_000
            u, a = f"msg_{s:06d}{k:05d}u", f"msg_{s:06d}{k:05d}v"
            msgs.append((u, sid, t, t, _enc({"role": "user", "time": {"created": t},
                                             "agent": "build", "model": model})))  # fmt: skip
            parts.append((f"prt_{u}a", u, sid, t, t, _enc({"type": "text", "text": text(k, 12)})))
            info = {"role": "assistant", "time": {"created": t + 1, "completed": t + 900},
                    "parentID": u, "modelID": model["modelID"], "providerID": "anthropic",
                    "mode": "build", "agent": "build",
                    "path": {"cwd": f"/home/ada/p{s}", "root": f"/home/ada/p{s}"},
                    "cost": 0.004, "tokens": tokens, "finish": "stop"}  # fmt: skip
            msgs.append((a, sid, t + 1, t + 900, _enc(info)))
            tool = {"type": "tool", "callID": f"toolu_{s}_{k}", "tool": "bash", "state": {
                "status": "completed", "input": {"command": "pytest -q"},
                "output": text(k + 1, 30), "title": "pytest", "metadata": {"exit": 0},
                "time": {"start": t + 2, "end": t + 100}}}  # fmt: skip
            for n, body in enumerate([
                {"type": "step-start", "snapshot": "4b825dc6"},
                {"type": "reasoning", "text": text(k, 8), "time": {"start": t + 1, "end": t + 2}},
                tool,
                {"type": "text", "text": text(k + 2, 25), "time": {"start": t + 3, "end": t + 4}},
                {"type": "step-finish", "reason": "stop", "snapshot": "4b825dc6",
                 "cost": 0.004, "tokens": tokens},
            ]):  # fmt: skip
                parts.append((f"prt_{a}{n}", a, sid, t + n, t + n, _enc(body)))
        con.executemany("INSERT INTO message VALUES (?,?,?,?,?)", msgs)
        con.executemany("INSERT INTO part VALUES (?,?,?,?,?,?)", parts)
    con.commit()
    con.close()
