"""Request bodies a provider accepts: the validity oracle (jsonltape/fold/_valid.py) on every
golden fold, every imported sample and fixture, random sessions, and `messages --check`.

The oracle states the providers' documented rules (sources in its docstring); the unit tests at
the end prove that each rule catches the violation it names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape import fold
from jsonltape.cli import cli as main
from jsonltape.fold._request_keys import ANTHROPIC_KEYS, OPENAI_KEYS
from jsonltape.fold._valid import check_anthropic, check_kept, check_openai
from jsonltape.interop import SOURCES, import_file
from jsonltape.interop._registry import AGENTS

from .conftest import LONG, SAMPLES
from .helpers import load_script
from .strategies import Refused, SurfaceModel, operation

FOLD = Path(__file__).parent / "fixtures" / "fold"
GOLDEN = sorted(FOLD.glob("*/*.openai.json")) + sorted(FOLD.glob("*/*.anthropic.json"))
HOUR_AGO = time.time() - 7200


FIXTURES = Path(__file__).parent / "fixtures"


def _source(path: Path) -> str | None:
    """The importer a sample or fixture is for, from its name or its folder's name: claude-…,
    codex-…, pi-… (tests/fixtures/interop, ../shared/samples), or claude21/, pi1/ and so on,
    or tests/fixtures/interop/<source>/… (a session file its importer takes there, as its
    agent declares)."""
    parts = path.parts
    for k in range(len(parts) - 1):
        if parts[k] == "interop" and parts[k + 1] in AGENTS:
            return parts[k + 1] if AGENTS[parts[k + 1]].wanted(path) else None
    for name in (path.name, path.parent.name):
        m = re.match(r"([a-z]+?)(?:-code)?(?=[-_.\d]|$)", name.lower())
        head = m.group(1) if m else ""
        source = {"claude": "claude-code", "gemini": "gemini-cli"}.get(head, head)
        if source in SOURCES:
            return source
    return None


def _agent_files() -> list[Path]:
    """Every agent session file under tests/fixtures (not the fold goldens, not exports) and in
    the read-only samples."""
    found = []
    for base in (FIXTURES, SAMPLES):
        for p in sorted(base.rglob("*")) if base.is_dir() else ():
            parts = p.relative_to(base).parts
            if not p.is_file() or parts[0] == "fold" or "export" in parts:
                continue
            if p.suffix in (".jsonl", ".json", ".db") and _source(p):
                found.append(p)
    return found


AGENT_FILES = _agent_files()


def _problems(path: Path) -> list[str]:
    items = fold.messages(path)["messages"]
    openai = fold.messages(path, format="openai")
    anthropic = fold.messages(path, format="anthropic")
    return [f"openai: {p}" for p in check_openai(openai) + check_kept(items, openai)] + [
        f"anthropic: {p}" for p in check_anthropic(anthropic) + check_kept(items, anthropic)
    ]


def _import(src: Path, tmp_path: Path) -> list[Path]:
    source = _source(src)
    assert source is not None
    copy = tmp_path / "src" / src.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, copy)
    os.utime(copy, (HOUR_AGO, HOUR_AGO))
    report = import_file(source, copy, tmp_path / "root")
    assert report.status == "imported", report.error
    return [Path(s) for s in report.sessions]


# -- every golden fold and every imported file ----------------------------------------------


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_golden_request_body_is_valid_for_its_provider(golden: Path) -> None:
    body = json.loads(golden.read_text(encoding="utf-8"))
    check = check_openai if golden.name.endswith(".openai.json") else check_anthropic
    assert check(body) == []


def test_the_suite_checks_samples_and_crafted_fixtures_of_every_agent() -> None:
    assert {_source(p) for p in AGENT_FILES} >= {"claude-code", "codex", "pi", "gemini-cli"}


@pytest.mark.parametrize("src", AGENT_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_imported_session_folds_to_request_bodies_a_provider_accepts(
    src: Path, tmp_path: Path
) -> None:
    for session in _import(src, tmp_path):
        assert _problems(session) == []


# -- defect 4: calls an errored or aborted response never got results -----------------------

_PI = [  # pi v3 session format (../shared/research/peers.md; pi's packages/ai AssistantMessage)
    {"type": "session", "version": 3, "id": "5e55i0n0-0000-4000-8000-0000000000a4",
     "timestamp": "2026-02-01T09:00:00.000Z", "cwd": "/home/ada/app"},
    {"type": "message", "id": "f0000001", "parentId": None,
     "timestamp": "2026-02-01T09:00:01.000Z",
     "message": {"role": "user", "content": "read the README and the LICENSE", "timestamp": 0}},
]  # fmt: skip


def _pi_assistant(n: int, parent: str, content: list[Any], stop: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant", "content": content, "timestamp": 0, "provider": "anthropic",
        "model": "claude-opus-4-5", "stopReason": stop,
        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                  "cost": {"total": 0.001}},
    }  # fmt: skip
    if stop == "error":
        message["errorMessage"] = "overloaded_error"
    return {"type": "message", "id": f"f000000{n}", "parentId": parent,
            "timestamp": f"2026-02-01T09:00:0{n}.000Z", "message": message}  # fmt: skip


def _pi_user(n: int, parent: str, text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"f000000{n}", "parentId": parent,
            "timestamp": f"2026-02-01T09:00:0{n}.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": text}],
                        "timestamp": 0}}  # fmt: skip


@pytest.mark.parametrize("stop", ["aborted", "error"])
def test_pi_calls_of_an_ended_response_are_left_out_of_both_bodies(
    stop: str, tmp_path: Path
) -> None:
    call = {"type": "toolCall", "id": "call_a1", "name": "read", "arguments": {"path": "README"}}
    thinking = {"type": "thinking", "thinking": "Two files.", "thinkingSignature": "c2lnLWE="}
    lines = [
        *_PI,
        _pi_assistant(2, "f0000001", [thinking, call], stop),
        _pi_user(3, "f0000002", "go on"),
        _pi_assistant(4, "f0000003", [{"type": "text", "text": "Done."}], "stop"),
    ]
    src = tmp_path / "pi-aborted-call.jsonl"
    src.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    (session,) = _import(src, tmp_path)
    neutral = fold.messages(session)["messages"]
    assert any(p["type"] == "tool_call" for i in neutral for p in i["message"]["parts"])
    assert _problems(session) == []
    anthropic = fold.messages(session, format="anthropic")["messages"]
    assert [m["role"] for m in anthropic] == ["user", "assistant", "user", "assistant"]
    assert anthropic[1]["content"] == [
        {"type": "thinking", "thinking": "Two files.", "signature": "c2lnLWE="}
    ]
    openai = fold.messages(session, format="openai")["messages"]
    assert all("tool_calls" not in m for m in openai)
    assert [m["role"] for m in openai] == ["user", "user", "assistant"]  # no text: left out
    # the file still has the call: only the request bodies leave it out
    logged = [e.data["message"]["parts"] for e in jsonltape.read(session) if "message" in e.data]
    assert {"type": "tool_call", "id": "call_a1"}.items() <= logged_call(logged).items()


def logged_call(parts_lists: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return next(p for parts in parts_lists for p in parts if p["type"] == "tool_call")


def _tape(tmp_path: Path, items: list[dict[str, Any]]) -> Path:
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        for item in items:
            tape.append(item["type"], item["data"])
    return path


_ids = iter(range(10**9))


def _msg(type_: str, role: str, *parts: dict[str, Any], **data: Any) -> dict[str, Any]:
    message = {"id": f"m{next(_ids)}", "role": role, "parts": list(parts)}
    return {"type": type_, "data": {"message": message, **data}}


def _text(t: str) -> dict[str, Any]:
    return {"type": "text", "content": t}


def _call(c: str) -> dict[str, Any]:
    return {"type": "tool_call", "id": c, "name": "Read", "arguments": {}}


def _result(c: str) -> dict[str, Any]:
    part = {"type": "tool_call_response", "id": c, "response": "ok"}
    return _msg("tool/result", "tool", part, call_id=c)


def test_any_source_a_call_answered_only_after_a_user_message_is_left_out(
    tmp_path: Path,
) -> None:
    path = _tape(
        tmp_path,
        [
            _msg("user/message", "user", _text("hi")),
            _msg("assistant/message", "assistant", _text("looking"), _call("c1"), _call("c2")),
            _result("c1"),
            _msg("user/message", "user", _text("stop")),
            _result("c2"),  # too late: the user spoke in between
            _msg("assistant/message", "assistant", _call("c3")),  # never answered
        ],
    )
    assert _problems(path) == []
    openai = fold.messages(path, format="openai")["messages"]
    assert [c["id"] for m in openai for c in m.get("tool_calls", [])] == ["c1"]
    assert [m.get("tool_call_id") for m in openai if m["role"] == "tool"] == ["c1"]
    anthropic = fold.messages(path, format="anthropic")["messages"]
    ids = [b.get("id") or b.get("tool_use_id") for m in anthropic for b in m["content"]]
    # Anthropic merges the user turn: c2's late result is still in the next user message
    assert [i for i in ids if i] == ["c1", "c2", "c1", "c2"]
    assert anthropic[-1]["role"] == "user"  # the emptied last assistant turn is left out


def test_an_emptied_assistant_turn_lets_its_neighbours_merge(tmp_path: Path) -> None:
    path = _tape(
        tmp_path,
        [
            _msg("user/message", "user", _text("a")),
            _msg("assistant/message", "assistant", _call("c1")),
            _msg("user/message", "user", _text("b")),
            _msg("assistant/message", "assistant", _text("c")),
        ],
    )
    anthropic = fold.messages(path, format="anthropic")
    assert check_anthropic(anthropic) == []
    assert anthropic["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }


# -- random sessions ------------------------------------------------------------------------

_DIR = tempfile.mkdtemp(prefix="jsonltape-valid-")
os.chmod(_DIR, 0o700)
_count = iter(range(10**9))


def _random_session(data: st.DataObject, steps: int) -> Path:
    path = Path(_DIR) / f"s{next(_count)}.jsonl"
    model = SurfaceModel()
    with jsonltape.open(path, create=True, durability="manual") as tape:
        for _ in range(steps):
            seq = tape.next_seq
            op = data.draw(operation(model, seq), label="op")
            trial = SurfaceModel(list(model.nodes), dict(model.status), dict(model.types))
            trial.compaction = set(model.compaction)
            try:
                for k, item in enumerate(op.items):
                    trial.apply(seq + k, item)
            except Refused:
                continue
            tape.append_batch(op.items)
            model = trial
    return path


@settings(max_examples=1000 if LONG else 60, deadline=None)
@given(st.data())
def test_random_sessions_fold_to_request_bodies_a_provider_accepts(data: Any) -> None:
    path = _random_session(data, data.draw(st.integers(1, 30), label="steps"))
    assert _problems(path) == []


# -- the CLI --------------------------------------------------------------------------------


def test_messages_check_is_silent_and_exits_zero_for_a_valid_session(tmp_path: Path) -> None:
    path = _tape(tmp_path, [_msg("user/message", "user", _text("hi"))])
    result = CliRunner().invoke(main, ["messages", str(path), "--check"])
    assert (result.exit_code, result.output) == (0, "")


def test_a_message_declaring_one_call_twice_sends_it_once(tmp_path: Path) -> None:
    # the writer takes a message that declares one call id twice (an OpenAI body once repeated
    # it, and the API refuses that): both mappings send the call once (spec 8.7.11, 8.7.12)
    twice = _msg("assistant/message", "assistant", _call("c1"), _call("c1"))
    path = _tape(tmp_path, [_msg("user/message", "user", _text("hi")), twice, _result("c1")])
    result = CliRunner().invoke(main, ["messages", str(path), "--check"])
    assert (result.exit_code, result.output) == (0, "")
    body = fold.messages(path, format="openai")
    assert [c["id"] for m in body["messages"] for c in m.get("tool_calls", ())] == ["c1"]


def test_messages_check_takes_no_format(tmp_path: Path) -> None:
    path = _tape(tmp_path, [_msg("user/message", "user", _text("hi"))])
    result = CliRunner().invoke(main, ["messages", str(path), "--check", "--format", "openai"])
    assert result.exit_code == 2


# -- each rule catches its violation --------------------------------------------------------


def _use(c: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": c, "name": "Read", "input": {}}


def _tr(c: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": c, "content": "ok"}


def _t(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def _a(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def _u(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def _one(problems: list[str], words: str) -> None:
    assert len(problems) == 1 and words in problems[0], problems


def test_anthropic_valid_body_has_no_problems() -> None:
    thinking = {"type": "thinking", "thinking": "t", "signature": "c2ln"}
    body = {"messages": [_u(_t("q")), _a(thinking, _use("c")), _u(_tr("c"), _t("more")), _a()]}
    body["messages"][-1] = _a(_t("done"))
    assert check_anthropic(body) == []


def test_anthropic_two_messages_of_one_role_in_a_row() -> None:
    _one(check_anthropic({"messages": [_u(_t("a")), _u(_t("b"))]}), "two user messages")


def test_anthropic_tool_use_without_a_result_in_the_next_message() -> None:
    body = {"messages": [_u(_t("q")), _a(_use("c")), _u(_t("no result"))]}
    _one(check_anthropic(body), "'c' has no tool_result")


def test_anthropic_tool_use_in_the_last_message() -> None:
    _one(check_anthropic({"messages": [_u(_t("q")), _a(_use("c"))]}), "has no tool_result")


def test_anthropic_tool_result_for_no_tool_use_before_it() -> None:
    body = {"messages": [_u(_t("q")), _a(_t("hm")), _u(_tr("x"))]}
    _one(check_anthropic(body), "answers no tool_use")


def test_anthropic_tool_results_after_text() -> None:
    body = {"messages": [_u(_t("q")), _a(_use("c")), _u(_t("see"), _tr("c"))]}
    _one(check_anthropic(body), "not first")


def test_anthropic_empty_content_and_empty_text() -> None:
    _one(check_anthropic({"messages": [_u()]}), "empty content")
    _one(check_anthropic({"messages": [_u(_t(""))]}), "empty text block")


def test_anthropic_thinking_without_signature_or_outside_assistant() -> None:
    unsigned = {"type": "thinking", "thinking": "t", "signature": ""}
    _one(check_anthropic({"messages": [_u(_t("q")), _a(unsigned)]}), "without its signature")
    signed = {"type": "thinking", "thinking": "t", "signature": "c2ln"}
    _one(check_anthropic({"messages": [_u(signed)]}), "outside an assistant")


def test_openai_valid_body_has_no_problems() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
    body = {
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]
    }
    assert check_openai(body) == []


def _openai_calls(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": c, "type": "function", "function": {"name": "R", "arguments": "{}"}} for c in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def test_openai_call_not_answered_before_the_next_user_message() -> None:
    body = {
        "messages": [
            _openai_calls("c"),
            {"role": "user", "content": "q"},
            {"role": "tool", "tool_call_id": "c", "content": "late"},
        ]
    }
    problems = check_openai(body)
    assert len(problems) == 2
    assert "has no tool message" in problems[0] and "answers no preceding" in problems[1]


def test_openai_call_not_answered_before_the_next_assistant_message() -> None:
    body = {"messages": [_openai_calls("c"), {"role": "assistant", "content": "x"}]}
    _one(check_openai(body), "has no tool message")


def test_openai_orphan_tool_message_and_double_answer() -> None:
    _one(check_openai({"messages": [{"role": "tool", "tool_call_id": "c", "content": "x"}]}),
         "answers no preceding")  # fmt: skip
    twice = {"role": "tool", "tool_call_id": "c", "content": "x"}
    _one(check_openai({"messages": [_openai_calls("c"), twice, twice]}), "answered twice")


def test_openai_assistant_message_with_neither_content_nor_calls() -> None:
    body = {"messages": [{"role": "assistant", "content": None}]}
    _one(check_openai(body), "neither content nor calls")


def test_a_call_declared_by_two_merged_assistant_messages_is_sent_once(tmp_path: Path) -> None:
    # Found by the property test: a message restored twice declares its call twice; Anthropic
    # merges the two assistant messages, and a repeated tool_use id is refused by the API.
    path = tmp_path / "s.jsonl"
    call = {"id": "c1", "name": "Read", "arguments": {}}
    with jsonltape.open(path, create=True) as tape:
        tape.user("read it")
        tape.assistant(tool_calls=[call])
        tape.assistant(tool_calls=[call])
        tape.tool_result("c1", "contents")
    body = fold.messages(path, format="anthropic")
    assert check_anthropic(body) == []
    uses = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert [b["id"] for b in uses] == ["c1"]
    assert check_openai(fold.messages(path, format="openai")) == []


# -- request members (issue 32, defect 3) ---------------------------------------------------


def test_each_api_refuses_a_member_it_does_not_define() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    assert check_openai({**body, "reasoning_effort": "high"}) == []
    _one(check_openai({**body, "thinking_level": "high"}), "thinking_level: not a member")
    _one(check_anthropic({**body, "reasoning_effort": "high"}), "reasoning_effort: not a member")
    assert check_anthropic({**body, "system": "s", "max_tokens": 10}) == []


def test_the_request_members_are_the_ones_the_providers_sdks_define() -> None:
    """scripts/gen_request_keys.py read the sets from the openai and anthropic SDKs' request
    types; with the SDK versions it names installed, it must produce them again."""
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from importlib import metadata

    from jsonltape.fold import _request_keys as keys

    gen = load_script(Path(__file__).parent.parent / "scripts" / "gen_request_keys.py", "gen_keys")
    installed = (
        f"openai {metadata.version('openai')}",
        f"anthropic {metadata.version('anthropic')}",
    )
    if installed != (keys.OPENAI_SDK, keys.ANTHROPIC_SDK):
        pytest.skip(f"the sets were read from {keys.OPENAI_SDK}, {keys.ANTHROPIC_SDK}")
    assert gen.main(["--check"]) == 0
    assert {"model", "messages", "tools", "reasoning_effort"} <= OPENAI_KEYS
    assert {"model", "messages", "tools", "system", "max_tokens"} <= ANTHROPIC_KEYS


_NAMES = st.sampled_from(
    sorted(OPENAI_KEYS | ANTHROPIC_KEYS | {"thinking_level", "effort", "x-custom", "system"})
)


@settings(max_examples=200, deadline=None)
@given(params=st.dictionaries(_NAMES, st.integers(0, 3), max_size=8))
def test_a_body_holds_only_members_its_api_defines_whatever_the_params(
    params: dict[str, int],
) -> None:
    header = {"model": "m", "params": params}
    items = [
        {
            "type": "user/message",
            "message": {"id": "u", "role": "user", "parts": [{"type": "text", "content": "q"}]},
        }
    ]
    openai = fold.openai_request(items, header)
    anthropic = fold.anthropic_request(items, header)
    assert check_openai(openai) == [] and check_anthropic(anthropic) == []
    reserved = {"model", "messages", "tools", "system"}  # the fold sets these itself
    for body, defined in ((openai, OPENAI_KEYS), (anthropic, ANTHROPIC_KEYS)):
        from_params = {k for k in body if k in params and k not in reserved}
        assert from_params == {k for k in params if k in defined and k not in reserved}
        assert all(body[k] == params[k] for k in from_params)
