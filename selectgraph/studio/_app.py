"""The studio's HTTP app: the page, its static files, a JSON API and each run's event stream.

Routes (all JSON unless said otherwise):

- ``GET /`` the page; ``GET /static/...`` its script, styles and the bundled Mermaid.
- ``GET /api/graph``: the graph's name, Mermaid text, node ids and links.
- ``GET /api/runs``, ``POST /api/runs`` ``{"input": ..., "run_id": optional}``.
- ``GET /api/runs/{id}``: status, pending interrupts, current state.
- ``GET /api/runs/{id}/events``: Server-Sent Events, one JSON event per message, each
  with an ``id``; a reconnect with ``Last-Event-ID`` (or ``?after=``) resumes exactly.
- ``POST /api/runs/{id}/resume`` ``{"interrupt_id": ..., "answer": ...}``.
- ``GET /api/runs/{id}/history``; ``POST /api/runs/{id}/fork`` ``{"checkpoint_id": ...}``;
  ``POST /api/runs/{id}/cancel``.

Bad requests get a 4xx with ``{"error": message}``; nothing a request sends crashes
the server. Bound to a loopback address the studio answers only requests for a
loopback host name (DNS rebinding); with a token, every request must carry it
(``Authorization: Bearer``, or the cookie the page sets from ``/?token=``). Writes
need ``Content-Type: application/json``, which a cross-site form cannot send.
"""

from __future__ import annotations

import asyncio
import hmac
import html
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from selectgraph.build._builder import AgentGraph
from selectgraph.compile._mermaid import mermaid_layout
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.studio._runs import RunManager, StudioError

__all__ = ["TOKEN_COOKIE", "create_app"]

TOKEN_COOKIE = "selectgraph_studio"
"""The cookie that carries the token after the page was opened with ``?token=``."""

_LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]
_STATIC = files("selectgraph.studio") / "static"

Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    graph: AgentGraph,
    *,
    store: CheckpointStore | None = None,
    token: str | None = None,
    loopback_only: bool = True,
    max_events: int = 50_000,
) -> Starlette:
    """The studio for ``graph``.

    Args:
        graph: The graph to draw and run.
        store: Where runs keep checkpoints (default: in memory, for this server's life).
        token: A secret every request must carry; required when serving beyond loopback.
        loopback_only: Answer only requests addressed to a loopback host name.
        max_events: Events kept per run for readers (the oldest are dropped past it).
    """
    graph.compile()  # a broken graph fails here, not at the first request
    manager = RunManager(graph, store or InMemoryCheckpointStore(), max_events=max_events)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await manager.close()

    api = _Api(graph, manager)
    routes = [
        Route("/", api.page),
        Route("/favicon.ico", _no_icon),
        Route("/api/graph", api.graph_info),
        Route("/api/runs", api.runs, methods=["GET", "POST"]),
        Route("/api/runs/{run_id}", api.run),
        Route("/api/runs/{run_id}/events", api.events),
        Route("/api/runs/{run_id}/resume", api.resume, methods=["POST"]),
        Route("/api/runs/{run_id}/fork", api.fork, methods=["POST"]),
        Route("/api/runs/{run_id}/cancel", api.cancel, methods=["POST"]),
        Route("/api/runs/{run_id}/history", api.history),
        Mount("/static", StaticFiles(directory=str(_STATIC)), name="static"),
    ]
    middleware = []
    if loopback_only:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=_LOOPBACK_HOSTS))
    middleware.append(Middleware(_Guard, token=token))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={StudioError: _studio_error, 404: _not_found, 405: _not_allowed},
    )
    app.state.manager = manager
    return app


