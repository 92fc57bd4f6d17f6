"""The rooms and the doors between them (DESIGN.md): the library never imports the index, the
adapters or a framework; the index reaches the library's private modules only through
``jsonltape._index_api``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import jsonltape._index_api as door

ROOT = Path(__file__).resolve().parents[1]


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


def test_the_index_reaches_private_library_modules_only_through_the_door() -> None:
    offenders = []
    for path in sorted((ROOT / "daemon" / "jsonltape_daemon").rglob("*.py")):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] != "jsonltape" or name.startswith("jsonltape._index_api"):
                continue
            if any(p.startswith("_") for p in parts[1:]):
                offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []


def test_the_library_outside_the_cli_never_imports_the_index() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "jsonltape").rglob("*.py"))
        if "cli" not in path.relative_to(ROOT / "jsonltape").parts
        and any(n.split(".")[0] == "jsonltape_daemon" for n in _imports(path))
    ]
    assert offenders == []


def test_every_name_of_the_door_resolves() -> None:
    for name in door.__all__:
        assert getattr(door, name) is not None, name


def test_a_query_through_the_door_loads_only_the_framing() -> None:
    code = (
        "import json, sys\n"
        "from jsonltape._index_api import crc_of, frame_ok\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('jsonltape'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    assert "jsonltape._framing" in loaded
    assert not {
        "jsonltape._lines",
        "jsonltape._scan",
        "jsonltape.interop",
        "jsonltape.events",
    } & set(loaded)


#: Which parts of the index package each part may import (besides the shared ground:
#: ``errors``, ``paths``, ``target``, ``origin``): dependencies run one way, so that an engine
#: never reaches into another, and nothing below the daemon's loop knows it.
_MAY_IMPORT = {
    "text": set(),
    "search.language": {"text"},
    "search.rank": set(),
    "search.snippet": {"search.rank"},
    "ingest": {"text", "ingest"},
    "engines.sqlite": {"text", "ingest", "search.language", "search.rank", "search.snippet"},
    "engines.postgres": {"text", "ingest", "search.language", "search.rank", "search.snippet"},
    "search.reader": {"engines.sqlite", "engines.postgres", "search.language"},
    "service": {"ingest", "engines.sqlite", "engines.postgres", "service"},
}
_GROUND = {"errors", "paths", "target", "origin"}


def _part(module: str) -> str:
    """``jsonltape_daemon.engines.sqlite.store`` -> ``engines.sqlite``; ``...search.rank`` ->
    ``search.rank``; ``...ingest.rows`` -> ``ingest``."""
    parts = module.split(".")[1:]
    if not parts:
        return ""
    if parts[0] in ("engines", "search") and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def test_the_index_packages_depend_one_way() -> None:
    pkg = ROOT / "daemon" / "jsonltape_daemon"
    wrong = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent).with_suffix("")
        me = _part(".".join(p for p in rel.parts if p != "__init__"))
        allowed = _MAY_IMPORT.get(me)
        if allowed is None:
            continue  # api and the package root: the front of the house
        for name in _imports(path):
            if not name.startswith("jsonltape_daemon."):
                continue
            other = _part(name)
            if other and other != me and other not in allowed | _GROUND:
                wrong.append(f"{rel}: {me} imports {name}")
    assert wrong == []
