"""A ``jsonltape`` command installed the way users get it: this checkout built as a wheel
into a fresh virtual environment, not the development checkout's editable install.

The editable install adds a meta-path finder that `site` imports at every start (≈ 17 ms of
``pathlib``, ``importlib.util`` and friends under ``-X importtime``), and the development
environment's many test packages add ``.pth`` files and ``sys.path`` entries; neither is there
for a user who ran ``pip install jsonltape``. The shell timings use this command by default.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

__all__ = ["installed_command"]

_REPO = Path(__file__).resolve().parent.parent


def installed_command(work: Path) -> str:
    """Build this checkout, as it is on disk, into ``work/venv-installed`` (replaced each run,
    so it is the code being measured) and return the path of its ``jsonltape``. The build runs
    on a copy: setuptools leaves a ``build/`` tree behind, whose stale files a later build of
    the checkout would pick up."""
    env_dir = work / "venv-installed"
    shutil.rmtree(env_dir, ignore_errors=True)
    venv.create(env_dir, with_pip=True)
    skip = shutil.ignore_patterns(
        ".git", ".venv", "_data", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
    )
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(_REPO, src, ignore=skip, symlinks=True)
        subprocess.run(
            [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", str(src)],
            check=True,
            stdout=sys.stderr,
        )
    return str(env_dir / "bin" / "jsonltape")
