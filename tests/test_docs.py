"""The README says what the code does: its library example runs, its commands exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from jsonltape.cli import cli

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


def test_every_command_in_the_readme_exists() -> None:
    table = _section("Command line")
    names = set(re.findall(r"^\| `([a-z]+)[ `]", table, re.M))
    names |= set(re.findall(r"· `([a-z]+)[ `]", table))
    assert {"new", "append", "verify", "repair", "messages", "fork", "sync", "import"} <= names
    runner = CliRunner()
    for name in sorted(names):
        result = runner.invoke(cli, [name, "--help"])
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
