"""``export --format atif`` and ``--format otel``: real sessions (the shared samples and the
project's fixtures, imported) and native ones exported, each document checked against the
standard's own schema and rules (``tests/_trace_check.py``: Harbor's ATIF schema and its
models' validators; opentelemetry-proto's parser and the GenAI message schemas), what each
format drops listed, sub-agents and forks linked, event text carried as data.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.interop import import_file
from jsonltape.interop._export_otel import span_id, trace_id
from jsonltape.interop.export import export, export_to

from ._trace_check import atif_errors, attributes, otel_errors, requests, root_span, spans
from .test_interop_export import build, result

SAMPLES = Path("/work/shared/samples")
FIXTURES = Path(__file__).parent / "fixtures"
REAL = [
    ("claude-code", SAMPLES / "claude-code-v1.0.98-init.jsonl"),
    ("claude-code", SAMPLES / "claude-code-v1.0.108-japanese.jsonl"),
    ("codex", SAMPLES / "codex-0.104-rollout-complete.jsonl"),
    ("codex", SAMPLES / "codex-0.104-rollout-unfinished-turn.jsonl"),
    ("pi", SAMPLES / "pi-v1-legacy-large-session.jsonl"),
    ("claude-code", FIXTURES / "interop" / "claude-rewind-compact.jsonl"),
    ("codex", FIXTURES / "interop" / "codex-compacted.jsonl"),
    ("pi", FIXTURES / "interop" / "pi-v3-tree.jsonl"),
    ("claude-code", FIXTURES / "claude21" / "streamed-tool-results.jsonl"),
    ("codex", FIXTURES / "codex15" / "rollout-usage-after-output.jsonl"),
    ("pi", FIXTURES / "pi1" / "legacy-compaction-index.jsonl"),
    ("gemini-cli", FIXTURES / "gemini" / "session-2026-03-02T10-00-4f1c2b9e.jsonl"),
]


def imported(source: str, src: Path, root: Path) -> list[Path]:
    """Import a finished copy of ``src``; its sessions, the main one first."""
    if not src.exists():  # pragma: no cover - the shared samples are on every machine here
        pytest.skip(f"{src} is not here")
    copy = root / "src" / src.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, copy)
    past = time.time() - 7200
    os.utime(copy, (past, past))
    report = import_file(source, copy, root / "out")
    assert report.status == "imported", report.error
    return [Path(s) for s in report.sessions]


def both(path: Path, **kw: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    atif = export(path, "atif", **kw)
    otel = export(path, "otel", **kw)
    return json.loads(atif.text), requests(otel.text)


@pytest.mark.parametrize(("source", "src"), REAL, ids=lambda v: getattr(v, "name", v))
def test_real_sessions_export_valid_atif_and_otlp(tmp_path: Path, source: str, src: Path) -> None:
    for path in imported(source, src, tmp_path):
        atif, otel = both(path)
        assert atif_errors(atif) == [], path
        assert otel_errors(otel) == [], path
        for sub in atif.get("subagent_trajectories", ()):
            assert sub["session_id"] != atif["session_id"]
        # every model response is one agent step and one inference span
        responses = [
            i
            for i in fold.messages(path, all_versions=True)["messages"]
            if i["type"] == "assistant/message" and i["status"] in ("current", "compacted")
        ]
        own = [i for i in responses if "session" not in i]
        agent_steps = [s for s in atif["steps"] if s["source"] == "agent"]
        assert len(agent_steps) == len(responses)
        chats = [s for s in spans(otel) if s["name"].startswith("chat")]
        assert len(chats) == len(own)


def test_native_session_with_every_kind_of_content(tmp_path: Path) -> None:
    path = build(tmp_path / "demo.jsonl")
    atif, otel = both(path)
    assert atif_errors(atif) == [] and otel_errors(otel) == []
    steps = atif["steps"]
    assert steps[0] == {
        "step_id": 1,
        "timestamp": "2025-11-30T00:00:00.000Z",
        "source": "system",
        "message": "You are a careful coding agent.",
        "extra": {"jsonltape": {"request_header": True}},
    }
    user = steps[1]
    assert user["message"][1] == {
        "type": "image",
        "source": {"media_type": "image/png", "path": "https://example.com/shot.png"},
    }
    agent = steps[2]
    assert agent["reasoning_content"] == "Read it first."
    assert agent["extra"]["jsonltape"]["signatures"] == ["sig"]
    assert agent["metrics"]["prompt_tokens"] == 812 and agent["metrics"]["completion_tokens"] == 31
    assert agent["observation"]["results"][0]["source_call_id"] == "call-1"
    failing = next(
        s for s in steps if any(c["tool_call_id"] == "call-2" for c in s.get("tool_calls", ()))
    )
    res = failing["observation"]["results"][0]
    assert res["extra"]["jsonltape"]["is_error"] is True
    assert res["extra"]["jsonltape"]["error"] == {"code": "EXIT_1", "message": "exit status 1"}
    assert json.loads(res["content"]) == {"stdout": "1 failed", "exit": 1}
    summary = next(
        s for s in steps if s.get("extra", {}).get("jsonltape", {}).get("compaction_summary")
    )
    assert summary["message"][0]["text"].startswith("Asked why the migration fails")
    assert summary["message"][1]["text"].startswith("### Files touched")  # the ledger part
    assert atif["final_metrics"] == {
        "total_prompt_tokens": 812,
        "total_completion_tokens": 31,
        "total_steps": len(steps),
    }
    # OpenTelemetry: the failing tool call is an error span; usage on its inference span
    by_name = {s["name"]: s for s in spans(otel)}
    bash = by_name["execute_tool Bash"]
    assert bash["status"] == {"code": 2, "message": "exit status 1"}
    assert attributes(bash)["error.type"] == "EXIT_1"
    read = attributes(by_name["execute_tool Read"])
    assert read["gen_ai.tool.call.result"] == "ALTER TABLE users ADD email TEXT NOT NULL; -- ```"
    assert json.loads(read["gen_ai.tool.call.arguments"]) == {"file_path": "migrations/0042.sql"}
    first = attributes(next(s for s in spans(otel) if s["name"] == "chat gpt-5"))
    assert first["gen_ai.usage.input_tokens"] == 812 and first["gen_ai.usage.output_tokens"] == 31
    out = json.loads(first["gen_ai.output.messages"])
    assert out[0]["finish_reason"] == "tool_call"
    assert out[0]["parts"][0] == {
        "type": "reasoning",
        "content": "Read it first.",
        "signature": "sig",
    }
    shot = json.loads(first["gen_ai.input.messages"])[0]["parts"][1]
    assert shot == {"type": "uri", "uri": "https://example.com/shot.png", "modality": "image"}


def test_each_inference_span_reads_the_history_the_model_saw(tmp_path: Path) -> None:
    """``gen_ai.input.messages`` of the span of a response at seq S is the fold as of S-1
    (``messages --at``), in the conventions' shape: a compaction shows as its summary."""
    path = build(tmp_path / "demo.jsonl")
    with jsonltape.open(path, durability="manual") as tape, tape.turn():
        tape.assistant("You're welcome.", model="gpt-5", id="a5")  # reads the compacted history
    otel = requests(export(path, "otel").text)
    responses = [e.seq for e in jsonltape.read(path) if e.type == "assistant/message"]
    chats = {s["spanId"]: attributes(s) for s in spans(otel) if s["name"].startswith("chat")}
    assert len(chats) == len(responses) == 5
    summaries = 0
    for seq in responses:
        got = json.loads(chats[span_id("demo-export", f"chat/{seq}")]["gen_ai.input.messages"])
        want = [
            {"role": i["message"]["role"], "parts": i["message"]["parts"]}
            for i in fold.messages(path, at=seq - 1)["messages"]
        ]
        for message in want:  # the one part the export completes: a modality
            for p in message["parts"]:
                if p["type"] == "uri":
                    p["modality"] = "image"
        assert got == want, seq
        summaries += any("Asked why the migration fails" in json.dumps(m) for m in got)
    assert summaries == 1  # only the last call came after the compaction


