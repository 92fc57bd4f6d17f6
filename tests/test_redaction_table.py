"""The table of secrets (tests/secret_cases.py) through everything that must hide them, in every
form a session can hold them.

Formats: ``--redact secrets`` on export (Markdown, HTML, JSON, OpenAI, Anthropic), ``jsonltape
redact`` (the masked copy) and the commit guard (``git check``). Forms: plain text, the text
JSON-escaped (as a tool prints a JSON string), in full-width lookalikes (NFKC maps them back),
with a zero-width space inside the secret, split across ``assistant/chunk`` events, split across
the text parts of one message, as the event's idempotency ``key`` (an envelope member) and in a
member the envelope does not know. Every positive must vanish from every output in every
spelling a reader could read it in (escaped, unescaped, normalised, invisible characters
removed) and be refused by the guard under its kind; every negative must come out exactly as
it went in and be refused by nothing.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import jsonltape
from jsonltape import _framing
from jsonltape.git._check import check_paths
from jsonltape.interop import export
from jsonltape.interop._redact_copy import redact_copy
from jsonltape.interop._render import _md_escape
from jsonltape.interop.export import FORMATS

from .secret_cases import NEGATIVE, POSITIVE

ZWSP = "\u200b"
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]")


def full_width(text: str) -> str:
    """``text`` with every printable ASCII character as its full-width form (NFKC undoes it)."""
    return "".join(
        chr(ord(c) - 0x21 + 0xFF01) if "!" <= c <= "~" else "\u3000" if c == " " else c
        for c in text
    )


def split_points(text: str, secret: str, n: int) -> list[int]:
    """``n - 1`` places inside the secret of ``text`` where it is cut in ``n`` pieces."""
    at = text.index(secret)
    return [at + len(secret) * i // n for i in range(1, n)]


def cut(text: str, points: list[int]) -> list[str]:
    edges = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


# -- how a case is written into a session, per form -------------------------------------------


def _message(tape: jsonltape.Tape, text: str, secret: str) -> None:
    tape.user(text)


def _json_escaped(tape: jsonltape.Tape, text: str, secret: str) -> None:
    tape.user(json.dumps(text))


def _full_width(tape: jsonltape.Tape, text: str, secret: str) -> None:
    tape.user(full_width(text))


def _zero_width(tape: jsonltape.Tape, text: str, secret: str) -> None:
    [at] = split_points(text, secret, 2)
    tape.user(text[:at] + ZWSP + text[at:])


def _chunks(tape: jsonltape.Tape, text: str, secret: str) -> None:
    for piece in cut(text, split_points(text, secret, 3)):
        tape.append("assistant/chunk", {"delta": piece}, ignorable=True)
    tape.flush()


def _parts(tape: jsonltape.Tape, text: str, secret: str) -> None:
    pieces = cut(text, split_points(text, secret, 2))
    tape.user([{"type": "text", "content": p} for p in pieces])


def _key(tape: jsonltape.Tape, text: str, secret: str) -> None:
    tape.user("see the key", key=text)


FORMS: dict[str, Callable[[jsonltape.Tape, str, str], None]] = {
    "plain": _message,
    "json-escaped": _json_escaped,
    "full-width": _full_width,
    "zero-width": _zero_width,
    "chunks": _chunks,
    "parts": _parts,
    "envelope-key": _key,
}
ALL_FORMS = [*FORMS, "unknown-member"]


def session(path: Path, cases: list[tuple[str, str]], form: str) -> list[int]:
    """A session holding each ``(text, secret)`` in ``form``, each case between two markers so
    its seqs are known; returns each case's first seq."""
    seqs = []
    with jsonltape.open(path, create=True, durability="manual", session_id="table") as tape:
        for i, (text, secret) in enumerate(cases):
            tape.user(f"case {i}")
            seqs.append(tape.append("turn/start", {}).seq + 1)
            if form == "unknown-member":
                tape.user("an unknown member follows")
            else:
                FORMS[form](tape, text, secret)
            tape.assistant("Noted.")  # a model call that read the case: a trace shows its input
            tape.append("turn/end", {"turn": seqs[-1] - 1, "reason": "completed"})
        tape.flush()
    if form == "unknown-member":
        _plant_unknown_members(path, [t for t, _ in cases])
    return seqs


