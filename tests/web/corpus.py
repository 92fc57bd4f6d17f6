"""Sessions the viewer's tests serve, written through the library as an agent would: one with
every kind of block a page draws (Markdown, thinking, tool calls with results and errors, file
edits of each agent's tools, an image, a todo list, a revision, a retraction, a compaction), a
fork of it, a session a git merge gave their branch, and the hostile payloads."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import jsonltape

#: A 1x1 PNG (red), the smallest real image.
PNG = base64.b64encode(
    b"\x89PNG\r\n\x1a\n"
    + b"\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
    + b"\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef"
    + b"\x00\x00\x00\x00IEND\xaeB`\x82"
).decode()

PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def main():
-    print("hello")
+    print("hello, world")
*** Add File: NOTES.md
+# Notes
*** End Patch"""


def rich_session(root: Path, name: str = "rich.jsonl") -> Path:
    """A finished session with one of every block the transcript draws."""
    path = root / name
    with (
        jsonltape.open(
            path, create=True, title="Fix the flaky migration", cwd="/work/app", agent="claude-code"
        ) as tape,
        tape.turn(),
    ):
        tape.user("Why does **test_migration** fail?\n\n- on CI only\n- since `0042`")
        tape.append("request/header", {"model": "claude-sonnet-4-5", "system": "Be brief."})
        tape.assistant(
            [
                {"type": "reasoning", "content": "The migration adds a NOT NULL column."},
                {"type": "text", "content": "Let me read the migration."},
            ],
            tool_calls=[{"id": "c1", "name": "Read", "arguments": {"file_path": "m/0042.sql"}}],
            model="claude-sonnet-4-5",
            usage={"input_tokens": 812, "output_tokens": 31},
        )
        tape.tool_call("Read", {"file_path": "m/0042.sql"}, call_id="c1")
        tape.tool_result("c1", "ALTER TABLE users ADD COLUMN email TEXT NOT NULL;")
        edits: list[dict[str, Any]] = [
            {
                "id": "c2",
                "name": "Edit",
                "arguments": {
                    "file_path": "m/0042.sql",
                    "old_string": "email TEXT NOT NULL;",
                    "new_string": "email TEXT NOT NULL DEFAULT '';",
                },
            },
            {
                "id": "c3",
                "name": "MultiEdit",
                "arguments": {
                    "file_path": "app/models.py",
                    "edits": [{"old_string": "email = None", "new_string": "email = ''"}],
                },
            },
            {
                "id": "c4",
                "name": "Write",
                "arguments": {
                    "file_path": "docs/migration.md",
                    "content": "# 0042\nadds email\n",
                },
            },
            {"id": "c5", "name": "apply_patch", "arguments": {"input": PATCH}},
            {
                "id": "c6",
                "name": "edit",
                "arguments": {
                    "path": "pi.ts",
                    "oldText": "let a = 1",
                    "newText": "const a = 1",
                },
            },
        ]
        tape.assistant("Fixing it in five places.", tool_calls=edits)
        for call in edits:
            tape.tool_call(call["name"], call["arguments"], call_id=call["id"])
            tape.tool_result(call["id"], "ok")
        tape.assistant(
            tool_calls=[{"id": "c7", "name": "Bash", "arguments": {"command": "pytest"}}]
        )
        tape.tool_call("Bash", {"command": "pytest"}, call_id="c7")
        tape.tool_result("c7", "1 failed: test_migration", is_error=True)
        tape.user(
            [
                {"type": "text", "content": "Here is the screenshot"},
                {"type": "blob", "mime_type": "image/png", "modality": "image", "content": PNG},
            ]
        )
        tape.append(
            "todo/write",
            {
                "todos": [
                    {"content": "fix 0042", "status": "completed"},
                    {"content": "rerun CI", "status": "pending"},
                ]
            },
        )
        wrong = tape.assistant("The column is fine.")
        tape.assistant("Tests pass now: the default fills old rows.")
    revised = jsonltape.revise(path, wrong.seq, "The column needed a default.")
    jsonltape.retract(path, revised[-1].seq, reason="a wrong turn")
    jsonltape.compact(path, "We fixed 0042 by adding a default.", through=6)
    return path


def fork_of(parent: Path) -> Path:
    """A fork of ``parent`` at seq 4 that goes on differently."""
    info = jsonltape.fork(parent, at=4, out=parent.with_name("forked.jsonl"), title="A fork")
    with jsonltape.open(info.path) as tape, tape.turn():
        tape.user("Try another way in the fork.")
        tape.assistant("Another way: a backfill migration.")
    return Path(info.path)