def test_exports_are_byte_identical_and_ids_derive_from_the_session(tmp_path: Path) -> None:
    path = build(tmp_path / "a" / "demo.jsonl")
    other = tmp_path / "b" / "copy.jsonl"
    other.parent.mkdir()
    shutil.copyfile(path, other)
    for fmt in ("atif", "otel"):
        first = export(path, fmt).text  # type: ignore[arg-type]
        assert export(path, fmt).text == first  # type: ignore[arg-type]
        assert export(other, fmt).text == first  # type: ignore[arg-type]
    otel = requests(export(path, "otel").text)
    all_spans = spans(otel)
    assert {s["traceId"] for s in all_spans} == {trace_id("demo-export")}
    keys = {"session"} | {f"turn/{e.seq}" for e in jsonltape.read(path) if e.type == "turn/start"}
    keys |= {f"chat/{e.seq}" for e in jsonltape.read(path) if e.type == "assistant/message"}
    keys |= {"tool/call-1", "tool/call-2"}
    assert {s["spanId"] for s in all_spans} == {span_id("demo-export", k) for k in keys}


def test_what_each_format_cannot_carry_is_listed(tmp_path: Path) -> None:
    """A session with a revision, a retraction, a prune, a compaction, a todo list, turns and a
    message no model call read: each format names what it drops, on stderr (one line) and in
    its document."""
    path = build(tmp_path / "demo.jsonl")
    with jsonltape.open(path, durability="manual") as tape, tape.turn():
        u4 = tape.user("Try another approach", id="u4")
        a6 = tape.assistant("Approach A", model="gpt-5", id="a6")
        tape.append("todo/write", {"todos": [{"content": "try B", "status": "pending"}]})
    revised = fold.revise(path, a6.seq, "Approach A, revised")[-1]
    fold.retract(path, u4.seq, revised.seq)  # the branch is abandoned
    with jsonltape.open(path, durability="manual") as tape, tape.turn():
        tape.user("Prune and go on", id="u5")
        tape.assistant("Going on.", model="gpt-5", id="a7")
    last_result = [e.seq for e in jsonltape.read(path) if e.type == "tool/result"][-1]
    fold.prune(path, last_result)
    atif = export(path, "atif")
    otel = export(path, "otel")
    atif_dropped = json.loads(atif.text)["extra"]["jsonltape"]["dropped"]
    assert atif_dropped == {
        "earlier versions of revised messages": 1,
        "retracted messages (abandoned branches)": 2,
        "compaction boundaries (the summary is a step, not what it replaced)": 1,
        "prune records": 1,
        "turn boundaries": 5,
        "todo lists": 1,
    }
    otel_doc = requests(otel.text)
    root = attributes(root_span(otel_doc))
    assert json.loads(root["jsonltape.dropped"]) == {
        "earlier versions of revised messages": 1,
        "retracted messages (abandoned branches)": 2,
        "messages no model call read": 1,  # the prune stub: no call came after it
        "compaction records": 1,
        "prune records": 1,
        "todo lists": 1,
    }
    otel_dropped = json.loads(root["jsonltape.dropped"])
    for fmt, out, dropped in (("atif", atif, atif_dropped), ("otel", otel, otel_dropped)):
        words = ", ".join(f"{k} ({n})" for k, n in dropped.items())
        assert out.notes == [f"{path}: {fmt} cannot carry: {words}"]
        if fmt == "atif":
            assert json.loads(out.text)["notes"] == f"atif cannot carry: {words}"
    assert atif_errors(json.loads(atif.text)) == [] and otel_errors(otel_doc) == []


