"""The rooms and the doors between them (DESIGN.md): the library never imports the index, the
adapters or a framework; the index reaches the library's private modules only through
``jsonltape._index_api``."""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from collections.abc import Mapping
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
        # the CLI and the web viewer (a client of the index's reader) are the index's users
        if not {"cli", "web"} & set(path.relative_to(ROOT / "jsonltape").parts)
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


# -- no import circles ----------------------------------------------------------------------
#
# A circle is a set of modules each of which reaches every other through imports. Every kind
# of import counts: at the top of a module, inside a function (a lazy import still ties the
# two modules: each needs the other to work), under ``if TYPE_CHECKING:`` (a type in a
# signature is part of the contract: reading the module means reading that type's module) and
# by name (``import_module`` of a registry's entries: the command table, the lazy public
# names). A package's ``__init__`` is not counted when one of its submodules is imported:
# Python runs it on the way, but the importer uses only the submodule (what an ``__init__``
# imports counts as its own imports; counted for every submodule, each package that re-exports
# its modules would be a circle). Circles are looked for between files (two files of one
# package count) and, with those left out, between rooms (DESIGN.md): ``a.x`` -> ``b.y`` and
# ``b.z`` -> ``a.w`` tie two rooms though no file reaches itself, and an import of a room's
# submodule runs the room's ``__init__``.

