"""``jsonltape usage``: every report in every format from a real index, bad input as one line
and exit 2 (never a traceback), and what sessions hold (titles, models, paths) printed as data."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from jsonltape_daemon.engines.sqlite.store import SqliteStore
from jsonltape_daemon.ingest.mirror import Mirror

import jsonltape
from jsonltape.interop import import_file

from .conftest import SAMPLES

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="no shared samples")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess: what a user's shell sees (stdout is a pipe)."""
    return subprocess.run(
        [sys.executable, "-m", "jsonltape", "usage", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JSONLTAPE_ORIGIN": "me@box", **(env or {})},
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The samples imported (Claude Code with sidechains, Codex, pi) and one hostile session."""
    tmp = tmp_path_factory.mktemp("usage-cli")
    root, src = tmp / "root", tmp / "src"
    src.mkdir()
    past = time.time() - 7200
    for source, name in (
        ("claude-code", "claude-code-v1.0.108-japanese.jsonl"),
        ("claude-code", "claude-code-v1.0.98-init.jsonl"),
        ("codex", "codex-0.104-rollout-complete.jsonl"),
        ("pi", "pi-v1-legacy-large-session.jsonl"),
    ):
        shutil.copyfile(SAMPLES / name, src / name)
        os.utime(src / name, (past, past))
        assert import_file(source, src / name, root).status == "imported"
    with jsonltape.open(
        root / "evil.jsonl", create=True, session_id="evil", title="=HYPERLINK(\x1b]0;pwn\x07)",
        cwd="/tmp/\u202eevil", agent="evil\x1b[31m/1", created=1_772_755_200_000,
    ) as tape:  # fmt: skip
        tape.assistant("hi", model="m\x1b[2J\u202e", usage={"input_tokens": 3, "output_tokens": 4})
    db = tmp / "index.db"
    store = SqliteStore(db)
    try:
        Mirror(store, str(root)).rescan()
    finally:
        store.close()
    return db


def test_the_daily_table_counts_each_response_once_and_flags_unpriced_models(index: Path) -> None:
    # claude-sonnet-4-20250514 left LiteLLM's table after 1.103.6; the shipped table keeps the
    # rates of the last release that listed it (3/15 $ per M, cache 3.75 write, 0.30 read)
    r = run("--index", str(index), "-z", "UTC")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["Date", "Models"]
    day = next(line for line in lines if line.startswith("2025-09-07"))
    # the Japanese sample and its two sidechains: ccusage's own numbers for that day
    assert day.split()[1:6] == ["claude-sonnet-4-20250514", "129", "3,629", "47,747", "324,259"]
    cost = (129 * 3 + 3_629 * 15 + 47_747 * 3.75 + 324_259 * 0.30) / 1e6
    assert day.split()[-1] == f"${cost:.2f}" == "$0.33"
    total = next(line for line in lines if line.startswith("Total"))
    assert total.endswith("*")  # the priced part, with unpriced tokens left out of it
    assert any(line.startswith("prices: LiteLLM") and "1.110.2" in line for line in lines)
    # the hostile model no table knows is the one said to be left out of the cost
    assert not any("claude-sonnet-4-20250514" in line and "not in the cost" in line
                   for line in lines)  # fmt: skip
    assert any("m\\x1b[2J\\u202e" in line and "not in the cost" in line for line in lines)
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert "m\\x1b[2J\\u202e" in r.stdout  # the hostile model name, escaped


def test_json_has_integer_micro_dollars_and_equals_the_csv(index: Path) -> None:
    j = run("weekly", "--index", str(index), "-z", "UTC", "--by", "agent", "--json")
    c = run("weekly", "--index", str(index), "-z", "UTC", "--by", "agent", "--csv")
    assert j.returncode == c.returncode == 0, j.stderr + c.stderr
    doc = json.loads(j.stdout)
    assert doc["prices"]["version"] and doc["unpriced_models"] == ["m\x1b[2J\u202e"]
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    assert len(rows) == len(doc["lines"])
    for row, line in zip(rows, doc["lines"], strict=True):
        assert isinstance(line["cost_micros"], int)
        assert (row["week"], row["agent"]) == (
            line["period"],
            line["by"]["agent"].replace("\x1b", "\\x1b"),
        )
        assert int(row["total"]) == line["tokens"]["total"]
        assert row["cost_usd"] == f"{line['cost_micros'] / 1e6:.6f}"
    assert {r["agent"] for r in rows} >= {"claude-code", "codex", "pi", "evil\\x1b[31m"}
    evil = next(r for r in rows if r["agent"].startswith("evil"))
    assert evil["models"].startswith("m\\x1b")


def test_the_session_report_rolls_sidechains_into_their_session(index: Path) -> None:
    r = run("session", "--index", str(index), "--json", "--breakdown")
    assert r.returncode == 0, r.stderr
    lines = {line["period"]: line for line in json.loads(r.stdout)["lines"]}
    ja = lines["claude-code-v1.0.108-japanese"]
    assert ja["session"]["subsessions"] == 2 and len(ja["subsessions"]) == 3
    assert sum(s["responses"] for s in ja["subsessions"]) == ja["responses"] == 20
    assert not any("sidechain" in k for k in lines)
    table = run("session", "--index", str(index), "--breakdown").stdout
    assert "  └ claude-code-v1.0.108-japanese.sidechain-" in table
    csv_text = run("session", "--index", str(index), "--breakdown", "--csv").stdout
    evil = next(row for row in csv.DictReader(io.StringIO(csv_text)) if row["session"] == "evil")
    assert evil["title"].startswith("'=HYPERLINK(")  # a spreadsheet does not run it


def test_blocks_and_monthly_reports_add_up_to_the_same_total(index: Path) -> None:
    totals = []
    for kind in ("blocks", "monthly", "daily"):
        r = run(kind, "--index", str(index), "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        totals.append(
            (doc["total"]["responses"], doc["total"]["tokens"], doc["total"]["cost_micros"])
        )
    assert totals[0] == totals[1] == totals[2]
    assert "gap of" in run("blocks", "--index", str(index), "-z", "UTC").stdout


def _bad(*args: str) -> str:
    r = run(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("jsonltape: error: ")
    return r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--by", "colour"], "'colour' is not one of model, agent, project, origin"),
        (["session", "--by", "agent"], "--by is for daily, weekly and monthly"),
        (["--breakdown"], "only the session report has them"),
        (["--json", "--csv"], "--json and --csv are two formats"),
        (["--since", "yesterday-ish"], "cannot read since 'yesterday-ish'"),
        (["--since", "2026-02-30"], "cannot read since '2026-02-30'"),
        (["--since", "20260501", "--until", "20260401"], "is before --since"),
        (["-z", "Mars/Olympus"], "unknown time zone 'Mars/Olympus'"),
        (["hourly"], "'hourly' is not one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(index: Path, args: list[str], says: str) -> None:
    assert says in _bad(*args, "--index", str(index))


def test_a_bad_price_table_is_refused_naming_it(index: Path, tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text('{"m": {"input_cost_per_token": -3}}')
    err = _bad("--index", str(index), "--prices", str(table))
    assert str(table) in err and "a price must be a number >= 0" in err
    assert "is a directory" in _bad("--index", str(index), "--prices", str(tmp_path))


def test_a_price_table_that_is_a_fifo_a_link_or_too_big_is_refused_without_waiting(
    index: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # opened blocking, the read waits for a writer forever
    assert "is not a regular file" in _bad("--index", str(index), "--prices", str(fifo))
    link = tmp_path / "link.json"
    link.symlink_to("/dev/zero")
    assert "is a symlink" in _bad("--index", str(index), "--prices", str(link))
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate((64 << 20) + 1)
    assert "is larger than" in _bad("--index", str(index), "--prices", str(big))
    assert "no such file" in _bad("--index", str(index), "--prices", str(tmp_path / "none"))


def test_another_price_table_prices_what_the_shipped_one_does_not(
    index: Path, tmp_path: Path
) -> None:
    table = tmp_path / "mine.json"
    table.write_text(
        json.dumps(
            {
                "claude-sonnet-4-20250514": {
                    "input_cost_per_token": 3e-06,
                    "output_cost_per_token": 1.5e-05,
                    "cache_creation_input_token_cost": 3.75e-06,
                    "cache_read_input_token_cost": 3e-07,
                }
            }
        )
    )
    r = run("--index", str(index), "--prices", str(table), "--json", "--since", "20250901",
            "--until", "2025-09-30", "-z", "UTC")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["unpriced_models"] == [] and doc["prices"]["path"] == str(table)
    # ccusage's figures for the same tokens at the same rates: $0.093157 and $0.331151
    assert [line["cost_micros"] for line in doc["lines"]] == [93157, 331151]


def test_an_index_from_before_usage_says_to_sync(index: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    shutil.copyfile(index, old)
    con = sqlite3.connect(old, isolation_level=None)
    con.executescript(
        "DROP TABLE usage; DROP TABLE usage_slots; DROP TABLE usage_sessions; "
        "DELETE FROM migrations WHERE version >= 9; PRAGMA user_version = 8;"
    )
    con.close()
    assert "predates usage reports: run `jsonltape sync`" in _bad("--index", str(old))
    assert "no index here yet" in _bad("--index", str(tmp_path / "none.db"))


def test_by_origin_names_this_machine(index: Path) -> None:
    r = run("monthly", "--index", str(index), "--by", "origin,model", "--json")
    doc: dict[str, Any] = json.loads(r.stdout)
    assert {line["by"]["origin"] for line in doc["lines"]} == {"me@box"}
    assert all(list(line["by"]) == ["origin", "model"] for line in doc["lines"])
    assert (
        run("--index", str(index), "--origin", "elsewhere", "--json").stdout.count('"lines":[]')
        == 1
    )


def test_the_local_time_zone_is_the_machines_with_its_dst(index: Path) -> None:
    """Without -z the days are the machine's (its $TZ here), summer time included: the same
    lines as naming the zone."""
    for zone in ("America/New_York", "Asia/Kathmandu"):
        local = json.loads(run("--index", str(index), "--json", env={"TZ": zone}).stdout)
        named = json.loads(run("--index", str(index), "--json", "-z", zone).stdout)
        assert local["timezone"] == zone and local["lines"] == named["lines"]
