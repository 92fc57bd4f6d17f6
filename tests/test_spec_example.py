"""The spec's own examples are right: the complete file of §2, the worked checksum of §5, the
check value, and the plain-Python reader of §11."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import jsonltape

SPEC = Path(__file__).resolve().parent.parent / "spec" / "jsonltape-v1.md"
TEXT = SPEC.read_text(encoding="utf-8")


def section(heading: str) -> str:
    """The text from ``heading`` to the next heading of the same or a higher level."""
    start = TEXT.index(heading)
    level = heading.split(" ", 1)[0]
    nxt = re.search(rf"^#{{1,{len(level)}}} ", TEXT[start + len(heading) :], flags=re.M)
    return TEXT[start : start + len(heading) + nxt.start()] if nxt else TEXT[start:]


def blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


EXAMPLE_SECTION = section("## 2. A complete example")
EXAMPLE = blocks(EXAMPLE_SECTION)[0].encode("utf-8")
LINES = EXAMPLE.splitlines(keepends=True)


@pytest.fixture
def example_path(tape_path: Path) -> Path:
    tape_path.write_bytes(EXAMPLE)
    tape_path.chmod(0o600)
    return tape_path


def test_example_verifies_clean(example_path: Path) -> None:
    report = jsonltape.verify(example_path)
    assert report.state == "clean"
    assert report.events == len(LINES)
    assert report.size == len(EXAMPLE)
    events = list(jsonltape.read(example_path))
    assert [e.seq for e in events] == list(range(len(LINES)))
    assert jsonltape.header(example_path).id == json.loads(LINES[0])["data"]["id"]


def test_example_lines_pass_the_python_one_liner_of_section_5() -> None:
    for line in LINES:
        assert zlib.crc32(line[:-19]) == int(line[-11:-3], 16)
        assert re.fullmatch(rb'.*,"crc":"[0-9a-f]{8}"\}\n', line, flags=re.S)


def test_example_checkpoints_are_valid_and_the_prose_names_them() -> None:
    offsets = [0]
    for line in LINES[:-1]:
        offsets.append(offsets[-1] + len(line))
    events = [json.loads(line) for line in LINES]
    flushes = [i for i, e in enumerate(events) if e["type"] == "session/flush"]
    for i in flushes:
        data = events[i]["data"]
        assert data["offset"] == offsets[i], f"line {i + 1}: data.offset"
        assert data["seq"] == events[i]["seq"] - 1
        assert events[i]["ignorable"] is True
        if "turn" in data:
            turn = events[data["turn"]["seq"]]
            assert turn["type"] == "turn/start"
            assert offsets[turn["seq"]] == data["turn"]["offset"]
    m = re.search(r"Lines (\d+), (\d+) and (\d+) are checkpoints", EXAMPLE_SECTION)
    assert m is not None
    assert [int(n) for n in m.groups()] == [i + 1 for i in flushes]
    closing = re.search(r"Line (\d+) also says the writer closed", EXAMPLE_SECTION)
    assert closing is not None and int(closing.group(1)) == len(LINES)
    assert events[-1]["data"].get("closed") is True


def test_example_through_the_conformance_adapter() -> None:
    from jsonltape import conformance

    out = conformance.run("read", EXAMPLE)
    assert out == {"ok": True, "events": [json.loads(line) for line in LINES]}
    assert conformance.run("verify", EXAMPLE) == {
        "state": "clean",
        "events": len(LINES),
        "line": None,
        "offset": None,
    }


CHECKSUM_SECTION = section("## 5. Checksum")


def test_check_value() -> None:
    m = re.search(r"nine ASCII bytes `(\d+)`, is `([0-9a-f]{8})`", CHECKSUM_SECTION)
    assert m is not None
    assert f"{zlib.crc32(m.group(1).encode()):08x}" == m.group(2) == "cbf43926"


WORKED = re.search(
    r"has the checked bytes `(.*?)` \((\d+)\s+bytes\); `zlib.crc32` of them is `0x([0-9a-f]{8})`",
    CHECKSUM_SECTION,
    flags=re.S,
)
WORKED_LINE = blocks(CHECKSUM_SECTION.split("Worked example:", 1)[1])[0].encode()


def test_worked_example_crc() -> None:
    assert WORKED is not None
    checked = WORKED.group(1).encode()
    assert WORKED_LINE.startswith(checked)
    assert WORKED_LINE[: -len(b',"crc":"xxxxxxxx"}\n')] == checked
    assert f"{zlib.crc32(checked):08x}" == WORKED.group(3)
    assert WORKED_LINE.endswith(f',"crc":"{WORKED.group(3)}"}}\n'.encode())
    assert WORKED_LINE in LINES, "the worked example is line 3 of the example file"


def test_worked_example_byte_count() -> None:
    assert WORKED is not None
    assert len(WORKED.group(1).encode()) == int(WORKED.group(2))


def test_reading_without_jsonltape_snippet(example_path: Path) -> None:
    """§11's three lines of plain Python print every event type of a clean file."""
    snippet = blocks(section("## 11. Reading without jsonltape"))[0]
    proc = subprocess.run(
        [sys.executable, "-c", snippet.replace('"s.jsonl"', repr(str(example_path)))],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert proc.stdout.splitlines() == [json.loads(line)["type"] for line in LINES]
