"""The Cursor importer on damaged and arbitrary input (spec B.20): a bad ``state.vscdb`` row is
one verdict naming the file, table, key and column; a composer id that is not an id is refused;
bubbles and transcript lines of any shape import clean; a transcript cut at any byte imports its
whole lines and holds the rest back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsonltape
from jsonltape.cli import cli as main
from jsonltape.interop import import_paths

from . import _cursor_db as cdb
from ._agents import run
from ._cursor import TID, TRANSCRIPT, build_db
from ._importers import JSON, age, nested, problems, raws


def _bad_rows() -> st.SearchStrategy[tuple[str, object, str]]:
    """(which row, its bad value, what the verdict names)."""
    values = st.one_of(
        st.just(42), st.just(b"\xff\xfe not utf-8"), st.just("{not json"),
        st.just("[1, 2]"), st.just(json.dumps(nested(600))), st.just(json.dumps(json.dumps(7))),
        st.binary(max_size=40).filter(lambda b: not _object(b)),
        st.text(max_size=40).filter(lambda t: not _object(t.encode("utf-8", "surrogatepass"))),
    )  # fmt: skip
    keys = st.sampled_from([f"composerData:{cdb.MAIN}", f"bubbleId:{cdb.MAIN}:a3"])
    return st.tuples(keys, values, st.just("value"))


def _object(data: bytes) -> bool:
    try:
        value = json.loads(data)
        if isinstance(value, str):
            value = json.loads(value)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bad=_bad_rows())
def test_a_bad_row_is_one_verdict_naming_file_table_key_and_column(
    tmp_path_factory: pytest.TempPathFactory, bad: tuple[str, object, str]
) -> None:
    tmp = tmp_path_factory.mktemp("bad")
    db = build_db(tmp / "src", recent=False)
    key, value, column = bad
    cdb.write(db, [(key, value)])
    age(db.parent.iterdir())
    reports = run("cursor", db, tmp / "out")
    errors = [r for r in reports if r.status == "error"]
    assert len(errors) == 1, [(r.path, r.status) for r in reports]
    why = errors[0].error or ""
    assert "\n" not in why and str(db) in why and "cursorDiskKV row" in why, why
    assert repr(key) in why and column in why, why
    assert "Traceback" not in why
    assert {r.status for r in reports if r is not errors[0]} <= {"imported"}
    assert errors[0].sessions == [] or not any(Path(s).exists() for s in errors[0].sessions)


def test_a_bad_row_through_the_command_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = build_db(tmp_path / "src", recent=False)
    cdb.write(db, [(f"bubbleId:{cdb.MAIN}:a2", "x" * 3_000_000)])  # huge, and not JSON
    age(db.parent.iterdir())
    res = CliRunner().invoke(main, ["import", "--from", "cursor", str(db), "-o",
                                    str(tmp_path / "out")])  # fmt: skip
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("jsonltape: error")]
    assert len(lines) == 1 and f"'bubbleId:{cdb.MAIN}:a2'" in lines[0] and "value" in lines[0]
    assert "Traceback" not in res.output + res.stderr and len(lines[0]) < 2000


def test_a_transcript_cut_at_every_byte_imports_its_whole_lines_and_waits_for_the_rest(
    tmp_path: Path,
) -> None:
    data = TRANSCRIPT.read_bytes()
    whole = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    for cut in range(len(data) + 1):
        f = tmp_path / f"c{cut}" / "agent-transcripts" / f"{TID}.jsonl"
        f.parent.mkdir(parents=True)
        f.write_bytes(data[:cut])
        reports = list(import_paths("cursor", [f], tmp_path / f"o{cut}", settle=None))
        assert len(reports) == 1
        r = reports[0]
        done = max([w for w in whole if w <= cut], default=0)
        # a last line without its newline is a line once it is a whole JSON object
        tail = data[done:cut]
        want = data[:cut] + b"\n" if tail and _object(tail) else data[:done]
        if not want:  # nothing whole yet: nothing written, the part held back
            assert (r.status, r.error, r.sessions) == ("empty", None, []), cut
            assert (r.torn is None) == (cut == 0), cut
            continue
        assert r.status == "imported", (cut, r.error)
        assert (r.torn is None) == (len(want) >= cut), cut  # the rest waits
        kept = raws(r.sessions)
        assert "".join(kept[n] + "\n" for n in sorted(kept)).encode() == want, cut
        assert jsonltape.verify(r.sessions[0]).state == "clean"


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    fields=st.dictionaries(
        st.sampled_from(
            [
                "type",
                "text",
                "thinking",
                "toolFormerData",
                "tokenCount",
                "modelInfo",
                "modelName",
                "createdAt",
            ]
        ),
        JSON
        | st.sampled_from([1, 2])
        | st.fixed_dictionaries(
            {},
            optional={
                "name": JSON,
                "toolCallId": JSON,
                "params": JSON,
                "rawArgs": JSON,
                "status": JSON,
                "result": JSON,
                "text": JSON,
                "inputTokens": JSON,
                "outputTokens": JSON,
            },
        ),
    ),
    blob=st.booleans(),
)
def test_a_bubble_of_any_shape_imports_clean_or_is_one_verdict(
    tmp_path_factory: pytest.TempPathFactory, fields: dict[str, object], blob: bool
) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    db = build_db(tmp / "src", recent=False)
    value = json.dumps(fields)
    cdb.write(db, [(f"bubbleId:{cdb.MAIN}:a3", value.encode() if blob else value)])
    age(db.parent.iterdir())
    for r in run("cursor", db, tmp / "out"):
        assert r.status == "imported", r.error
        for session in r.sessions:
            assert jsonltape.verify(session).state == "clean"
            assert problems(session) == [], fields
        for _n, why in r.problems:
            assert "\n" not in why


_BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "thinking", "image"])},
    optional={
        k: JSON for k in ("text", "name", "input", "id", "tool_use_id", "content", "thinking")
    },
)
_LINE = st.dictionaries(
    st.sampled_from(["role", "message", "type"]),
    JSON
    | st.sampled_from(["user", "assistant", "turn_ended"])
    | st.fixed_dictionaries({"content": JSON | st.lists(_BLOCK, max_size=3)}),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(lines=st.lists(_LINE, min_size=1, max_size=6))
def test_a_transcript_of_any_lines_imports_clean_each_problem_one_line(
    tmp_path_factory: pytest.TempPathFactory, lines: list[dict[str, object]]
) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    f = tmp / "agent-transcripts" / f"{TID}.jsonl"
    f.parent.mkdir()
    f.write_text("".join(json.dumps(line) + "\n" for line in lines))
    age([f])
    for r in run("cursor", f, tmp / "out"):
        assert r.status in ("imported", "error", "empty"), r.error
        if r.status == "error":
            assert r.error is not None and "\n" not in r.error and str(f) in r.error
            continue
        for session in r.sessions:
            assert jsonltape.verify(session).state == "clean"
            assert problems(session) == [], lines
        for _n, why in r.problems:
            assert "\n" not in why


@pytest.mark.parametrize("cid", ["../../evil", "a/b", "x" * 200, "\u202eevil", " ", ""])
def test_a_composer_id_that_is_not_an_id_is_one_verdict_and_nothing_leaves_the_root(
    tmp_path: Path, cid: str
) -> None:
    db = build_db(tmp_path / "src", recent=False)
    hi = cdb.bubble(1, cdb.T0, text="hi")
    value = cdb.composer(cid, "t", [("b1", hi)])
    cdb.write(
        db, [(f"composerData:{cid}", json.dumps(value)), (f"bubbleId:{cid}:b1", json.dumps(hi))]
    )
    age(db.parent.iterdir())
    reports = run("cursor", db, tmp_path / "out")
    errors = [r.error or "" for r in reports if r.status == "error"]
    assert len(errors) == 1 and f"{f'composerData:{cid}'!r}" in errors[0], errors
    assert "names no composer id" in errors[0] and "\n" not in errors[0]
    made = [p.relative_to(tmp_path) for p in tmp_path.rglob("*.jsonl")]
    assert all(p.parts[:2] == ("out", "cursor") and len(p.parts) == 3 for p in made), made
    assert len(made) == 2  # the other composers
