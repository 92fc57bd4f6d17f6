"""``import --from auto`` and the agent registry: every importer declares its agent once, with
its default places per platform; auto finds each agent's data where the agent keeps it (the
default places under a home directory, per-project files below the directories given), says
what it found where, and imports all of it; the README's table of default paths is the
registry's."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonltape_daemon.ingest.foreign import IN_PLACE, parse_source

from jsonltape.cli import cli as main
from jsonltape.interop import SOURCES
from jsonltape.interop._agent import expand, homes_of
from jsonltape.interop._auto import find
from jsonltape.interop._registry import AGENTS

from ._agents_b import FIXTURES, database

README = Path(__file__).parent.parent / "README.md"


def _home(tmp_path: Path) -> Path:
    """A home directory with Claude Code, Codex and Goose data in their default places, and
    two projects with Aider's and Crush's per-project files."""
    home = tmp_path / "home"
    claude = home / ".claude" / "projects" / "-home-u-shop"
    claude.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "claude-rewind-compact.jsonl", claude / "s1.jsonl")
    codex = home / ".codex" / "sessions" / "2026" / "01" / "02"
    codex.mkdir(parents=True)
    shutil.copyfile(FIXTURES / "codex-compacted.jsonl", codex / "rollout-2026-01-02-x.jsonl")
    database("goose", home / ".local" / "share" / "goose" / "sessions" / "sessions.db").close()
    shop = home / "code" / "shop"
    shop.mkdir(parents=True)
    shutil.copyfile(
        FIXTURES / "aider" / "agentsview-synthetic.aider.chat.history.md",
        shop / ".aider.chat.history.md",
    )
    database("crush", home / "code" / "api" / ".crush" / "crush.db").close()
    # a dependency's committed database: node_modules is never entered
    database(
        "crush", home / "code" / "api" / "node_modules" / "dep" / ".crush" / "crush.db"
    ).close()
    return home


def test_auto_finds_each_agents_data_where_it_keeps_it_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path)
    env = {"HOME": str(home)}
    found, capped = find([home / "code"], env=env, plat="linux")
    assert not capped
    where = {f.agent.name: [p.relative_to(home).as_posix() for p in f.paths] for f in found}
    assert where == {
        "claude-code": [".claude/projects"],
        "codex": [".codex/sessions"],
        "aider": ["code/shop/.aider.chat.history.md"],
        "goose": [".local/share/goose/sessions"],
        "crush": ["code/api/.crush/crush.db"],
    }
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "code")
    out = tmp_path / "root"
    result = CliRunner().invoke(main, ["import", "--from", "auto", "-o", str(out)])
    assert result.exit_code == 0, result.output
    said = [ln for ln in result.stderr.splitlines() if ln.startswith("jsonltape: found")]
    assert [re.sub(r" \(.*", "", ln) for ln in said] == [
        f"jsonltape: found {label}"
        for label in ("Claude Code", "Codex CLI", "Aider", "Goose", "Crush")
    ]
    assert all(str(home) in ln for ln in said)
    assert sorted(p.name for p in out.iterdir()) == [
        "aider",
        "claude-code",
        "codex",
        "crush",
        "goose",
    ]
    assert all(list((out / d).glob("*.jsonl")) for d in ("aider", "claude-code", "crush", "goose"))
    again = CliRunner().invoke(main, ["import", "--from", "auto", "-o", str(out)])
    assert again.exit_code == 0 and "0 events appended" in again.stderr, again.stderr


@pytest.mark.parametrize(
    ("plat", "user"),
    [("linux", ".config/Code/User"), ("darwin", "Library/Application Support/Code/User")],
)
def test_auto_finds_copilot_cli_copilot_chat_and_continue_in_their_default_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, plat: str, user: str
) -> None:
    """Copilot CLI, Copilot Chat in VS Code and Continue are declared in the registry like every
    importer: auto searches their default places and imports each session found there, as an
    import of the place names them."""
    home = tmp_path / "home"
    shutil.copytree(
        FIXTURES / "copilot-cli" / "built-from-schema" / "session-state",
        home / ".copilot" / "session-state",
    )
    shutil.copytree(FIXTURES / "copilot-vscode" / "built-from-writer", home / user)
    shutil.copytree(FIXTURES / "continue" / "built-from-writer" / ".continue", home / ".continue")
    found, _capped = find([], env={"HOME": str(home)}, plat=plat)
    where = {f.agent.name: [p.relative_to(home).as_posix() for p in f.paths] for f in found}
    assert where == {
        "copilot-cli": [".copilot/session-state"],
        "copilot-vscode": [user],
        "continue": [".continue/sessions"],
    }
    if plat != "linux":
        return  # the command searches this machine's platform
    for var in ("XDG_CONFIG_HOME", "COPILOT_HOME", "CONTINUE_GLOBAL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "root"
    result = CliRunner().invoke(main, ["import", "--from", "auto", "-o", str(out)])
    assert result.exit_code == 0, result.output
    for name, rel in where.items():
        alone = tmp_path / f"alone-{name}"
        one = CliRunner().invoke(
            main, ["import", "--from", name, str(home / rel[0]), "-o", str(alone)]
        )
        assert one.exit_code == 0, one.output
        made = sorted(p.name for p in (out / name).glob("*.jsonl"))
        assert made and made == sorted(p.name for p in (alone / name).glob("*.jsonl")), name


def test_auto_with_nothing_found_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(
        main, ["import", "--from", "auto", str(tmp_path / "empty"), "-o", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no sessions of a known agent found" in lines[0], result.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.jsonl"))


def test_the_import_root_is_never_searched_as_an_agents_data(tmp_path: Path) -> None:
    home = _home(tmp_path)
    found, _ = find([home], exclude=home / "code" / "api", env={"HOME": str(home)}, plat="linux")
    assert "crush" not in {f.agent.name for f in found}


@pytest.mark.parametrize(
    ("template", "env", "want"),
    [
        ("~/.claude/projects", {}, "/h/.claude/projects"),
        ("${CLAUDE_CONFIG_DIR:-~/.claude}/projects", {}, "/h/.claude/projects"),
        ("${CLAUDE_CONFIG_DIR:-~/.claude}/projects", {"CLAUDE_CONFIG_DIR": "/c"}, "/c/projects"),
        ("${XDG_DATA_HOME:-~/.local/share}/goose", {"XDG_DATA_HOME": ""}, "/h/.local/share/goose"),
        ("%APPDATA%/Code/User", {"APPDATA": "C:/Users/u/AppData/Roaming"}, None),
        ("${GOOSE_PATH_ROOT}/data/sessions", {}, None),
    ],
)
def test_a_default_path_expands_its_variables_or_is_left_out(
    template: str, env: dict[str, str], want: str | None
) -> None:
    got = expand(template, env, "/h")
    if want is None and "APPDATA" in env:
        assert got == "C:/Users/u/AppData/Roaming/Code/User"
    else:
        assert got == want


def test_every_agent_has_default_places_on_each_platform_it_runs_on() -> None:
    env = {"HOME": "/h", "USERPROFILE": "C:/Users/u", "APPDATA": "C:/Users/u/AppData/Roaming"}
    per_project = {a.name for a in AGENTS.values() if a.projects}
    for a in AGENTS.values():
        assert a.name in SOURCES
        for plat in ("linux", "darwin", "win32"):
            places = homes_of(a, env=env, plat=plat)
            if a.name in per_project:
                continue  # found below the directories searched
            if a.name == "amp" and plat == "win32":
                continue  # where Amp keeps threads on Windows is not known (README says so)
            assert places, (a.name, plat)


def test_sync_source_indexes_in_place_only_the_agents_that_keep_files_of_their_own() -> None:
    for a in AGENTS.values():
        if a.in_place:
            assert a.name in IN_PLACE
            assert parse_source(f"{a.name}:/x") == (a.name, "/x")
        else:
            with pytest.raises(ValueError, match="cannot be indexed in place: import them"):
                parse_source(f"{a.name}:/x")


def test_the_readme_table_of_default_paths_is_the_registrys() -> None:
    text = README.read_text()
    start = text.index("| agent | `--from` |")
    table = text[start : text.index("\n\n", start)].splitlines()[2:]
    rows = {}
    for row in table:
        cells = [c.strip() for c in row.strip("|").split("|")]
        rows[cells[1].strip("`")] = cells
    assert list(rows) == list(AGENTS)
    for name, a in AGENTS.items():
        cells = rows[name]
        assert cells[0] == a.label
        for h in a.homes:
            path = re.sub(
                r"/(Code|Code - Insiders|VSCodium|Cursor|Windsurf)/User(?=/|$)",
                "/<editor>/User",
                h.path,
            )
            assert f"`{path}`" in " ".join(cells[2:]), (name, h.path)
        for rel in a.projects:
            assert f"`<project>/{rel}`" in " ".join(cells[2:]), (name, rel)
