"""Start-up: what ``import jsonltape`` and each command path import (issue 11, target e).

Every check runs a fresh interpreter: a module imported once anywhere in the test process
would hide the import under test. ``import jsonltape`` is watched with ``-X importtime``; a
command by the ``sys.modules`` it ends with, because ``-X importtime`` does not log a module
loaded through ``importlib.import_module`` or ``from package import module`` (as the lazy
command table and the lazy names load theirs). Nothing here is timed; benchmarks/bench_startup.py
measures the milliseconds.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import jsonltape
from jsonltape.cli import _COMMANDS, cli
from jsonltape.cli._base import available as _available
from jsonltape.cli._git import GIT_COMMANDS, git

from .helpers import one_turn

#: What neither the library import nor a command that does not need it may load.
HEAVY = (
    "jsonltape.fold",
    "jsonltape.interop",
    "jsonltape_daemon",
    "asyncio",
    "sqlite3",
    "watchdog",
)

_IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \| \s*(\S+)")
_MODULES = "modules at exit:"
# Prints every loaded module as the interpreter exits, however the code before it ends.
_REPORT = (
    "import atexit, sys; "
    f"atexit.register(lambda: print({_MODULES!r}, *sorted(sys.modules), file=sys.stderr)); "
)


def run(args: list[str], cwd: Path | None) -> str:
    """Stderr of a fresh ``python ARGS`` (which must exit 0)."""
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "JSONLTAPE_ROOT": str(cwd or Path.cwd())},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def importtime(code: str) -> set[str]:
    """The modules ``python -X importtime -c CODE`` logs."""
    stderr = run(["-X", "importtime", "-c", code], None)
    return {m[1] for m in map(_IMPORT_LINE.match, stderr.splitlines()) if m}


def modules_after(code: str, cwd: Path | None = None) -> set[str]:
    """``sys.modules`` when a fresh ``python -c CODE`` exits."""
    last = run(["-c", _REPORT + code], cwd).splitlines()[-1]
    assert last.startswith(_MODULES), last
    return set(last.split()[len(_MODULES.split()) :])


def command_imports(*argv: str, cwd: Path) -> set[str]:
    """``sys.modules`` at the end of ``jsonltape ARGV`` (run as the console script does)."""
    return modules_after(
        f"sys.argv = ['jsonltape', *{list(argv)!r}]; from jsonltape.cli import main; main()", cwd
    )


def at_exit(expression: str, *argv: str, cwd: Path, before: str = "pass") -> Any:
    """The value of ``expression`` (a literal; ``gc`` and ``sys`` are imported) in the last
    exit handler of ``jsonltape ARGV``: after the command and every other handler ran.
    ``before`` is a statement run first."""
    code = (
        f"import atexit, gc, sys; {before}; "
        f"atexit.register(lambda: print('at exit:', repr({expression}), file=sys.stderr)); "
        f"sys.argv = ['jsonltape', *{list(argv)!r}]; from jsonltape.cli import main; main()"
    )
    last = run(["-c", code], cwd).splitlines()[-1]
    assert last.startswith("at exit: "), last
    return ast.literal_eval(last.removeprefix("at exit: "))


def loaded(modules: set[str], *names: str) -> list[str]:
    """Which of ``modules`` are one of ``names`` or inside one of those packages."""
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


# -- the library --------------------------------------------------------------------------


def test_import_jsonltape_loads_no_module_but_itself() -> None:
    modules = importtime("import jsonltape")
    assert loaded(modules, *HEAVY) == []
    assert modules - importtime("pass") == {"jsonltape"}  # not even typing
    assert modules_after("import jsonltape") - modules_after("pass") == {"jsonltape"}


def test_first_use_of_a_name_loads_only_its_module() -> None:
    modules = modules_after("import jsonltape; jsonltape.read")
    assert "jsonltape.reader" in modules
    assert loaded(modules, *HEAVY, "jsonltape.writer", "filelock") == []


def test_every_public_name_resolves() -> None:
    for name in jsonltape.__all__:
        assert getattr(jsonltape, name) is not None, name
    assert set(jsonltape.__all__) <= set(dir(jsonltape))


def test_the_lazy_table_lists_exactly_the_public_names() -> None:
    lazy = set(jsonltape._MODULE_OF)
    assert lazy == set(jsonltape.__all__) - {"__version__"}
    assert sum(len(names) for names in jsonltape._SOURCES.values()) == len(lazy)  # no repeats


def test_star_import_binds_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from jsonltape import *", namespace)
    assert set(jsonltape.__all__) <= set(namespace)
    assert namespace["open"] is jsonltape.open and namespace["Tape"] is jsonltape.Tape


def test_public_names_are_the_objects_of_their_modules() -> None:
    from jsonltape import errors, fold, reader, writer

    assert jsonltape.open is writer.open and jsonltape.read is reader.read
    assert jsonltape.messages is fold.messages and jsonltape.LockedError is errors.LockedError


def test_repair_stays_the_function_after_its_module_is_imported(tape_path: Path) -> None:
    # Importing jsonltape.repair binds the module as the package's `repair` attribute; the
    # public name must stay the function, whichever is imported first.
    code = (
        "import jsonltape.repair, jsonltape, sys; "
        "assert callable(jsonltape.repair), jsonltape.repair; "
        "assert jsonltape.repair is sys.modules['jsonltape.repair'].repair; "
        f"print(jsonltape.repair({str(tape_path)!r}).state_before)"
    )
    with jsonltape.open(tape_path, create=True) as tape:
        one_turn(tape)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "clean"


def test_submodules_are_attributes_and_unknown_names_are_not() -> None:
    code = (
        "import jsonltape; "
        "assert jsonltape.fold.messages is jsonltape.messages; "
        "assert jsonltape.events.Event is jsonltape.Event; "
        "assert not hasattr(jsonltape, 'no_such_thing'); "
        "assert not hasattr(jsonltape, '__wrapped__')"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the command --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sessions root with one small session and an index of it, in ``<dir>/index.db``."""
    root = tmp_path_factory.mktemp("startup")
    sessions = root / "sessions"
    sessions.mkdir(mode=0o700)
    with jsonltape.open(sessions / "s.jsonl", create=True, title="start-up") as tape:
        one_turn(tape, "the migration fails")
    runner = CliRunner()
    done = runner.invoke(cli, ["sync", str(sessions), "--index", str(root / "index.db")])
    assert done.exit_code == 0, done.output
    return root


