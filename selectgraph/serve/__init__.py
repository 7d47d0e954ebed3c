"""Serving a graph to the outside: OpenAI-compatible, MCP and A2A endpoints.

Each conversation a client holds is a thread of the server's checkpoint store, so it
continues run after run and outlives the process (see :class:`ServedGraph`).
"""

from __future__ import annotations

from selectgraph.serve._parts import ServedPart
from selectgraph.serve._turns import Question, ServedGraph, ServeError, Turn, TurnStatus

__all__ = ["Question", "ServeError", "ServedGraph", "ServedPart", "Turn", "TurnStatus"]
