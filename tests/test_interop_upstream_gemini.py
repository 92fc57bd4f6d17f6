"""Gemini CLI recordings as current Gemini CLI writes them (google-gemini/gemini-cli
packages/core/src/services/chatRecordingService.ts, core/geminiChat.ts at 5411f113).

Hand-written from the upstream writer: each tool response the CLI sends is recorded as a
``user`` message of ``functionResponse`` parts (``recordSyntheticMessage``, "to ensure durable
ID and linear history for resume"), after the ``gemini`` record whose ``toolCalls`` carry the
result; ``updateMessagesFromHistory`` appends ``{"$set": {"messages": [...]}}`` when the
history changes in memory (a compression puts a summary turn and an acknowledgement first, a
masking rewrites tool outputs), and ``loadConversationRecord`` clears its messages and rebuilds
them from that list.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import fold
from jsonltape.fold._valid import check_anthropic, check_openai
from jsonltape.interop import import_file

from .helpers import import_finished, openai_surface

SESSION = "8c2d4e6f-1a3b-4c5d-8e7f-9a0b1c2d3e4f"
CALL = "run_shell_command-1790000000000-abc123"


def _meta() -> dict[str, Any]:
    return {
        "sessionId": SESSION,
        "projectHash": "ab" * 32,
        "startTime": "2026-11-20T10:00:00.000Z",
        "lastUpdated": "2026-11-20T10:00:00.000Z",
    }


def _user(mid: str, text: str) -> dict[str, Any]:
    return {
        "id": mid,
        "timestamp": "2026-11-20T10:00:01.000Z",
        "type": "user",
        "content": [{"text": text}],
    }


def _gemini(mid: str, text: str, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": mid,
        "timestamp": "2026-11-20T10:00:02.000Z",
        "type": "gemini",
        "content": text,
        "model": "gemini-3-pro",
    }
    if calls is not None:
        rec["toolCalls"] = calls
    return rec


def _response(output: str) -> dict[str, Any]:
    return {
        "functionResponse": {
            "id": CALL,
            "name": "run_shell_command",
            "response": {"output": output},
        }
    }


def _call(output: str) -> dict[str, Any]:
    return {
        "id": CALL,
        "name": "run_shell_command",
        "args": {"command": "ls"},
        "status": "success",
        "timestamp": "2026-11-20T10:00:03.000Z",
        "result": [_response(output)],
    }


def _tool_turn() -> list[dict[str, Any]]:
    """A prompt, a reply that runs a tool, the recorded tool response, the final reply."""
    synthetic = {
        "id": "t-1",
        "timestamp": "2026-11-20T10:00:04.000Z",
        "type": "user",
        "content": [_response("a.txt\nb.txt")],
    }
    return [
        _meta(),
        _user("u-1", "list the files"),
        _gemini("g-1", "Listing.", []),
        _gemini("g-1", "Listing.", [_call("a.txt\nb.txt")]),
        synthetic,
        _gemini("g-2", "There are two files."),
    ]


def _import_any(tmp: Path, records: list[dict[str, Any]]) -> Any:
    """The import of ``records`` as a finished recording, whatever it reports."""
    src = tmp / "src" / "session-2026-11-20T10-00-8c2d4e6f.jsonl"
    text = "".join(json.dumps(r) + "\n" for r in records)
    return import_finished("gemini-cli", src, text, tmp / "root")


def _import(tmp: Path, records: list[dict[str, Any]]) -> tuple[Path, Any]:
    report = _import_any(tmp, records)
    assert report.problems == [] and report.unknown == {}
    return Path(report.sessions[0]), report


_surface = openai_surface


def test_a_recorded_tool_response_is_not_a_prompt_and_opens_no_turn(tmp_path: Path) -> None:
    path, _ = _import(tmp_path, _tool_turn())
    assert _surface(path) == [
        ("user", "list the files"),
        ("assistant", "Listing."),
        ("tool", "a.txt\nb.txt"),
        ("assistant", "There are two files."),
    ]
    events = list(jsonltape.read(path))
    assert [e.type for e in events].count("turn/start") == 1
    assert [e.data["reason"] for e in events if e.type == "turn/end"] == ["completed"]


def test_a_tool_response_recorded_before_its_result_gives_the_result(tmp_path: Path) -> None:
    records = _tool_turn()
    del records[3]  # the call's record never got its result: the response carries it
    records[2] = _gemini("g-1", "Listing.", [{**_call("x"), "result": None, "status": "executing"}])
    path, _ = _import(tmp_path, records)
    assert ("tool", "a.txt\nb.txt") in _surface(path)
    results = [e for e in jsonltape.read(path) if e.type == "tool/result"]
    assert [r.data.get("synthetic") for r in results] == [None]


def test_a_compression_checkpoint_rebuilds_the_surface_from_its_list(tmp_path: Path) -> None:
    records = _tool_turn()
    summary = _user("s-1", "<state_snapshot>listed two files</state_snapshot>")
    ack = _gemini("s-2", "Got it. Thanks for the additional context!")
    records.append({"$set": {"messages": [summary, ack], "lastUpdated": "2026-11-20T10:01:00Z"}})
    records += [_user("u-2", "and now?"), _gemini("g-3", "Nothing else.")]
    path, _ = _import(tmp_path, records)
    assert _surface(path) == [
        ("user", "<state_snapshot>listed two files</state_snapshot>"),
        ("assistant", "Got it. Thanks for the additional context!"),
        ("user", "and now?"),
        ("assistant", "Nothing else."),
    ]
    retracts = [e.data["reason"] for e in jsonltape.read(path) if e.type == "surface/retract"]
    assert retracts == ["checkpoint"]


def test_a_masking_checkpoint_replaces_the_tool_output_the_model_sees(tmp_path: Path) -> None:
    records = _tool_turn()
    masked = "<tool_output_masked>"
    kept = [
        records[1],
        _gemini("g-1", "Listing.", [_call(masked)]),
        {**records[4], "content": [_response(masked)]},
        records[5],
    ]
    records.append({"$set": {"messages": kept}})
    path, _ = _import(tmp_path, records)
    assert _surface(path) == [
        ("user", "list the files"),
        ("assistant", "Listing."),
        ("tool", masked),
        ("assistant", "There are two files."),
    ]


def test_an_unchanged_checkpoint_changes_nothing(tmp_path: Path) -> None:
    records = _tool_turn()
    history = [records[1], records[3], records[4], records[5]]
    records.append({"$set": {"messages": history}})
    path, _ = _import(tmp_path, records)
    events = list(jsonltape.read(path))
    assert not [e for e in events if e.type == "surface/retract"]
    assert [e.data["kind"] for e in events if e.type == "import/raw"][-1] == "$set"


def test_a_rewind_to_a_recorded_tool_response_keeps_the_call_and_its_result(
    tmp_path: Path,
) -> None:
    records = _tool_turn() + [{"$rewindTo": "t-1"}]
    path, _ = _import(tmp_path, records)
    assert _surface(path) == [
        ("user", "list the files"),
        ("assistant", "Listing."),
        ("tool", "a.txt\nb.txt"),
    ]


def test_binary_data_a_tool_returned_reaches_the_model_from_its_info_record(
    tmp_path: Path,
) -> None:
    records = _tool_turn()
    ack = {
        **_gemini("g-ack", ""),
        "content": [{"text": "Binary content received.", "thought": True}],
    }
    image = {
        "id": "i-1",
        "timestamp": "2026-11-20T10:00:05.000Z",
        "type": "info",
        "content": [{"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}],
    }
    records[5:5] = [ack, image]  # after the tool response, before the final reply
    records.insert(
        1,
        {
            "id": "note-1",
            "timestamp": "2026-11-20T10:00:00.500Z",
            "type": "info",
            "content": "Logged in with Google.",
        },
    )  # a note for the user only
    path, _ = _import(tmp_path, records)
    items = [i["message"] for i in fold.messages(path)["messages"]]
    assert [m["role"] for m in items] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert items[4]["parts"] == [
        {"type": "blob", "content": "iVBORw0KGgo=", "mime_type": "image/png", "modality": "image"}
    ]


def test_a_rewind_to_a_note_for_the_user_drops_only_what_follows_it(tmp_path: Path) -> None:
    records = _tool_turn()
    records.insert(
        5,
        {
            "id": "note-2",
            "timestamp": "2026-11-20T10:00:04.500Z",
            "type": "info",
            "content": "Request cancelled.",
        },
    )
    records.append({"$rewindTo": "note-2"})
    path, _ = _import(tmp_path, records)
    assert _surface(path) == [
        ("user", "list the files"),
        ("assistant", "Listing."),
        ("tool", "a.txt\nb.txt"),
    ]


def test_a_checkpointed_recording_imported_at_each_line_folds_like_one_import(
    tmp_path: Path,
) -> None:
    """Tool responses, a compression checkpoint and a rewind, imported after every line (the
    source still open), give the history of one import of the finished file, with bodies the
    providers accept at every step."""
    records = _tool_turn()
    summary = _user("s-1", "<state_snapshot>listed two files</state_snapshot>")
    records.append({"$set": {"messages": [summary, _gemini("s-2", "Got it.")]}})
    records += [_user("u-2", "and now?"), _gemini("g-3", "Nothing else."), {"$rewindTo": "u-2"}]
    records += [_user("u-3", "bye"), _gemini("g-4", "Bye.")]
    whole, _ = _import(tmp_path / "whole", records)
    src = tmp_path / "grow" / "session-2026-11-20T10-00-8c2d4e6f.jsonl"
    src.parent.mkdir(parents=True)
    path = None
    for i in range(1, len(records) + 1):
        src.write_text("".join(json.dumps(r) + "\n" for r in records[:i]))
        report = import_file("gemini-cli", src, tmp_path / "grow-root", settle=None)
        assert report.status in ("imported", "unchanged"), report.error
        path = Path(report.sessions[0])
        assert check_openai(fold.messages(path, format="openai")) == []
        assert check_anthropic(fold.messages(path, format="anthropic")) == []
    past = time.time() - 7200
    os.utime(src, (past, past))
    report = import_file("gemini-cli", src, tmp_path / "grow-root")
    assert path is not None and report.problems == []
    assert _surface(path) == _surface(whole)


def test_a_resume_sync_that_only_reshapes_contents_changes_nothing(tmp_path: Path) -> None:
    """On resume Gemini CLI syncs the history it rebuilt: each reply's content becomes the
    model's parts (thoughts and calls beside the text), which give the history nothing new."""
    records = _tool_turn()
    call = {"functionCall": {"id": CALL, "name": "run_shell_command", "args": {"command": "ls"}}}
    first = {
        **records[3],
        "content": [{"text": "plan", "thought": True}, {"text": "Listing."}, call],
    }
    last = {**records[5], "content": [{"text": "There are two files."}]}
    records.append({"$set": {"messages": [records[1], first, records[4], last]}})
    path, _ = _import(tmp_path, records)
    events = list(jsonltape.read(path))
    assert not [e for e in events if e.type == "surface/retract"]
    assert len(_surface(path)) == 4