def test_help_lists_every_command_without_importing_one(workspace: Path) -> None:
    modules = command_imports("--help", cwd=workspace)
    assert loaded(modules, "jsonltape.cli._", *HEAVY) == [], "listing imported a command"
    assert loaded(modules, "jsonltape.cli") == ["jsonltape.cli", "jsonltape.cli._base"]
    assert "msgspec" not in modules


@pytest.mark.parametrize(
    "argv",
    [["cat", "sessions/s.jsonl"], ["info", "sessions/s.jsonl"], ["verify", "sessions/s.jsonl"]],
    ids=lambda argv: argv[0],
)
def test_reading_commands_load_neither_the_writer_nor_the_fold(
    workspace: Path, argv: list[str]
) -> None:
    modules = command_imports(*argv, cwd=workspace)
    assert loaded(modules, *HEAVY, "jsonltape.writer", "filelock") == []
    if argv[0] == "cat":  # the read path builds no dataclass (start-up time it does not need)
        assert loaded(modules, "dataclasses") == []


def test_append_loads_the_writer_but_not_the_fold_or_the_index(workspace: Path) -> None:
    data = '{"message":{"id":"m9","role":"user","parts":[{"type":"text","content":"hi"}]}}'
    argv = ["append", "sessions/s.jsonl", "--type", "user/message", "--data", data]
    modules = command_imports(*argv, cwd=workspace)
    assert "jsonltape.writer" in modules
    assert loaded(modules, *HEAVY, "jsonltape.repair") == []


