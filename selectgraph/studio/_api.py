"""The studio's request handlers: the page, the graph, runs, their event streams, and threads.

Each handler reads and checks its request, asks the :class:`RunManager` (runs) or
the :class:`ThreadDesk` (threads), and answers JSON; what is wrong with a request is
a :class:`StudioError`, answered as ``{"error": message}`` with its status.
"""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import AsyncIterator
from importlib.resources import files
from typing import Any, Final

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from selectgraph.build._builder import AgentGraph
from selectgraph.build._input import MAX_INPUT_DEPTH, input_field_of, json_depth, text_input
from selectgraph.compile._mermaid import mermaid_layout
from selectgraph.core._errors import ThreadIdError
from selectgraph.persistence._threads import check_thread_id
from selectgraph.studio._compare import compare_runs
from selectgraph.studio._experiments import (
    compared_experiments,
    experiment_cases,
    experiments_listing,
)
from selectgraph.studio._fork import fork_edited
from selectgraph.studio._reload import Reloader
from selectgraph.studio._runs import RunManager, StudioError
from selectgraph.studio._threads import ThreadDesk

__all__ = ["STATIC", "Api"]

STATIC: Final = files("selectgraph.studio") / "static"
MAX_LIMIT: Final = 1000
"""The most items one ``?limit=`` asks for (runs, threads, a page of events)."""
DEFAULT_MAX_BODY: Final = 1 << 20
"""The largest request body read, in bytes (1 MiB): runs' inputs and answers are small."""
_MAX_EVENT_ID: Final = 2**63 - 1
"""The largest event id (``?after=``, ``Last-Event-ID``) a store's integers hold."""