def test_sidechains_are_embedded_sub_agents_and_linked_spans(tmp_path: Path) -> None:
    """Claude Code's Task sub-agents (sidechains, imported as sessions beside the main one):
    ATIF embeds them and references each from the result of the Task call that spawned it;
    each sub-agent's trace links to its parent's root span and to that call's span."""
    main, *sides = imported(
        "claude-code", SAMPLES / "claude-code-v1.0.108-japanese.jsonl", tmp_path
    )
    assert len(sides) == 2
    atif = json.loads(export(main, "atif").text)
    assert atif_errors(atif) == []
    embedded = {t["trajectory_id"]: t for t in atif["subagent_trajectories"]}
    side_ids = {jsonltape.header(s).id for s in sides}
    assert set(embedded) == side_ids
    refs = {}
    for step in atif["steps"]:
        for call in step.get("tool_calls", ()):
            for res in step.get("observation", {}).get("results", ()):
                if (
                    res["source_call_id"] == call["tool_call_id"]
                    and "subagent_trajectory_ref" in res
                ):
                    refs[call["tool_call_id"]] = res["subagent_trajectory_ref"][0]["trajectory_id"]
                    assert call["function_name"] == "Task"
    spawned = {
        jsonltape.header(s).meta["import"]["spawned_by"]: jsonltape.header(s).id for s in sides
    }
    assert refs == spawned
    for sid, sub in embedded.items():
        alone = json.loads(
            export(next(s for s in sides if jsonltape.header(s).id == sid), "atif").text
        )
        assert sub["steps"] == alone["steps"]  # the same trajectory as exported on its own
    parent = requests(export(main, "otel").text)
    parent_ids = {s["spanId"] for s in spans(parent)}
    main_id = jsonltape.header(main).id
    for side in sides:
        child = requests(export(side, "otel").text)
        assert otel_errors(child) == []
        root = root_span(child)
        links = {attributes(link)["jsonltape.link"]: link for link in root["links"]}
        assert set(links) == {"parent", "spawned_by"}
        for link in links.values():
            assert link["traceId"] == trace_id(main_id) and link["spanId"] in parent_ids
        call = jsonltape.header(side).meta["import"]["spawned_by"]
        assert links["spawned_by"]["spanId"] == span_id(main_id, f"tool/{call}")


