"""The server's front door, as plain ASGI middleware: every request passes here first.

* ``Host`` must name the address the viewer is bound to (DNS rebinding: a page of another
  site whose name resolves to 127.0.0.1 would otherwise read the sessions with the user's
  browser); anything else is 421, one line.
* With a token (a viewer reachable from the network), a request must carry it: the cookie the
  first visit set, or ``Authorization: Bearer``, or ``?token=`` once (answered by a redirect
  that sets the cookie and drops the token from the address bar and history).
* Every response carries a strict Content-Security-Policy (scripts, styles and connections to
  this origin only, no inline script, images only from here or ``data:``, no frames, no
  plugins), ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``, and
  ``Cache-Control: no-store`` (session text stays out of caches).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["COOKIE", "CSP", "SECURITY_HEADERS", "Guard"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "jsonltape_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'none'; object-src 'none'; media-src 'none'; "
    "frame-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


class Guard:
    """ASGI middleware: the Host check, the token, the security headers."""

    def __init__(self, app: App, *, hosts: frozenset[str] | None, token: str | None) -> None:
        self.app, self.hosts, self.token = app, hosts, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        host = headers.get("host", "").lower()
        if self.hosts is not None and host not in self.hosts:
            await _plain(send, 421, "this viewer answers only to its own address (Host refused)")
            return
        if self.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get("token")
            if given is not None and _same(given, self.token):
                await _set_cookie(scope, send, self.token)
                return
            if not (
                _same(_cookie(headers.get("cookie", "")), self.token)
                or _same(headers.get("authorization", "").removeprefix("Bearer "), self.token)
            ):
                await _plain(
                    send, 401, "this viewer needs its token: open the address serve printed"
                )
                return

        async def secure(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *((k, v) for k, v in message.get("headers", []) if k.lower() not in _OURS),
                    *SECURITY_HEADERS,
                ]
            await send(message)

        await self.app(scope, receive, secure)


_OURS = frozenset(k for k, _ in SECURITY_HEADERS)


def _headers(scope: Scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers", []):
        out.setdefault(k.decode("latin-1").lower(), v.decode("latin-1"))
    return out


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())


def _cookie(header: str) -> str:
    for item in header.split(";"):
        name, _, value = item.strip().partition("=")
        if name == COOKIE:
            return value
    return ""


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _set_cookie(scope: Scope, send: Send, token: str) -> None:
    """The first visit with ``?token=``: remember it in a cookie only this origin's requests
    carry (HttpOnly, SameSite=Strict) and send the browser to the same page without it."""
    rest = [
        (k, v)
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        if k != "token"
    ]
    # the same path, quoted, and never "//host" (a redirect to another site)
    where = "/" + quote(str(scope.get("path", "/")).lstrip("/"))
    where += "?" + urlencode(rest) if rest else ""
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", where.encode("latin-1", "replace")),
                (b"set-cookie", cookie.encode()),
                (b"content-length", b"0"),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
