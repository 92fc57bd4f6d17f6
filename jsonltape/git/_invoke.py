"""How git runs this jsonltape: the absolute interpreter that ran ``jsonltape git install``.

``python -m jsonltape`` is not enough: it puts the current directory first on ``sys.path``,
and git runs hooks, textconv and merge drivers in the work tree, so a checked-out
``jsonltape/`` folder (in any repository one clones) would be imported and run instead. Python
3.11+ has ``-P`` to leave it out; 3.10 drops it by hand before the import.
"""

from __future__ import annotations

import shlex
import sys

__all__ = ["invocation", "python_args"]

_SAFE_MAIN = (
    "import sys; sys.path[0] == '' and sys.path.pop(0); from jsonltape.cli import main; main()"
)


def python_args() -> list[str]:
    """The interpreter options (before the jsonltape arguments) that run jsonltape safely."""
    if sys.version_info >= (3, 11):
        return ["-P", "-m", "jsonltape"]
    return ["-c", _SAFE_MAIN]  # pragma: no cover - Python 3.10


def invocation(python: str | None = None) -> str:
    """The shell words that run this jsonltape: its interpreter, absolute and not resolved (a
    venv's python must stay the venv's), then :func:`python_args`."""
    return " ".join(shlex.quote(w) for w in [python or sys.executable, *python_args()])
