"""OpenAI-compatible endpoints: a served graph answers as if it were a model.

Routes: ``GET /v1/models`` (and ``/v1/models/{name}``), ``POST /v1/chat/completions``
(``_openai_chat.py``) and ``POST /v1/responses`` (``_openai_responses.py``), each
streamed or not. The request's ``model`` names the graph; what both APIs share is in
``_openai_ask.py``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from selectgraph.serve._openai_ask import Catalog
from selectgraph.serve._openai_chat import chat_completions
from selectgraph.serve._openai_responses import responses
from selectgraph.serve._turns import ServedGraph

__all__ = ["openai_routes"]


def openai_routes(graphs: Sequence[ServedGraph]) -> list[Route]:
    """The OpenAI-compatible routes serving ``graphs``, each under its name."""
    catalog = Catalog(graphs)
    created = int(time.time())

    def describe(served: ServedGraph) -> dict[str, Any]:
        return {
            "id": served.name,
            "object": "model",
            "created": created,
            "owned_by": "selectgraph",
            "description": served.description,
        }

    async def models(request: Request) -> Response:
        data = [describe(served) for served, _ in catalog.graphs.values()]
        return JSONResponse({"object": "list", "data": data})

    async def model(request: Request) -> Response:
        served, _ = catalog.graph(request.path_params["name"], param=None)
        return JSONResponse(describe(served))

    async def chat(request: Request) -> Response:
        return await chat_completions(catalog, request)

    async def respond(request: Request) -> Response:
        return await responses(catalog, request)

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{name:path}", model, methods=["GET"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/responses", respond, methods=["POST"]),
    ]
