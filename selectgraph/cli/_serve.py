"""``selectgraph serve``: graphs served to the outside, as OpenAI-compatible models and more.

Each GRAPH is served under its name (or ``--name``): ``/v1`` answers OpenAI's clients;
the MCP part (``/mcp``) and the A2A part join the same app, behind the same token and
body limit, when their modules are installed with the package.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from selectgraph.cli._common import AllowOpt, StoreOpt, err, fail, load, open_checkpoints

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
    parts, lines = _parts(served, base)
    err.print(f"selectgraph serve: {', '.join(repr(s.name) for s in served)}", highlight=False)
    err.print(f"  OpenAI-compatible: {base}/v1", highlight=False)
    for line in lines:
        err.print(f"  {line}", highlight=False)
    try:
        run_server(served, parts=parts, host=host, port=port, token=token, max_body=max_body)
    except ValueError as error:
        fail(str(error))


def _parts(served: Sequence[Any], base: str) -> tuple[list[Any], list[str]]:
    """The protocol parts beside the OpenAI routes, and the lines announcing them.

    The one place other protocols join the command: each is a module of
    ``selectgraph.serve`` with a function making its :class:`ServedPart`; a module
    that is not there is left out.
    """
    parts: list[Any] = []
    lines: list[str] = []
    mcp = _part_maker(("selectgraph.serve._mcp_http", "selectgraph.serve._mcp_server"), "mcp_part")
    if mcp is not None:
        parts.append(mcp(served))
        lines.append(f"MCP (streamable HTTP): {base}/mcp")
    a2a = _part_maker(("selectgraph.serve._a2a",), "a2a_part")
    if a2a is not None:
        parts.append(a2a(served, base_url=base))
        lines.append(f"A2A agent card: {base}/.well-known/agent-card.json")
    return parts, lines


def _part_maker(modules: Sequence[str], function: str) -> Any:
    for module in modules:
        try:
            found = getattr(importlib.import_module(module), function, None)
        except ImportError:
            continue
        if callable(found):
            return found
    return None