def _plant_unknown_members(path: Path, texts: list[str]) -> None:
    """Give each case's message line an envelope member no reader knows, holding the text."""
    lines = path.read_bytes().splitlines(keepends=True)
    out, i = [], 0
    for raw in lines:
        event = json.loads(raw)
        if event.get("data", {}).get("message", {}).get("parts", [{}])[0].get("content") == (
            "an unknown member follows"
        ):
            event.pop("crc")
            event["x-note"] = texts[i]
            i += 1
            raw = _framing.frame(msgspec.json.encode(event))
        out.append(raw)
    # Offsets moved: the checkpoints are rewritten by a redacted copy of the copy, so cut them.
    kept = [r for r in out if b'"session/flush"' not in r]
    path.write_bytes(b"".join(kept))


# -- what a reader could read -----------------------------------------------------------------


def readings(text: str) -> set[str]:
    """``text`` as a reader could read it: as is, HTML entities taken, backslash escapes
    taken once and twice (Markdown, JSON, JSON in JSON), each also NFKC-normalised with
    invisible characters removed."""
    out = {text, html.unescape(text)}
    for _ in range(2):  # twice: JSON text in a JSON string (an OTLP attribute holding messages)
        out |= {re.sub(r"\\(.)", r"\1", t, flags=re.S) for t in list(out)}
    out |= {unicodedata.normalize("NFKC", _INVISIBLE.sub("", t)) for t in list(out)}
    return out


def spellings(secret: str) -> set[str]:
    return {secret, re.sub(r"\\(.)", r"\1", secret), html.escape(secret), _md_escape(secret)}


def leaks(outputs: list[str], secret: str) -> list[str]:
    return [s for out in outputs for r in readings(out) for s in spellings(secret) if s in r]


def copy_texts(path: Path) -> list[str]:
    """What a reader of the copy could read: its bytes, each line's strings joined, and the
    deltas of its chunks joined."""
    raw = path.read_bytes().decode()
    out = [raw]
    deltas = []
    for line in raw.splitlines():
        event = json.loads(line)
        out.append("".join(_strings(event)))
        if event["type"] == "assistant/chunk":
            deltas.append(event["data"]["delta"])
    out.append("".join(deltas))
    return out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for x in value:
            yield from _strings(x)
    elif isinstance(value, dict):
        for k, x in value.items():
            yield k
            yield from _strings(x)


