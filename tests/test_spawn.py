"""``jsonltape._spawn``: the command line, working directory and environment of every process
jsonltape starts, and the rule that every process is started through it (an AST scan of the
library and the index). The commands that start processes are run end to end inside a hostile
clone in tests/test_spawn_hostile_cwd.py.
"""

from __future__ import annotations

import ast
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import jsonltape
from jsonltape._spawn import SAFE_CWD, child_env, command, program, python_options, start

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "jsonltape", ROOT / "daemon" / "jsonltape_daemon")
HELPER = ROOT / "jsonltape" / "_spawn.py"


# -- the rule: no process is started but through the helper ----------------------------------

#: Calls that start a process, by module.
_STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput"},
    "os": {
        "system",
        "popen",
        "fork",
        "forkpty",
        "posix_spawn",
        "posix_spawnp",
        *(f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
        *(f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    },
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}
#: Modules that start Python children with command lines of their own.
_FORBIDDEN_IMPORTS = {
    "multiprocessing",
    "concurrent.futures.process",
    "concurrent.futures.ProcessPoolExecutor",
}
#: What names the running interpreter: a Python command line is built from it.
_INTERPRETER = {"sys.executable", "sys._base_executable", "sys.orig_argv"}
#: What may name the program of a process started outside the helper: the helper's look-up
#: of a program that is not Python (git), never the interpreter.
_PROGRAM_LOOKUPS = {"program", "git_program"}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _looked_up(argv: ast.expr) -> bool:
    """Whether ``argv`` is a list whose program comes from the helper's look-up."""
    if not isinstance(argv, ast.List | ast.Tuple) or not argv.elts:
        return False
    first = argv.elts[0]
    if not isinstance(first, ast.Call):
        return False
    name = _dotted(first.func) or ""
    if name.rsplit(".", 1)[-1] not in _PROGRAM_LOOKUPS:
        return False
    words = [a.value for a in first.args if isinstance(a, ast.Constant)]
    return not any(isinstance(w, str) and w.startswith("python") for w in words)


def _forbidden(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in _FORBIDDEN_IMPORTS)


def _resolve(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The full dotted name ``node`` names, through the imports' local names."""
    dotted = _dotted(node)
    if dotted is None:
        return None
    head, dot, rest = dotted.partition(".")
    return aliases.get(head, head) + dot + rest


def spawn_offences(source: str, name: str = "<source>") -> list[str]:
    """Every place in ``source`` that starts a process (or builds a Python command line) other
    than through ``jsonltape._spawn``."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}  # local name -> what it names ("subprocess", "sys.executable")
    found: list[str] = []
    for node in ast.walk(tree):
        imported: list[tuple[str, str]] = []  # (local name, full name)
        if isinstance(node, ast.Import):
            for a in node.names:
                local = a.asname or a.name.split(".")[0]
                imported.append((local, a.name if a.asname else local))
                if _forbidden(a.name):
                    found.append(f"{name}:{node.lineno}: imports {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                imported.append((a.asname or a.name, full))
                if _forbidden(full):
                    found.append(f"{name}:{node.lineno}: imports {full}")
        aliases.update(imported)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name) and _resolve(node, aliases) in _INTERPRETER:
            found.append(f"{name}:{node.lineno}: {_resolve(node, aliases)} (a Python command)")
        if not isinstance(node, ast.Call):
            continue
        module, _, func = (_resolve(node.func, aliases) or "").rpartition(".")
        if func not in _STARTERS.get(module, ()):
            continue
        argv = node.args[0] if node.args else None
        if module != "os" and argv is not None and _looked_up(argv):
            continue
        found.append(f"{name}:{node.lineno}: {module}.{func}")
    return found


def test_no_module_starts_a_process_but_through_the_spawn_helper() -> None:
    offences = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            if path != HELPER:
                offences += spawn_offences(path.read_text(encoding="utf-8"), str(path))
    assert offences == []


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess, sys\nsubprocess.Popen([sys.executable, '-m', 'jsonltape'])",
        "import subprocess as sp\nsp.run(['python3', '-m', 'x'])",
        "from subprocess import check_output\ncheck_output(['python', '-c', 'pass'])",
        "import os, sys\nos.execv(sys.executable, [sys.executable])",
        "import os\nos.posix_spawn('/usr/bin/python3', [], {})",
        "import os\nos.system('python -m jsonltape')",
        "import sys\nargv = [sys.executable, '-m', 'jsonltape']",
        "from sys import executable\nargv = [executable]",
        "import multiprocessing\nmultiprocessing.Process(target=print).start()",
        "from concurrent.futures import ProcessPoolExecutor",
        "import asyncio\nasyncio.create_subprocess_exec('python3')",
        "import subprocess\nsubprocess.run([program('python3'), '-c', 'pass'])",
        "import subprocess\nsubprocess.run(['git', 'status'])",  # git from a bare PATH look-up
    ],
)
def test_the_scan_finds_every_way_to_start_python_outside_the_helper(code: str) -> None:
    assert spawn_offences(code) != [], code


def test_the_scan_lets_the_helpers_program_look_up_start_git() -> None:
    code = (
        "import subprocess\nfrom .._spawn import program\n"
        "subprocess.run([program('git'), 'status'], cwd='.')\n"
        "subprocess.Popen([git_program(), 'cat-file', '--batch'])\n"
    )
    assert spawn_offences(code) == []


# -- the command line -------------------------------------------------------------------------


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A directory holding a ``jsonltape`` package that leaves a marker if imported."""
    cwd, marker = tmp_path / "clone", tmp_path / "imported"
    (cwd / "jsonltape").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py"):
        (cwd / "jsonltape" / name).write_text(f"open({str(marker)!r}, 'w').close()\n")
    return cwd, marker


@pytest.mark.parametrize("safe_path", [True, False], ids=["-P", "python3.10 -c"])
def test_the_command_line_never_imports_from_the_current_directory(
    tmp_path: Path, safe_path: bool
) -> None:
    if safe_path and sys.version_info < (3, 11):
        pytest.skip("-P is Python 3.11's")
    cwd, marker = _hostile(tmp_path)
    session = tmp_path / "s.jsonl"
    with jsonltape.open(session, create=True) as tape:
        tape.user("hi")
    argv = [sys.executable, *python_options("jsonltape", safe_path=safe_path)]
    done = subprocess.run(
        [*argv, "info", str(session), "--json"], cwd=cwd, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert f'"path":"{session}"' in done.stdout  # the real jsonltape, with its arguments
    assert not marker.exists()
    # and without the option, this directory is where `python -m` would take jsonltape from
    subprocess.run([sys.executable, "-m", "jsonltape", "--version"], cwd=cwd, capture_output=True)
    assert marker.exists()


def test_the_command_is_this_interpreter_with_paths_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = command("jsonltape", "daemon", Path("rel/root"), "--index", "rel.db")
    assert argv[0] == sys.executable
    assert argv[1:-4] == python_options("jsonltape")
    assert argv[-4:] == ["daemon", str(tmp_path / "rel" / "root"), "--index", "rel.db"]
    assert command("m", python="/venv/bin/python")[0] == "/venv/bin/python"


@pytest.mark.parametrize("module", ["", "a b", "x; import os", "os.", "-m"])
def test_a_module_name_that_is_not_one_is_refused(module: str) -> None:
    with pytest.raises(ValueError):
        python_options(module)


# -- the environment ---------------------------------------------------------------------------


def test_the_childs_environment_names_no_place_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "rel", "/abs/lib", ""]))
    monkeypatch.setenv("JSONLTAPE_HOME", "data")
    monkeypatch.setenv("JSONLTAPE_ROOT", "~/sessions")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    env = child_env({"JSONLTAPE_INDEX": "postgresql://db/x"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "rel"), "/abs/lib"])
    assert env["JSONLTAPE_HOME"] == str(tmp_path / "data")
    assert env["JSONLTAPE_ROOT"] == str(tmp_path / "home" / "sessions")
    assert env["JSONLTAPE_INDEX"] == "postgresql://db/x"
    assert env["HOME"] == str(tmp_path / "home")  # the rest passes as it is
    monkeypatch.setenv("PYTHONPATH", os.pathsep)  # only the current directory
    monkeypatch.delenv("JSONLTAPE_ROOT")
    env = child_env()
    assert "PYTHONPATH" not in env and "JSONLTAPE_ROOT" not in env


