"""What one ``jsonltape serve`` serves, and the rule for where it may listen.

A viewer on the loopback interface is reachable only from this machine. Any other address
reaches the network, so it needs a token (given, or generated and printed once); without one
the server refuses to start.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from jsonltape_daemon.target import Target

from jsonltape.errors import InvalidArgumentError

__all__ = ["Config", "allowed_hosts", "is_loopback", "new_token"]

#: Events of a transcript page (a page is read from the file by seq, never the whole file).
PAGE_EVENTS = 200


@dataclass(frozen=True)
class Config:
    """One viewer: the index it reads, where it listens, its token (None on loopback)."""

    target: Target
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    #: The sessions root the viewer keeps the index current with (None: it does not).
    root: Path | None = None
    page_events: int = PAGE_EVENTS
    #: Host names the browser may use besides the bound address (DNS rebinding guard).
    extra_hosts: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not is_loopback(self.host) and not self.token:
            raise InvalidArgumentError(
                f"--host {self.host} is reachable from other machines: give --token TOKEN "
                "(or --token generate), or listen on 127.0.0.1",
                field="host",
            )


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and addresses of the loopback range (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A token for a viewer reachable from the network (256 random bits)."""
    return secrets.token_urlsafe(32)


def allowed_hosts(config: Config, port: int) -> frozenset[str] | None:
    """The ``Host`` header values a request may carry (None: any, for a wildcard bind, which
    the token guards). A loopback viewer answers only to loopback names, so a page of another
    site whose name was made to resolve to 127.0.0.1 (DNS rebinding) is refused."""
    host = config.host
    if host in ("0.0.0.0", "::", "[::]"):
        return None
    names = {host.lower(), *(h.lower() for h in config.extra_hosts)}
    if ":" in host and not host.startswith("["):
        names.add(f"[{host.lower()}]")
    if is_loopback(host):
        names |= {"localhost", "127.0.0.1", "[::1]"}
    return frozenset(n for name in names for n in (name, f"{name}:{port}"))