class _Guard:
    """Token check, and JSON-only writes (a cross-site form cannot send JSON)."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        problem = self._problem(request)
        if problem is not None:
            await problem(scope, receive, send)
            return
        given = request.query_params.get("token")
        if self.token is not None and given is not None and scope["path"] == "/":
            # The page was opened with its token: keep it in a cookie for its requests.
            async def with_cookie(message: Any) -> None:
                if message["type"] == "http.response.start":
                    cookie = (
                        f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                    ).encode()
                    message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie)]
                await send(message)

            await self.app(scope, receive, with_cookie)
            return
        await self.app(scope, receive, send)

    def _problem(self, request: Request) -> Response | None:
        if self.token is not None and not self._authorized(request):
            return _error(401, "this studio needs its token: open it with /?token=<token>")
        if request.method == "POST":
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return _error(415, "send the request body as JSON (Content-Type: application/json)")
        return None

    def _authorized(self, request: Request) -> bool:
        assert self.token is not None
        header = request.headers.get("authorization", "")
        candidates = [
            header[7:] if header.lower().startswith("bearer ") else "",
            request.cookies.get(TOKEN_COOKIE, ""),
            request.query_params.get("token", ""),
        ]
        return any(c and hmac.compare_digest(c.encode(), self.token.encode()) for c in candidates)


class _Api:
    def __init__(self, graph: AgentGraph, manager: RunManager) -> None:
        self.graph = graph
        self.manager = manager

    async def page(self, request: Request) -> Response:
        page = (_STATIC / "index.html").read_text(encoding="utf-8")
        return HTMLResponse(page.replace("{{GRAPH_NAME}}", _html(self.graph.name)))

    async def graph_info(self, request: Request) -> Response:
        compiled = self.graph.compile()
        layout = mermaid_layout(compiled)
        return JSONResponse(
            {
                "name": compiled.name,
                "entry": compiled.entry,
                "mermaid": layout.text,
                "ids": layout.ids,
                "links": [
                    {"source": s, "target": t, "index": i, "kind": k} for s, t, i, k in layout.links
                ],
                "nodes": {
                    name: {"kind": spec.adapter.kind, "description": spec.description}
                    for name, spec in compiled.nodes.items()
                },
            }
        )

    async def runs(self, request: Request) -> Response:
        if request.method == "GET":
            limit = _int(request.query_params.get("limit", "100"), "limit")
            return JSONResponse(await asyncio.to_thread(self.manager.listing, limit))
        body = await _json_body(request)
        run_id = body.get("run_id")
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            raise StudioError(400, "run_id must be a non-empty string")
        run = self.manager.start(body.get("input"), run_id)
        return JSONResponse(run.describe(), status_code=201)

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return JSONResponse(await asyncio.to_thread(self.manager.describe, run_id))

    async def events(self, request: Request) -> Response:
        log = self.manager.log_of(request.path_params["run_id"])
        after = _int(
            request.headers.get("last-event-id") or request.query_params.get("after") or "0",
            "Last-Event-ID",
        )

        async def messages() -> AsyncIterator[dict[str, Any]]:
            async for record in log.follow(after):
                yield {"id": str(record["id"]), "data": json.dumps(record)}
            yield {"event": "end", "data": json.dumps({"last_id": log.last_id})}

        return EventSourceResponse(messages(), ping=10)

    async def resume(self, request: Request) -> Response:
        body = await _json_body(request)
        interrupt_id = body.get("interrupt_id")
        if not isinstance(interrupt_id, str) or not interrupt_id:
            raise StudioError(400, "resume needs an interrupt_id (a string)")
        if "answer" not in body:
            raise StudioError(400, "resume needs an answer (any JSON value)")
        run = self.manager.resume(request.path_params["run_id"], interrupt_id, body["answer"])
        return JSONResponse(run.describe(), status_code=202)

    async def fork(self, request: Request) -> Response:
        body = await _json_body(request)
        checkpoint_id = body.get("checkpoint_id")
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise StudioError(400, "fork needs a checkpoint_id (a string)")
        run = self.manager.fork(request.path_params["run_id"], checkpoint_id)
        return JSONResponse(run.describe(), status_code=201)

    async def cancel(self, request: Request) -> Response:
        run = self.manager.cancel(request.path_params["run_id"])
        return JSONResponse(run.describe(), status_code=202)

    async def history(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return JSONResponse(await asyncio.to_thread(self.manager.history, run_id))


async def _no_icon(request: Request) -> Response:
    return Response(status_code=204)


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except ValueError as error:
        raise StudioError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise StudioError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _int(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise StudioError(400, f"{name} must be an integer, got {text!r}") from None
    if value < 0:
        raise StudioError(400, f"{name} must be >= 0, got {value}")
    return value


def _html(text: str) -> str:
    return html.escape(text, quote=True)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _studio_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StudioError)
    return _error(exc.status, str(exc))


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, f"no such page or API route: {request.url.path}")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _error(405, f"{request.method} is not allowed on {request.url.path}")
