"""``selectgraph worker``: this process becomes a worker of an executor.

``--graphs`` names the graphs the worker runs, comma-separated:
``module:attr`` registers that graph under the attribute's name,
``NAME=module:attr`` under NAME. The modules are imported from the working
directory and ``sys.path``, as the other commands import their GRAPH.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from selectgraph.build._builder import AgentGraph
from selectgraph.cli._load import LoadError, load_target

if TYPE_CHECKING:
    from selectgraph.executors.dbos import DBOSExecutor

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


def serve_worker(executor: DBOSExecutor, on_ready: Callable[[], None] | None = None) -> None:
    """Serve ``executor`` until SIGINT or SIGTERM, then stop cleanly."""
    # The executor's own blocking serve() handles the signals: the CLI only names it.
    executor.serve(on_ready=on_ready)