def test_append_builds_the_data_shape_of_its_event_type_only(workspace: Path) -> None:
    # The fast shape check compiles one Struct per core type (24 of them, ~1.3 ms together).
    data = '{"message":{"id":"m8","role":"user","parts":[{"type":"text","content":"hi"}]}}'
    argv = ["append", "sessions/s.jsonl", "--type", "user/message", "--data", data]
    shapes = "sorted(sys.modules['jsonltape._validate']._SHAPES)"
    assert at_exit(shapes, *argv, cwd=workspace) == ["user/message"]


def test_the_writer_loads_the_lock_library_only_when_it_takes_a_lock(tmp_path: Path) -> None:
    assert "filelock" not in modules_after("import jsonltape.writer")
    path = tmp_path / "s.jsonl"
    opened = modules_after(f"import jsonltape; jsonltape.open({str(path)!r}, create=True).close()")
    assert "filelock" in opened


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "sessions/s.jsonl", "--format", "markdown"],
        ["messages", "sessions/s.jsonl"],
        ["todo", "sessions/s.jsonl"],
    ],
    ids=lambda argv: argv[0],
)
def test_commands_that_write_nothing_load_no_lock_library(workspace: Path, argv: list[str]) -> None:
    assert "filelock" not in command_imports(*argv, cwd=workspace)


#: Commands of each kind: no library, a reader, the writer, the index.
_EACH_KIND = pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["cat", "sessions/s.jsonl"],
        ["append", "sessions/s.jsonl", "--type", "note/x", "--ignorable", "--data", "{}"],
        ["search", "migration", "--index", "index.db"],
    ],
    ids=lambda argv: argv[0],
)


@_EACH_KIND
def test_a_command_starts_without_a_collection(workspace: Path, argv: list[str]) -> None:
    # Everything start-up allocates lives until exit: a collection there traces it for nothing.
    # Counted from main() on (the console script imports jsonltape.cli, and click, before it).
    count = (
        "from jsonltape.cli import main; "
        "C = []; gc.callbacks.append(lambda phase, info: C.append(info['generation']))"
    )
    assert at_exit("C", *argv, cwd=workspace, before=count) == []


def test_the_collector_runs_as_usual_once_a_command_allocates_past_its_start_up() -> None:
    code = (
        "import gc; from jsonltape.cli import _defer_first_collection, _FIRST_COLLECTION; "
        "default = gc.get_threshold(); _defer_first_collection(); "
        "assert gc.get_threshold() == (_FIRST_COLLECTION, *default[1:]), gc.get_threshold(); "
        "kept = [[] for _ in range(_FIRST_COLLECTION + 1000)]; "
        "assert gc.get_threshold() == default, gc.get_threshold()"
    )
    run(["-c", code], None)


def test_the_collector_runs_no_code_of_the_command_after_its_first_collection() -> None:
    # A signal's handler runs in the first Python code after the signal came, and a
    # KeyboardInterrupt raised in a collector's callback is printed and dropped: the callback
    # ran at every collection, and Ctrl-C during an import was lost one time in ten.
    code = (
        "import gc; from jsonltape.cli import _defer_first_collection, _FIRST_COLLECTION; "
        "before = list(gc.callbacks); _defer_first_collection(); "
        "assert len(gc.callbacks) == len(before) + 1; "
        "kept = [[] for _ in range(_FIRST_COLLECTION + 1000)]; "
        "assert gc.callbacks == before, gc.callbacks"
    )
    run(["-c", code], None)


@_EACH_KIND
def test_a_command_leaves_the_interpreters_last_collections_nothing_to_trace(
    workspace: Path, argv: list[str]
) -> None:
    # At exit the interpreter collects garbage over every object the GC tracks: the modules,
    # classes and functions of every import (~15 ms for `append`). The command freezes them.
    frozen, tracked = at_exit(
        "(gc.get_freeze_count(), len(gc.get_objects()))", *argv, cwd=workspace
    )
    assert frozen > 5000
    assert tracked * 100 < frozen


