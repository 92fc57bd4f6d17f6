"""The README says what the code does: its library example runs, its commands exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

import jsonltape
from jsonltape.cli import cli, fail
from jsonltape.errors import JsonltapeError

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end >= 0 else None]


def test_readme_library_example_runs(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", _section("Library"), re.S)[0]
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "clean"
    assert "tool/result" in proc.stdout


def test_readme_index_api_example_runs(tmp_path: Path) -> None:
    code = re.findall(r"```python\n(.*?)```", _section("Library"), re.S)[1]
    with jsonltape.open(tmp_path / "sessions" / "s.jsonl", create=True) as tape:
        tape.tool_result("c1", "FileNotFoundError: no such file")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    counts, sizes = proc.stdout.splitlines()
    assert counts.startswith("1 [(") and "NotFound" in counts  # the match marked in its snippet
    assert "messages" in sizes


_CANNED_AGENTS_MODEL = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from agents import set_tracing_disabled
from tests.test_adapter_openai_agents import CannedModel, reply
set_tracing_disabled(True)
model = CannedModel([[reply("m1", "Hello!")], [reply("m2", "You said hi.")]])
"""


def test_readme_framework_examples_run(tmp_path: Path) -> None:
    """Each example of "Use with your agent framework" runs as written (no model is called:
    the examples use the frameworks' own fake models) and leaves a clean session behind."""
    blocks = re.findall(r"```python\n(.*?)```", _section("Use with your agent framework"), re.S)
    assert len(blocks) >= 3
    for i, code in enumerate(blocks):
        if 'model="gpt-5"' in code:  # the Agents SDK example: a canned model, no network
            code = _CANNED_AGENTS_MODEL + code.replace('model="gpt-5"', "model=model")
        cwd = tmp_path / str(i)
        cwd.mkdir()
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
        written = list(cwd.rglob("*.jsonl"))
        assert written, f"example {i} wrote no session"
        for path in written:
            assert jsonltape.verify(path).state == "clean", path


def _commands() -> list[tuple[str, click.Command]]:
    """Every command and group, all levels down: ("index status", <Command>), ..."""
    out: list[tuple[str, click.Command]] = []

    def walk(group: click.Group, prefix: str) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert cmd is not None, name
            out.append((f"{prefix}{name}", cmd))
            if isinstance(cmd, click.Group):
                walk(cmd, f"{prefix}{name} ")

    walk(cli, "")
    return out


def test_every_command_option_and_argument_has_help() -> None:
    """Like sqlite-utils' docs test: a command without a docstring, an option without help=,
    or an argument its docstring never mentions fails here, in every group."""
    missing: list[str] = []
    for name, cmd in [("jsonltape", cli), *_commands()]:
        text = (cmd.help or "").strip()
        if not text:
            missing.append(f"{name}: no help text")
        for param in cmd.params:
            if isinstance(param, click.Option):
                if not (param.help or "").strip() and "--help" not in param.opts:
                    missing.append(f"{name} {param.opts[0]}: no help=")
            elif isinstance(param, click.Argument):
                label = (param.metavar or param.name or "").strip("[].").upper()
                if label not in text.upper():
                    missing.append(f"{name} {label}: the docstring does not say what it is")
    assert not missing, "\n".join(missing)


def _readme_commands() -> set[str]:
    """The commands the README's command tables name, groups spelled out: "index status"."""
    tables = "\n".join(
        ln for ln in README.splitlines() if ln.startswith("| `") or ln.startswith("| command")
    )
    names = set(re.findall(r"^\| `([a-z]+)[ `]", tables, re.M))
    names |= set(re.findall(r"· `([a-z]+)[ `]", tables))
    for group, subs in re.findall(r"`([a-z]+) ([a-z-]+(?:\\\|[a-z-]+)+)`", tables):
        names |= {f"{group} {sub}" for sub in subs.split("\\|")}
    return names


def test_every_command_is_in_the_readme_and_every_readme_command_exists() -> None:
    documented = _readme_commands()
    actual = {name for name, _cmd in _commands()}
    assert {"new", "append", "verify", "repair", "messages", "fork", "sync", "import"} <= documented
    leaves = {name for name, cmd in _commands() if not isinstance(cmd, click.Group)}
    assert leaves - documented == set(), "commands missing from the README's tables"
    assert documented - actual == set(), "the README names commands that do not exist"
    runner = CliRunner()
    for name in sorted(documented):
        result = runner.invoke(cli, [*name.split(), "--help"])
        assert result.exit_code == 0, (name, result.output)


