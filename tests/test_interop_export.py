"""Export: golden files for every format, HTML safety, redaction with planted secrets,
open and torn sessions.

Goldens live in tests/fixtures/interop/export/; regenerate them with
``JSONLTAPE_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests -k interop_export``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import jsonltape
from jsonltape import _framing, fold
from jsonltape.interop import import_file
from jsonltape.interop.export import FORMATS, export
from jsonltape.interop.redaction import mask_secrets

from .secret_cases import GITHUB, GOOGLE, JWT, PEM, PEM_LINES, fake

FIXTURES = Path(__file__).parent / "fixtures" / "interop"
GOLDEN = FIXTURES / "export"
REGEN = bool(os.environ.get("JSONLTAPE_REGEN_GOLDEN"))
BASE = 1764460800000  # 2025-11-30T00:00:00Z
SUFFIX = {"markdown": "md", "html": "html", "json": "json", "openai": "openai.json"}
SUFFIX["anthropic"] = "anthropic.json"
SUFFIX |= {"atif": "atif.json", "otel": "otel.json"}


def freeze(path: Path) -> None:
    """Give every line a fixed time (same width, so checkpoint offsets stay right)."""
    out = []
    for i, raw in enumerate(path.read_bytes().splitlines(keepends=True)):
        body = raw[: -(_framing.SUFFIX_LEN + 1)]
        body = re.sub(rb'"time":\d{13}', b'"time":%d' % (BASE + i * 1000), body, count=1)
        if i == 0:
            body = re.sub(rb'"created":\d{13}', b'"created":%d' % BASE, body, count=1)
        out.append(_framing.frame(body + b"}"))
    path.write_bytes(b"".join(out))


def result(call_id: str, msg_id: str, response: Any, **extra: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response", "id": call_id, "response": response}
    if extra.pop("is_error", False):
        part["is_error"] = True
    return {"call_id": call_id, "message": {"id": msg_id, "role": "tool", "parts": [part]}, **extra}


def build(path: Path, s: dict[str, str] | None = None) -> Path:
    """A native session with every kind of content; ``s`` plants secrets in every field."""
    s = s or {}

    def at(key: str, default: str) -> str:
        return s.get(key, default)

    with jsonltape.open(
        path,
        create=True,
        session_id=at("id", "demo-export"),
        title=at("title", 'Fix the migration <b>now</b> & "quote"'),
        cwd=at("cwd", "/home/ada/app"),
        agent=at("agent", "example-agent/1.0"),
        durability="manual",
    ) as tape:
        tape.append(
            "request/header",
            {
                "model": "gpt-5",
                "provider": "openai",
                "system": at("system", "You are a careful coding agent."),
                "params": {"metadata": {"user": at("param", "ada")}},
            },
        )
        with tape.turn():
            tape.user(
                [
                    {
                        "type": "text",
                        "content": at(
                            "user", "Why does `test_migration` fail? <script>alert(1)</script> & co"
                        ),
                    },
                    {"type": "uri", "uri": at("uri", "https://example.com/shot.png")},
                ],
                id="u1",
            )
            read_args = {"file_path": at("path", "migrations/0042.sql")}
            tape.assistant(
                [
                    {
                        "type": "reasoning",
                        "content": at("reasoning", "Read it first."),
                        "signature": "sig",
                    },
                    {"type": "text", "content": at("assistant", "Let me look.")},
                ],
                tool_calls=[{"id": "call-1", "name": "Read", "arguments": read_args}],
                model="gpt-5",
                usage={"input_tokens": 812, "output_tokens": 31},
                id="a1",
            )
            tape.tool_call("Read", read_args, call_id="call-1")
            tape.append(
                "tool/result",
                result(
                    "call-1",
                    "r1",
                    at("result", "ALTER TABLE users ADD email TEXT NOT NULL; -- ```"),
                ),
            )
            tape.assistant(
                "The `NOT NULL` column has no default:\n\n```sql\nALTER TABLE users;\n```",
                model="gpt-5",
                id="a2",
            )
        with tape.turn():
            tape.user("Run the tests", id="u2")
            args = {"command": at("command", "pytest -q"), at("argkey", "env"): "ci"}
            tape.assistant(
                tool_calls=[{"id": "call-2", "name": at("tool", "Bash"), "arguments": args}],
                model="gpt-5",
                id="a3",
            )
            tape.tool_call(at("tool", "Bash"), args, call_id="call-2")
            tape.append(
                "tool/result",
                result(
                    "call-2",
                    "r2",
                    {"stdout": at("stdout", "1 failed"), at("reskey", "exit"): 1},
                    is_error=True,
                    error={"code": "EXIT_1", "message": at("error", "exit status 1")},
                ),
            )
            tape.assistant("One test fails.", model="gpt-5", id="a4")
    a2 = next(e.seq for e in jsonltape.read(path) if e.data.get("message", {}).get("id") == "a2")
    fold.compact(path, at("summary", "Asked why the migration fails: no default."), through=a2)
    with jsonltape.open(path, durability="manual") as tape, tape.turn():
        tape.user("Thanks!", id="u3")
    freeze(path)
    assert jsonltape.verify(path).state == "clean"
    return path


def check_golden(name: str, text: str) -> None:
    golden = GOLDEN / name
    if REGEN:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"missing golden {golden}; run with JSONLTAPE_REGEN_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8"), f"export differs from {golden}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_native_session_goldens(tmp_path: Path, fmt: str) -> None:
    path = build(tmp_path / "demo.jsonl")
    out = export(path, fmt)  # type: ignore[arg-type]
    # the trace formats say what they cannot carry (tests/test_export_trace.py lists it)
    if fmt in ("atif", "otel"):
        assert len(out.notes) == 1 and out.notes[0].startswith(f"{path}: {fmt} cannot carry: ")
    else:
        assert out.notes == []
    assert out.redacted is None
    check_golden(f"demo.{SUFFIX[fmt]}", out.text)


@pytest.mark.parametrize(
    ("fixture", "source"),
    [("claude-rewind-compact.jsonl", "claude-code"), ("codex-compacted.jsonl", "codex")],
)
@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_imported_session_goldens(tmp_path: Path, fixture: str, source: str, fmt: str) -> None:
    src = tmp_path / "src" / fixture
    src.parent.mkdir()
    shutil.copyfile(FIXTURES / fixture, src)
    old = time.time() - 7200
    os.utime(src, (old, old))
    report = import_file(source, src, tmp_path / "root")
    out = export(report.sessions[0], fmt)  # type: ignore[arg-type]
    check_golden(f"{fixture[: -len('.jsonl')]}.{SUFFIX[fmt]}", out.text)


def test_html_is_self_contained_escaped_and_collapsible(tmp_path: Path) -> None:
    path = build(tmp_path / "demo.jsonl")
    text = export(path, "html").text
    assert "<script" not in text.lower() and "<link" not in text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>now</b>" not in text and "&lt;b&gt;now&lt;/b&gt;" in text
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?(?!data:)[a-z]+:""", text, re.I)
    assert "url(" not in text and "@import" not in text
    assert "default-src 'none'" in text and 'name="viewport"' in text
    # two tool calls, each collapsible with its result inside; reasoning collapsible too
    assert text.count('<details class="tool">') == 2
    assert text.count('<details class="reasoning">') == 1
    assert "Result (error)" in text and "1 failed" in text


