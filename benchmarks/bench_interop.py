"""Import benchmark: how fast foreign sessions become jsonltape sessions.

The workloads below, each imported into a fresh root, then imported again (nothing changed: the
fast path reads only the end of each imported session) and again after touching every source
(every file is re-mapped and compared by key, nothing is written):

* ``pi``: the real 974 KB pi v1 session from ../shared/samples (1,019 lines);
* ``claude-tree``: a synthetic ~/.claude/projects tree (``--projects`` × ``--sessions`` files of
  ``--turns`` turns; per turn a prompt, an assistant reply streamed as 3 lines sharing one
  message id (thinking, text, tool_use), the tool result, a final reply, and a
  file-history-snapshot line), like the lines Claude Code 1.0.x writes;
* ``codex-tree``, ``gemini-tree``, ``gemini-json`` (legacy whole-file chats) and
  ``opencode-db`` (one database): as many sessions of ``--turns`` turns each, shaped as those
  agents write them (benchmarks/_interop_trees.py);
* ``qwen-tree``, ``kimi-tree``, ``droid-tree``, ``openhands-tree`` and ``amp-threads``: as many
  sessions again, the importers' test fixtures scaled up (benchmarks/_interop_agents.py);
* ``continue``, ``copilot-cli``, ``copilot-vscode``: as many sessions again, shaped as those
  agents write them (benchmarks/_interop_trees_a.py).
* ``aider-tree`` (``--projects`` repositories, each history Aider's own runs repeated),
  ``cline-tasks`` (task folders), ``goose-db`` and ``crush-db`` (one database each): the test
  fixtures scaled up (benchmarks/_interop_trees_b.py).
* ``cursor-db`` (one ``state.vscdb``) and ``cursor-transcripts`` (agent transcripts): the Cursor
  importer's test fixtures scaled up (benchmarks/_interop_trees_c.py).
* ``aider-history``: a real Aider history as it is, ``--aider-history FILE`` (Aider's own,
  Aider-AI/aider@5dc9490 ``tests/fixtures/chat-history.md``: 4.2 MB, 1,133 runs; only its
  first 4 runs are in tests/fixtures), in a repository of its own.

``--only NAME`` (repeatable) runs only those workloads. An import of many sources goes on in
one more process than the cores once it has run 0.2 s alone or its first sources say the rest
would (``jsonltape import``'s default: ``interop._many``); ``--workers N`` caps the processes
(1: each import in one process). Each workload starts after ``os.sync()``: what the workloads
before it wrote is not written back during its syncs.

Events/s counts the jsonltape events written (messages, tool calls, turns, raw lines, ...);
lines/s the source lines read. Run:

    .venv/bin/python benchmarks/bench_interop.py [--projects 20 --sessions 10 --turns 100]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from jsonltape.interop import import_paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _interop_agents as agents
import _interop_trees as trees
import _interop_trees_a as trees_a
import _interop_trees_b as trees_b
import _interop_trees_c as trees_c

#: The real sessions: $JSONLTAPE_SAMPLES (as in the tests), else shared/samples beside the repo.
SAMPLES = Path(
    os.environ.get("JSONLTAPE_SAMPLES")
    or Path(__file__).resolve().parents[2] / "shared" / "samples"
)
PI = SAMPLES / "pi-v1-legacy-large-session.jsonl"
T0 = trees.T0
_text = trees.text


def _session(sid: str, cwd: str, turns: int) -> list[str]:
    """The lines of one synthetic Claude Code session."""
    base = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": sid}
    base.update(version="1.0.98", gitBranch="main")
    out: list[str] = []
    parent: str | None = None
    for t in range(turns):
        mid = f"msg_{sid[:8]}{t:05d}"
        usage = {"input_tokens": 10, "output_tokens": 5}
        result: dict[str, object] = {"type": "tool_result", "tool_use_id": f"toolu_{mid}"}
        result["content"] = _text(t + 3, 200)
        lines: list[dict[str, object]] = [
            {"type": "user", "message": {"role": "user", "content": _text(t, 30)}}
        ]
        for b in (
            {"type": "thinking", "thinking": _text(t + 1, 40), "signature": "c2ln"},
            {"type": "text", "text": _text(t + 2, 60)},
            {"type": "tool_use", "id": f"toolu_{mid}", "name": "Read",
             "input": {"file_path": f"src/mod_{t % 17}.py"}},
        ):  # fmt: skip
            msg: dict[str, object] = {"id": mid, "type": "message", "role": "assistant"}
            msg.update(model="claude-sonnet-4", content=[b], usage=usage)
            lines.append({"type": "assistant", "message": msg, "requestId": f"req_{mid}"})
        lines.append({"type": "user", "message": {"role": "user", "content": [result]}})
        msg = {"id": mid + "b", "type": "message", "role": "assistant"}
        msg.update(model="claude-sonnet-4", usage=usage, stop_reason="end_turn")
        msg["content"] = [{"type": "text", "text": _text(t + 4, 80)}]
        lines.append({"type": "assistant", "message": msg, "requestId": f"req_{mid}b"})
        lines.append({"type": "file-history-snapshot", "messageId": mid, "snapshot": {}})
        for obj in lines:
            n = len(out) + 1
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((T0 + n * 1000) / 1000))
            obj["timestamp"] = f"{ts}.000Z"
            if obj["type"] in ("user", "assistant"):
                obj.update(parentUuid=parent, uuid=f"{sid[:8]}-{n:06d}", **base)
                parent = str(obj["uuid"])
            out.append(json.dumps(obj, ensure_ascii=False))
    return out


def claude_tree(root: Path, projects: int, sessions: int, turns: int) -> None:
    """Write the synthetic tree."""
    for p in range(projects):
        d = root / f"-home-ada-project-{p}"
        d.mkdir(parents=True)
        for s in range(sessions):
            sid = f"{p:04x}{s:04x}-0000-4000-8000-{p * 1000 + s:012d}"
            lines = _session(sid, f"/home/ada/p{p}", turns)
            (d / f"{sid}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


#: ``--workers``: processes an import may use (None: as ``jsonltape import``, one more than the
#: cores).
WORKERS: int | None = None


def run(source: str, src: Path, root: Path) -> tuple[float, int, int, int]:
    t = time.perf_counter()
    events = lines = reports = 0
    for r in import_paths(source, [src], root, settle=0, workers=WORKERS):
        assert r.status in ("imported", "unchanged"), r.error
        events += r.events
        lines += r.lines
        reports += 1
    return time.perf_counter() - t, events, lines, reports


def _files(src: Path) -> list[Path]:
    return [f for f in src.rglob("*") if f.is_file()] if src.is_dir() else [src]


def measure(name: str, source: str, src: Path, work: Path) -> None:
    root = work / f"root-{name}"
    # what was written before (this tree, the workloads before it) is on disk first: its
    # writeback would slow this import's syncs (ext4 commits other files' data with them)
    os.sync()
    first, events, lines, sessions = run(source, src, root)
    files = _files(src)
    size = sum(f.stat().st_size for f in files)
    out = sum(f.stat().st_size for f in root.rglob("*.jsonl"))
    again, _, _, _ = run(source, src, root)
    for f in files:
        os.utime(f)
    # an OpenCode session changes with its rows' time_updated, not the file's mtime: touching
    # the database re-reads nothing, like an unchanged tree
    touched, written, _, _ = run(source, src, root)
    assert written == 0
    print(
        f"{name:14} {sessions:5} sessions {size / 1e6:7.1f} MB {lines:9,} lines -> "
        f"{events:9,} events ({out / 1e6:6.1f} MB) in {first:6.2f} s: "
        f"{events / first:9,.0f} events/s, {lines / first:8,.0f} lines/s, "
        f"{size / first / 1e6:5.1f} MB/s | again {again * 1000:7.1f} ms | "
        f"touched {touched:5.2f} s"
    )


#: The importers of issue 32: workload -> (source, tree generator, folder the import reads).
_ISSUE32 = {
    "continue": ("continue", trees_a.continue_tree, "continue/sessions"),
    "copilot-cli": ("copilot-cli", trees_a.copilot_cli_tree, "copilot/session-state"),
    "copilot-vscode": ("copilot-vscode", trees_a.copilot_vscode_tree, "Code/User"),
}


def _issue32(name: str, sessions: int, turns: int, work: Path) -> None:
    source, make, folder = _ISSUE32[name]
    tree = work / folder
    make(tree, sessions, turns)
    measure(name, source, tree, work)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--projects", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--only", action="append", default=[], help="run only this workload")
    ap.add_argument("--aider-history", type=Path, help="a real .aider.chat.history.md")
    ap.add_argument(
        "--workers",
        type=int,
        help="processes an import may use (default: one more than the cores, as the CLI)",
    )
    args = ap.parse_args()
    global WORKERS
    WORKERS = args.workers
    print(
        f"{platform.machine()}, {os.cpu_count()} cpus, Python {sys.version.split()[0]}, "
        f"msgspec {msgspec.__version__}, {platform.system()} {platform.release()}, "
        f"workers {args.workers or 'one more than the cores'}"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-interop-"))
    n = args.projects * args.sessions

    def want(name: str) -> bool:
        return not args.only or name in args.only

    try:
        if want("pi"):
            pi = work / "pi" / PI.name
            pi.parent.mkdir()
            shutil.copyfile(PI, pi)
            measure("pi", "pi", pi, work)
        if want("claude-tree"):
            tree = work / "projects"
            claude_tree(tree, args.projects, args.sessions, args.turns)
            measure("claude-tree", "claude-code", tree, work)
        if want("codex-tree"):
            codex = work / "codex"
            trees.codex_tree(codex, n, args.turns)
            measure("codex-tree", "codex", codex, work)
        if want("gemini-tree"):
            gemini = work / "gemini"
            trees.gemini_tree(gemini, n, args.turns)
            measure("gemini-tree", "gemini-cli", gemini, work)
        if want("gemini-json"):
            legacy = work / "gemini-legacy"
            trees.gemini_tree(legacy, n, args.turns, legacy=True)
            measure("gemini-json", "gemini-cli", legacy, work)
        if want("opencode-db"):
            opencode = work / "opencode" / "opencode.db"
            trees.opencode_db(opencode, n, args.turns)
            measure("opencode-db", "opencode", opencode.parent, work)
        for name, source, make in (
            ("qwen-tree", "qwen-code", agents.qwen_tree),
            ("kimi-tree", "kimi-cli", agents.kimi_tree),
            ("droid-tree", "factory-droid", agents.droid_tree),
            ("openhands-tree", "openhands", agents.openhands_tree),
            ("amp-threads", "amp", agents.amp_tree),
            ("aider-tree", "aider", lambda d, _n, t: trees_b.aider_tree(d, args.projects, t)),
            ("cline-tasks", "cline", trees_b.cline_tree),
            ("goose-db", "goose", lambda d, n, t: trees_b.goose_db(d / "sessions.db", n, t)),
            (
                "crush-db",
                "crush",
                lambda d, n, t: trees_b.crush_db(d / ".crush" / "crush.db", n, t),
            ),
            (
                "cursor-db",
                "cursor",
                lambda d, n, t: trees_c.cursor_db(d / "globalStorage" / "state.vscdb", n, t),
            ),
            ("cursor-transcripts", "cursor", trees_c.cursor_transcripts),
        ):
            if want(name):
                make(work / name, n, args.turns)
                measure(name, source, work / name, work)
        if want("aider-history") and args.aider_history is not None:
            repo = work / "aider-history" / "repo"
            repo.mkdir(parents=True)
            shutil.copyfile(args.aider_history, repo / ".aider.chat.history.md")
            measure("aider-history", "aider", repo.parent, work)
        for name in _ISSUE32:
            if want(name):
                _issue32(name, n, args.turns, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work)


if __name__ == "__main__":
    main()
