"""``jsonltape redact SRC -o DST``: a valid session with every pattern match masked, seqs and
structure kept, CRCs and checkpoints (offset, turn offset, span) recomputed, a new id, DST
created 0600 exclusively, SRC untouched; and the finder it shares with the commit guard."""

from __future__ import annotations

import itertools
import json
import os
import stat
import zlib
from pathlib import Path

import msgspec
import pytest

import jsonltape
from jsonltape import _framing
from jsonltape.errors import CorruptError, InvalidArgumentError, SessionExistsError
from jsonltape.events import validate_type_name
from jsonltape.interop._redact_copy import (
    META_KEY,
    Secret,
    mask_value,
    may_hold_secret,
    redact_copy,
    redacted_id,
    screen,
)
from jsonltape.interop._secret_events import WINDOW
from jsonltape.interop.redaction import Redactor

from .helpers import one_turn
from .secret_cases import STRIPE
from .test_git_check import AWS, GITHUB, OPENAI, jt
from .test_redaction_table import NEGATIVE, POSITIVE


def lines(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def secret_session(path: Path, *, leave_turn_open: bool = False) -> Path:
    with jsonltape.open(path, create=True, session_id="src", title=f"debug {OPENAI}") as tape:
        one_turn(tape, "hello", with_tool=True)
        tape.flush()
        with tape.turn():
            tape.user(f"my key is {AWS}, and the token {GITHUB}")
            call = tape.assistant(
                tool_calls=[{"name": "Bash", "arguments": {"cmd": "env", "api_key": OPENAI}}]
            )
            cid = call.data["message"]["parts"][0]["id"]
            tape.tool_call("Bash", {"cmd": "env", "nested": [{"deep": f"x {AWS} y"}]}, call_id=cid)
            tape.tool_result(cid, {"stdout": f"AWS={AWS}\nOPENAI={OPENAI}\n", "code": 0})
            tape.assistant("I will not repeat those.")
            tape.flush()  # a checkpoint inside the open turn: its turn.offset moves
        one_turn(tape, "after")
        tape.flush()
        if leave_turn_open:
            tape.append("turn/start", {})
            tape.user("unfinished")
            tape.flush()
    return path


def test_the_copy_verifies_folds_and_holds_no_secret(tmp_path: Path) -> None:
    src = secret_session(tmp_path / "s.jsonl")
    dst = tmp_path / "r.jsonl"
    report = redact_copy(src, dst)
    assert jsonltape.verify(dst).state == "clean"
    raw = dst.read_bytes()
    for secret in (AWS, OPENAI, GITHUB):
        assert secret.encode() not in raw
    assert report.masked == {
        "aws-access-token": 3,
        "github-pat": 1,
        "openai-key": 3,  # one of them under a secret's name ("api_key"): named by its rule
    }
    folded = jsonltape.messages(dst)
    text = json.dumps(msgspec.to_builtins(folded))
    assert "[REDACTED:aws-access-token]" in text
    assert "my key is [REDACTED:aws-access-token], and the token [REDACTED:github-pat]" in text
    done = jt(tmp_path, "messages", str(dst))
    assert done.returncode == 0, done.stderr


def test_seqs_types_and_structure_are_kept_and_clean_lines_copied_byte_for_byte(
    tmp_path: Path,
) -> None:
    src = secret_session(tmp_path / "s.jsonl")
    dst = tmp_path / "r.jsonl"
    redact_copy(src, dst)
    before, after = lines(src), lines(dst)
    assert [(e["seq"], e["type"], e["time"]) for e in after] == [
        (e["seq"], e["type"], e["time"]) for e in before
    ]
    for b, a in zip(before, after, strict=True):
        assert list(a) == list(b)  # the same envelope members in the same order
    src_raw = src.read_bytes().splitlines()
    dst_raw = dst.read_bytes().splitlines()
    # Lines 1-8 come before any secret and any moved offset: copied as they were.
    assert dst_raw[1:8] == src_raw[1:8]
    assert after[0]["data"]["id"] == "src.redacted" == redacted_id("src")
    assert after[0]["data"]["meta"] == {META_KEY: {"from": "src"}}
    assert after[0]["data"]["title"] == "debug [REDACTED:openai-key]"


def test_checkpoints_name_their_new_offsets_turns_and_spans(tmp_path: Path) -> None:
    src = secret_session(tmp_path / "s.jsonl", leave_turn_open=True)
    dst = tmp_path / "r.jsonl"
    redact_copy(src, dst)
    raw = dst.read_bytes()
    starts = [0]
    for line in raw.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    events = lines(dst)
    span_from = starts[1]
    checkpoints = 0
    for seq, event in enumerate(events):
        if event["type"] != "session/flush":
            continue
        checkpoints += 1
        data = event["data"]
        assert data["offset"] == starts[seq]
        assert data["span"] == {
            "from": span_from,
            "crc": f"{zlib.crc32(raw[span_from : starts[seq]]):08x}",
        }
        turn = data.get("turn")
        if turn is not None:
            assert events[turn["seq"]]["type"] == "turn/start"
            assert turn["offset"] == starts[turn["seq"]]
        span_from = starts[seq + 1]
    assert checkpoints >= 4
    assert sum(1 for e in events if e["type"] == "session/flush" and "turn" in e["data"]) >= 2
    # The open turn is still open: the reader's tail scan finds it where it now is.
    scan = jsonltape.reader.tail_scan(dst)
    assert scan.turn is not None and scan.turn.offset == starts[scan.turn.seq]


def test_the_copy_is_created_0600_and_nothing_is_ever_replaced(tmp_path: Path) -> None:
    src = secret_session(tmp_path / "s.jsonl")
    before = src.read_bytes()
    mtime = src.stat().st_mtime_ns
    old = os.umask(0)
    try:
        redact_copy(src, tmp_path / "r.jsonl")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.jsonl").stat().st_mode) == 0o600
    assert src.read_bytes() == before and src.stat().st_mtime_ns == mtime
    with pytest.raises(InvalidArgumentError, match="never overwrites"):
        redact_copy(src, tmp_path / "r.jsonl")
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "nowhere.jsonl")  # a dangling link: following it would create
    with pytest.raises((InvalidArgumentError, SessionExistsError)):
        redact_copy(src, link)
    assert not (tmp_path / "nowhere.jsonl").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_command_refuses_an_existing_destination_and_itself(tmp_path: Path) -> None:
    src = secret_session(tmp_path / "s.jsonl")
    done = jt(tmp_path, "redact", str(src), "-o", str(tmp_path / "r.jsonl"))
    assert done.returncode == 0, done.stderr
    assert "session src.redacted" in done.stdout
    assert "redacted secrets: 3 aws-access-token, 1 github-pat, 3 openai-key" in done.stderr
    again = jt(tmp_path, "redact", str(src), "-o", str(tmp_path / "r.jsonl"))
    assert again.returncode == 2
    assert "never overwrites" in again.stderr
    itself = jt(tmp_path, "redact", str(src), "-o", str(src))
    assert itself.returncode == 2