def test_markdown_neutralises_html_and_keeps_code(tmp_path: Path) -> None:
    path = build(tmp_path / "demo.jsonl")
    text = export(path, "markdown").text
    assert "\\<script>alert(1)\\</script>" in text
    assert not re.search(r"(?<!\\)<(?!/?(?:details|summary))", text)  # every other < is escaped
    assert "```sql\nALTER TABLE users;\n```" in text  # code kept as written
    assert "````\nALTER TABLE users ADD email TEXT NOT NULL; -- ```\n````" in text


def test_json_export_is_the_neutral_fold(tmp_path: Path) -> None:
    path = build(tmp_path / "demo.jsonl")
    import json

    assert json.loads(export(path, "json").text) == fold.messages(path)
    assert json.loads(export(path, "openai").text) == fold.messages(path, format="openai")
    assert json.loads(export(path, "anthropic").text) == fold.messages(path, format="anthropic")


# -- redaction --------------------------------------------------------------------------------

_AWS = ["AKIA" + fake(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(3)]
_SECRET = {k: fake(24) for k in ("title", "system", "result", "reskey", "user", "argkey")}
PLANTED = {
    "id": _AWS[0],
    "title": f"deploy with sk-proj-{_SECRET['title']}",
    "cwd": f"/home/ada/{GITHUB}",
    "agent": f"agent/1.0 xoxb-123456789012-1234567890123-{fake(24)}",
    "system": f"Use key sk-ant-api03-{_SECRET['system']}",
    "param": JWT,
    "user": f"curl -H 'Authorization: Bearer {_SECRET['user']}' and\n{PEM}",
    "uri": "https://deploy:UriPassw0rd99@example.com/shot.png",
    "reasoning": "the db password=Reas0ningPassword42 works",
    "assistant": f"found {GOOGLE} in the config",
    "path": f"/keys/{_AWS[1]}/id_rsa",
    "result": f"OPENAI_API_KEY=sk-proj-{_SECRET['result']}",
    "command": "git push https://bot:CommandPassw0rd77@github.com/x.git",
    "argkey": f"github_pat_11{_SECRET['argkey']}_{fake(56)}",
    "tool": f"xoxp-223456789012-1234567890123-2234567890123-{fake(32, '0123456789abcdef')}",
    "stdout": "token: StdoutTok3n-0123456789",
    "reskey": f"sk-ant-api03-{_SECRET['reskey']}",
    "error": "auth failed: api_key='ErrorApiKey0123456789'",
    "summary": f"Summary mentions {_AWS[2]} once.",
}
#: The part of each planted value that must never appear in a redacted export.
NEEDLES = {
    "id": _AWS[0],
    "title": _SECRET["title"],
    "cwd": GITHUB,
    "agent": PLANTED["agent"].split("-")[-1],
    "system": _SECRET["system"],
    "param": JWT.split(".")[-1],
    "user": _SECRET["user"],
    "user-key": PEM_LINES[2],
    "uri": "UriPassw0rd99",
    "reasoning": "Reas0ningPassword42",
    "assistant": GOOGLE,
    "path": _AWS[1],
    "result": _SECRET["result"],
    "command": "CommandPassw0rd77",
    "argkey": _SECRET["argkey"],
    "tool": PLANTED["tool"].split("-")[-1],
    "stdout": "StdoutTok3n-0123456789",
    "reskey": _SECRET["reskey"],
    "error": "ErrorApiKey0123456789",
    "summary": _AWS[2],
}


def test_redact_secrets_masks_every_planted_secret_in_every_format(tmp_path: Path) -> None:
    path = build(tmp_path / "secrets.jsonl", PLANTED)
    plain = {fmt: export(path, fmt).text for fmt in FORMATS}  # type: ignore[arg-type]
    shown = "\n".join(plain.values())
    for field, needle in NEEDLES.items():  # every field is shown by some format
        assert needle in shown, f"planted {field} is not exported at all"
    for fmt in FORMATS:
        out = export(path, fmt, redact_secrets=True)  # type: ignore[arg-type]
        for field, needle in NEEDLES.items():
            assert needle not in out.text, f"{fmt} export leaks the {field} secret"
        assert "[REDACTED:" in out.text
        assert out.redacted is not None and out.redacted.startswith("redacted secrets: ")
    md = export(path, "markdown", redact_secrets=True)
    assert md.redacted is not None
    for kind in ("aws-access-token", "openai-key", "private-key", "url-password", "jwt"):
        assert kind in md.redacted
    assert "deploy:\\[REDACTED:url-password\\]@example.com" in md.text  # structure kept


def test_redact_tools_hides_arguments_and_results_but_keeps_the_calls(tmp_path: Path) -> None:
    path = build(tmp_path / "tools.jsonl", PLANTED)
    for fmt in FORMATS:
        out = export(path, fmt, redact_tools=True)  # type: ignore[arg-type]
        for field in ("path", "result", "command", "stdout", "error"):
            assert NEEDLES[field] not in out.text, f"{fmt} shows the tool {field}"
        assert "[redacted]" in out.text
        assert PLANTED["tool"] in out.text and "call-2" in out.text  # the call and its name stay
        assert out.redacted is not None and "hidden: " in out.redacted
    both = export(path, "html", redact_tools=True, redact_secrets=True)
    assert all(n not in both.text for n in NEEDLES.values())


# -- open and torn sessions -------------------------------------------------------------------


def test_torn_session_exports_its_committed_part_and_says_so(tmp_path: Path) -> None:
    path = build(tmp_path / "torn.jsonl")
    whole = export(path, "markdown").text
    committed = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b'{"seq":99,"type":"user/message","data":{"message":{"id":"x","ro')
    out = export(path, "markdown")
    said = (
        f"torn tail at line 27: its last 63 bytes (after byte {committed}) were being written when"
    )
    assert out.text.startswith(whole) and out.text.endswith(
        f"**Note:** {said} the writer stopped, or were copied mid-write; they are not "
        "committed and not in this export\n"
    )
    assert out.notes == [
        f"{path}: {said} the writer stopped, or were copied mid-write; they "
        "are not committed and not in this export"
    ]