@pytest.mark.parametrize(
    "argv",
    [["search", "migration"], ["sessions"], ["show", "sessions/s.jsonl", "--last", "1"]],
    ids=lambda argv: argv[0],
)
def test_queries_load_only_the_read_side_of_the_index(workspace: Path, argv: list[str]) -> None:
    modules = command_imports(*argv, "--index", "index.db", cwd=workspace)
    assert "sqlite3" in modules and "jsonltape_daemon.engines.sqlite.search" in modules
    writing_side = ("ingest", "store", "foreign", "service", "watcher", "fts_helper")
    assert loaded(modules, *(f"jsonltape_daemon.{m}" for m in writing_side)) == []
    assert loaded(modules, "watchdog", "filelock", "asyncio", "jsonltape.writer") == []
    assert loaded(modules, "jsonltape.fold", "jsonltape.interop") == []
    # the reader's protocol includes usage reports' (a light module), not the reports
    assert loaded(modules, "jsonltape.usage._report", "jsonltape.usage._prices", "zoneinfo") == []


@pytest.mark.parametrize(
    "argv",
    [["search", "migration"], ["sessions"], ["show", "sessions/s.jsonl", "--last", "1"]],
    ids=lambda argv: argv[0],
)
def test_queries_load_neither_the_daemon_commands_nor_the_postgresql_door(
    workspace: Path, argv: list[str]
) -> None:
    # Given --index, a query needs none of these: the daemon group's module (its commands and
    # the project-root helpers), the PostgreSQL connection module, the data-dir lookup.
    modules = command_imports(*argv, "--index", "index.db", cwd=workspace)
    unneeded = (
        "jsonltape.cli._daemon_cmds",
        "jsonltape_daemon.engines.postgres.conn",
        "jsonltape._project",
    )
    assert loaded(modules, *unneeded, "jsonltape._fs", "fcntl") == []


def test_search_loads_no_event_structs_and_no_dataclasses(workspace: Path) -> None:
    # The query path needs neither: events' Structs and dataclasses cost ~4 ms at start-up.
    modules = command_imports("search", "migration", "--index", "index.db", cwd=workspace)
    assert loaded(modules, "jsonltape.events", "dataclasses") == []


def test_sync_does_not_load_the_daemon_watcher(workspace: Path) -> None:
    modules = command_imports("sync", "sessions", "--index", "index.db", cwd=workspace)
    assert "jsonltape_daemon.ingest.ingestor" in modules
    assert loaded(modules, "watchdog", "asyncio", "jsonltape_daemon.service.daemon") == []


# -- the help table -----------------------------------------------------------------------


#: Commands of issue 12 whose modules land separately: listed once their module exists.
LATER = {"_git_check", "_git_merge"}


def _present(table: dict[str, tuple[str, str, str]]) -> dict[str, tuple[str, str, str]]:
    return {n: t for n, t in table.items() if t[0] not in LATER or _available(t[0])}


@pytest.mark.parametrize(
    ("group", "table"), [(cli, _COMMANDS), (git, GIT_COMMANDS)], ids=["jsonltape", "git"]
)
def test_the_help_table_holds_each_commands_own_first_paragraph(
    group: click.Group, table: dict[str, tuple[str, str, str]]
) -> None:
    ctx = click.Context(group)
    for name, (_module, _attr, summary) in _present(table).items():
        command = group.get_command(ctx, name)
        assert command is not None and command.help is not None, name
        first = " ".join(command.help.split("\n\n")[0].split())
        assert summary == first, f"the help table entry of {name!r} is out of date"


@pytest.mark.parametrize(
    ("group", "table"), [(cli, _COMMANDS), (git, GIT_COMMANDS)], ids=["jsonltape", "git"]
)
def test_help_lists_the_commands_as_click_would_with_all_of_them_loaded(
    group: click.Group, table: dict[str, tuple[str, str, str]]
) -> None:
    ctx = click.Context(group, info_name="jsonltape")
    lazy, eager = click.HelpFormatter(width=100), click.HelpFormatter(width=100)
    group.format_commands(ctx, lazy)
    click.Group.format_commands(group, ctx, eager)  # click's own: imports every command
    assert lazy.getvalue() == eager.getvalue()
    assert all(f"  {name} " in lazy.getvalue() for name in _present(table))


