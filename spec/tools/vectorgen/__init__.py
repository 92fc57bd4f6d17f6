"""The conformance-vector generator: every case of spec/vectors/ built from the spec's rules.

Only the standard library is used, and jsonltape is *not* imported: every input is built line by
line here (CRC-32 from zlib, JSON from the json module), and every expected result is stated by
the case that builds it (the damaged line, the state, the closers), so the vectors are a second
reading of the spec, not a recording of the library's behaviour. Randomness comes from
``random.Random`` with a fixed seed per case, and nothing depends on the clock, the machine or
dict ordering, so a rebuild is identical to the checked-in tree.

Modules:

- ``common``: CRC-32, compact JSON, framing, the ``Log`` session-file builder, shared files;
- ``expect``: the expected answer of each protocol command (spec/conformance.md §1);
- ``registry``: how a case is registered (``case``, ``table``, and the ``session``,
  ``repair`` and ``fold`` shapes that build a ``Log`` and state its answer);
- one module per category of spec/vectors/: ``checksum``, ``read_good``, ``read_damage``,
  ``read_header``, ``read_open``, ``read_bytes``, ``read_span``, ``read_branch``, ``repair``,
  ``fold``, ``compat``;
- ``tree``: building every case, writing the tree and its README, ``--check``.

Layout of the output: ``<dir>/<name>.<ext>`` is the input (``.jsonl`` for sessions,
``.bin``/``.txt`` for the checksum command) and ``<dir>/<name>.<cmd>.json`` the expected answer
to ``cmd`` (see spec/conformance.md). ``spec/vectors/README.md`` lists every case.
"""

from __future__ import annotations

from .tree import CATEGORIES, COMMAND_ORDER, VECTORS, Case, build, compare_trees, main, write_tree

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