def test_open_turn_session_exports_and_says_what_it_means(tmp_path: Path) -> None:
    path = build(tmp_path / "open.jsonl")
    with jsonltape.open(path, durability="manual") as tape:
        start = tape.append("turn/start", {}).seq
        tape.user("Still working", id="u4")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))  # no closing checkpoint: a writer crashed mid-turn
    assert jsonltape.verify(path).state == "open-turn"
    said = f"the turn that started at seq {start} has no end: the agent was still running, or it"
    for fmt in ("html", "markdown"):
        out = export(path, fmt)
        assert "Still working" in out.text
        assert out.notes == [
            f"{path}: {said} crashed; the transcript shows what was committed, "
            "so its last step may be missing"
        ]
        assert said in out.text and str(path) not in out.text  # the document says it too
    assert said not in export(path, "json").text  # data formats stay data


def test_a_turn_left_open_by_a_clean_close_is_explained(tmp_path: Path) -> None:
    """The README's first example: a turn/start and a message, then a clean close."""
    path = tmp_path / "s.jsonl"
    with jsonltape.open(path, create=True) as tape:
        tape.append("turn/start", {})
        tape.user("Why does test_migration fail?", id="m1")
    assert jsonltape.verify(path).state == "clean"
    out = export(path, "markdown")
    assert out.notes == [
        f"{path}: the turn that started at seq 1 has no end: its writer closed the session with "
        "the turn still open (to go on later); the transcript shows everything written so far"
    ]
    assert out.text.rstrip().endswith(
        "**Note:** the turn that started at seq 1 has no end: its writer closed the session "
        "with the turn still open (to go on later); the transcript shows everything written "
        "so far"
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_times_at_the_edges_render(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "t.jsonl"
    with jsonltape.open(path, create=True) as tape, tape.turn():
        tape.append("user/message", {"message": {"id": "a", "role": "user", "parts": []}}, time=0)
        last = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the writer's limit
        tape.append(
            "user/message", {"message": {"id": "b", "role": "user", "parts": []}}, time=last
        )
        data = {"message": {"id": "c", "role": "user", "parts": []}, "import": {"time": 2**53 - 1}}
        tape.append("user/message", data)
    text = export(path, fmt).text  # type: ignore[arg-type]
    if fmt in ("markdown", "html"):
        assert "1970-01-01 00:00:00Z" in text and "9999-12-31 23:59:59Z" in text
        assert "time 9007199254740991" in text  # past the calendar: a placeholder, not a crash


def test_secret_patterns_keep_their_context_and_spare_look_alikes() -> None:
    cases = {
        "postgres://admin:hunter2@db/x": "postgres://admin:[REDACTED:url-password]@db/x",
        '{"password": "s3cret!", "token_count": 12345}': (
            '{"password": "[REDACTED:assignment]", "token_count": 12345}'
        ),
        f"export GITHUB_TOKEN={GITHUB}": "export GITHUB_TOKEN=[REDACTED:github-pat]",
        f"mcp__{GITHUB}": "mcp__[REDACTED:github-pat]",
        # cut short; a mask keeps the line breaks it covers: each line masked
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN": "[REDACTED:private-key-block]\n"
        "[REDACTED:private-key-block]",
    }
    for text, want in cases.items():
        assert mask_secrets(text) == want
    spared = [
        "task-learn-compatible-estimators-2024 and sk-learn-compatible",
        "the token: we need it; bearer tokens are great; Bearer authentication",
        "http://localhost:8080/path?a=b",
        "token_count: 5, max_tokens=100, password_hint: see docs",
        "xAKIAIOSFODNN7EXAMPLE1",
    ]
    for text in spared:
        assert mask_secrets(text) == text