def test_readme_plain_python_reader_runs(tmp_path: Path) -> None:
    import jsonltape

    with jsonltape.open(tmp_path / "s.jsonl", create=True) as tape:
        tape.user("hi")
    code = re.findall(r"```python\n(.*?)```", _section("The format"), re.S)[0]
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["session/start", "user/message", "session/flush"]


def test_the_readme_first_command_runs_the_demo(tmp_path: Path) -> None:
    """`python -m jsonltape.demo`, as the Set-up section runs it: a real interpreter in an
    empty directory; it writes a session and its crashed copy, repairs the copy, indexes both
    and finds the phrase."""
    assert "python -m jsonltape.demo" in _section("Set-up")
    proc = subprocess.run(
        [sys.executable, "-m", "jsonltape.demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JSONLTAPE_HOME": str(tmp_path / "home")},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    demo = tmp_path / "demo-sessions"
    assert sorted(p.name for p in demo.glob("*.jsonl")) == ["demo-1-crashed.jsonl", "demo-1.jsonl"]
    assert len(list(demo.glob("demo-1-crashed.jsonl.*.torn"))) == 1  # the cut tail, kept
    assert "verify demo-1-crashed.jsonl: torn-tail at line" in out
    assert "verify after repair: clean" in out
    assert "2 sessions indexed" in out
    assert "ALTER TABLE users" in out.split('$ jsonltape search "NOT NULL"')[1]  # a hit
    assert jsonltape.verify(demo / "demo-1.jsonl").state == "clean"
    assert jsonltape.verify(demo / "demo-1-crashed.jsonl").state == "clean"
    assert (demo / "demo-1.jsonl").stat().st_mode & 0o777 == 0o600
    assert "Traceback" not in proc.stderr


def _console(section: str) -> list[tuple[str, list[str]]]:
    """The ``$ command`` lines of a section's first console block, each with the output lines
    shown under it (a quoted argument may span lines, as in the shell)."""
    block = re.findall(r"```console\n(.*?)```", _section(section), re.S)[0]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and steps[-1][0].count("'") % 2:  # inside a quoted argument
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        elif steps:
            steps[-1][1].append(line)
    return steps


def test_the_readme_command_line_example_runs_as_shown(tmp_path: Path) -> None:
    """Each command of the Command line example exits 0; the seqs and the verify verdict are
    the ones shown (ids, times and CRCs differ from run to run)."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    steps = _console("Command line")
    assert len(steps) >= 4
    for command, shown in steps:
        proc = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, env=env
        )
        assert proc.returncode == 0, (command, proc.stderr)
        assert proc.stderr == "", (command, proc.stderr)
        if "append" in command or "verify" in command:
            assert proc.stdout.splitlines() == shown, command
    export = subprocess.run(
        ["jsonltape", "export", "s.jsonl"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert export.returncode == 0 and "note:" not in export.stderr  # its turn is closed


def test_the_samples_are_found_beside_the_checkout() -> None:
    """Without $JSONLTAPE_SAMPLES the samples are shared/samples next to the repository, found
    from this file's place (CI runs a fresh clone in another folder, shared/ beside it)."""
    from .conftest import SAMPLES

    if os.environ.get("JSONLTAPE_SAMPLES"):
        assert Path(os.environ["JSONLTAPE_SAMPLES"]).absolute() == SAMPLES
    else:
        assert Path(__file__).resolve().parents[2] / "shared" / "samples" == SAMPLES
    assert (SAMPLES / "SOURCES.md").is_file()


def _error_classes() -> list[type[JsonltapeError]]:
    import jsonltape_daemon.errors  # noqa: F401

    import jsonltape.interop  # noqa: F401  (its errors)

    out: list[type[JsonltapeError]] = []
    todo: list[type[JsonltapeError]] = [JsonltapeError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo += cls.__subclasses__()
    return out


def test_every_error_code_is_in_the_readme_table_with_its_exit_code() -> None:
    rows = re.findall(r"^\| (\d) \| ([^|]*) \|", _section("Command line"), re.M)
    documented = {
        code: int(exit_) for exit_, codes in rows for code in re.findall(r"`([a-z-]+)`", codes)
    }
    for cls in _error_classes():
        exc = cls.__new__(cls)
        JsonltapeError.__init__(exc, "x")
        assert cls.code in documented, f"{cls.__name__}.code {cls.code!r} is not in the README"
        assert fail(exc).exit_code == documented[cls.code], cls.__name__


def test_each_error_class_names_its_own_code() -> None:
    """A subclass that forgets its code would report its parent's: scripts could not tell it
    apart."""
    inherited = [c.__name__ for c in _error_classes() if "code" not in vars(c)]
    assert inherited == []