#: The import packages whose modules may form no circle.
PACKAGES = (ROOT / "jsonltape", ROOT / "daemon" / "jsonltape_daemon")
_BY_NAME = frozenset({"import_module", "__import__"})
_DOTTED = re.compile(r"\.*[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def module_files(*packages: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the import ``packages`` (a
    package's ``__init__.py`` is the package itself)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            parts = path.relative_to(package.parent).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _home(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module of the tree that ``name`` (a module, or a name inside one) lives in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _relative(dots: int, rest: str, package: str) -> str:
    """What ``from <dots><rest> import ...`` names, written in ``package``."""
    base = package.split(".")[: len(package.split(".")) - (dots - 1)]
    return ".".join([*base, rest] if rest else base)


class _Source:
    """What one module's syntax tree says about its imports, read in one walk."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.imports: list[ast.Import | ast.ImportFrom] = []
        self.strings: list[str] = []  # the constants that could name a module
        self.loaders: set[str] = set()  # its top-level functions and classes that import by name
        self.by_name = False  # it imports by name itself
        for top in tree.body:
            loads = False
            for node in ast.walk(top):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    self.imports.append(node)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if _DOTTED.fullmatch(node.value):
                        self.strings.append(node.value)
                elif isinstance(node, ast.Name | ast.Attribute):
                    loads |= (node.id if isinstance(node, ast.Name) else node.attr) in _BY_NAME
            self.by_name |= loads
            if loads and isinstance(top, ast.FunctionDef | ast.ClassDef):
                self.loaders.add(top.name)


def _named(text: str, package: str) -> str:
    """The module a registry's string names: ``".errors"`` and ``"_core"`` relative to
    ``package``, ``"jsonltape._framing"`` as it is."""
    dots = len(text) - len(text.lstrip("."))
    if dots:
        return _relative(dots, text[dots:], package)
    return text if "." in text else f"{package}.{text}"


def import_graph(*packages: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports, however and wherever (see above).

    A module that imports by name (``import_module``, or a loader of the tree such as
    ``_lazy_package`` or ``LazyCommands``) imports every module a string in it names: relative
    to its package (``"_core"``, ``".errors"``) or in full (``"jsonltape._framing"``). That
    over-approximates (a string may name a module it never loads), which shows as a circle to
    read rather than a circle missed.
    """
    modules = module_files(*packages)
    sources = {m: _Source(path) for m, path in modules.items()}
    loaders = set().union(*(source.loaders for source in sources.values()))
    graph: dict[str, set[str]] = {}
    for me, source in sources.items():
        package = me if modules[me].name == "__init__.py" else me.rpartition(".")[0]
        named: set[str | None] = set()
        by_name = source.by_name
        for node in source.imports:
            if isinstance(node, ast.Import):
                named.update(_home(a.name, modules) for a in node.names)
                continue
            base = _relative(node.level, node.module or "", package) if node.level else node.module
            for a in node.names:
                full = f"{base}.{a.name}"
                named.add(full if full in modules else _home(base or "", modules))
                by_name |= a.name in loaders
        if by_name:
            named.update(_named(text, package) for text in source.strings)
        graph[me] = {m for m in named if m is not None and m in modules and m != me}
    return graph


@functools.cache
def _our_graph() -> dict[str, set[str]]:
    return import_graph(*PACKAGES)


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph``: its strongly connected components of two or more modules
    (Tarjan's algorithm), each sorted, in the order of their first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def room(module: str) -> str:
    """The room of a module (DESIGN.md): the package's top-level module or subpackage it is in
    (``jsonltape.writer``, ``jsonltape.fold``), in the index the parts the rules above name
    (``jsonltape_daemon.engines.sqlite``, ``jsonltape_daemon.search.rank``)."""
    parts = module.split(".")
    deep = len(parts) > 2 and parts[0] == "jsonltape_daemon" and parts[1] in ("engines", "search")
    return ".".join(parts[: 3 if deep else 2])


def room_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the rooms it imports, leaving out the imports inside a circle between files
    (that circle is reported as such): what is left is a circle no file circle explains."""
    tangled = {m: i for i, circle in enumerate(circles(graph)) for m in circle}
    rooms: dict[str, set[str]] = {}
    for me, others in graph.items():
        mine = rooms.setdefault(room(me), set())
        for other in others:
            same_circle = me in tangled and tangled[me] == tangled.get(other)
            if room(other) != room(me) and not same_circle:
                mine.add(room(other))
    return rooms


def _show(graph: Mapping[str, set[str]], found: list[list[str]]) -> str:
    """Each circle as one way around it (``a -> b -> a``), and every member it ties."""
    lines = []
    for circle in found:
        members = set(circle)
        paths = {circle[0]: [circle[0]]}
        queue = [circle[0]]
        way: list[str] = []
        while queue and not way:  # breadth first: the shortest way back to the first
            node = queue.pop(0)
            for nxt in sorted(graph.get(node, set()) & members):
                if nxt == circle[0]:
                    way = [*paths[node], nxt]
                    break
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    queue.append(nxt)
        lines.append(f"{' -> '.join(way)}  (ties {len(circle)}: {', '.join(circle)})")
    return "\n".join(lines)


def test_no_module_reaches_itself_through_its_imports() -> None:
    graph = _our_graph()
    found = circles(graph)
    shown = _show(graph, found)
    print(shown)
    assert found == [], f"import circles:\n{shown}"


def test_no_room_reaches_itself_through_its_imports() -> None:
    rooms = room_graph(_our_graph())
    found = circles(rooms)
    shown = _show(rooms, found)
    print(shown)
    assert found == [], f"circles between rooms:\n{shown}"


#: A package with one circle of each kind the test must find, and imports that make none.
_PLANTED = {
    "__init__.py": "from .front import thing\n",
    # a front door importing a submodule that imports a sibling: no circle (the package's
    # __init__ runs first, but is not what front uses)
    "front.py": "import planted.leaf\nthing = planted.leaf.x\n",
    "leaf.py": "x = 1\n",
    "uses_front.py": "from planted import thing\n",
    # at the top, one of them absolute
    "top_a.py": "from . import top_b\n",
    "top_b.py": "import planted.top_a\n",
    # inside a function
    "lazy_a.py": "from .leaf import x\n\ndef f():\n    from .lazy_b import y\n",
    "lazy_b.py": "from planted.lazy_a import f\ny = 1\n",
    # for the type checker only
    "typed_a.py": (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .typed_b import T\n"
    ),
    "typed_b.py": "from . import typed_a\nT = int\n",
    # up a package and back down through `from package import module`
    "sub/__init__.py": "",
    "sub/deep.py": "from ..up import u\n",
    "up.py": "u = 1\n\ndef g():\n    from planted.sub import deep\n",
    # by name, through a loader another module defines
    "loader.py": "import importlib\n\ndef load(name):\n    return importlib.import_module(name)\n",
    "table.py": "from .loader import load\nNAMES = ['tabled', 'no_such_module']\n",
    "tabled.py": "from . import table\n",
    # two rooms tied through different files: no file imports itself
    "r1/__init__.py": "",
    "r1/x.py": "from ..r2 import y\n",
    "r1/w.py": "",
    "r2/__init__.py": "",
    "r2/y.py": "",
    "r2/z.py": "from ..r1 import w\n",
}


def test_the_circle_finder_finds_a_planted_circle_of_every_kind(tmp_path: Path) -> None:
    for name, text in _PLANTED.items():
        (tmp_path / "planted" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "planted" / name).write_text(text, encoding="utf-8")
    graph = import_graph(tmp_path / "planted")
    assert circles(graph) == [
        ["planted.lazy_a", "planted.lazy_b"],
        ["planted.sub.deep", "planted.up"],
        ["planted.table", "planted.tabled"],
        ["planted.top_a", "planted.top_b"],
        ["planted.typed_a", "planted.typed_b"],
    ]
    rooms = room_graph(graph)
    assert circles(rooms) == [["planted.r1", "planted.r2"]]
    assert _show(rooms, circles(rooms)) == (
        "planted.r1 -> planted.r2 -> planted.r1  (ties 2: planted.r1, planted.r2)"
    )
    assert graph["planted.front"] == {"planted.leaf"}  # not its package's __init__
    assert graph["planted.uses_front"] == {"planted"}
