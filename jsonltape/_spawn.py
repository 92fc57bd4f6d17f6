"""How jsonltape starts a process: the one place that builds a child's command line, working
directory and environment.

Every Python process jsonltape starts (the daemon of ``daemon start``, the full-text helper of
a first bulk sync, the workers of a long import) and every command line it writes for another
program to run (git's merge driver, textconv and hooks; the systemd and launchd service files) is
``<python> -P -m <module> ARGS``, built here. ``python -m`` alone puts the current directory
first on ``sys.path``, and the commands that start these processes are typed inside
repositories (they find their project's ``.jsonltape/`` there) while git runs its drivers and
hooks at the top of the work tree: a ``jsonltape/`` or ``jsonltape_daemon/`` package committed
to any repository one clones would be imported, and run as the user.

``-P`` and not ``-I``: ``-I`` is ``-P`` plus ``-E`` (every ``PYTHON*`` variable ignored) plus
``-s`` (no user site-packages). A jsonltape installed with ``pip install --user`` lives in the
user site-packages, and one run from a source tree may be found through ``PYTHONPATH``: under
``-I`` the child would not import the jsonltape that started it, or would import another one.
``-P`` drops exactly the entry that names the current directory; the rest of the path is the
user's own set-up, which the parent already trusted to import itself. What ``-P`` leaves is
closed by the environment (:func:`child_env`): an empty ``PYTHONPATH`` entry, which Python
reads as the current directory even under ``-P``, is dropped. Python 3.10 has no ``-P``: it
runs a ``-c`` line that drops the entry itself, then the module as ``-m`` would.

A process jsonltape starts also runs in a safe directory (:data:`SAFE_CWD`), with its
environment built explicitly, and with every path in its arguments or environment made
absolute before it leaves the current directory behind. Programs other than Python (git) are
found on ``PATH`` by :func:`program`, which skips the entries that name the current directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import IO, Any

from ._project import data_dir, resolve_root

__all__ = [
    "SAFE_CWD",
    "child_env",
    "command",
    "program",
    "python_options",
    "shell_command",
    "start",
]

#: Where a process jsonltape starts runs: the root directory. Every process may enter it, only
#: root may write into it (no package can be planted there), and a long-lived daemon whose
#: working directory is ``/`` keeps no directory or mount busy, as daemons have always done.
SAFE_CWD = os.path.abspath(os.sep)

# Python 3.10: ``-c`` puts '' (the current directory) first on sys.path; take it out before
# anything is imported, then run the module as ``-m`` does (its ``__main__``, argv kept).
_SAFE_RUN = (
    "import sys; sys.path[0] == '' and sys.path.pop(0); import runpy; "
    "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
)

Arg = str | os.PathLike[str]


def python_options(module: str, *, safe_path: bool | None = None) -> list[str]:
    """The interpreter options that run ``module`` as ``python -m`` does, without the current
    directory on ``sys.path``. ``safe_path`` (default: whether this Python has ``-P``) picks
    ``-P -m`` or the ``-c`` form that Python 3.10 needs."""
    if not all(part.isidentifier() for part in module.split(".")):
        raise ValueError(f"not a module name: {module!r}")
    if safe_path if safe_path is not None else sys.version_info >= (3, 11):
        return ["-P", "-m", module]
    return ["-c", _SAFE_RUN.format(module=module)]


def command(module: str, *args: Arg, python: str | None = None) -> list[str]:
    """The argv that runs ``python -m module ARGS`` safely: ``python`` (default: this
    interpreter, absolute and not resolved, so a venv's python stays the venv's), then
    :func:`python_options`, then ``args``. A path goes as a path-like object and is made
    absolute here (the child starts elsewhere); a ``str`` goes as it is."""
    words = [a if isinstance(a, str) else os.path.abspath(os.fspath(a)) for a in args]
    return [python or sys.executable, *python_options(module), *words]


def shell_command(module: str, *args: Arg, python: str | None = None) -> str:
    """:func:`command` as one line of shell words (git's config runs it through ``sh -c``)."""
    return shlex.join(command(module, *args, python=python))


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a process jsonltape starts: this one's, with what names a place
    relative to the current directory made absolute, then ``extra`` on top.

    ``PYTHONPATH``: relative entries made absolute, empty ones (the current directory, even
    under ``-P``) dropped. ``JSONLTAPE_HOME``: the data directory as this process sees it (it may
    come from a relative setting, or from the platform's defaults). ``JSONLTAPE_ROOT``, when
    set: made absolute as the commands read it. ``JSONLTAPE_INDEX`` is left alone: every child
    that opens an index is given it as an argument.
    """
    env = dict(os.environ)
    entries = [os.path.abspath(p) for p in env.pop("PYTHONPATH", "").split(os.pathsep) if p]
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(entries)
    env["JSONLTAPE_HOME"] = str(data_dir())
    if env.get("JSONLTAPE_ROOT"):
        env["JSONLTAPE_ROOT"] = str(resolve_root().path)
    env.update(extra or {})
    return env


def start(
    module: str,
    *args: Arg,
    env: Mapping[str, str] | None = None,
    stdin: int | IO[Any] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    start_new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start ``python -m module ARGS`` (:func:`command`) in :data:`SAFE_CWD` with
    :func:`child_env` (``env``: variables to add), no descriptor but the three inherited."""
    return subprocess.Popen(
        command(module, *args),
        cwd=SAFE_CWD,
        env=child_env(env),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        close_fds=True,
        start_new_session=start_new_session,
    )


def program(name: str) -> str | None:
    """The absolute path of the program ``name`` on ``PATH``, or None. An empty or relative
    ``PATH`` entry names the current directory (for git, the work tree of a clone): skipped."""
    path = os.pathsep.join(d for d in os.get_exec_path() if os.path.isabs(d))
    return shutil.which(name, path=path)