def test_the_data_directory_is_passed_even_when_it_comes_from_the_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JSONLTAPE_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert child_env()["JSONLTAPE_HOME"] == str(tmp_path / "xdg" / "jsonltape")


# -- starting ---------------------------------------------------------------------------------

_WHEREAMI = """\
import json, os, sys
print(json.dumps({"cwd": os.getcwd(), "argv": sys.argv[1:], "home": os.environ["JSONLTAPE_HOME"],
                  "extra": os.environ.get("EXTRA"), "path": sys.path}))
"""


def test_start_runs_the_module_in_the_safe_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "whereami.py").write_text(_WHEREAMI)
    here = tmp_path / "here"
    here.mkdir()
    (here / "whereami.py").write_text("raise SystemExit('the planted module ran')\n")
    monkeypatch.chdir(here)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", "../lib"]))  # relative, and ''
    monkeypatch.setenv("JSONLTAPE_HOME", "data")
    proc = start("whereami", Path("rel.db"), "--flag", env={"EXTRA": "1"}, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    seen = json.loads(out)
    assert seen["cwd"] == SAFE_CWD
    assert seen["argv"] == [str(here / "rel.db"), "--flag"]
    assert seen["home"] == str(here / "data") and seen["extra"] == "1"
    assert str(here) not in seen["path"] and "" not in seen["path"]


# -- programs that are not Python ------------------------------------------------------------


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
def test_a_program_is_never_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = program("git")
    assert real is not None and os.path.isabs(real)
    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.chdir(tmp_path)
    for entry in ("", ".", "./", "sub/.."):
        monkeypatch.setenv("PATH", os.pathsep.join([entry, os.path.dirname(real)]))
        assert program("git") == real, entry
    monkeypatch.setenv("PATH", os.pathsep.join(["", "."]))
    assert program("git") is None