def refused_kinds(problems: list[Any], seqs: list[int]) -> dict[int, set[str]]:
    """Case index -> the kinds of the secrets the guard reports on that case's lines."""
    found: dict[int, set[str]] = {}
    bounds = [*seqs, 1 << 60]
    for p in problems:
        if p.kind != "secret" or p.fingerprint is None:
            continue
        m = re.match(r"lines? (\d+)", p.what)
        assert m, p.what
        seq = int(m.group(1)) - 1
        kind = p.fingerprint.split(":")[0]
        case = next(i for i in range(len(seqs)) if bounds[i] - 1 <= seq < bounds[i + 1] - 1)
        found.setdefault(case, set()).add(kind)
    return found


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ALL_FORMS)
def test_every_positive_is_masked_in_every_format(tmp_path: Path, form: str) -> None:
    cases = [(text, secret) for text, secret, _ in POSITIVE]
    path = tmp_path / "pos.jsonl"
    seqs = session(path, cases, form)
    assert jsonltape.verify(path).state == "clean"

    # Export, every format: the secret is shown without redaction (where the form is shown at
    # all) and gone with it.
    shown = {fmt: export(path, fmt).text for fmt in FORMATS}  # type: ignore[arg-type]
    redacted = {fmt: export(path, fmt, redact_secrets=True).text for fmt in FORMATS}  # type: ignore[arg-type]
    for text, secret, _kind in POSITIVE:
        if form in ("plain", "json-escaped", "zero-width"):
            assert leaks(list(shown.values()), secret), f"{form}: never exported {text!r}"
        for fmt, out in redacted.items():
            assert not leaks([out], secret), f"{form}: {fmt} export leaks {text!r}"

    # The redacted copy: valid, and no reading of it holds a secret.
    dst = tmp_path / "copy.jsonl"
    report = redact_copy(path, dst)
    assert jsonltape.verify(dst).state == "clean"
    texts = copy_texts(dst)
    for text, secret, _kind in POSITIVE:
        assert not leaks(texts, secret), f"{form}: the redacted copy leaks {text!r}"
    assert sum(report.masked.values()) >= len(POSITIVE)

    # The guard: each case refused under its kind (MAX_SECRETS_SHOWN per file: one file each).
    files = []
    for i, case in enumerate(cases):
        one = tmp_path / "guard" / f"c{i}.jsonl"
        one.parent.mkdir(exist_ok=True)
        session(one, [case], form)
        files.append(one)
    problems = check_paths(files)
    by_file: dict[str, list[Any]] = {}
    for p in problems:
        by_file.setdefault(p.path, []).append(p)
    for i, (text, secret, kind) in enumerate(POSITIVE):
        got = refused_kinds(by_file.get(str(files[i]), []), [seqs[0]])
        assert kind in got.get(0, set()), f"{form}: the guard misses {text!r}: {got}"
        shown_text = "\n".join(p.what for p in by_file[str(files[i])])
        assert not leaks([shown_text], secret)
    assert check_paths([dst]) == [], "the guard refuses the redacted copy"


def test_the_counts_name_each_positive_once_by_its_kind(tmp_path: Path) -> None:
    path = tmp_path / "pos.jsonl"
    session(path, [(text, secret) for text, secret, _ in POSITIVE], "plain")
    out = export(path, "json", redact_secrets=True)
    want = Counter(kind for _, _, kind in POSITIVE)
    assert out.redacted == "redacted secrets: " + ", ".join(
        f"{n} {k}" for k, n in sorted(want.items())
    )
    report = redact_copy(path, tmp_path / "copy.jsonl")
    assert report.masked == dict(want)


# Not "parts": a part is also read alone (exports show each part), so a piece of a negative
# cut in two ("password = get" + "pass()") is judged as what it is alone. Chunks are read only
# joined: a delta is never shown on its own.
@pytest.mark.parametrize("form", ["plain", "json-escaped", "full-width", "chunks"])
def test_no_negative_is_touched(tmp_path: Path, form: str) -> None:
    cases = [(text, text[len(text) // 2 :]) for text in NEGATIVE]
    path = tmp_path / "neg.jsonl"
    session(path, cases, form)
    for fmt in FORMATS:
        out = export(path, fmt, redact_secrets=True)  # type: ignore[arg-type]
        assert out.text == export(path, fmt).text  # type: ignore[arg-type]
        assert out.redacted == "redacted secrets: none found"
    report = redact_copy(path, tmp_path / "copy.jsonl")
    assert report.masked == {} and report.lines_changed == 0
    assert [p for p in check_paths([path]) if p.kind == "secret"] == []


def test_masks_keep_the_structure_around_them(tmp_path: Path) -> None:
    path = tmp_path / "ctx.jsonl"
    session(path, [(text, secret) for text, secret, _ in POSITIVE], "plain")
    text = export(path, "json", redact_secrets=True).text
    assert "redis://:[REDACTED:url-password]@cache:6379/0" in text
    assert "postgres://app:[REDACTED:url-password]@db.internal:5432/x" in text
    assert "POSTGRES_PASSWORD: [REDACTED:assignment]" in text
    assert "export GITLAB_TOKEN=[REDACTED:assignment]" in text
    assert '{\\"DB_PASSWORD\\": \\"[REDACTED:assignment]\\"}' in text
    assert "mysql -h db -u root -p[REDACTED:mysql-password] shop" in text
    assert "AccountKey=[REDACTED:azure-storage-key];EndpointSuffix" in text
