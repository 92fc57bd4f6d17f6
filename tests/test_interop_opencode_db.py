"""Crafted and damaged ``opencode.db`` files (issue 29, item 10): only real tables are read, every
row's columns are checked against the types OpenCode writes (one verdict naming the file, table,
row and column; the other sessions import), and the work is capped so no file can hang an import.

The good session is the fixture's (tests/fixtures/opencode, built as test_interop_opencode.py
builds it); the crafted one beside it, ``ses_bad``, has one message and one part. A crafted
file can hold what OpenCode's schema forbids: the tables' ``NOT NULL`` is removed from the schema
(``writable_schema``, which leaves the stored rows as they are) before the bad value goes in.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jsonltape.interop import import_file
from jsonltape.interop._opencode_db import BASE_STEPS, STEPS_PER_PAGE, Database
from jsonltape.interop._opencode_store import OpenCodeStoreError, units

from .test_interop_opencode import FIX, SID, build_db

BAD = "ses_bad"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The fixture's session and ``ses_bad`` (valid so far), in a schema that takes NULLs."""
    path = build_db(FIX / "storage", tmp_path / "opencode.db")
    con = sqlite3.connect(path)
    con.execute("PRAGMA writable_schema = ON")
    con.execute("UPDATE sqlite_master SET sql = replace(sql, 'NOT NULL', '') WHERE type = 'table'")
    con.commit()
    con.close()
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created,"
        " time_updated) SELECT ?, project_id, 's', '/b', 't', '1', 9e12, 9e12 FROM session"
        " LIMIT 1",
        (BAD,),
    )
    data = {"role": "user", "time": {"created": 3}, "agent": "build"}
    con.execute("INSERT INTO message VALUES ('msg_b', ?, 3, 3, ?)", (BAD, json.dumps(data)))
    part = json.dumps({"type": "text", "text": "hello"})
    con.execute("INSERT INTO part VALUES ('prt_b', 'msg_b', ?, 3, 3, ?)", (BAD, part))
    con.commit()
    con.close()
    return path


def spoil(db: Path, sql: str) -> None:
    con = sqlite3.connect(db)
    con.execute(sql)
    con.commit()
    con.close()


def import_all(db: Path, root: Path) -> dict[str, Any]:
    """Import every session of ``db``; the reports by session (the part after ``#``)."""
    return {
        u.name.rpartition("#")[2]: import_file("opencode", u, root, settle=0) for u in units(db)
    }


ROWS = {"session": BAD, "message": "msg_b", "part": "prt_b"}
#: Every column read and OpenCode's type for it (session.sql.ts: ids and data text, times
#: integer), with values of other types: what each holds, as the verdict says it.
WRONG = {
    "integer": [("NULL", "NULL"), ("'soon'", "text"), ("1.5", "a real number"),
                ("x'01'", "a blob")],
    "text": [("NULL", "NULL"), ("x'01'", "a blob")],  # a number in a text column becomes text
}  # fmt: skip
COLUMNS = [
    ("session", "id", "text"), ("session", "time_created", "integer"),
    ("session", "time_updated", "integer"),
    ("message", "id", "text"), ("message", "time_created", "integer"),
    ("message", "time_updated", "integer"), ("message", "data", "text"),
    ("part", "id", "text"), ("part", "message_id", "text"), ("part", "time_created", "integer"),
    ("part", "time_updated", "integer"), ("part", "data", "text"),
]  # fmt: skip
CASES = [
    pytest.param(table, column, value, f"{column} holds {said}, not {wanted}",
                 id=f"{table}.{column}={value}")
    for table, column, kind in COLUMNS
    for value, said in WRONG[kind]
    for wanted in ["an integer" if kind == "integer" else "text"]
] + [
    pytest.param("message", "data", "'not json'", "data is not JSON", id="message.data=not-json"),
    pytest.param("part", "data", "'[1, 2]'", "data is not a JSON object (a list)",
                 id="part.data=list"),
    pytest.param("message", "data", "CAST(x'7b22726f6c65223a2275ff227d' AS TEXT)",
                 "data is not JSON", id="message.data=not-utf8"),
    pytest.param("part", "message_id", "CAST(x'ff' AS TEXT)", "message_id is not UTF-8 text",
                 id="part.message_id=not-utf8"),
    pytest.param("session", "id", "''", "id is not UTF-8 text, or empty", id="session.id=empty"),
    pytest.param("part", "data",
                 """'{"d":' || printf('%.*c', 600, '[') || printf('%.*c', 600, ']') || '}'""",
                 "data: arrays and objects nest deeper than 510 levels (at byte 514)",
                 id="part.data=nested-600"),
]  # fmt: skip


@pytest.mark.parametrize(("table", "column", "value", "said"), CASES)
def test_a_row_that_breaks_opencodes_types_refuses_its_session_in_one_line_naming_it(
    db: Path, tmp_path: Path, table: str, column: str, value: str, said: str
) -> None:
    spoil(db, f"UPDATE {table} SET {column} = {value} WHERE id = '{ROWS[table]}'")
    reports = import_all(db, tmp_path / "root")
    good = reports.pop(SID)
    assert good.status == "imported" and good.events > 0, good.error
    (bad,) = reports.values()
    assert bad.status == "error" and bad.sessions == [] and bad.events == 0
    error = str(bad.error)
    assert "\n" not in error and error.startswith(f"{db}: ")
    row = repr(ROWS[table])
    if column == "id":  # a row without a usable id is named by its place, or said to be so
        row = "number 2 (its id is unusable)" if table == "session" else "with an unusable id"
    assert f"{table} row {row}: {said}" in error, error
    assert error.endswith("nothing of this session is imported")
    assert not list((tmp_path / "root").rglob(f"*{BAD}*"))


