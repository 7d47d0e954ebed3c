"""MCP over streamable HTTP: the MCP server's share of the served app, at ``/mcp``.

The SDK's session manager runs a task group for the sessions it holds, and can run
only once; so the part's lifespan makes a fresh one each time the app starts, and
the route hands each request to the manager that is running (a request before the
app started, or after it stopped, is answered 503).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Final

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from selectgraph.serve._guard import Guard
from selectgraph.serve._mcp_server import mcp_server
from selectgraph.serve._parts import ServedPart
from selectgraph.serve._turns import ServedGraph

__all__ = ["LOOPBACK_HOSTS", "MCP_PATH", "mcp_app", "mcp_part"]

MCP_PATH: Final = "/mcp"
"""Where the MCP endpoint is, under the served app."""
LOOPBACK_HOSTS: Final = ("127.0.0.1:*", "localhost:*", "[::1]:*")
"""``Host`` headers of a server bound to loopback (the DNS rebinding check)."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def mcp_part(
    graphs: Sequence[ServedGraph], *, allowed_hosts: Sequence[str] | None = None
) -> ServedPart:
    """The MCP server of ``graphs`` over streamable HTTP at ``/mcp``, for the served app.

    Args:
        graphs: The graphs, each a tool (see :func:`mcp_server`).
        allowed_hosts: ``Host`` header values the endpoint answers (``"127.0.0.1:*"``
            allows any port), so a web page cannot reach a loopback server through
            DNS rebinding; None answers any host (behind a token, or a proxy).

    Raises:
        ValueError: what :func:`mcp_server` refuses.
    """
    endpoint = _Endpoint(mcp_server(graphs), allowed_hosts)
    return ServedPart(routes=[Route(MCP_PATH, endpoint=endpoint)], lifespan=endpoint.running)


def mcp_app(
    graphs: Sequence[ServedGraph],
    *,
    token: str | None = None,
    max_body: int = 1 << 20,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """An app serving only the MCP endpoint of ``graphs`` (``selectgraph mcp --transport http``).

    It stands behind the same guard as the full served app: the bearer token when
    there is one (401 without it), and the body limit (413).

    Args:
        graphs: The graphs, each a tool (see :func:`mcp_server`).
        token: A secret every request must carry as ``Authorization: Bearer``.
        max_body: The largest request body read, in bytes.
        allowed_hosts: See :func:`mcp_part`.

    Raises:
        ValueError: an empty token, a ``max_body`` below 1, or what :func:`mcp_server`
            refuses.
    """
    if token is not None and not token:
        raise ValueError("token must not be empty: give a secret, or None for no token")
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body must be a positive number of bytes, got {max_body!r}")
    part = mcp_part(graphs, allowed_hosts=allowed_hosts)
    lifespan = part.lifespan
    assert lifespan is not None  # mcp_part always has one

    @contextlib.asynccontextmanager
    async def running(app: Starlette) -> AsyncIterator[None]:
        async with lifespan():
            yield

    return Starlette(
        routes=list(part.routes),
        middleware=[Middleware(Guard, token=token, max_body=max_body)],
        lifespan=running,
    )


class _Endpoint:
    """The ASGI endpoint at ``/mcp``: the running session manager's."""

    def __init__(self, server: Server[Any], allowed_hosts: Sequence[str] | None) -> None:
        self._server = server
        self._security = None
        if allowed_hosts is not None:
            origins = [f"http://{host}" for host in allowed_hosts]
            self._security = TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=list(allowed_hosts),
                allowed_origins=origins,
            )
        self._manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """A session manager for as long as the app runs."""
        if self._manager is not None:
            raise RuntimeError("this MCP part is already running in another app")
        manager = StreamableHTTPSessionManager(app=self._server, security_settings=self._security)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:
            await _unavailable(send)
            return
        await manager.handle_request(scope, receive, send)


async def _unavailable(send: Send) -> None:
    body = json.dumps(
        {"error": {"message": "the MCP endpoint is not running (the app was not started)"}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