def test_a_fork_carries_its_inherited_history_as_copied_context(tmp_path: Path) -> None:
    base = FIXTURES / "fold" / "fork-of-fork-then-merge"
    for name in ("session.jsonl", "fork1.jsonl", "fork2.jsonl"):
        shutil.copyfile(base / name, tmp_path / name)
    fork = tmp_path / "fork2.jsonl"
    hdr = jsonltape.header(fork)
    assert hdr.parent is not None
    atif, otel = both(fork)
    assert atif_errors(atif) == [] and otel_errors(otel) == []
    inherited = [i for i in fold.messages(fork)["messages"] if "session" in i]
    copied = [s for s in atif["steps"] if s.get("is_copied_context")]
    steps = [i for i in inherited if i["type"] != "tool/result"]  # results are observations
    assert len(copied) == len(steps) > 0 and len(steps) < len(inherited)
    assert [s["extra"]["jsonltape"]["session"] for s in copied] == [i["session"] for i in steps]
    link = root_span(otel)["links"][0]
    assert link["spanId"] == span_id(hdr.parent.session, "session")
    assert attributes(link)["jsonltape.parent.seq"] == hdr.parent.seq
    # the parent embeds its forks (forks of forks too), each once
    top = json.loads(export(tmp_path / "session.jsonl", "atif").text)
    assert atif_errors(top) == []
    ids = [t["trajectory_id"] for t in top["subagent_trajectories"]]
    assert sorted(ids) == sorted(
        {jsonltape.header(tmp_path / n).id for n in ("fork1.jsonl", "fork2.jsonl")}
    )