def test_a_command_whose_module_is_missing_is_not_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GIT_COMMANDS, "not-yet", ("_no_such_module", "x", "Not there yet."))
    ctx = click.Context(git, info_name="git")
    assert "not-yet" not in git.list_commands(ctx)
    assert git.get_command(ctx, "not-yet") is None
    assert {"install", "status"} <= set(git.list_commands(ctx))


def test_git_help_imports_neither_the_git_library_nor_the_lazy_subcommands(
    workspace: Path,
) -> None:
    modules = command_imports("git", "--help", cwd=workspace)
    assert loaded(modules, "jsonltape.git", *(f"jsonltape.cli.{m}" for m in LATER)) == []
    assert loaded(modules, *HEAVY) == []


# -- the query's output ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of 30 sessions of 10 turns, each with a message that says "migration"."""
    root = tmp_path_factory.mktemp("busy")
    sessions = root / "sessions"
    sessions.mkdir(mode=0o700)
    for n in range(30):
        with jsonltape.open(sessions / f"s{n:02}.jsonl", create=True, title=f"busy {n}") as tape:
            for i in range(10):
                one_turn(tape, f"the migration number {i} adds a NOT NULL column to the table")
    done = CliRunner().invoke(cli, ["sync", str(sessions), "--index", str(root / "index.db")])
    assert done.exit_code == 0, done.output
    return root / "index.db"


# Runs the command with a stdout that counts the writes reaching the file (each flush is one),
# then prints the count and the lines written on stderr.
_COUNTED = """
import atexit, io, sys
class Raw(io.RawIOBase):
    writes, data = 0, b""
    def writable(self): return True
    def write(self, b):
        Raw.writes += 1
        Raw.data += bytes(b)
        return len(b)
sys.stdout = io.TextIOWrapper(io.BufferedWriter(Raw()), encoding="utf-8")
def report():
    sys.stdout.flush()
    print("writes", Raw.writes, "lines", Raw.data.count(b"\\n"), file=sys.stderr)
atexit.register(report)
sys.argv = ["jsonltape", *sys.argv[1:]]
from jsonltape.cli import main
main()
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "migration", "--limit", "100"],
        ["search", "migration", "--limit", "100", "--json"],
        ["sessions"],
        ["show", "s00.jsonl", "--last", "100"],
    ],
    ids=["search", "search-json", "sessions", "show"],
)
def test_a_query_writes_its_output_a_block_at_a_time_not_a_line(
    busy: Path, argv: list[str]
) -> None:
    if argv[0] == "show":
        argv = ["show", str(busy.parent / "sessions" / argv[1]), *argv[2:]]
    done = subprocess.run(
        [sys.executable, "-c", _COUNTED, *argv, "--index", str(busy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    words = done.stderr.split()
    writes, lines = int(words[words.index("writes") + 1]), int(words[words.index("lines") + 1])
    # 3 lines a hit (one in JSON); a line a session; 3 or more a message (20 in a session)
    expected = 100 if "--json" in argv else {"search": 300, "sessions": 30}.get(argv[0], 60)
    assert lines >= expected
    assert writes * 3 <= lines  # blocks of 4 KiB; a line a write was `writes == lines`


def test_a_reader_that_leaves_a_long_search_early_gets_no_error_line(busy: Path) -> None:
    # More than a pipe buffer of output: a write after the reader left fails (EPIPE), which
    # click turns into a quiet exit 1. Even unbuffered, where one write of everything cut short
    # by the reader's leaving would be dropped silently and end in exit 0.
    search = subprocess.Popen(
        [sys.executable, "-m", "jsonltape", "search", "migration", "--limit", "1000"]
        + ["--index", str(busy)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert search.stdout is not None and search.stderr is not None
    assert search.stdout.read(10)
    search.stdout.close()  # what `| head -c 10` does
    assert search.wait(timeout=60) != 0
    with search.stderr:
        assert search.stderr.read() == b""
