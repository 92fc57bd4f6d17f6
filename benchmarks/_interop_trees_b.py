"""Synthetic source trees for bench_interop.py of the Aider, Cline, Goose and Crush importers:
their test fixtures scaled up (tests/fixtures/interop/<agent>), shaped as each agent writes them.

* Aider: a repository per session group, its ``.aider.chat.history.md`` the real head of Aider's
  own history (4 runs) repeated with later run times until it holds ``turns`` prompts a run;
* Cline: ``tasks/<id>/`` folders, per turn a prompt, a reply with a ``tool_use``, its
  ``tool_result`` and a final reply in the API history, and an ``api_req_started`` per request
  in the UI messages;
* Goose: a ``sessions.db`` from Goose's schema (tests/fixtures/interop/goose/schema-v17.sql), per
  turn a prompt, a reply with a tool request, its response, a final reply and a usage row;
* Crush: a ``.crush/crush.db`` from the real Crush schema (tests/fixtures/interop/crush), per
  turn a prompt, a reply with a tool call and ``finish``, its tool result, a final reply.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from _interop_trees import T0, text

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "interop"


def _enc(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def aider_tree(root: Path, repos: int, turns: int) -> None:
    runs = (FIXTURES / "aider" / "aider-repo-head.chat.history.md").read_text()
    body = runs.split("\n# aider chat started at ")
    head, rest = body[0], body[1:]
    for r in range(repos):
        out = [head]
        for k in range(max(1, turns // 4)):  # the fixture's runs hold about 4 prompts each
            for n, run in enumerate(rest):
                stamp = f"2024-{1 + r % 12:02d}-{1 + k % 28:02d} {n:02d}:{k % 60:02d}:{r % 60:02d}"
                out.append(stamp + run.partition("\n")[1] + run.partition("\n")[2])
        repo = root / f"repo{r:04d}"
        repo.mkdir(parents=True)
        (repo / ".aider.chat.history.md").write_text("\n# aider chat started at ".join(out))


def cline_tree(root: Path, tasks: int, turns: int) -> None:
    for s in range(tasks):
        tid = str(1_760_000_000_000 + s * 10_000_000)
        t = int(tid)
        api: list[dict[str, Any]] = []
        ui: list[dict[str, Any]] = [{"ts": t, "type": "say", "say": "text", "text": text(s, 6)}]
        for k in range(turns):
            t += 10_000
            prompt = (
                f"<task>\n{text(k, 12)}\n</task>"
                if k == 0
                else f"<feedback>\n{text(k, 12)}\n</feedback>"
            )
            api.append({"role": "user", "content": [{"type": "text", "text": prompt}], "ts": t})
            for req in (0, 1):
                ui.append({"ts": t + 1 + req * 3, "type": "say", "say": "api_req_started",
                           "text": _enc({"tokensIn": 1200, "tokensOut": 90, "cacheReads": 800,
                                         "cacheWrites": 40, "cost": 0.004})})  # fmt: skip
            call = f"toolu_{s}_{k}"
            api.append({"role": "assistant", "id": f"msg_{s}_{k}a", "ts": t + 2, "content": [
                {"type": "text", "text": text(k + 1, 20)},
                {"type": "tool_use", "id": call, "name": "execute_command",
                 "input": {"command": "pytest -q", "requires_approval": False}}]})  # fmt: skip
            api.append({"role": "user", "ts": t + 3, "content": [
                {"type": "tool_result", "tool_use_id": call,
                 "content": [{"type": "text", "text": text(k + 2, 30)}]}]})  # fmt: skip
            api.append({"role": "assistant", "id": f"msg_{s}_{k}b", "ts": t + 5,
                        "content": [{"type": "text", "text": text(k + 3, 25)}]})  # fmt: skip
        folder = root / "tasks" / tid
        folder.mkdir(parents=True)
        (folder / "api_conversation_history.json").write_text(_enc(api))
        (folder / "ui_messages.json").write_text(_enc(ui))


def goose_db(path: Path, sessions: int, turns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript((FIXTURES / "goose" / "schema-v17.sql").read_text())
    meta = _enc({"userVisible": True, "agentVisible": True})
    for s in range(sessions):
        sid = f"20250901_{s}"
        t = T0 // 1000 + s * 3600
        con.execute(
            "INSERT INTO sessions (id, name, session_type, working_dir, created_at, updated_at)"
            " VALUES (?, ?, 'user', ?, datetime(?, 'unixepoch'), datetime(?, 'unixepoch'))",
            (sid, text(s, 5), f"/home/ada/p{s}", t, t + turns * 10),
        )
        rows: list[tuple[Any, ...]] = []
        usage: list[tuple[Any, ...]] = []
        for k in range(turns):
            t += 10
            call = f"toolu_{s}_{k}"
            for role, content, dt in (
                ("user", [{"type": "text", "text": text(k, 12)}], 0),
                ("assistant", [{"type": "text", "text": text(k + 1, 20)}, {"type": "toolRequest",
                 "id": call, "toolCall": {"status": "success", "value": {
                     "name": "developer__shell", "arguments": {"command": "pytest -q"}}}}], 1),
                ("user", [{"type": "toolResponse", "id": call, "toolResult": {
                    "status": "success", "value": {"content": [
                        {"type": "text", "text": text(k + 2, 30)}], "isError": False}}}], 2),
                ("assistant", [{"type": "text", "text": text(k + 3, 25)}], 3),
            ):  # fmt: skip
                rows.append((f"msg_{s}_{k}_{dt}", sid, role, _enc(content), t + dt, meta))
            for dt in (1, 3):
                usage.append((sid, t + dt, "claude-sonnet-4-5", 1200, 90, 1290, 800, 40, 0.004, 0))
        con.executemany(
            "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp,"
            " metadata_json) VALUES (?,?,?,?,?,?)",
            rows,
        )
        con.executemany(
            "INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens,"
            " output_tokens, total_tokens, cache_read_tokens, cache_write_tokens, cost,"
            " is_compaction) VALUES (?,?,?,?,?,?,?,?,?,?)",
            usage,
        )
    con.commit()
    con.close()


def crush_db(path: Path, sessions: int, turns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    schema = [
        line
        for line in (FIXTURES / "crush" / "crush-dbos.sql").read_text().split(";\n")
        if line.lstrip().startswith("CREATE TABLE") or line.lstrip().startswith("CREATE INDEX")
    ]
    con.executescript(";\n".join(schema) + ";")
    for s in range(sessions):
        sid = f"0000{s:04d}-bench-4000-8000-000000000000"
        t = T0 // 1000 + s * 3600
        con.execute(
            "INSERT INTO sessions (id, title, message_count, prompt_tokens, completion_tokens,"
            " cost, updated_at, created_at) VALUES (?, ?, ?, 0, 0, 0, ?, ?)",
            (sid, text(s, 5), turns * 4, t + turns * 10, t),
        )
        rows: list[tuple[Any, ...]] = []
        for k in range(turns):
            t += 10
            call = f"toolu_{s}_{k}"
            finish = {"type": "finish", "data": {"reason": "tool_use", "time": t + 1}}
            done = {"type": "finish", "data": {"reason": "end_turn", "time": t + 3}}
            for role, parts, dt in (
                ("user", [{"type": "text", "data": {"text": text(k, 12)}}], 0),
                ("assistant", [{"type": "text", "data": {"text": text(k + 1, 20)}},
                               {"type": "tool_call", "data": {"id": call, "name": "bash",
                                "input": _enc({"command": "pytest -q"}), "finished": True}},
                               finish], 1),
                ("tool", [{"type": "tool_result", "data": {"tool_call_id": call, "name": "bash",
                           "content": text(k + 2, 30), "is_error": False}}], 2),
                ("assistant", [{"type": "text", "data": {"text": text(k + 3, 25)}}, done], 3),
            ):  # fmt: skip
                model = "claude-sonnet-4-5" if role == "assistant" else None
                provider = "anthropic" if role == "assistant" else None
                rows.append((f"{sid}-{k}-{dt}", sid, role, _enc(parts), model, t + dt, t + dt,
                             t + dt if role == "assistant" else None, provider))  # fmt: skip
        con.executemany("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?)", rows)
    con.commit()
    con.close()