def merged_session(root: Path) -> Path:
    """A session that went on in two clones and was merged by the git merge driver: ours
    keeps its lines, theirs are recorded as a branch (spec §8.7.14)."""
    base = root / "merged.jsonl"
    with (
        jsonltape.open(base, create=True, title="Merged in git", agent="codex") as tape,
        tape.turn(),
    ):
        tape.user("Start here.")
        tape.assistant("Started.")
    work = root.parent / "merge-work"
    work.mkdir(exist_ok=True)
    ours, theirs, ancestor = work / "ours.jsonl", work / "theirs.jsonl", work / "base.jsonl"
    for p in (ours, theirs, ancestor):
        shutil.copyfile(base, p)
        os.chmod(p, 0o600)
    for p, text in ((ours, "our way"), (theirs, "their way")):
        with jsonltape.open(p) as tape, tape.turn():
            tape.user(f"Go {text}.")
            tape.assistant(f"Went {text}.")
    subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "jsonltape",
            "git",
            "merge-driver",
            str(ancestor),
            str(ours),
            str(theirs),
            "merged.jsonl",
        ],
        check=True,
        capture_output=True,
        cwd=work,
    )
    shutil.copyfile(ours, base)
    return base


#: What a session's text may hold that must stay text in every page: markup, handlers,
#: script URLs, SVG, CSS, terminal escapes, bidi controls, a lone surrogate's stand-in.
HOSTILE = [
    "<script>window.__pwned=1;alert('script')</script>",
    "<img src=x onerror=\"window.__pwned=1;alert('img')\">",
    '<a href="javascript:alert(1)">click</a> [md link](javascript:alert(2))',
    "<svg onload=\"window.__pwned=1\"><script>alert('svg')</script></svg>",
    '<style>body{display:none}</style><div style="position:fixed;inset:0">x</div>',
    '"><iframe src="https://example.invalid/"></iframe>',
    "![tracker](https://example.invalid/pixel.png) <link rel=stylesheet href=https://example.invalid/x.css>",
    "\x1b]0;title\x07\x1b[31mred\x1b[0m \u202eevil\u202c \u200b",
    "{{ 7*7 }} {% raw %} ${7*7} <!-- comment -->",
    "\ufffd replacement character",
]


def append_surrogate_line(path: Path) -> None:
    """A line another writer framed well (its crc right) whose text is a JSON escape of a
    lone surrogate: not valid UTF-8 text, so every reader's verdict is that it is bad (a torn
    tail here). The viewer must show the session up to it, and nothing of it."""
    last = list(jsonltape.read(path))[-1]
    data = {
        "message": {
            "id": "sur",
            "role": "user",
            "parts": [{"type": "text", "content": "a\ud800 <b>surrogate</b>"}],
        }
    }
    body = (
        f'{{"seq":{last.seq + 1},"type":"user/message","time":{last.time},'
        f'"data":{json.dumps(data, ensure_ascii=True, separators=(",", ":"))},"surface":"append"'
    )
    with open(path, "a", encoding="ascii") as f:
        f.write(body + f',"crc":"{zlib.crc32(body.encode()):08x}"}}\n')


def hostile_session(root: Path, *, big: bool = True) -> Path:
    """A session with a hostile payload in every field a page shows: title, cwd, agent,
    message text, thinking, tool names, arguments, results, call ids, todo items, a model
    name, a compaction summary, a session title event; and a 10 MB line."""
    path = root / "hostile.jsonl"
    bad = " ".join(HOSTILE)
    with (
        jsonltape.open(path, create=True, title=bad, cwd=bad, agent=HOSTILE[0]) as tape,
        tape.turn(),
    ):
        for h in HOSTILE:
            tape.user(h)
            tape.assistant(
                [{"type": "reasoning", "content": h}, {"type": "text", "content": h}],
                tool_calls=[
                    {
                        "id": f"x{zlib.crc32(h.encode())}",
                        "name": h[:60],
                        "arguments": {"file_path": h, "old_string": h, "new_string": h},
                    }
                ],
                model=h[:40],
            )
            tape.tool_result(f"x{zlib.crc32(h.encode())}", h, is_error=True)
        tape.append("todo/write", {"todos": [{"content": h, "status": "pending"} for h in HOSTILE]})
        tape.append("session/title", {"title": HOSTILE[1]})
        if big:
            tape.user("<script>alert('big')</script>" + "A" * 10_000_000)
    jsonltape.compact(path, bad, through=3)
    append_surrogate_line(path)
    return path


def long_session(root: Path, turns: int = 110) -> Path:
    """A session of more than two transcript pages (four events a turn)."""
    path = root / "long.jsonl"
    with jsonltape.open(path, create=True, title="A long session", agent="pi") as tape:
        for i in range(turns):
            with tape.turn():
                tape.user(f"prompt number {i}")
                tape.assistant(f"reply number {i}")
    return path
