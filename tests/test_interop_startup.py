"""Start-up of the interop package: its public names load their modules on first use, so the
commit guard and ``jsonltape redact`` (which need only the redaction patterns) import neither
the importers, nor the exporters, nor markdown-it. Every check runs a fresh interpreter (see
tests/test_startup.py); nothing is timed (benchmarks/bench_git.py measures the hook).
"""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module

import jsonltape.interop as interop
from jsonltape.interop import _engine, _many, foreign, redaction

from .test_startup import importtime, loaded, modules_after

#: What importing the redaction patterns must not load.
HEAVY = (
    "jsonltape.interop._engine",
    "jsonltape.interop._base",
    "jsonltape.interop._render",
    "jsonltape.interop._render_common",
    "jsonltape.interop._render_md",
    "jsonltape.interop._render_html",
    "jsonltape.interop.export",
    "jsonltape.interop.foreign",
    "jsonltape.interop.claude_code",
    "jsonltape.interop.codex",
    "jsonltape.interop.pi",
    "jsonltape.fold",
    "jsonltape.writer",
    "markdown_it",
)


def test_importing_the_redaction_patterns_loads_no_importer_exporter_or_markdown() -> None:
    modules = importtime("import jsonltape.interop.redaction")
    assert "jsonltape.interop.redaction" in modules
    assert loaded(modules, *HEAVY) == []
    modules = modules_after("import jsonltape.interop._redact_copy")
    assert loaded(modules, *HEAVY) == []


def test_the_commit_guard_loads_no_importer_exporter_or_markdown() -> None:
    assert loaded(modules_after("import jsonltape.git._check"), *HEAVY) == []


def test_first_use_of_a_name_loads_only_its_module() -> None:
    modules = modules_after("from jsonltape import interop; interop.mask_secrets")
    assert "jsonltape.interop.redaction" in modules
    assert loaded(modules, *HEAVY) == []
    modules = modules_after("from jsonltape import interop; interop.scan_foreign")
    assert "jsonltape.interop.foreign" in modules
    assert loaded(modules, "jsonltape.interop.export", "markdown_it") == []


def test_every_public_name_resolves_to_its_modules_object() -> None:
    for name in interop.__all__:
        assert getattr(interop, name) is not None, name
    assert set(interop.__all__) <= set(dir(interop))
    export = import_module("jsonltape.interop.export")  # `interop.export` is the function
    assert interop.export is export.export and interop.FORMATS is export.FORMATS
    assert interop.scan_foreign is foreign.scan and interop.foreign_messages is foreign.messages
    assert interop.import_paths is _many.import_paths
    assert interop.import_file is _engine.import_file
    assert interop.Redactor is redaction.Redactor


def test_the_lazy_table_lists_exactly_the_public_names() -> None:
    assert set(interop._HOME) == set(interop.__all__)
    assert sum(len(names) for names in interop._SOURCES.values()) == len(interop._HOME)


def test_star_import_binds_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from jsonltape.interop import *", namespace)
    assert set(interop.__all__) <= set(namespace)
    assert namespace["export"] is interop.export and callable(namespace["export"])


def test_export_stays_the_function_after_its_module_is_imported() -> None:
    # Importing jsonltape.interop.export binds the module as the package's `export`
    # attribute; the public name must stay the function, whichever is imported first.
    code = (
        "import jsonltape.interop.export, sys; from jsonltape import interop; "
        "assert callable(interop.export), interop.export; "
        "assert interop.export is sys.modules['jsonltape.interop.export'].export; "
        "from jsonltape.interop import export; assert callable(export)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_submodules_are_attributes_and_unknown_names_are_not() -> None:
    code = (
        "from jsonltape import interop; "
        "assert interop.foreign.scan is interop.scan_foreign; "
        "assert interop.claude_code.ClaudeCodeMapper is not None; "
        "assert not hasattr(interop, 'no_such_thing'); "
        "assert not hasattr(interop, '__wrapped__')"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