class Api:
    """The handlers, bound to one graph and its runs."""

    def __init__(
        self,
        graph: AgentGraph,
        manager: RunManager,
        *,
        max_body: int = DEFAULT_MAX_BODY,
        reloader: Reloader | None = None,
    ) -> None:
        self.reloader = reloader
        self.manager = manager
        self.desk = ThreadDesk(manager)
        self.max_body = max_body

    @property
    def graph(self) -> AgentGraph:
        """The graph served now (a hot reload swaps it on the manager)."""
        return self.manager.graph

    async def page(self, request: Request) -> Response:
        page = (STATIC / "index.html").read_text(encoding="utf-8")
        return HTMLResponse(page.replace("{{GRAPH_NAME}}", html.escape(self.graph.name)))

    async def graph_info(self, request: Request) -> Response:
        compiled = self.graph.compile()
        layout = mermaid_layout(compiled)
        return JSONResponse(
            {
                "name": compiled.name,
                "entry": compiled.entry,
                "input_field": input_field_of(self.graph),
                "capture_content": self.manager.capture_content,
                "reload": self.reloader is not None,
                "version": 1 if self.reloader is None else self.reloader.version,
                "reload_error": None if self.reloader is None else self.reloader.error,
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

    # ------------------------------------------------------------ runs
    async def runs(self, request: Request) -> Response:
        if request.method == "GET":
            limit = _limit(request, 100)
            return JSONResponse(await asyncio.to_thread(self.manager.listing, limit))
        body = await self._body(request)
        run_id = _run_id(body)
        if body.get("input") is None:  # the engine would take it as "continue run_id"
            raise StudioError(
                400, "a new run needs an input: text, or an object of state fields ({} for none)"
            )
        run = self.manager.start(self._input(body.get("input")), run_id)
        return JSONResponse(run.describe(), status_code=201)

    def _input(self, value: Any) -> Any:
        """What a run starts from: the command line's convention.

        Text goes to the graph's input field when it declares one (``input_field`` on
        its state schema) and is the user's message; an object is the state.
        """
        return text_input(self.graph, value) if isinstance(value, str) else value

    async def run(self, request: Request) -> Response:
        run_id = _path_run_id(request)
        return JSONResponse(await asyncio.to_thread(self.manager.describe, run_id))

    async def events(self, request: Request) -> Response:
        """Server-Sent Events (or, asked for JSON, a page of them) of any run."""
        run_id = _path_run_id(request)
        after = _int(
            request.headers.get("last-event-id") or request.query_params.get("after") or "0",
            "Last-Event-ID",
            0,
            _MAX_EVENT_ID,
        )
        if _wants_json(request):
            limit = _limit(request, MAX_LIMIT)
            return JSONResponse(await self.manager.events_page(run_id, after, limit))
        records = await self.manager.stream(run_id, after)

        async def messages() -> AsyncIterator[dict[str, Any]]:
            last = after
            async for record in records:
                last = record["id"]
                yield {"id": str(last), "data": json.dumps(record)}
            yield {"event": "end", "data": json.dumps({"last_id": last})}

        return EventSourceResponse(messages(), ping=10)

    async def resume(self, request: Request) -> Response:
        run_id = _path_run_id(request)
        body = await self._body(request)
        interrupt_id = body.get("interrupt_id")
        if not isinstance(interrupt_id, str) or not interrupt_id:
            raise StudioError(400, "resume needs an interrupt_id (a string)")
        if "answer" not in body:
            raise StudioError(400, "resume needs an answer (any JSON value)")
        run = self.manager.resume(run_id, interrupt_id, body["answer"])
        return JSONResponse(run.describe(), status_code=202)

    async def fork(self, request: Request) -> Response:
        run_id = _path_run_id(request)
        body = await self._body(request)
        checkpoint_id = body.get("checkpoint_id")
        if not isinstance(checkpoint_id, str) or not checkpoint_id:
            raise StudioError(400, "fork needs a checkpoint_id (a string)")
        update = body.get("update")
        if update is not None and not isinstance(update, dict):
            raise StudioError(
                400, f"update must be an object of state fields, got {type(update).__name__}"
            )
        if update:
            run = await fork_edited(self.manager, run_id, checkpoint_id, update)
        else:
            run = self.manager.fork(run_id, checkpoint_id)
        return JSONResponse(run.describe(), status_code=201)

    async def checkpoint(self, request: Request) -> Response:
        run_id = _path_run_id(request)
        checkpoint_id = request.path_params["checkpoint_id"]
        found = await asyncio.to_thread(self.manager.checkpoint, run_id, checkpoint_id)
        return JSONResponse(found)

    async def cancel(self, request: Request) -> Response:
        run = self.manager.cancel(_path_run_id(request))
        return JSONResponse(run.describe(), status_code=202)

    async def compare(self, request: Request) -> Response:
        """``?a=RUN&b=RUN``: the two runs side by side."""
        ids = []
        for key in ("a", "b"):
            value = request.query_params.get(key)
            if not value:
                raise StudioError(
                    400, f"compare needs two runs: ?a=RUN_ID&b=RUN_ID ({key} is missing)"
                )
            ids.append(_storable(value))
        return JSONResponse(await asyncio.to_thread(compare_runs, self.manager, *ids))

    async def history(self, request: Request) -> Response:
        run_id = _path_run_id(request)
        return JSONResponse(await asyncio.to_thread(self.manager.history, run_id))

    # ------------------------------------------------------------ experiments
    async def experiments(self, request: Request) -> Response:
        """The experiments ``selectgraph eval`` kept in this studio's store."""
        limit = _limit(request, 100)
        store = self.manager.store
        return JSONResponse(await asyncio.to_thread(experiments_listing, store, limit))

    async def experiment(self, request: Request) -> Response:
        """One experiment's cases."""
        name = request.path_params["name"]
        return JSONResponse(await asyncio.to_thread(experiment_cases, self.manager.store, name))

    async def compare_experiments(self, request: Request) -> Response:
        """``?a=BASELINE&b=CANDIDATE``: two experiments case by case."""
        names = []
        for key in ("a", "b"):
            value = request.query_params.get(key)
            if not value:
                raise StudioError(
                    400,
                    f"comparing experiments needs two: ?a=BASELINE&b=CANDIDATE ({key} is missing)",
                )
            names.append(value)
        store = self.manager.store
        return JSONResponse(await asyncio.to_thread(compared_experiments, store, *names))

    # ------------------------------------------------------------ threads
    async def threads(self, request: Request) -> Response:
        limit = _limit(request, 100)
        metadata = _metadata(request.query_params.getlist("metadata"))
        listed = await asyncio.to_thread(self.desk.listing, metadata, limit)
        return JSONResponse(listed)

    async def thread(self, request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        return JSONResponse(await asyncio.to_thread(self.desk.describe, thread_id))

    async def send(self, request: Request) -> Response:
        body = await self._body(request)
        run = await self.desk.send(
            request.path_params["thread_id"],
            body.get("input"),
            strategy=_text(body, "strategy", "reject"),
            metadata=body.get("metadata"),
            run_id=_run_id(body),
        )
        return JSONResponse(run.describe(), status_code=201)

    async def _body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object, read up to ``max_body`` bytes.

        Counted here, over Starlette's own ``request.stream()``: Starlette's
        ``max_body_size`` (1.6+; the extra allows 0.40) answers a body that
        declares its size with a fixed plain-text 413, not ``{"error": ...}``.

        Raises:
            StudioError: 413 past the limit (declared or streamed), 400 for a body
                that is not a JSON object or is nested too deeply to read.
        """
        declared = request.headers.get("content-length")
        if declared is not None and _int(declared, "Content-Length", 0) > self.max_body:
            raise _too_large(self.max_body)
        raw = bytearray()
        async for chunk in request.stream():  # without a Content-Length: count as it comes
            raw += chunk
            if len(raw) > self.max_body:
                raise _too_large(self.max_body)
        body = _loads(bytes(raw) or b"{}", "the request body")
        if not isinstance(body, dict):
            raise StudioError(
                400, f"the request body must be a JSON object, got {type(body).__name__}"
            )
        return body


def _too_large(limit: int) -> StudioError:
    return StudioError(
        413, f"the request body is larger than this studio reads ({limit:,} bytes: max_body)"
    )


def _no_constant(name: str) -> Any:
    # JSON has no NaN or Infinity (a browser sends null); Python's parser takes them.
    raise ValueError(f"{name} is not a JSON value")


def _loads(raw: str | bytes, what: str) -> Any:
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise StudioError(400, f"{what} is JSON nested too deeply to read") from None
    except ValueError as error:
        raise StudioError(400, f"{what} is not valid JSON: {error}") from None
    return _shallow(value, what)


def _shallow(value: Any, what: str) -> Any:
    """``value``, unless it nests deeper than MAX_INPUT_DEPTH (what reads it next may recurse)."""
    if json_depth(value) > MAX_INPUT_DEPTH:
        raise StudioError(400, f"{what} is JSON nested deeper than {MAX_INPUT_DEPTH} levels")
    return value


def _wants_json(request: Request) -> bool:
    """Whether the client asked for JSON rather than an event stream."""
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/event-stream" not in accept


def _run_id(body: dict[str, Any]) -> str | None:
    run_id = body.get("run_id")
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        raise StudioError(400, "run_id must be a non-empty string")
    return None if run_id is None else _storable(run_id)


def _path_run_id(request: Request) -> str:
    return _storable(request.path_params["run_id"])


def _storable(run_id: str) -> str:
    """``run_id`` if every store can hold it: the rule for thread ids, which ``|`` breaks too."""
    try:
        return check_thread_id(run_id)
    except ThreadIdError:
        raise StudioError(
            400,
            f"run id {run_id!r} cannot be stored: use 1 to 256 characters without control "
            "characters or '|' (interrupt ids use it), that UTF-8 can encode",
        ) from None


def _text(body: dict[str, Any], key: str, default: str) -> str:
    value = body.get(key, default)
    if not isinstance(value, str):
        raise StudioError(400, f"{key} must be a string, got {type(value).__name__}")
    return value


def _metadata(items: list[str]) -> dict[str, Any]:
    """``key=value`` query items as a dict; a value is JSON when it parses, else text."""
    found: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise StudioError(400, f"metadata must be key=value, got {item!r}")
        try:
            parsed = json.loads(value, parse_constant=_no_constant)
        except RecursionError:
            raise StudioError(400, f"metadata {key!r} is JSON nested too deeply to read") from None
        except ValueError:
            parsed = value  # not JSON: the text itself
        found[key] = _shallow(parsed, f"metadata {key!r}")
    return found


def _limit(request: Request, default: int) -> int:
    """``?limit=``: an integer from 1 to :data:`MAX_LIMIT`."""
    return _int(request.query_params.get("limit", str(default)), "limit", 1, MAX_LIMIT)


def _int(text: str, name: str, low: int = 0, high: int = _MAX_EVENT_ID) -> int:
    try:
        value = int(text)
    except ValueError:
        raise StudioError(400, f"{name} must be an integer, got {text[:40]!r}") from None
    if not low <= value <= high:
        raise StudioError(400, f"{name} must be from {low} to {high:,}, got {value}")
    return value