def test_a_torn_tail_is_left_out_and_a_corrupt_source_refused(tmp_path: Path) -> None:
    src = secret_session(tmp_path / "s.jsonl")
    with src.open("ab") as f:
        f.write(b'{"seq":999,"type":"user/mes')
    report = redact_copy(src, tmp_path / "r.jsonl")
    assert report.torn_bytes == 27
    assert jsonltape.verify(tmp_path / "r.jsonl").state == "clean"
    data = bytearray(src.read_bytes())
    data[data.index(b"hello")] = ord("j")
    src.write_bytes(bytes(data))
    with pytest.raises(CorruptError, match="repair the source first"):
        redact_copy(src, tmp_path / "r2.jsonl")
    assert not (tmp_path / "r2.jsonl").exists()


def test_the_guard_passes_the_copy_it_refuses_the_original_for(tmp_path: Path) -> None:
    src = secret_session(tmp_path / "s.jsonl")
    redact_copy(src, tmp_path / "r.jsonl")
    assert jt(tmp_path, "git", "check", str(src)).returncode == 1
    done = jt(tmp_path, "git", "check", str(tmp_path / "r.jsonl"))
    assert done.returncode == 0, done.stderr


def test_a_long_id_gets_a_shortened_redacted_id() -> None:
    long = "a" * 128
    new = redacted_id(long)
    assert len(new) <= 128 and new.endswith(".redacted") and new != redacted_id("a" * 127)


# -- the finder shared with the guard -------------------------------------------------------


