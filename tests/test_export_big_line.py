"""A session whose one message is bigger than a read chunk and than the Markdown limit.

What this proves is that such a line exports right in every format: whole, escaped, secrets
masked, shown preformatted instead of parsed. Whether the work stays linear in the line's
length is measured by ``benchmarks/bench_big_line.py`` (the ratio for N and 2N MB), not here:
no deterministic counter sees a reader re-copying the part of a line it has already read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import jsonltape
from jsonltape import _framing
from jsonltape.interop import export
from jsonltape.interop._render import MARKDOWN_LIMIT
from jsonltape.interop.export import FORMATS

SIZE = max(3 * _framing.CHUNK, 2 * MARKDOWN_LIMIT) + 12_345
SECRET = "POSTGRES_PASSWORD: correcthorsebatterystaple"


def big_text() -> str:
    body = "## not a heading <img src=x onerror=alert(1)> `x`` line\n"
    text = body * (SIZE // len(body))
    return text[: SIZE // 2] + SECRET + "\n" + text[SIZE // 2 :]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    with jsonltape.open(path, create=True) as tape, tape.turn():
        tape.user(big_text(), id="u1")
        tape.assistant("short answer", id="a1")
    return path


def test_the_line_is_bigger_than_a_chunk_and_the_markdown_limit(big: Path) -> None:
    assert max(len(line) for line in big.read_bytes().splitlines()) > 3 * _framing.CHUNK
    assert len(big_text()) > 2 * MARKDOWN_LIMIT


def test_messages_returns_the_whole_line(big: Path) -> None:
    items = jsonltape.messages(big)["messages"]
    assert [p["content"] for p in items[0]["message"]["parts"]] == [big_text()]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_exports_it_whole_and_masked(big: Path, fmt: str) -> None:
    plain = export(big, fmt).text  # type: ignore[arg-type]
    masked = export(big, fmt, redact_secrets=True)  # type: ignore[arg-type]
    assert "correcthorsebatterystaple" in plain
    assert "correcthorsebatterystaple" not in masked.text
    assert masked.redacted == "redacted secrets: 1 assignment"
    text = big_text()
    if fmt == "markdown":  # preformatted in a fence no backtick run inside can close
        assert "```\n" + text + "\n```" in plain
    elif fmt == "html":  # escaped, not parsed
        assert '<div class="text">## not a heading &lt;img src=x onerror=alert(1)&gt;' in plain
        assert "<h2>" not in plain
    elif fmt == "otel":  # JSON text of the messages in a JSON string attribute
        assert json.dumps(json.dumps(text)[1:-1])[1:-1] in plain
    else:
        assert json.dumps(text)[1:-1] in plain