def test_atif_round_trip_keeps_every_text_call_result_and_token(tmp_path: Path) -> None:
    """What survives ATIF, checked against the neutral fold of real sessions: every message's
    text, reasoning, tool calls (id, name, arguments) with their results, and token counts.
    (No ATIF importer: what it would give back is exactly this; see the README.)"""
    for source, src in REAL[:6]:
        for path in imported(source, src, tmp_path / src.stem):
            atif = json.loads(export(path, "atif").text)
            shown = [
                i
                for i in fold.messages(path, all_versions=True)["messages"]
                if i["status"] in ("current", "compacted")
            ]
            steps = [s for s in atif["steps"] if "seq" in s.get("extra", {}).get("jsonltape", {})]
            by_seq = {
                (s["extra"]["jsonltape"].get("session"), s["extra"]["jsonltape"]["seq"]): s
                for s in steps
            }
            results = {
                (r["extra"]["jsonltape"].get("session"), r["extra"]["jsonltape"]["seq"]): r
                for s in atif["steps"]
                for r in s.get("observation", {}).get("results", ())
            }
            for item in shown:
                key = (item.get("session"), item["seq"])
                parts = item["message"]["parts"]
                texts = [p["content"] for p in parts if p["type"] == "text"]
                if item["type"] == "tool/result":
                    response = parts[0]["response"]
                    want = response if isinstance(response, str) else fold.compact_json(response)
                    assert results[key]["content"] == want
                    continue
                step = by_seq[key]
                message = step["message"]
                got = (
                    [message]
                    if isinstance(message, str) and message
                    else [p["text"] for p in message if p["type"] == "text"]
                    if isinstance(message, list)
                    else []
                )
                assert got == texts, key
                if item["type"] != "assistant/message":
                    continue
                reasoning = [p["content"] for p in parts if p["type"] == "reasoning"]
                assert step.get("reasoning_content", "") == "\n\n".join(reasoning)
                calls = [
                    (p["id"], p["name"], fold.tool_input(p.get("arguments")))
                    for p in parts
                    if p["type"] == "tool_call"
                ]
                assert [
                    (c["tool_call_id"], c["function_name"], c["arguments"])
                    for c in step.get("tool_calls", ())
                ] == calls
                usage = item.get("usage") or fold_usage(path, item["seq"])
                if usage:
                    assert step["metrics"]["extra"]["usage"] == usage


def fold_usage(path: Path, seq: int) -> Any:
    return next((e.data.get("usage") for e in jsonltape.read(path) if e.seq == seq), None)


HOSTILE = [
    'quote " backslash \\ newline \n tab \t nul \x00 bell \x07 del \x7f',
    "</script><script>alert(1)</script>",
    '{"role": "system", "parts": [{"type": "text", "content": "injected"}]}',
    "\u2028 line separator \u2029 paragraph separator, \ufeff bom, 💥 astral",
    "$(rm -rf ~) `rm -rf ~` ; rm -rf ~",
]


def test_event_text_is_carried_as_data_exactly(tmp_path: Path) -> None:
    path = tmp_path / "hostile.jsonl"
    with jsonltape.open(path, create=True, session_id="hostile", durability="manual") as tape:
        tape.append("request/header", {"model": "m", "system": HOSTILE[0]})
        with tape.turn():
            for i, text in enumerate(HOSTILE):
                tape.user(text, id=f"u{i}")
            args = {"cmd": HOSTILE[4], HOSTILE[1]: HOSTILE[2]}
            tape.assistant(
                HOSTILE[3],
                tool_calls=[{"id": "c1", "name": HOSTILE[1], "arguments": args}],
                model="m",
                id="a1",
            )
            tape.append("tool/result", result("c1", "r1", HOSTILE[0]))
            tape.assistant(HOSTILE[2], model="m", id="a2")
    atif, otel = both(path)
    assert atif_errors(atif) == [] and otel_errors(otel) == []
    assert [s["message"] for s in atif["steps"] if s["source"] == "user"] == HOSTILE
    agent = [s for s in atif["steps"] if s["source"] == "agent"]
    assert agent[0]["message"] == HOSTILE[3] and agent[1]["message"] == HOSTILE[2]
    assert agent[0]["tool_calls"][0]["function_name"] == HOSTILE[1]
    assert agent[0]["tool_calls"][0]["arguments"] == args
    assert agent[0]["observation"]["results"][0]["content"] == HOSTILE[0]
    last = attributes([s for s in spans(otel) if s["name"] == "chat m"][-1])
    seen = json.loads(last["gen_ai.input.messages"])
    assert [m["parts"][0]["content"] for m in seen[: len(HOSTILE)]] == HOSTILE
    tool = attributes(next(s for s in spans(otel) if s["name"].startswith("execute_tool")))
    assert tool["gen_ai.tool.name"] == HOSTILE[1]
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == args
    assert tool["gen_ai.tool.call.result"] == HOSTILE[0]
    system = json.loads(last["gen_ai.system_instructions"])
    assert system == [{"type": "text", "content": HOSTILE[0]}]


