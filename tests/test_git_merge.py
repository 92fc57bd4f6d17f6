"""The merge driver (``jsonltape git merge-driver``) and ``git adopt`` with the real ``git``
binary: two clones append to one session and pull; criss-cross merges, a rebase, a
cherry-pick and a repeated merge record nothing twice; a rewritten history is a conflict that
leaves ours alone; ``merge=union`` on the same scenario breaks the file (the regression
reference); their version is shown by ``messages --branch`` and made current by ``adopt``.

Repositories are set up by ``jsonltape git install`` (the driver, ``recursive``, the hooks that
restore 0600), in an isolated HOME (see :func:`tests.test_git_install.git_env`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import jsonltape

from ._records import forge_record, held_lines, malformed_record
from .helpers import one_turn
from .test_git_install import clone, commit_all, git, git_env, jt, make_repo, mode

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
__all__ = ["git_env"]  # the fixture, imported for the tests below

SESSION = ".jsonltape/sessions/s.jsonl"
BOOKKEEPING = {"session/flush", "branch/start"}


# -- helpers ------------------------------------------------------------------------------


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def identities(path: Path) -> Counter[tuple[int, str]]:
    """Every event's identity (seq, crc) as first written — a branch/event's origin — with
    how often the file holds it; bookkeeping left out."""
    out: Counter[tuple[int, str]] = Counter()
    for line in lines(path):
        if line["type"] in BOOKKEEPING:
            continue
        if line["type"] == "branch/event":
            out[(line["data"]["origin"]["seq"], line["data"]["origin"]["crc"])] += 1
        else:
            out[(line["seq"], line["crc"])] += 1
    return out


def texts(body: dict[str, Any]) -> list[str]:
    return [
        p["content"]
        for m in body["messages"]
        for p in m["message"]["parts"]
        if p.get("type") == "text"
    ]


def messages(repo: Path, *args: str) -> dict[str, Any]:
    done = jt(repo, "messages", SESSION, *args)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def append(repo: Path, text: str, *, commit: bool = True) -> None:
    with jsonltape.open(repo / SESSION, create="if-missing", session_id="shared") as tape:
        one_turn(tape, text, with_tool=True)
    if commit:
        commit_all(repo, text)


def verify_clean(path: Path) -> None:
    done = jt(path.parent, "verify", path.name)
    assert done.returncode == 0 and ": clean," in done.stdout, done.stdout + done.stderr


def installed(repo: Path) -> Path:
    done = jt(repo, "git", "install")
    assert done.returncode == 0, done.stderr
    return repo


@pytest.fixture
def pair(git_env: Path, tmp_path: Path) -> tuple[Path, Path]:
    """alice and bob: two clones of one repository holding a session of one turn."""
    alice = installed(make_repo(tmp_path / "alice"))
    append(alice, "the start")
    bob = installed(clone(alice, tmp_path / "bob"))
    return alice, bob


def pull(repo: Path, other: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return git(repo, "pull", "-q", "--no-edit", *extra, str(other), "main", check=False)


# -- pulling --------------------------------------------------------------------------------


def test_a_one_sided_append_pulls_as_a_fast_forward_byte_for_byte(pair: tuple[Path, Path]) -> None:
    alice, bob = pair
    append(alice, "only alice")
    done = pull(bob, alice)
    assert done.returncode == 0, done.stderr
    assert (bob / SESSION).read_bytes() == (alice / SESSION).read_bytes()
    assert mode(bob / SESSION) == 0o600


def test_both_sides_appending_merge_into_ours_plus_theirs_recorded_once(
    pair: tuple[Path, Path],
) -> None:
    alice, bob = pair
    append(alice, "alice 1")
    append(bob, "bob 1")
    ours = (bob / SESSION).read_bytes()
    want = identities(alice / SESSION) | identities(bob / SESSION)
    done = pull(bob, alice)
    assert done.returncode == 0, done.stderr
    merged = bob / SESSION
    assert "recorded as branch" in done.stderr
    data = merged.read_bytes()
    assert data.startswith(ours)  # ours as it was, then theirs
    verify_clean(merged)  # dense seqs, every crc, spans
    assert lines(merged)[0] == lines(alice / SESSION)[0]  # the header unchanged
    got = identities(merged)
    assert set(got) == set(want) and max(got.values()) == 1
    assert mode(merged) == 0o600
    # The surface is ours: theirs is recorded, not applied.
    assert "reply to alice 1" not in texts(messages(bob))
    assert "reply to bob 1" in texts(messages(bob))


def test_messages_branch_shows_their_history_and_all_versions_lists_it(
    pair: tuple[Path, Path],
) -> None:
    alice, bob = pair
    append(alice, "alice 1")
    append(bob, "bob 1")
    assert pull(bob, alice).returncode == 0
    receipt = next(x["seq"] for x in lines(bob / SESSION) if x["type"] == "branch/start")
    theirs = messages(bob, "--branch", str(receipt))
    assert texts(theirs) == texts(messages(alice))  # their model-visible history, exactly
    every = messages(bob, "--all-versions")["messages"]
    recorded = [m for m in every if m["status"] == "branch"]
    assert {m["by"] for m in recorded} == {receipt}
    assert "reply to alice 1" in texts({"messages": recorded})


def test_adopt_makes_their_messages_current_and_adopting_twice_adds_nothing(
    pair: tuple[Path, Path],
) -> None:
    alice, bob = pair
    append(alice, "alice 1")
    append(bob, "bob 1")
    assert pull(bob, alice).returncode == 0
    receipt = next(x["seq"] for x in lines(bob / SESSION) if x["type"] == "branch/start")
    done = jt(bob, "git", "adopt", SESSION, "--branch", str(receipt))
    assert done.returncode == 0, done.stderr
    assert "adopted branch" in done.stdout
    assert texts(messages(bob)) == texts(messages(alice))
    verify_clean(bob / SESSION)
    before = (bob / SESSION).read_bytes()
    again = jt(bob, "git", "adopt", SESSION, "--branch", str(receipt))
    assert again.returncode == 0 and "nothing written" in again.stdout
    assert (bob / SESSION).read_bytes() == before


def test_a_rewritten_history_is_a_conflict_that_leaves_ours_untouched(
    pair: tuple[Path, Path],
) -> None:
    alice, bob = pair
    append(alice, "alice 1")
    path = bob / SESSION
    data = path.read_bytes()
    cut = data.rfind(b'"type":"turn/start"')  # drop the last turn (a line boundary)
    cut = data.rfind(b"\n", 0, cut) + 1
    path.write_bytes(data[:cut])
    append(bob, "bob instead")
    ours = path.read_bytes()
    done = pull(bob, alice)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "ours lacks seq " in out and "either ours rewrote history, or" in out
    assert path.read_bytes() == ours  # %A left as it was: no conflict markers


def test_merge_union_on_the_same_scenario_breaks_seq_density(git_env: Path, tmp_path: Path) -> None:
    """The regression reference: git's union driver interleaves lines, so the file is damaged
    (this is what merge=jsonltape is for)."""
    alice = make_repo(tmp_path / "alice")
    (alice / ".gitattributes").write_text("*.jsonl merge=union\n")
    append(alice, "the start")
    bob = clone(alice, tmp_path / "bob")
    append(alice, "alice 1")
    append(bob, "bob 1")
    done = pull(bob, alice)
    assert done.returncode == 0, done.stderr
    check = jt(bob / ".jsonltape/sessions", "verify", "s.jsonl")
    assert check.returncode != 0 and ": clean," not in check.stdout


# -- repeated, criss-cross, rebase, cherry-pick -------------------------------------------------


@pytest.fixture
def repo(git_env: Path, tmp_path: Path) -> Path:
    r = installed(make_repo(tmp_path / "repo"))
    append(r, "base")
    return r


def _merge(repo: Path, rev: str) -> None:
    done = git(repo, "merge", "-q", "--no-edit", rev, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _no_duplicates(path: Path) -> Counter[tuple[int, str]]:
    verify_clean(path)
    got = identities(path)
    assert max(got.values()) == 1, [i for i, n in got.items() if n > 1]
    return got


def test_criss_cross_merges_and_a_third_merge_record_nothing_twice(repo: Path) -> None:
    git(repo, "branch", "y")
    git(repo, "checkout", "-q", "-b", "x")
    append(repo, "x 1")
    x1 = git(repo, "rev-parse", "HEAD").stdout.strip()
    git(repo, "checkout", "-q", "y")
    append(repo, "y 1")
    y1 = git(repo, "rev-parse", "HEAD").stdout.strip()
    _merge(repo, x1)  # y records x 1
    git(repo, "checkout", "-q", "x")
    _merge(repo, y1)  # x records y 1: a criss-cross
    _merge(repo, "y")  # two merge bases: the virtual ancestor is merged by the driver too
    path = repo / SESSION
    first = _no_duplicates(path)
    # Both sides go on; the third merge of the same branches records only what is new.
    append(repo, "x 2")
    git(repo, "checkout", "-q", "y")
    append(repo, "y 2")
    y_ids = identities(path)
    git(repo, "checkout", "-q", "x")
    _merge(repo, "y")
    got = _no_duplicates(path)
    assert set(first) | set(y_ids) <= set(got)
    git(repo, "checkout", "-q", "y")
    _merge(repo, "x")  # and back: everything of x is recorded in y, once
    assert set(_no_duplicates(path)) == set(got)


def test_a_rebase_replays_a_session_commit_without_duplicates(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "topic")
    append(repo, "topic 1")
    topic = identities(repo / SESSION)
    git(repo, "checkout", "-q", "main")
    append(repo, "main 1")
    main = identities(repo / SESSION)
    git(repo, "checkout", "-q", "topic")
    done = git(repo, "rebase", "-q", "main", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    got = _no_duplicates(repo / SESSION)
    assert set(got) == set(topic) | set(main)
    git(repo, "checkout", "-q", "main")
    _merge(repo, "topic")  # a fast-forward now: nothing recorded twice
    assert set(_no_duplicates(repo / SESSION)) == set(got)


def test_a_cherry_pick_then_a_merge_of_its_branch_record_nothing_twice(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "side")
    append(repo, "side 1")
    pick = git(repo, "rev-parse", "HEAD").stdout.strip()
    append(repo, "side 2")
    git(repo, "checkout", "-q", "main")
    append(repo, "main 1")
    done = git(repo, "cherry-pick", pick, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    _no_duplicates(repo / SESSION)
    _merge(repo, "side")
    got = _no_duplicates(repo / SESSION)
    git(repo, "checkout", "-q", "side")
    assert set(identities(repo / SESSION)) <= set(got)


# -- the driver by hand, and the benchmark at a tiny size -------------------------------------


def test_the_driver_exits_1_on_a_torn_side_and_names_it(tmp_path: Path) -> None:
    o = tmp_path / "o.jsonl"
    with jsonltape.open(o, create=True, session_id="s") as tape:
        one_turn(tape, "base")
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    shutil.copy(o, a)
    b.write_bytes(o.read_bytes() + b'{"seq":99')
    ours = a.read_bytes()
    done = jt(tmp_path, "git", "merge-driver", str(o), str(a), str(b), "s.jsonl")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "theirs has a torn tail at line" in done.stderr
    assert a.read_bytes() == ours


def test_the_merge_benchmark_runs_at_a_tiny_size(tmp_path: Path) -> None:
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_git_merge.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--mb", "0.2", "--events", "20", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "| jsonltape git merge-driver |" in done.stdout
    assert "| git merge-file |" in done.stdout


@pytest.mark.parametrize("type_", ["branch/start", "branch/event"])
def test_the_writer_refuses_branch_lines_from_callers(tmp_path: Path, type_: str) -> None:
    refused = pytest.raises(jsonltape.InvalidEventError, match="written by the writer itself")
    with jsonltape.open(tmp_path / "s.jsonl", create=True) as tape, refused:
        tape.append(type_, {}, ignorable=True)


# -- what a collaborator commits: forged and malformed records --------------------------------


def commit_bytes(repo: Path, data: bytes, message: str) -> None:
    """Commit ``data`` as the session, as a collaborator who bypasses the hooks would."""
    (repo / SESSION).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message)


def test_a_forged_record_on_one_side_does_not_drop_the_line_it_names(
    pair: tuple[Path, Path],
) -> None:
    """Bob fetches Alice's work, sees her line, and commits a well-formed record of a line
    with its seq and CRC-32 but his text; then he pulls her branch. Before, the merge took her
    line for recorded: her text was nowhere in his file, which verified clean."""
    alice, bob = pair
    append(alice, "alice: the real plan")
    git(bob, "fetch", "-q", str(alice), "main")
    hers = git(bob, "show", f"FETCH_HEAD:{SESSION}").stdout.encode()
    victim = next(x for x in hers.splitlines() if b"alice: the real plan" in x)
    commit_bytes(bob, forge_record((bob / SESSION).read_bytes(), victim, "bob: forged"), "f")
    done = pull(bob, alice)
    assert done.returncode == 0, done.stderr
    merged = bob / SESSION
    verify_clean(merged)
    assert held_lines(merged.read_bytes())[victim] == 1  # her line, byte for byte
    receipt = [x["seq"] for x in lines(merged) if x["type"] == "branch/start"][-1]  # the merge's
    assert texts(messages(bob, "--branch", str(receipt))) == texts(messages(alice))
    # And Alice pulling Bob's branch keeps his forgery beside her line: nothing is dropped.
    done = pull(alice, bob)
    assert done.returncode == 0, done.stderr
    held = held_lines((alice / SESSION).read_bytes())
    assert held[victim] == 1 and any(b"bob: forged" in x for x in held)


@pytest.fixture
def diverged(pair: tuple[Path, Path]) -> tuple[Path, Path]:
    """alice and bob, each with a turn of their own after the shared one."""
    alice, bob = pair
    append(alice, "alice 1")
    append(bob, "bob 1")
    return alice, bob


def test_a_malformed_record_makes_the_merge_a_conflict_git_reports_with_one_line(
    diverged: tuple[Path, Path],
) -> None:
    alice, bob = diverged
    commit_bytes(bob, malformed_record((bob / SESSION).read_bytes()), "malformed")
    ours = (alice / SESSION).read_bytes()
    done = pull(alice, bob)
    assert done.returncode != 0 and "Traceback" not in done.stdout + done.stderr
    said = [x for x in done.stderr.splitlines() if x.startswith("jsonltape:")]
    assert len(said) == 1 and "conflict: theirs is corrupt at line" in said[0], done.stderr
    assert (alice / SESSION).read_bytes() == ours  # %A as it was: no conflict markers
    status = git(alice, "status", "--porcelain").stdout
    assert f"UU {SESSION}" in status  # git's conflict path: the user resolves it
    git(alice, "merge", "--abort")


# -- cherry-pick ---------------------------------------------------------------------------------


def test_cherry_picking_a_later_commit_says_why_and_picking_the_commits_before_it_works(
    repo: Path,
) -> None:
    """git gives the picked commit's parent as the ancestor: ours never had its lines, which
    three files cannot tell from a rewritten history. The conflict says both; picking the
    commits before it too goes through, and a later merge records nothing twice."""
    git(repo, "checkout", "-q", "-b", "side")
    append(repo, "side 1")
    first = git(repo, "rev-parse", "HEAD").stdout.strip()
    append(repo, "side 2")
    second = git(repo, "rev-parse", "HEAD").stdout.strip()
    git(repo, "checkout", "-q", "main")
    append(repo, "main 1")
    ours = (repo / SESSION).read_bytes()
    done = git(repo, "cherry-pick", second, check=False)
    assert done.returncode != 0
    said = [x for x in done.stderr.splitlines() if x.startswith("jsonltape:")]
    assert len(said) == 1, done.stderr
    assert "ours lacks seq " in said[0] and "either ours rewrote history, or" in said[0]
    assert "a cherry-pick or revert gives the picked commit's parent" in said[0]
    assert (repo / SESSION).read_bytes() == ours
    git(repo, "cherry-pick", "--abort")
    done = git(repo, "cherry-pick", first, second, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    picked = _no_duplicates(repo / SESSION)
    git(repo, "checkout", "-q", "side")
    side = identities(repo / SESSION)
    assert set(side) <= set(picked)
    git(repo, "checkout", "-q", "main")
    _merge(repo, "side")
    assert set(_no_duplicates(repo / SESSION)) == set(picked)


# -- textconv of a merged file -------------------------------------------------------------------


def test_git_diff_of_a_merge_shows_their_recorded_events_as_transcript_lines(
    diverged: tuple[Path, Path],
) -> None:
    alice, bob = diverged
    assert pull(bob, alice).returncode == 0
    receipt = next(x for x in lines(bob / SESSION) if x["type"] == "branch/start")
    diff = git(bob, "diff", "HEAD^1", "HEAD", "--", SESSION).stdout
    added = [x[1:] for x in diff.splitlines() if x.startswith("+") and not x.startswith("+++")]
    assert '{"branch"' not in diff and '"origin"' not in diff  # no raw records
    assert f"branch/start at {receipt['data']['at']} head {receipt['data']['head']}," in diff
    shown = [x for x in added if f"[branch {receipt['seq']}, seq " in x]
    assert len(shown) == receipt["data"]["count"]
    assert any(x.endswith("user: alice 1") for x in shown)
    assert any("assistant: reply to alice 1" in x for x in shown)