@pytest.mark.parametrize("text", [p[0] for p in POSITIVE] + NEGATIVE)
def test_mask_value_masks_exactly_as_the_exporters_redactor(text: str) -> None:
    value = {"a": [text, {"b": text, "DB_PASSWORD": text, text: 1}], "n": 3}
    found: list[Secret] = []
    masked = mask_value(value, found)
    assert masked == Redactor(secrets=True).value(value)
    assert bool(found) == (masked != value)  # what it reports is what it masked
    plain: list[Secret] = []
    assert (mask_value(text, plain) == text) == (text in NEGATIVE) == (not plain)


@pytest.mark.parametrize("case", POSITIVE, ids=[p[2] + str(i) for i, p in enumerate(POSITIVE)])
def test_the_screen_finds_every_table_secret_inside_a_json_line(
    case: tuple[str, str, str],
) -> None:
    text = case[0]
    for value in (text, {"k": text}, [f"prefix\n{text}\tsuffix"], {"DB_PASSWORD": "x1"}):
        line = msgspec.json.encode({"seq": 1, "type": "t/x", "data": {"v": value}})
        assert screen(line), line
    for key_case in (text.lower(), text.upper()):
        line = msgspec.json.encode({"data": {"v": key_case}})
        found: list[Secret] = []
        if mask_value(key_case, found) != key_case:
            assert screen(line), line


@pytest.mark.parametrize("secret", [AWS, OPENAI, GITHUB])
def test_the_screen_finds_keys_escaped_as_json_writers_may(secret: str) -> None:
    line = json.dumps({"data": {"v": f"url http://u:{secret}@h/ {secret}"}}, ensure_ascii=True)
    assert screen(line.replace("/", "\\/").encode())
    assert screen(json.dumps({"v": "é " + secret}, ensure_ascii=True).encode())


def test_ordinary_session_lines_are_copied_byte_for_byte(tmp_path: Path) -> None:
    # Random ids may hold a short keyword ("a3t", "asia") the screen flags; the rules clear it.
    path = tmp_path / "a.jsonl"
    with jsonltape.open(path, create=True, session_id="plain") as tape:
        for i in range(5):
            one_turn(tape, f"refactor the parser, step {i}", with_tool=True)
            tape.flush()
    report = redact_copy(path, tmp_path / "r.jsonl")
    assert report.masked == {} and report.lines_changed == 0
    copied = (tmp_path / "r.jsonl").read_bytes().splitlines()
    events = [x for x in path.read_bytes().splitlines()[1:] if b'"session/flush"' not in x]
    assert events == [x for x in copied[1:] if b'"session/flush"' not in x]  # as they were
    prose = b'{"data":{"text":"refactor the parser, then run the suite again"}}\n'
    assert screen(prose * 100) == []  # no keyword of any rule: no line to look into


@pytest.mark.parametrize("text", [p[0] for p in POSITIVE] + NEGATIVE)
def test_the_screened_kinds_mask_exactly_what_every_pattern_masks(text: str) -> None:
    value = {"v": [text, {"DB_PASSWORD": text}], "w": f"{text} and {AWS} and {GITHUB}"}
    line = msgspec.json.encode({"data": value})
    kinds = may_hold_secret(line)
    assert kinds is not None
    assert mask_value(value, [], kinds) == mask_value(value, [])


# -- members, chunks, the header ------------------------------------------------------------


def _raw_line(path: Path, members: dict) -> None:  # type: ignore[type-arg]
    """Append a line with exactly ``members`` (its seq the next one), as another writer could."""
    last = json.loads(path.read_bytes().splitlines()[-1])
    line = msgspec.json.encode({"seq": last["seq"] + 1, **members})
    with path.open("ab") as f:
        f.write(_framing.frame(line))


def _keyed(path: Path, key: str) -> Path:
    with jsonltape.open(path, create=True, session_id="m") as tape:
        one_turn(tape, "hello")
        tape.user("keyed", key=key)
    return path


