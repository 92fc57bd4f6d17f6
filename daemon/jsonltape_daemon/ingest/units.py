"""Service definitions: a systemd user unit and a launchd agent that run ``daemon run``.

Both run the daemon in the foreground (launchd forbids forking agents; systemd supervises
``Type=simple``), restart it on failure and stop it with SIGTERM, which the daemon answers by
finishing its transaction and exiting 0. ``daemon/systemd/`` and ``daemon/launchd/`` hold the
same files rendered with placeholders; a test keeps them identical to what this module makes.
The command (``argv``) and its working directory come from ``jsonltape._spawn``: ``python -P``
in ``/``, so a service never imports a package from the directory it was installed from.
"""

from __future__ import annotations

import plistlib
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["LAUNCHD_LABEL", "SYSTEMD_NAME", "default_kind", "install_path", "launchd", "systemd"]

SYSTEMD_NAME = "jsonltape-daemon.service"
LAUNCHD_LABEL = "dev.jsonltape.daemon"


def _systemd_quote(arg: str) -> str:
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped}"'


def systemd(argv: Sequence[str], cwd: str) -> str:
    # ExecStart= takes quoted words; WorkingDirectory= takes one path, unquoted (both expand
    # % specifiers)
    command = " ".join(_systemd_quote(a) for a in argv)
    return f"""\
[Unit]
Description=jsonltape sync daemon: mirrors session files into a searchable index

[Service]
Type=simple
ExecStart={command}
WorkingDirectory={cwd.replace("%", "%%")}
Restart=on-failure
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=30
UMask=0077

[Install]
WantedBy=default.target
"""


def launchd(argv: Sequence[str], cwd: str, log: str) -> str:
    plist = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": list(argv),
        "WorkingDirectory": cwd,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ProcessType": "Background",
        "Umask": 0o077,
        "StandardOutPath": log,
        "StandardErrorPath": log,
    }
    return plistlib.dumps(plist, sort_keys=False).decode()


def default_kind() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"


def install_path(kind: str) -> Path:
    if kind == "launchd":
        return Path.home() / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
    return Path.home() / ".config" / "systemd" / "user" / SYSTEMD_NAME
