"""``selectgraph serve``: graphs served to the outside, as OpenAI-compatible models and more.

Each GRAPH is served under its name (or ``--name``): ``/v1`` answers OpenAI's clients,
``/mcp`` MCP clients (each graph a tool), ``/a2a/<name>/`` A2A clients; all in one app,
behind one token and body limit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from selectgraph.cli._common import AllowOpt, StoreOpt, err, fail, load, open_checkpoints

if TYPE_CHECKING:
    from selectgraph.serve import ServedGraph, ServedPart

__all__ = ["DEFAULT_PORT", "serve"]

DEFAULT_PORT = 8410
"""The port the server listens on unless ``--port`` says otherwise."""

GraphsArg = Annotated[
    list[str],
    typer.Argument(
        metavar="GRAPH",
        help="Graphs to serve: GraphSpec files (.yaml/.json) or module:attribute "
        "(an AgentGraph, SupervisorAgent, DeepResearch...); module may be a path/to/file.py.",
    ),
]


def serve(
    graphs: GraphsArg,
    store: StoreOpt = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = DEFAULT_PORT,
    token: Annotated[
        str | None,
        typer.Option(
            help="A secret every request must carry as 'Authorization: Bearer' "
            "(needed beyond 127.0.0.1; or SELECTGRAPH_SERVE_TOKEN)."
        ),
    ] = None,
    max_body: Annotated[
        int,
        typer.Option("--max-body", min=1, help="The largest request body read, in bytes (1 MiB)."),
    ] = 1 << 20,
    name: Annotated[
        list[str] | None,
        typer.Option(
            "--name",
            help="The name clients call a graph by (the OpenAI model), one per GRAPH in order; "
            "default: the graph's own name.",
        ),
    ] = None,
    allow: AllowOpt = None,
) -> None:
    """Serve GRAPH(s) to other programs: OpenAI-compatible endpoints, MCP and A2A."""
    try:
        from selectgraph.serve import ServedGraph
        from selectgraph.serve._app import TOKEN_ENV, is_loopback, server_url
        from selectgraph.serve._app import serve as run_server
    except ImportError as error:
        fail(f'serving needs its extra: pip install "selectgraph[serve]" ({error})')
    names = name or []
    if len(names) > len(graphs):
        fail(f"--name was given {len(names)} times for {len(graphs)} GRAPH(s): one per GRAPH")
    token = token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(host) and not token:
        # Checked before loading anything: the answer does not depend on the graphs.
        fail(
            f"the server would be reachable from other machines on {host}; give it a token "
            f"(--token, or {TOKEN_ENV})"
        )
    checkpoints = open_checkpoints(store)
    served = []
    for index, graph in enumerate(graphs):
        target = load(graph, allow)
        chosen = names[index] if index < len(names) else None
        try:
            served.append(
                ServedGraph(target.graph, source=target.source, name=chosen, store=checkpoints)
            )
        except TypeError as error:
            fail(f"{graph}: {error}")
    base = server_url(host, port)
    try:
        parts, lines = _parts(served, base)
    except ValueError as error:  # a graph name the MCP or A2A part cannot take
        fail(str(error))
    err.print(f"selectgraph serve: {', '.join(repr(s.name) for s in served)}", highlight=False)
    err.print(f"  OpenAI-compatible: {base}/v1", highlight=False)
    for line in lines:
        err.print(f"  {line}", highlight=False)
    try:
        run_server(served, parts=parts, host=host, port=port, token=token, max_body=max_body)
    except ValueError as error:
        fail(str(error))


def _parts(served: Sequence[ServedGraph], base: str) -> tuple[list[ServedPart], list[str]]:
    """The protocol parts beside the OpenAI routes, and the lines announcing them.

    The one place other protocols join the command. Host names are checked by the
    app's guard for all of them (``loopback_only``), so the MCP part checks none.
    """
    from selectgraph.serve._a2a import a2a_part
    from selectgraph.serve._mcp_http import mcp_part

    agents = ", ".join(f"{base}/a2a/{s.name}/" for s in served)
    lines = [
        f"MCP (streamable HTTP): {base}/mcp",
        f"A2A: {agents} (card: {base}/.well-known/agent-card.json)",
    ]
    return [mcp_part(served), a2a_part(served, base_url=base)], lines
