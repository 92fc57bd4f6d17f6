#!/usr/bin/env python3
"""Generate the conformance vectors in spec/vectors/ from the spec's rules, byte for byte.

Usage::

    python spec/tools/gen_vectors.py            # rewrite spec/vectors/
    python spec/tools/gen_vectors.py --out DIR  # write the tree somewhere else
    python spec/tools/gen_vectors.py --check    # exit 1 if spec/vectors/ differs from a rebuild

The generator is the package ``vectorgen/`` beside this script (standard library only, it does
not import jsonltape); this entry point only makes it importable and runs it.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory is already sys.path[0]; loaded by path (the tests), it is not.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from vectorgen import (  # noqa: E402
    CATEGORIES,
    COMMAND_ORDER,
    VECTORS,
    Case,
    build,
    compare_trees,
    main,
    write_tree,
)

__all__ = [
    "CATEGORIES",
    "COMMAND_ORDER",
    "VECTORS",
    "Case",
    "build",
    "compare_trees",
    "main",
    "write_tree",
]

if __name__ == "__main__":
    sys.exit(main())
