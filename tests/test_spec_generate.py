"""The checked-in vectors and schemas are exactly what their generators produce.

Vectors are rebuilt from the spec's rules with fixed seeds; schemas from the library's msgspec
models. Either drifting (a hand edit, a changed model, a changed generator) fails here, with the
command that brings the tree back in line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from .helpers import load_script

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "spec" / "tools"


def load_tool(name: str) -> ModuleType:
    """Import a script from spec/tools/ by path (gen_vectors.py makes its package importable)."""
    return load_script(TOOLS / f"{name}.py", f"spec_tools_{name}")


gen_vectors = load_tool("gen_vectors")
gen_schema = load_tool("gen_schema")


def test_regenerated_vectors_are_identical(tmp_path: Path) -> None:
    gen_vectors.write_tree(tmp_path)
    diff = gen_vectors.compare_trees(tmp_path, ROOT / "spec" / "vectors")
    assert diff == [], f"run: python spec/tools/gen_vectors.py ({len(diff)} files differ)"


def test_vector_generation_is_deterministic(tmp_path: Path) -> None:
    """Two builds in one process agree byte for byte (no clock, no unseeded randomness)."""
    a, b = tmp_path / "a", tmp_path / "b"
    gen_vectors.write_tree(a)
    gen_vectors.write_tree(b)
    assert gen_vectors.compare_trees(a, b) == []


def test_every_case_has_an_input_and_an_expected_result() -> None:
    cases = gen_vectors.build()
    for c in cases:
        assert c.expect, c.name
        assert set(c.expect) <= set(gen_vectors.COMMAND_ORDER), c.name
        assert c.category != "read" or c.name[:2] in ("y_", "n_", "i_"), c.name
        if c.category == "read" and not c.name.startswith("i_"):
            refused = c.expect["read"]["ok"] is False
            assert refused == c.name.startswith("n_"), c.name


def test_vector_generator_imports_only_the_standard_library() -> None:
    """The vectors are a second reading of the spec: building them loads no jsonltape and no
    third-party module (checked in a fresh interpreter, so this test process does not count)."""
    probe = (
        "import runpy, sys; "
        f"g = runpy.run_path({str(TOOLS / 'gen_vectors.py')!r}); g['build'](); "
        "print(__import__('json').dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    # -S: no site hooks (editable-install finders); cwd ROOT keeps jsonltape importable.
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=ROOT,
    )
    loaded = set(json.loads(out.stdout))
    assert "jsonltape" not in loaded
    assert loaded - set(sys.stdlib_module_names) - {"__main__", "vectorgen"} == set()


def test_regenerated_schemas_are_identical() -> None:
    for name, text in gen_schema.expected_files().items():
        path = ROOT / "spec" / "schema" / name
        assert path.exists(), f"missing {path}; run: python spec/tools/gen_schema.py"
        assert path.read_text(encoding="utf-8") == text, (
            f"{name} drifted from jsonltape/events.py; run: python spec/tools/gen_schema.py"
        )


def test_check_modes_agree(tmp_path: Path) -> None:
    assert gen_vectors.main(["--check"]) == 0
    assert gen_schema.main(["--check"]) == 0
    assert gen_schema.main(["--check", "--out", str(tmp_path)]) == 1
