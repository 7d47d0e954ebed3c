"""Serving a graph to the outside: OpenAI-compatible, MCP and A2A endpoints.

Each conversation a client holds is a thread of the server's checkpoint store, so it
continues run after run and outlives the process (see :class:`ServedGraph`). The
endpoints need the ``serve`` extra (``pip install "selectgraph[serve]"``); they are
imported when first used, so ``ServedGraph`` alone needs nothing more.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from selectgraph.serve._parts import ServedPart
from selectgraph.serve._turns import Question, ServedGraph, ServeError, Turn, TurnStatus

if TYPE_CHECKING:
    from selectgraph.serve._a2a import a2a_part
    from selectgraph.serve._app import create_app, serve
    from selectgraph.serve._mcp_http import mcp_app, mcp_part
    from selectgraph.serve._mcp_server import mcp_server

_LAZY = {
    "a2a_part": "selectgraph.serve._a2a",
    "create_app": "selectgraph.serve._app",
    "serve": "selectgraph.serve._app",
    "mcp_server": "selectgraph.serve._mcp_server",
    "mcp_part": "selectgraph.serve._mcp_http",
    "mcp_app": "selectgraph.serve._mcp_http",
}
"""Names whose modules need the serve extra (starlette, mcp, a2a-sdk), imported on first use."""

__all__ = [
    "Question",
    "ServeError",
    "ServedGraph",
    "ServedPart",
    "Turn",
    "TurnStatus",
    "a2a_part",
    "create_app",
    "mcp_app",
    "mcp_part",
    "mcp_server",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'selectgraph.serve' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
