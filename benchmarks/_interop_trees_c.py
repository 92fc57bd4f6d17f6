"""Synthetic source trees for bench_interop.py of the Cursor importer: its test fixtures scaled
up (tests/fixtures/interop/cursor, tests/_cursor_db.py), shaped as readers describe Cursor's files.

* ``cursor-db``: a global ``state.vscdb`` (``ItemTable`` and ``cursorDiskKV``, WAL mode), one
  composer per session, per turn a prompt bubble, an assistant bubble with thinking and a tool
  call with its result, and a reply bubble with its ``tokenCount``; 200 unrelated ``ItemTable``
  rows beside them;
* ``cursor-transcripts``: ``projects/<slug>/agent-transcripts/<id>/<id>.jsonl``, per turn a
  ``<user_query>`` prompt, a reply with a ``tool_use``, its ``tool_result``, a final reply and a
  ``turn_ended`` line.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from _interop_trees import T0, text

_TABLE = "(key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)"


def _enc(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def _bubble(kind: int, at: int, **fields: Any) -> dict[str, Any]:
    return {"_v": 3, "type": kind, "createdAt": _iso(at), "text": "",
            "tokenCount": {"inputTokens": 0, "outputTokens": 0}, **fields}  # fmt: skip


def cursor_db(path: Path, sessions: int, turns: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute(f"CREATE TABLE ItemTable {_TABLE}")
    con.execute(f"CREATE TABLE cursorDiskKV {_TABLE}")
    con.executemany("INSERT INTO ItemTable VALUES (?, ?)",
                    [(f"workbench.state.{i}", text(i, 20)) for i in range(200)])  # fmt: skip
    for s in range(sessions):
        cid = str(uuid.uuid5(uuid.NAMESPACE_OID, f"composer {s}"))
        t = T0 + s * 3_600_000
        rows: list[tuple[str, str]] = []
        headers: list[dict[str, Any]] = []
        for k in range(turns):
            t += 10_000
            call = f"toolu_{s}_{k}"
            for n, value in enumerate((
                _bubble(1, t, text=text(k, 12)),
                _bubble(2, t + 1, thinking={"text": text(k + 1, 15), "signature": ""},
                        toolFormerData={"name": "run_terminal_cmd", "toolCallId": call,
                                        "status": "completed",
                                        "rawArgs": _enc({"command": "pytest -q"}),
                                        "result": _enc({"output": text(k + 2, 30)})}),
                _bubble(2, t + 3, text=text(k + 3, 25), modelInfo={"modelName": "gpt-5"},
                        tokenCount={"inputTokens": 1200, "outputTokens": 90}),
            )):  # fmt: skip
                bid = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{s}.{k}.{n}"))  # as Cursor's: uuids
                headers.append({"bubbleId": bid, "type": value["type"]})
                rows.append((f"bubbleId:{cid}:{bid}", _enc(value)))
        composer = {"_v": 3, "composerId": cid, "name": text(s, 5), "createdAt": T0 + s * 3_600_000,
                    "lastUpdatedAt": t + 3, "fullConversationHeadersOnly": headers}  # fmt: skip
        rows.append((f"composerData:{cid}", _enc(composer)))
        con.executemany("INSERT INTO cursorDiskKV VALUES (?, ?)", rows)
    con.commit()
    con.close()


def cursor_transcripts(root: Path, sessions: int, turns: int) -> None:
    for s in range(sessions):
        sid = str(uuid.uuid5(uuid.NAMESPACE_OID, f"transcript {s}"))
        f = root / f"home-ada-p{s % 10}" / "agent-transcripts" / sid / f"{sid}.jsonl"
        f.parent.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        for k in range(turns):
            lines += [
                _enc({"role": "user", "message": {"content": [
                    {"type": "text", "text": f"<user_query>\n{text(k, 12)}\n</user_query>"}]}}),
                _enc({"role": "assistant", "message": {"content": [
                    {"type": "text", "text": text(k + 1, 20)},
                    {"type": "tool_use", "name": "Shell", "input": {"command": "pytest -q"}}]}}),
                _enc({"role": "user", "message": {"content": [
                    {"type": "tool_result", "content": [{"type": "text",
                                                         "text": text(k + 2, 30)}]}]}}),
                _enc({"role": "assistant", "message": {"content": [
                    {"type": "text", "text": text(k + 3, 25)}]}}),
                _enc({"type": "turn_ended"}),
            ]  # fmt: skip
        f.write_text("".join(line + "\n" for line in lines))
