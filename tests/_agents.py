"""The fixtures of the Qwen Code, Kimi CLI, Factory Droid, OpenHands and Amp importers laid out
as each agent lays out its data (tests/fixtures/interop/<agent>, PROVENANCE.md there), and what
the tests of those importers share: where each session's source records are, the request body
checks, the events of an import."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import jsonltape
from jsonltape import fold
from jsonltape.interop import FileReport, import_paths

from ._importers import kept_whole

FIXTURES = Path(__file__).parent / "fixtures" / "interop"
AGENTS = ("qwen-code", "kimi-cli", "factory-droid", "openhands", "amp")
#: Agents whose sessions are append-only line logs (rebuilt byte for byte); the others are
#: JSON documents or folders read as records (rebuilt record for record).
LINE_LOGS = ("qwen-code", "kimi-cli", "factory-droid")
HOUR_AGO = time.time() - 7200


def tree(agent: str, dest: Path, *, finished: bool = True) -> Path:
    """A copy of the agent's fixtures laid out as the agent stores them; every file last
    modified two hours ago when ``finished``. Returns the root to import."""
    src = FIXTURES / agent
    if agent == "qwen-code":
        chats = dest / "projects" / "-home-u-shop" / "chats"
        chats.mkdir(parents=True)
        for f in sorted(src.glob("*.jsonl")):
            shutil.copyfile(f, chats / f.name)
        root = dest / "projects"
    elif agent == "kimi-cli":
        shutil.copytree(src / "sessions", dest / "sessions")
        root = dest / "sessions"
    elif agent == "factory-droid":
        shutil.copytree(src, dest / "sessions", ignore=shutil.ignore_patterns("*.md"))
        root = dest / "sessions"
    elif agent == "openhands":
        shutil.copytree(src / "conversations", dest / "conversations")
        root = dest / "conversations"
    else:
        threads = dest / "threads"
        threads.mkdir(parents=True)
        for f in sorted(src.glob("*.json")):
            shutil.copyfile(f, threads / f.name)
        root = threads
    if finished:
        for dirpath, _dirs, files in os.walk(root):
            for name in files + [dirpath]:
                os.utime(os.path.join(dirpath, name), (HOUR_AGO, HOUR_AGO))
    return root


def run(agent: str, root: Path, out: Path, *, settle: float | None = 3600.0) -> list[FileReport]:
    return list(import_paths(agent, [root], out, settle=settle))


def reimport_writes_nothing(agent: str, root: Path, out: Path) -> None:
    """Import ``root`` into ``out``, then again unchanged, then with every file touched: the
    later imports write nothing (not even a sync marker)."""
    sessions = imported(run(agent, root, out, settle=0))
    before = {s: s.read_bytes() for s in sessions}
    again = run(agent, root, out, settle=0)
    assert {r.status for r in again} == {"unchanged"} and sum(r.events for r in again) == 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(dirpath, name))  # touched: every source is mapped again
    touched = run(agent, root, out, settle=0)
    assert sum(r.events for r in touched) == 0
    assert {s: s.read_bytes() for s in sessions} == before  # not even a sync marker


def imported(reports: list[FileReport]) -> list[Path]:
    """The sessions the reports name (every report imported or unchanged)."""
    for r in reports:
        assert r.status in ("imported", "unchanged"), (r.path, r.error)
    return sorted({Path(s) for r in reports for s in r.sessions})


def raw_lines(sessions: list[Path]) -> dict[str, dict[int, str]]:
    """Per source (``meta.import.file`` + ``name``): line number -> the verbatim text its
    events carry; a line carried twice fails, and so does an event's raw an import does not
    write (``kept_whole``)."""
    found: dict[str, dict[int, str]] = {}
    for s in sessions:
        info = jsonltape.read(s).__next__().data["meta"]["import"]
        key = f"{info['file']}#{info['name']}"
        lines = found.setdefault(key, {})
        for e in jsonltape.read(s):
            for n, text in kept_whole((e.data.get("import") or {}).get("raw")):
                assert n not in lines, f"{key}: line {n} carried twice"
                lines[n] = text
    return found


def events(path: Path) -> list[jsonltape.Event]:
    return list(jsonltape.read(path))


def surface(path: Path) -> list[dict[str, Any]]:
    """The session's messages as the fold gives them, without their seqs (an incremental
    import has its sync markers and checkpoints between them)."""
    return [{k: v for k, v in m.items() if k != "seq"} for m in fold.messages(path)["messages"]]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def shown_title(path: Path) -> str | None:
    """The title the session shows: its header's, then each ``session/title``."""
    title = None
    for e in jsonltape.read(path):
        if e.seq == 0 or e.type == "session/title":
            title = e.data.get("title", title if e.seq else None)
    return title
