"""A Cursor ``state.vscdb`` built the way readers of real ones describe it (Cursor is closed
source: tests/fixtures/interop/cursor/PROVENANCE.md names them): VS Code's ``ItemTable`` and
Cursor's ``cursorDiskKV``, both ``(key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)``, composer
and bubble rows in the observed shapes, values as TEXT, as BLOB and as a JSON string of the JSON,
an authentication token in ``ItemTable``, and the newest rows only in the ``-wal`` beside its
``-shm`` (Cursor running)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

#: What ``ItemTable`` holds that no import may ever show.
TOKEN = "cursor-secret-token-7f3a9c0d2e"
MAIN = "c0a1b2c3-0000-4000-8000-00000000a001"
SUB = "c0a1b2c3-0000-4000-8000-00000000b002"
OLD = "c0a1b2c3-0000-4000-8000-00000000c003"
DEAD = "b0000000-0000-4000-8000-0000000000de"
T0 = 1_780_000_000_000  # epoch ms, 2026-05-28
_TABLE = "(key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)"


def iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def bubble(kind: int, at: int | None, **fields: Any) -> dict[str, Any]:
    b: dict[str, Any] = {
        "_v": 3,
        "type": kind,
        "text": "",
        "tokenCount": {"inputTokens": 0, "outputTokens": 0},
    }
    if at is not None:
        b["createdAt"] = iso(at)
    b.update(fields)
    return b


def composer(cid: str, name: str, bubbles: list[tuple[str, dict[str, Any]]],
             **fields: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "_v": 3, "composerId": cid, "name": name, "createdAt": T0, "lastUpdatedAt": T0 + 60_000,
        "unifiedMode": "agent", "isAgentic": True,
        "modelConfig": {"modelName": "claude-4.5-sonnet", "maxMode": False},
        "fullConversationHeadersOnly": [{"bubbleId": b, "type": v["type"]} for b, v in bubbles],
        **fields,
    }  # fmt: skip


def main_rows() -> list[tuple[str, Any]]:
    """The main composer: a prompt, thinking, a tool call with its result, a reply with its
    tokens, a second prompt and reply (untimed: an older Cursor), and a dead branch."""
    bubbles = [
        ("u1", bubble(1, T0 + 1_000, text="Why is the cart total wrong?")),
        ("a1", bubble(2, T0 + 2_000, thinking={"text": "Look at cart.py first.", "signature": ""})),
        (
            "a2",
            bubble(
                2,
                T0 + 3_000,
                toolFormerData={
                    "name": "read_file",
                    "toolCallId": "toolu_cart",
                    "status": "completed",
                    "rawArgs": json.dumps({"target_file": "cart.py"}),
                    "params": json.dumps({"targetFile": "cart.py"}),
                    "result": json.dumps({"contents": "total = sum(prices)"}),
                },
            ),
        ),
        (
            "a3",
            bubble(
                2,
                T0 + 4_000,
                text="The total ignores the quantity.",
                modelInfo={"modelName": "claude-4.5-sonnet"},
                tokenCount={"inputTokens": 1200, "outputTokens": 80},
            ),
        ),
        ("u2", bubble(1, None, text="Fix it, using a sub-agent to find the tests.")),
        (
            "a4",
            bubble(
                2,
                None,
                toolFormerData={
                    "name": "task",
                    "toolCallId": "toolu_task",
                    "status": "error",
                    "rawArgs": "not json {",
                    "result": "the sub-agent stopped",
                },
            ),
        ),
        (
            "a5",
            bubble(
                2,
                T0 + 9_000,
                text="Fixed: total = sum(p * q).",
                tokenCount={"inputTokens": 2400, "outputTokens": 40},
            ),
        ),
    ]
    rows: list[tuple[str, Any]] = [
        (f"composerData:{MAIN}", json.dumps(composer(MAIN, "Cart total", bubbles)))
    ]
    for i, (bid, value) in enumerate(bubbles):
        text = json.dumps(value)
        if i % 3 == 1:
            rows.append((f"bubbleId:{MAIN}:{bid}", text.encode()))  # a BLOB
        elif i % 3 == 2:
            rows.append((f"bubbleId:{MAIN}:{bid}", json.dumps(text)))  # JSON in a JSON string
        else:
            rows.append((f"bubbleId:{MAIN}:{bid}", text))
    dead = bubble(2, T0 + 5_000, text="An answer the user regenerated.")
    rows.append((f"bubbleId:{MAIN}:{DEAD}", json.dumps(dead)))
    return rows


def sub_rows() -> list[tuple[str, Any]]:
    """A sub-agent's composer, written last (its rows only in the ``-wal``)."""
    bubbles = [
        ("s1", bubble(1, T0 + 6_000, text="Find the tests of cart.py.")),
        (
            "s2",
            bubble(
                2,
                T0 + 7_000,
                text="tests/test_cart.py covers it.",
                tokenCount={"inputTokens": 300, "outputTokens": 12},
            ),
        ),
    ]
    info = {"parentComposerId": MAIN, "toolCallId": "toolu_task", "subagentTypeName": "explore"}
    value = composer(SUB, "", bubbles, subagentInfo=info, createdAt=T0 + 5_500)
    rows: list[tuple[str, Any]] = [(f"composerData:{SUB}", json.dumps(value).encode())]
    rows += [(f"bubbleId:{SUB}:{b}", json.dumps(v)) for b, v in bubbles]
    return rows


