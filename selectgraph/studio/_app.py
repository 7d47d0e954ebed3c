"""The studio's HTTP app: the page, its static files, a JSON API and each run's event stream.

Routes (all JSON unless said otherwise):

- ``GET /`` the page; ``GET /static/...`` its script, styles and the bundled Mermaid.
- ``GET /api/graph``: the graph's name, Mermaid text, node ids and links.
- ``GET /api/runs``, ``POST /api/runs`` ``{"input": ..., "run_id": optional}``.
- ``GET /api/runs/{id}``: status, pending interrupts, current state.
- ``GET /api/runs/{id}/events``: Server-Sent Events, one JSON event per message, each
  with an ``id``; a reconnect with ``Last-Event-ID`` (or ``?after=``) resumes exactly.
  A run this studio did not start streams from the store's event log (its seqs are
  the ids), polled as it grows. ``Accept: application/json``: the events after
  ``?after=`` as one JSON page.
- ``POST /api/runs/{id}/resume`` ``{"interrupt_id": ..., "answer": ...}``.
- ``GET /api/runs/{id}/history``; ``GET /api/runs/{id}/checkpoints/{checkpoint_id}``: the
  state there; ``POST /api/runs/{id}/fork`` ``{"checkpoint_id": ..., "update": optional
  {field: value}}`` (the edit merged into the fork's state first); ``POST
  /api/runs/{id}/cancel``. A run's description says which run and step it was forked
  from (``forked_from``) and the forks made from it (``forks``).
- ``GET /api/compare?a=RUN&b=RUN``: two runs side by side (path, tokens, cost,
  duration, and their final states' differences).
- ``GET /api/experiments``: the experiments ``selectgraph eval`` kept in the store
  (name, cases, pass rate, tokens, cost, when); ``GET /api/experiments/{name}``: its
  cases (input, output, expected, scores, pass/fail, run); ``GET
  /api/compare-experiments?a=BASELINE&b=CANDIDATE``: case by case, each fixed, broke,
  changed, same, added or removed.
- ``GET /api/threads`` (``?metadata=key=value``, ``?limit=``); ``GET /api/threads/{id}``:
  its conversation, runs and questions; ``POST /api/threads/{id}/runs`` ``{"input": ...,
  "strategy": "reject" | "enqueue" | "interrupt" | "rollback"}``: the next message.

The handlers are in ``_api.py``; runs in ``_runs.py``, threads in ``_threads.py``,
stored event logs in ``_stored.py``.

Bad requests get a 4xx with ``{"error": message}``; nothing a request sends crashes
the server. A body past ``max_body`` bytes (1 MiB) is refused with 413 before it is
all read; ids a store could not hold and ``?limit=`` outside 1..1000 get 400.

Bound to a loopback address the studio answers only requests for a loopback host
name (DNS rebinding); with a token, every request must carry it (``Authorization:
Bearer``, or the cookie the page sets from ``/?token=``). Writes need
``Content-Type: application/json``, which a cross-site form cannot send.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from selectgraph.build._builder import AgentGraph
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.studio._api import DEFAULT_MAX_BODY, STATIC, Api
from selectgraph.studio._reload import Reloader
from selectgraph.studio._runs import RunManager, StudioError

__all__ = ["TOKEN_COOKIE", "create_app"]

TOKEN_COOKIE = "selectgraph_studio"
"""The cookie that carries the token after the page was opened with ``?token=``."""

_LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]

Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    graph: AgentGraph,
    *,
    store: CheckpointStore | None = None,
    token: str | None = None,
    loopback_only: bool = True,
    max_events: int = 50_000,
    poll_interval: float = 0.25,
    max_body: int = DEFAULT_MAX_BODY,
    capture_content: bool = False,
    reload: bool = False,
    reload_interval: float = 0.5,
) -> Starlette:
    """The studio for ``graph``.

    Args:
        graph: The graph to draw and run.
        store: Where runs keep checkpoints (default: in memory, for this server's life).
        token: A secret every request must carry; required when serving beyond loopback.
        loopback_only: Answer only requests addressed to a loopback host name.
        max_events: Events kept per run for readers (the oldest are dropped past it).
        poll_interval: Seconds between reads of the store's event log while a page
            follows a run going on in another process.
        max_body: The largest request body read, in bytes (1 MiB by default); a larger
            one is answered 413, whether it declares its length or streams past it.
        capture_content: Keep the prompts and replies of the runs started here, and
            their tools' arguments and results, for the page to show (and in the
            store's event log, as ``event_log="content"`` does). Off by default: a
            prompt may hold what should not be kept.
        reload: Import the graph's module again when its file changes, keeping the
            store and the runs (the graph must be a global of an imported module).
        reload_interval: Seconds between looks at the module's file, with ``reload``.

    Raises:
        ValueError: ``max_body`` is not a positive integer, or ``reload`` is asked
            for a graph that is no module's global.
    """
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValueError(f"max_body must be a positive number of bytes, got {max_body!r}")
    graph.compile()  # a broken graph fails here, not at the first request
    manager = RunManager(
        graph,
        store or InMemoryCheckpointStore(),
        max_events=max_events,
        poll_interval=poll_interval,
        capture_content=capture_content,
    )

    reloader = Reloader(manager, reload_interval) if reload else None

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        watcher = None if reloader is None else asyncio.create_task(reloader.watch())
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await manager.close()

    api = Api(graph, manager, max_body=max_body, reloader=reloader)
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
        Route("/api/runs/{run_id}/checkpoints/{checkpoint_id}", api.checkpoint),
        Route("/api/compare", api.compare),
        Route("/api/experiments", api.experiments),
        # Experiment names may hold "/": the path converter takes them whole.
        Route("/api/experiments/{name:path}", api.experiment),
        Route("/api/compare-experiments", api.compare_experiments),
        Route("/api/threads", api.threads),
        # Thread ids may hold "/": the path converter takes them whole.
        Route("/api/threads/{thread_id:path}/runs", api.send, methods=["POST"]),
        Route("/api/threads/{thread_id:path}", api.thread),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
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


async def _no_icon(request: Request) -> Response:
    return Response(status_code=204)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _studio_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StudioError)
    return JSONResponse({**exc.detail, "error": str(exc)}, status_code=exc.status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(404, f"no such page or API route: {request.url.path}")


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _error(405, f"{request.method} is not allowed on {request.url.path}")