@pytest.mark.parametrize("drop", ["rewind", "checkpoint"])
def test_dropping_the_record_of_a_calls_only_result_voids_it_and_drops_the_rest(
    tmp_path: Path, drop: str
) -> None:
    # The call's record has no result of its own (still executing when it was written): the
    # tool response record t-1 is its only result. Gemini CLI's history after a rewind to t-1
    # (or a checkpoint without it) holds the call without a response and no reply after it.
    t = _tool_turn()
    open_call = _gemini("g-1", "Listing.", [{**_call("x"), "result": None, "status": "executing"}])
    base = [t[0], t[1], open_call, t[4], t[5]]
    last = {"$rewindTo": "t-1"} if drop == "rewind" else {"$set": {"messages": [t[1], open_call]}}
    path, _report = _import(tmp_path, [*base, last])
    surface = _surface(path)
    assert [role for role, _ in surface] == ["user", "assistant", "tool"]
    assert surface[2][1] == f"the session's {drop} dropped this tool result"
    assert "There are two files." not in str(surface)


def _open_call(cid: str) -> dict[str, Any]:
    return {"id": cid, "name": "run_shell_command", "args": {"command": "ls"},
            "status": "executing", "result": None}  # fmt: skip


def _answer(cid: str, out: str) -> dict[str, Any]:
    return {
        "functionResponse": {"id": cid, "name": "run_shell_command", "response": {"output": out}}
    }