def old_rows() -> list[tuple[str, Any]]:
    """An older composer keeping its messages inline (``conversation[]``, no headers)."""
    value = {
        "composerId": OLD, "name": "", "createdAt": T0 - 86_400_000,
        "conversation": [
            {"bubbleId": "o1", "type": 1, "text": "Rename shop to store."},
            {"bubbleId": "o2", "type": 2, "text": "Renamed."},
        ],
    }  # fmt: skip
    return [(f"composerData:{OLD}", json.dumps(value))]


def build(dest: Path, *, recent: bool = True) -> Path:
    """``dest`` (a ``state.vscdb``): the main and older composers in the database file, the
    sub-agent's rows (``recent``) only in its ``-wal``, as a running Cursor leaves them."""
    work = dest.parent / f".build-{dest.name}"
    work.mkdir(parents=True)
    db = work / dest.name
    con = sqlite3.connect(db, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute(f"CREATE TABLE ItemTable {_TABLE}")
        con.execute(f"CREATE TABLE cursorDiskKV {_TABLE}")
        con.executemany("INSERT INTO ItemTable VALUES (?, ?)", [
            ("cursorAuth/accessToken", TOKEN), ("cursorAuth/refreshToken", TOKEN + "-refresh"),
            ("workbench.colorTheme", "Default Dark Modern"),
        ])  # fmt: skip
        con.executemany("INSERT INTO cursorDiskKV VALUES (?, ?)", main_rows() + old_rows())
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if recent:
            con.executemany("INSERT INTO cursorDiskKV VALUES (?, ?)", sub_rows())
            # a token refreshed while Cursor runs: in the -wal too
            con.execute("INSERT INTO ItemTable VALUES (?, ?)",
                        ("cursorAuth/accessToken", (TOKEN + "-renewed").encode()))  # fmt: skip
        dest.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):  # a copy while Cursor holds it open
            src = db.with_name(db.name + suffix)
            if src.exists() and src.stat().st_size:
                shutil.copyfile(src, dest.with_name(dest.name + suffix))
    finally:
        con.close()
        shutil.rmtree(work)
    return dest


def write(db: Path, rows: list[tuple[str, Any]]) -> None:
    """Cursor writing ``rows`` (replacing rows of the same key)."""
    con = sqlite3.connect(db, isolation_level=None)
    try:
        con.executemany("INSERT INTO cursorDiskKV VALUES (?, ?)", rows)
    finally:
        con.close()
