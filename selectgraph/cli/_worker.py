"""``selectgraph worker``: this process becomes a worker of an executor.

``--graphs`` names the graphs the worker runs, comma-separated:
``module:attr`` registers that graph under the attribute's name,
``NAME=module:attr`` under NAME. The modules are imported from the working
directory and ``sys.path``, as the other commands import their GRAPH.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from typing import Any

from selectgraph.build._builder import AgentGraph
from selectgraph.cli._load import LoadError, load_target

__all__ = ["parse_graphs", "serve_worker"]


def parse_graphs(value: str, allow: Sequence[str] = ()) -> dict[str, AgentGraph]:
    """The graphs ``--graphs`` names, by the name runs use.

    Raises:
        LoadError: an entry is malformed, or names nothing runnable.
    """
    graphs: dict[str, AgentGraph] = {}
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        name, sep, spec = entry.partition("=")
        if not sep:
            spec = entry
            name = entry.rpartition(":")[2].rpartition(".")[2]
        name = name.strip()
        if not name or not spec.strip():
            raise LoadError(f"--graphs: {entry!r} is not module:attr or NAME=module:attr")
        if name in graphs:
            raise LoadError(f"--graphs: two graphs are named {name!r}; name one NAME=module:attr")
        graphs[name] = load_target(spec.strip(), allow=allow).graph
    if not graphs:
        raise LoadError("--graphs: name at least one graph, e.g. --graphs myapp.graphs:triage")
    return graphs


def serve_worker(executor: Any, on_ready: Callable[[], None] | None = None) -> None:
    """Serve ``executor`` until SIGINT or SIGTERM, then stop cleanly."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await executor.aserve(stop=stop, on_ready=on_ready)

    asyncio.run(main())