def test_a_rewind_over_parallel_calls_voids_every_result_it_drops(
    tmp_path: Path,
) -> None:
    t1 = {"id": "t-1", "timestamp": "2026-11-20T10:00:04.000Z", "type": "user",
          "content": [_answer("A", "ra"), _answer("B", "rb")]}  # fmt: skip
    records = [
        _meta(),
        _user("u-1", "list"),
        _gemini("g-1", "Listing.", [_open_call("A"), _open_call("B")]),
        t1,
        _gemini("g-2", "Done."),
        {"$rewindTo": "t-1"},
    ]
    path, _report = _import(tmp_path, records)
    dropped = "the session's rewind dropped this tool result"
    assert _surface(path)[2:] == [("tool", dropped), ("tool", dropped)]  # no "Done.", no "rb"


def test_a_response_sent_again_after_a_rewind_is_the_calls_result_again(tmp_path: Path) -> None:
    t = _tool_turn()
    open_call = _gemini("g-1", "Listing.", [{**_call("x"), "result": None, "status": "executing"}])
    again = {**t[4], "id": "t-2"}
    path, _report = _import(
        tmp_path,
        [t[0], t[1], open_call, t[4], t[5], {"$rewindTo": "t-1"}, again, _gemini("g-3", "ok")],
    )
    assert _surface(path)[2:] == [("tool", "a.txt\nb.txt"), ("assistant", "ok")]


def test_a_checkpoint_the_surface_refuses_to_cut_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A surface that refuses every retraction (no recording found here makes the real rules
    # refuse one: the branch is forced): the checkpoint is reported and its list is not
    # mapped on top of what it could not cut (that appended "Two files, then." after "There
    # are two files.").
    from jsonltape.errors import SurfaceError
    from jsonltape.interop.gemini import GeminiMapper

    refused = SurfaceError("refused")
    monkeypatch.setattr(GeminiMapper, "refusal", staticmethod(lambda out, nodes: refused))
    t = _tool_turn()
    changed = _gemini("g-2", "Two files, then.")
    records = [*t, {"$set": {"messages": [t[1], t[3], t[4], changed]}}]
    report = _import_any(tmp_path, records)
    assert [p for _n, p in report.problems] == [
        "checkpoint: the surface rules refuse dropping what follows"
    ]
    surface = _surface(Path(report.sessions[0]))
    assert surface[-1] == ("assistant", "There are two files.")
    assert "Two files, then." not in str(surface)