def test_the_checkers_find_what_the_standards_forbid(tmp_path: Path) -> None:
    """Each rule the checkers apply catches a document that breaks it (they can fail)."""
    path = build(tmp_path / "demo.jsonl")
    atif, otel = both(path)
    breaks = {
        "step id": lambda d: d["steps"][1].update(step_id=7),
        "agent-only field": lambda d: d["steps"][1].update(model_name="m"),
        "unknown call": lambda d: d["steps"][2]["observation"]["results"][0].update(
            source_call_id="zz"
        ),
        "bad time": lambda d: d["steps"][1].update(timestamp="yesterday"),
        "schema": lambda d: d.update(surprise=1),
        "image type": lambda d: d["steps"][1]["message"][1]["source"].update(
            media_type="image/bmp"
        ),
        "no llm": lambda d: d["steps"][2].update(llm_call_count=0),
    }
    for name, spoil in breaks.items():
        doc = json.loads(json.dumps(atif))
        spoil(doc)
        assert atif_errors(doc), name

    def chat(d: list[dict[str, Any]]) -> dict[str, Any]:
        return next(s for s in spans(d) if s["name"].startswith("chat"))

    def set_attr(d: list[dict[str, Any]], key: str, value: Any) -> None:
        for a in chat(d)["attributes"]:
            if a["key"] == key:
                a["value"] = {"stringValue": json.dumps(value)}

    blob = [
        {"role": "user", "parts": [{"type": "blob", "content": "AAAA", "mime_type": "image/png"}]}
    ]
    spans_breaks = {
        "short span id": lambda d: chat(d).update(spanId="abcd"),
        "lost parent": lambda d: chat(d).update(parentSpanId="0123456789abcdef"),
        "time order": lambda d: chat(d).update(startTimeUnixNano="99999999999999999999"),
        "not protobuf": lambda d: chat(d).update(kind="SIDEWAYS"),
        "blob without modality": lambda d: set_attr(d, "gen_ai.input.messages", blob),
        "no finish reason": lambda d: set_attr(
            d, "gen_ai.output.messages", [{"role": "assistant", "parts": []}]
        ),
    }
    for name, spoil in spans_breaks.items():
        docs = json.loads(json.dumps(otel))
        spoil(docs)
        assert otel_errors(docs), name


def test_cli_writes_the_file_private_and_one_note(tmp_path: Path) -> None:
    path = build(tmp_path / "demo.jsonl")
    for fmt in ("atif", "otel"):
        out = tmp_path / f"demo.{fmt}"
        run = subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "jsonltape",
                "export",
                str(path),
                "--format",
                fmt,
                "-o",
                str(out),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout == ""
        assert run.stderr.count("\n") == 1 and run.stderr.startswith(
            f"jsonltape: note: {path}: {fmt} cannot carry: "
        )
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert out.read_text() == export(path, fmt).text  # type: ignore[arg-type]