def test_a_secret_in_the_type_key_or_an_unknown_member_is_masked_and_the_line_stays_valid(
    tmp_path: Path,
) -> None:
    src = _keyed(tmp_path / "s.jsonl", f"deploy {STRIPE}")
    _raw_line(
        src,
        {
            "type": f"x.tool/{STRIPE.lower()}",
            "time": 1,
            "data": {"ok": 1},
            "ignorable": True,
            f"note-{GITHUB}": {"deep": [f"AWS={AWS}"]},
        },
    )
    report = redact_copy(src, tmp_path / "r.jsonl")
    raw = (tmp_path / "r.jsonl").read_bytes()
    for secret in (STRIPE, STRIPE.lower(), GITHUB, AWS):
        assert secret.encode() not in raw
    events = lines(tmp_path / "r.jsonl")
    assert events[-1]["type"] == "x.tool/redacted"
    validate_type_name(events[-1]["type"])
    assert events[-1]["[REDACTED:github-pat]".replace("[", "note-[")] == {
        "deep": ["AWS=[REDACTED:aws-access-token]"]
    }
    keyed = [e for e in events if "key" in e]
    assert [e["key"] for e in keyed] == ["deploy [REDACTED:stripe-access-token]"]
    assert jsonltape.verify(tmp_path / "r.jsonl").state == "clean"
    assert report.masked == {"stripe-access-token": 2, "github-pat": 1, "aws-access-token": 1}
    assert jt(tmp_path, "git", "check", str(tmp_path / "r.jsonl")).returncode == 0
    done = jt(tmp_path, "git", "check", str(src))
    assert "in $.type" in done.stderr and "in $.key" in done.stderr
    assert '$["note-[REDACTED:github-pat]"].deep[0]' in done.stderr  # a name holding one, masked
    for secret in (STRIPE, GITHUB, AWS):
        assert not any(secret[i : i + 8] in done.stderr for i in range(len(secret) - 7))


def test_a_secret_split_across_chunks_is_masked_in_each_chunk_and_counted_once(
    tmp_path: Path,
) -> None:
    src = tmp_path / "s.jsonl"
    text = f"here it is: {GITHUB} (keep it safe)"
    cuts = [0, 14, 20, 31, len(text)]
    with jsonltape.open(src, create=True, session_id="c") as tape, tape.turn():
        for a, b in itertools.pairwise(cuts):
            tape.append("assistant/chunk", {"delta": text[a:b]}, ignorable=True)
            tape.flush()  # checkpoints between chunks do not break the run
        tape.assistant(text.replace(GITHUB, "the token"))
    report = redact_copy(src, tmp_path / "r.jsonl")
    assert report.masked == {"github-pat": 1}
    chunks = [e for e in lines(tmp_path / "r.jsonl") if e["type"] == "assistant/chunk"]
    mask = "[REDACTED:github-pat]"
    assert [c["data"]["delta"] for c in chunks] == [
        f"here it is: {mask}",  # each chunk masks its part of the secret, and keeps the rest
        mask,
        mask,
        f"{mask} (keep it safe)",
    ]


def test_a_secret_split_at_the_end_of_a_window_of_a_long_run_is_found(tmp_path: Path) -> None:
    src = tmp_path / "s.jsonl"
    filler = "all fine here, nothing to see. " * 32  # ~1 KB a chunk
    with jsonltape.open(src, create=True, session_id="w", durability="manual") as tape:
        with tape.turn():
            size = 0
            while size < WINDOW - 600:
                tape.append("assistant/chunk", {"delta": filler}, ignorable=True)
                size += len(filler)
            # The window is scanned when the run reaches WINDOW: the secret starts before that
            # and ends after it.
            tape.append("assistant/chunk", {"delta": "x" * 570 + " key " + GITHUB[:20]})
            tape.append("assistant/chunk", {"delta": GITHUB[20:] + " done"}, ignorable=True)
        tape.flush()
    report = redact_copy(src, tmp_path / "r.jsonl")
    assert report.masked == {"github-pat": 1}
    deltas = "".join(
        e["data"]["delta"] for e in lines(tmp_path / "r.jsonl") if e["type"] == "assistant/chunk"
    )
    assert GITHUB[:20] not in deltas and GITHUB[20:] not in deltas


def test_the_header_is_masked_and_an_id_holding_a_secret_is_not_carried_into_the_copy(
    tmp_path: Path,
) -> None:
    src = tmp_path / "s.jsonl"
    sid = f"run-{STRIPE}"
    with jsonltape.open(src, create=True, session_id=sid, meta={"env": {"TOKEN": GITHUB}}):
        pass
    redact_copy(src, tmp_path / "r.jsonl")
    raw = (tmp_path / "r.jsonl").read_bytes()
    assert STRIPE.encode() not in raw and GITHUB.encode() not in raw
    header = lines(tmp_path / "r.jsonl")[0]["data"]
    assert header["id"].startswith("redacted-") and header["id"].endswith(".redacted")
    assert header["meta"][META_KEY] == {"from": "run-[REDACTED:stripe-access-token]"}
    assert header["meta"]["env"] == {"TOKEN": "[REDACTED:github-pat]"}
    assert redacted_id(sid) == header["id"]
