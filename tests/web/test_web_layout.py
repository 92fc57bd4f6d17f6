"""The web viewer's room (DESIGN.md): a client of the library's public API and of the index's
reader interface only. No SQL in it, no private module of the library or the index imported,
no database driver; nothing else imports it but the ``serve`` command, and neither
``import jsonltape`` nor the CLI's start-up loads it or its web stack."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "jsonltape" / "web"

#: The index's modules the viewer may use: its reader interface (the reader, its query
#: language and result types, the snippet marks), the target of ``--index``, its errors, the
#: daemon's loop (run in-process to keep the index current, as ``daemon run`` runs it), and
#: this machine's origin name (the origin column of a local index's sessions).
INDEX_DOORS = {
    "jsonltape_daemon.origin",
    "jsonltape_daemon.search.reader",
    "jsonltape_daemon.search.language",
    "jsonltape_daemon.search.snippet",
    "jsonltape_daemon.target",
    "jsonltape_daemon.errors",
    "jsonltape_daemon.service.daemon",
}
_SQL = re.compile(
    r"\b(SELECT\s+[\w*(]|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)"
    r"|DROP\s+TABLE|PRAGMA\s+\w+)\b|\.execute\(|\.executemany\(",
    re.IGNORECASE,
)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _sources() -> list[Path]:
    return sorted(WEB.rglob("*.py")) + [ROOT / "jsonltape" / "cli" / "_serve.py"]


def test_no_sql_in_the_viewer() -> None:
    found = []
    for path in [*_sources(), *sorted((WEB / "templates").glob("*.html"))]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _SQL.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_the_viewer_imports_only_public_modules_and_the_index_reader() -> None:
    wrong = []
    for path in _sources():
        for name in _imports(path):
            top = name.split(".")[0]
            if top in ("sqlite3", "psycopg", "psycopg2"):
                wrong.append(f"{path.name}: {name} (a database driver)")
            if top == "jsonltape" and not name.startswith("jsonltape.web"):
                parts = name.split(".")
                if any(p.startswith("_") for p in parts[1:]) and not name.startswith(
                    "jsonltape.cli._params"
                ):
                    wrong.append(f"{path.name}: {name} (a private module of the library)")
            if top == "jsonltape_daemon":
                module = name if name in INDEX_DOORS else name.rsplit(".", 1)[0]
                if module not in INDEX_DOORS:
                    wrong.append(f"{path.name}: {name} (not the index's reader interface)")
    assert wrong == []


def test_nothing_but_the_serve_command_imports_the_viewer() -> None:
    users = []
    for path in sorted((ROOT / "jsonltape").rglob("*.py")) + sorted(
        (ROOT / "daemon").rglob("*.py")
    ):
        if WEB in path.parents or path.name == "_serve.py":
            continue
        if any(n.startswith("jsonltape.web") for n in _imports(path)):
            users.append(str(path.relative_to(ROOT)))
    assert users == []


def test_neither_the_library_nor_the_cli_start_up_loads_the_web_stack() -> None:
    code = (
        "import json, sys\n"
        "import jsonltape, jsonltape.cli\n"
        "from jsonltape.cli import cli\n"
        "try:\n"
        "    cli.main(['--help'], standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    heavy = {"starlette", "uvicorn", "jinja2", "sse_starlette", "markupsafe", "jsonltape.web"}
    assert heavy & loaded == set()
    assert "serve" in out.stdout  # listed, without being loaded
