"""The real ``jsonltape serve``, started as a user starts it: a subprocess on a temporary index
and a free port (``--port 0``; the address it prints names the port), stopped with Ctrl-C
(SIGINT), which must end it cleanly (exit 0)."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Serve", "sync"]

_URL = re.compile(r"open (http://\S+?)(\?token=(\S+))?$")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JSONLTAPE_", "PG"))}
    env["JSONLTAPE_HOME"] = str(home)
    return env


def sync(root: Path, index: Path, home: Path) -> None:
    """Index ``root`` once (``jsonltape sync``), so a server starts on a ready index."""
    subprocess.run(
        [sys.executable, "-P", "-m", "jsonltape", "sync", str(root), "--index", str(index)],
        check=True,
        capture_output=True,
        env=_env(home),
        cwd=home,
    )


class Serve:
    """One running ``jsonltape serve``; ``url`` ends with ``/``."""

    def __init__(self, *args: str, home: Path, env: dict[str, str] | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.argv = [sys.executable, "-P", "-m", "jsonltape", "serve", "--port", "0", *args]
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env={**_env(home), **(env or {})},
            cwd=home,
        )
        self.lines: list[str] = []
        self.url, self.token = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 30.0) -> tuple[str, str | None]:
        """Read what serve prints (raw reads: a buffered reader would keep lines from the
        selector) until the address line."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            *done, buf = buf.split(b"\n")
            for raw in done:
                line = raw.decode()
                self.lines.append(line)
                m = _URL.search(line)
                if m:
                    sel.close()
                    return m.group(1), m.group(3)
        sel.close()
        self.proc.kill()
        _out, err = self.proc.communicate()
        raise AssertionError(f"serve did not start: {self.lines} {err.decode(errors='replace')}")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].strip("/"))

    def stop(self, timeout: float = 20.0) -> tuple[int, str, str]:
        """Ctrl-C; the exit code and what it printed after the address."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError(f"serve did not stop on SIGINT: {err!r}") from None
        return self.proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