def test_the_otlp_trace_is_written_a_span_at_a_time(tmp_path: Path) -> None:
    """Its size grows with calls times history, so it is streamed: ``export_to`` gives each
    finished span to the writer as its own line, and the largest line is one call's history,
    not the trace (the CLI writes them to stdout or the file as they come)."""
    path = tmp_path / "long.jsonl"
    calls = 60
    with jsonltape.open(path, create=True, session_id="long", durability="manual") as tape:
        for i in range(calls):
            with tape.turn():
                tape.user(f"question {i} " + "x" * 200, id=f"u{i}")
                tape.assistant(f"answer {i}", model="m", id=f"a{i}")
    chunks: list[str] = []
    done = export_to(chunks.append, path, "otel")
    assert done.text == "" and done.notes == []
    assert len(chunks) == 1 + 2 * calls  # the root, and a turn and a chat span per call
    total = sum(map(len, chunks))
    assert max(map(len, chunks)) < total / 20
    assert "".join(chunks) == export(path, "otel").text
    assert otel_errors(requests("".join(chunks))) == []


def test_sub_agent_files_of_a_session_are_embedded_too(tmp_path: Path) -> None:
    """Claude Code's own sub-agent files (``agent-*.jsonl``, one sidechain each, imported as a
    session whose ``meta.import.sidechain_of`` is the main session): found beside the main
    session and embedded, referenced from a last system step (the file does not say which
    call spawned it)."""
    lines = (SAMPLES / "claude-code-v1.0.108-japanese.jsonl").read_text().splitlines(True)
    side = [ln for ln in lines if json.loads(ln).get("isSidechain") is True]
    main = [ln for ln in lines if json.loads(ln).get("isSidechain") is not True]
    src = tmp_path / "src"
    src.mkdir()
    (src / "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl").write_text("".join(main))
    (src / "agent-6340ddef.jsonl").write_text("".join(side))
    past = time.time() - 7200
    for f in src.iterdir():
        os.utime(f, (past, past))
    sessions = {}
    for f in sorted(src.iterdir()):
        report = import_file("claude-code", f, tmp_path / "out")
        assert report.status == "imported", report.error
        sessions[f.name] = Path(report.sessions[0])
    agent = sessions["agent-6340ddef.jsonl"]
    assert jsonltape.header(agent).parent is None
    atif = json.loads(export(sessions["5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"], "atif").text)
    assert atif_errors(atif) == []
    assert [t["trajectory_id"] for t in atif["subagent_trajectories"]] == [
        jsonltape.header(agent).id
    ]
    last = atif["steps"][-1]
    assert last["source"] == "system"
    ref = last["observation"]["results"][0]["subagent_trajectory_ref"][0]
    assert ref["trajectory_id"] == jsonltape.header(agent).id


def test_a_damaged_sub_agent_session_is_left_out_and_counted(tmp_path: Path) -> None:
    base = FIXTURES / "fold" / "fork-of-fork-then-merge"
    for name in ("session.jsonl", "fork1.jsonl", "fork2.jsonl"):
        shutil.copyfile(base / name, tmp_path / name)
    raw = (tmp_path / "fork2.jsonl").read_bytes().splitlines(True)
    flipped = raw[2].replace(b'"seq":2', b'"seq":2 ', 1)  # its crc no longer matches
    assert flipped != raw[2] and any(b"session/flush" in ln for ln in raw[3:])
    (tmp_path / "fork2.jsonl").write_bytes(b"".join([*raw[:2], flipped, *raw[3:]]))
    out = export(tmp_path / "session.jsonl", "atif")
    doc = json.loads(out.text)
    assert atif_errors(doc) == []
    assert [t["trajectory_id"] for t in doc["subagent_trajectories"]] == [
        jsonltape.header(tmp_path / "fork1.jsonl").id
    ]
    assert doc["extra"]["jsonltape"]["dropped"]["sub-agent sessions that could not be read"] == 1
    assert "sub-agent sessions that could not be read (1)" in out.notes[0]
