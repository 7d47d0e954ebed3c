"""``selectgraph mcp``: graphs offered as the tools of an MCP server, over stdio or HTTP.

Over stdio (what an MCP client starts as a subprocess) stdout carries the protocol
and nothing else: what loading the graphs prints, and every message of this
command, goes to stderr. Over HTTP the endpoint is ``/mcp``, behind the serve
app's guard (the bearer token, the body limit); beyond loopback a token is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from selectgraph.cli._common import AllowOpt, StoreOpt, err, fail, load, open_checkpoints

if TYPE_CHECKING:
    from selectgraph.serve import ServedGraph

__all__ = ["DEFAULT_PORT", "Transport", "mcp_command"]

DEFAULT_PORT = 8411
"""The port ``--transport http`` listens on unless ``--port`` says otherwise."""


class Transport(StrEnum):
    """How the MCP client reaches the server."""

    stdio = "stdio"
    """The client started this process: stdin and stdout carry the protocol."""
    http = "http"
    """Streamable HTTP at ``/mcp``."""


GraphsArg = Annotated[
    list[str],
    typer.Argument(
        metavar="GRAPH",
        help="Graphs to offer as tools: GraphSpec files (.yaml/.json) or module:attribute "
        "(an AgentGraph, SupervisorAgent, DeepResearch...); module may be a path/to/file.py.",
    ),
]


def mcp_command(
    graphs: GraphsArg,
    store: StoreOpt = None,
    transport: Annotated[
        Transport, typer.Option(help="stdio (started by the client) or http (at /mcp).")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="Address to listen on (http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (http).")] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            help="A secret every request must carry as 'Authorization: Bearer' (http; "
            "needed beyond 127.0.0.1; or SELECTGRAPH_SERVE_TOKEN)."
        ),
    ] = None,
    name: Annotated[
        list[str] | None,
        typer.Option(
            "--name",
            help="The tool name of a graph, one per GRAPH in order; default: the graph's name.",
        ),
    ] = None,
    allow: AllowOpt = None,
) -> None:
    """Offer GRAPH(s) as the tools of an MCP server: one tool per graph, a call per turn."""
    try:
        from selectgraph.serve._app import TOKEN_ENV, is_loopback, server_url
        from selectgraph.serve._mcp_server import mcp_server, run_stdio
    except ImportError as error:
        fail(f'serving over MCP needs its extra: pip install "selectgraph[serve]" ({error})')
    if transport is Transport.stdio:
        if token is not None:
            fail(
                "--token protects --transport http; over stdio only the client that "
                "started this process can reach it"
            )
    else:
        token = token or os.environ.get(TOKEN_ENV) or None
        if not is_loopback(host) and not token:
            fail(
                f"the MCP server would be reachable from other machines on {host}; give it a "
                f"token (--token, or {TOKEN_ENV})"
            )
    # Over stdio, stdout is the protocol: what importing the graphs prints must not reach it.
    with contextlib.redirect_stdout(sys.stderr):
        served = _served(graphs, name or [], store, allow)
    try:
        server = mcp_server(served)
    except ValueError as error:
        fail(str(error))
    tools = ", ".join(repr(s.name) for s in served)
    if transport is Transport.stdio:
        err.print(f"selectgraph mcp: {tools} over stdio", highlight=False)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_stdio(server))
        return
    err.print(f"selectgraph mcp: {tools} at {server_url(host, port)}/mcp", highlight=False)
    _serve_http(served, host=host, port=port, token=token, loopback=is_loopback(host))


def _served(
    graphs: Sequence[str], names: Sequence[str], store: str | None, allow: list[str] | None
) -> list[ServedGraph]:
    from selectgraph.serve import ServedGraph

    if len(names) > len(graphs):
        fail(f"--name was given {len(names)} times for {len(graphs)} GRAPH(s): one per GRAPH")
    checkpoints = open_checkpoints(store)
    served: list[ServedGraph] = []
    for index, graph in enumerate(graphs):
        target = load(graph, allow)
        chosen = names[index] if index < len(names) else None
        try:
            served.append(
                ServedGraph(target.graph, source=target.source, name=chosen, store=checkpoints)
            )
        except TypeError as error:
            fail(f"{graph}: {error}")
    return served


def _serve_http(
    served: Sequence[ServedGraph], *, host: str, port: int, token: str | None, loopback: bool
) -> None:
    import uvicorn

    from selectgraph.serve._mcp_http import LOOPBACK_HOSTS, mcp_app

    # On loopback, a web page must not reach the tools by DNS rebinding: check Host.
    allowed = LOOPBACK_HOSTS if loopback else None
    try:
        app = mcp_app(served, token=token, allowed_hosts=allowed)
    except ValueError as error:
        fail(str(error))
    uvicorn.run(app, host=host, port=port, log_level="warning")