def test_the_crash_of_issue_29_is_one_line_and_exit_2_at_the_command_line(
    db: Path, tmp_path: Path
) -> None:
    # session.time_updated NULL or text raised TypeError/ValueError out of the listing
    for value in ("NULL", "'soon'"):
        spoil(db, f"UPDATE session SET time_updated = {value} WHERE id = '{BAD}'")
        r = subprocess.run(
            [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "opencode", str(db),
             "-o", str(tmp_path / "root")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        errors = [line for line in r.stderr.splitlines() if line.startswith("jsonltape: error:")]
        held = "NULL" if value == "NULL" else "text"
        assert errors == [
            f"jsonltape: error: {db}: session row {BAD!r}: time_updated holds {held}, not an "
            "integer; nothing of this session is imported"
        ]
        assert r.stderr.splitlines()[-1].startswith("jsonltape: import: 2 files, 1 error, ")


RECURSIVE = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)"
    " SELECT 'm' || i AS id, 'ses_bad' AS session_id, i AS time_created, i AS time_updated,"
    " '{}' AS data FROM n"
)


@pytest.mark.parametrize(
    ("table", "create", "said"),
    [
        ("message", f"CREATE VIEW message AS {RECURSIVE}", "'message' is a view, not a table"),
        ("part", "CREATE VIEW part AS SELECT * FROM message", "'part' is a view, not a table"),
        ("session", "CREATE VIRTUAL TABLE session USING fts5(id, project_id, parent_id, directory,"
         " version, time_created, time_updated)", "'session' is a virtual table"),
        ("message", "CREATE TABLE message (id text, session_id text, time_created integer,"
         " time_updated integer, body text, data text GENERATED ALWAYS AS (body) VIRTUAL)",
         "'message' computes data when read (generated)"),
        ("part", "CREATE TABLE part (id text, session_id text, time_created integer,"
         " time_updated integer, data text)", "'part' lacks message_id"),
    ],
)  # fmt: skip
def test_only_real_tables_are_read_and_anything_else_is_refused_in_one_line(
    db: Path, tmp_path: Path, table: str, create: str, said: str
) -> None:
    con = sqlite3.connect(db)
    con.execute("PRAGMA foreign_keys = OFF")
    con.execute(f"DROP TABLE {table}")
    con.execute(create)
    con.commit()
    con.close()
    with pytest.raises(OpenCodeStoreError) as err:
        units(db)
    assert str(err.value).startswith(f"{db}: not an OpenCode database ({said}")
    # at the command line: one line, exit 2, and the recursive view never runs (no hang)
    r = subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "import", "--from", "opencode", str(db), "-o",
         str(tmp_path / "root")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, r.stderr
    assert not (tmp_path / "root" / "opencode").exists()


def _sessions(path: Path, sessions: int, parts: int, *, indexed: bool) -> Path:
    """``sessions`` sessions of one message and ``parts`` parts in all (one session holds them),
    in OpenCode's tables with or without its indexes."""
    con = sqlite3.connect(path)
    schema = (FIX / "schema.sql").read_text()
    con.executescript(schema if indexed else schema.split("CREATE INDEX", 1)[0])
    con.execute("INSERT INTO project VALUES ('p', '/', 'git', NULL, 1, 1, '[]')")
    con.executemany(
        "INSERT INTO session (id, project_id, slug, directory, title, version, time_created,"
        " time_updated) VALUES (?, 'p', 's', '/', 't', '1', ?, ?)",
        [(f"ses_{i:05d}", i, i) for i in range(sessions)],
    )
    con.executemany(
        'INSERT INTO message VALUES (?, ?, 1, 1, \'{"role":"user"}\')',
        [(f"msg_{i:05d}", f"ses_{i:05d}") for i in range(sessions)],
    )
    con.executemany(
        "INSERT INTO part VALUES (?, 'msg_00000', 'ses_00000', 1, 1, '{\"type\":\"text\"}')",
        [(f"prt_{i:06d}",) for i in range(parts)],
    )
    con.commit()
    con.close()
    return path


def test_the_work_is_capped_so_a_file_that_makes_every_read_a_scan_cannot_hang_the_import(
    tmp_path: Path,
) -> None:
    # Without OpenCode's indexes each session's read scans every part: work grows with
    # sessions x parts. The cap (steps, not time) stops it; OpenCode's own database of the same
    # rows, with its indexes, takes a small fraction of the cap.
    crafted = Database(_sessions(tmp_path / "crafted.db", 400, 60_000, indexed=False))
    real = Database(_sessions(tmp_path / "real.db", 400, 60_000, indexed=True))
    outcomes = []
    for database in (crafted, real):
        refused = []
        for row in database.sessions():
            try:
                database.messages(str(row.sid))
            except OpenCodeStoreError as exc:
                refused.append(str(exc))
        outcomes.append(refused)
    capped, fine = outcomes
    cap = BASE_STEPS + STEPS_PER_PAGE * crafted.pages
    assert capped and len(set(capped)) == 1, capped[:2]
    assert capped[0].startswith(f"{crafted.path}: reading it stopped after {cap:,} SQLite steps")
    assert cap <= crafted.steps <= cap + 1000  # it stopped at the cap
    # an indexed read costs a small part of what a page allows (measured: 180-1,500 a page)
    assert fine == [] and real.steps < STEPS_PER_PAGE * real.pages / 3
