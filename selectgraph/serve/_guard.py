"""The guard: the bearer token and the body limit, checked before any route sees a request.

It sits in front of every protocol's routes (OpenAI, MCP, A2A), so none of them can
forget a check. A request without the token is answered 401; a body past the limit
413, as soon as its declared length says so or its streamed bytes pass it, never
after reading it whole. The body read is handed on to the app as it came.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from selectgraph.serve._http import error_response

__all__ = ["Guard", "is_loopback"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """ASGI middleware: the token (when there is one) and the body limit on every request."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, max_body: int, loopback_only: bool = False
    ) -> None:
        """Guard ``app``.

        Args:
            app: The app behind the guard.
            token: The secret every request must carry as ``Authorization: Bearer``;
                None lets every request through.
            max_body: The largest request body read, in bytes.
            loopback_only: Answer only requests addressed to a loopback host name, so
                a web page cannot reach a server on this machine through a DNS name
                it controls (DNS rebinding).
        """
        self.app = app
        self.token = None if token is None else token.encode()
        self.max_body = max_body
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket: no route takes one, and none passes unchecked
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = {key.lower(): value for key, value in scope.get("headers", [])}
        if self.loopback_only and not _loopback_host(headers.get(b"host", b"")):
            refused = error_response(400, "this server answers only requests for a loopback host")
            await refused(scope, receive, send)
            return
        if self.token is not None and not self._authorized(headers.get(b"authorization", b"")):
            refused = error_response(
                401,
                "this server needs its token: send the header 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refused(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None:
            problem = self._declared_problem(declared)
            if problem is not None:
                await error_response(*problem)(scope, receive, send)
                return
        body, more = await self._read(receive)
        if more is None:
            return  # the client went away before sending its body
        if more:
            await self._too_large()(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def _authorized(self, header: bytes) -> bool:
        assert self.token is not None
        scheme, _, given = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(given.strip(), self.token)

    def _declared_problem(self, declared: bytes) -> tuple[int, str] | None:
        if not declared.isdigit():
            return 400, f"Content-Length is not a number: {declared[:40]!r}"
        length = int(declared)
        if length > self.max_body:
            return 413, self._too_large_text()
        return None

    async def _read(self, receive: Receive) -> tuple[bytes, bool | None]:
        """The body up to the limit, and whether more was coming (None: the client left)."""
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"", None
            body += message.get("body", b"")
            if len(body) > self.max_body:
                return b"", True  # stop reading: the rest is never buffered
            if not message.get("more_body", False):
                return bytes(body), False

    def _too_large_text(self) -> str:
        return f"the request body is larger than this server reads ({self.max_body:,} bytes)"

    def _too_large(self) -> Any:
        return error_response(413, self._too_large_text())


def _loopback_host(header: bytes) -> bool:
    """Whether a Host header names this machine (``127.0.0.1:8410``, ``[::1]:80``...)."""
    host = header.decode("latin-1")
    if host.startswith("["):
        host = host[: host.find("]") + 1]
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return is_loopback(host)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read once, then what the client sends next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # a disconnect, for routes that stream their answer

    return replayed
