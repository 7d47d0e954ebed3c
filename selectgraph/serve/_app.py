"""The served app: the OpenAI-compatible routes and every protocol part, behind one guard.

``create_app`` builds the ASGI app (for embedding or tests); ``serve`` runs it with
uvicorn. Every route, whatever its protocol, is behind the :class:`Guard` (the
bearer token, the body limit), and every error the server answers itself is JSON
that says what was wrong (``_http.py``). Bound beyond loopback, the server needs a
token: a graph would otherwise answer anyone who can reach the port.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Final

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from selectgraph.serve._guard import Guard, is_loopback
from selectgraph.serve._http import (
    ApiError,
    error_response,
    handle_api_error,
    handle_serve_error,
)
from selectgraph.serve._openai import openai_routes
from selectgraph.serve._parts import ServedPart
from selectgraph.serve._turns import ServedGraph, ServeError

__all__ = ["DEFAULT_MAX_BODY", "TOKEN_ENV", "create_app", "is_loopback", "serve", "server_url"]

DEFAULT_MAX_BODY: Final = 1 << 20
"""The largest request body read, in bytes (1 MiB): messages are small."""
TOKEN_ENV: Final = "SELECTGRAPH_SERVE_TOKEN"
"""The environment variable a token may come from."""


def create_app(
    graphs: Sequence[ServedGraph],
    *,
    parts: Sequence[ServedPart] = (),
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    loopback_only: bool = False,
) -> Starlette:
    """The app serving ``graphs``: OpenAI-compatible routes under ``/v1``, and ``parts``.

    Args:
        graphs: The graphs, each answering as the model of its name.
        parts: Other protocols' routes (MCP, A2A), each with its lifespan.
        token: A secret every request must carry as ``Authorization: Bearer``.
        max_body: The largest request body read, in bytes; a larger one is answered
            413, whether it declares its length or streams past it.
        loopback_only: Answer only requests addressed to a loopback host name
            (``serve`` sets it when bound to loopback): a web page cannot then reach
            the server through a DNS name it controls.

    Raises:
        ValueError: no graphs, two graphs of one name, an empty token, or a
            ``max_body`` below 1.
    """
    _check(graphs, token, max_body)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for part in parts:
                if part.lifespan is not None:
                    await stack.enter_async_context(part.lifespan())
            yield

    routes: list[BaseRoute] = [*openai_routes(graphs)]
    for part in parts:
        routes.extend(part.routes)
    return Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, max_body=max_body, loopback_only=loopback_only)],
        lifespan=lifespan,
        exception_handlers={
            ApiError: handle_api_error,
            ServeError: handle_serve_error,
            404: _not_found,
            405: _not_allowed,
            Exception: _server_error,
        },
    )


def _check(graphs: Sequence[ServedGraph], token: str | None, max_body: int) -> None:
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body must be a positive number of bytes, got {max_body!r}")
    if token is not None and not token:
        raise ValueError("token must not be empty: give a secret, or None for no token")
    if not graphs:
        raise ValueError("create_app needs at least one ServedGraph to serve")
    seen: set[str] = set()
    for served in graphs:
        if not isinstance(served, ServedGraph):
            raise ValueError(f"graphs holds a {type(served).__name__}, not a ServedGraph")
        if served.name in seen:
            raise ValueError(
                f"two graphs are served as {served.name!r}; give one another name "
                "(ServedGraph(..., name=...))"
            )
        seen.add(served.name)


def server_url(host: str, port: int) -> str:
    """The server's base URL (``/v1`` under it is the OpenAI base URL)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def serve(
    graphs: Sequence[ServedGraph],
    *,
    parts: Sequence[ServedPart] = (),
    host: str = "127.0.0.1",
    port: int = 8410,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    log_level: str = "warning",
    **uvicorn_options: Any,
) -> None:
    """Serve ``graphs`` until interrupted (Ctrl-C).

    Bound to a loopback address it needs no token; bound elsewhere it needs one
    (``token``, or ``SELECTGRAPH_SERVE_TOKEN``), and every request must carry it.

    Raises:
        ValueError: a non-loopback ``host`` without a token, or what
            :func:`create_app` refuses.
    """
    import uvicorn

    token = token or os.environ.get(TOKEN_ENV) or None
    loopback = is_loopback(host)
    if not loopback and not token:
        raise ValueError(
            f"the server would be reachable from other machines on {host}; give it a token "
            f"(--token, or {TOKEN_ENV}), for example {secrets.token_urlsafe(16)}"
        )
    app = create_app(graphs, parts=parts, token=token, max_body=max_body, loopback_only=loopback)
    uvicorn.run(app, host=host, port=port, log_level=log_level, **uvicorn_options)


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, f"no such route: {request.method} {request.url.path}")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(405, f"{request.method} is not allowed on {request.url.path}")


async def _server_error(request: Request, exc: Exception) -> Response:
    # A bug, not a request's fault: the client gets JSON it can read, the log the traceback.
    return error_response(500, f"the server failed on {request.url.path}: {type(exc).__name__}")
