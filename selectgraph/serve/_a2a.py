"""A2A: each served graph an A2A agent (its card, JSON-RPC and REST), with the ``a2a-sdk``.

Every graph is an agent under ``/a2a/<name>/``: its card at
``/a2a/<name>/.well-known/agent-card.json``, JSON-RPC at ``/a2a/<name>/`` and the
HTTP+JSON (REST) binding under ``/a2a/<name>/rest``. The root card,
``/.well-known/agent-card.json``, is the first graph's: a client given the
server's URL finds the default agent there, and the others at their own paths.

Tasks are kept where the conversations are: with a checkpoint store, in the
threads' metadata (``_a2a_tasks.py``), so a task outlives the process and any
server on the store answers for it; without one, in the SDK's in-memory store.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from starlette.routing import BaseRoute, Mount

from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._threads import ThreadStore
from selectgraph.serve._a2a_executor import CheckedRequests, GraphExecutor, GraphRequests
from selectgraph.serve._a2a_tasks import StoredTasks
from selectgraph.serve._parts import ServedPart
from selectgraph.serve._turns import ServedGraph

__all__ = ["A2A_PREFIX", "a2a_part", "agent_card", "agent_path", "task_store"]

A2A_PREFIX: Final = "/a2a"
"""Where the agents are, under the served app."""
MODES: Final = ("text/plain", "application/json")
"""What an agent takes and gives: text, or a JSON object in a data part."""


def agent_path(name: str) -> str:
    """The path segment of a graph's agent: its name, keeping letters, digits, ``-`` and ``_``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name) or "graph"


def agent_card(served: ServedGraph, *, base_url: str) -> AgentCard:
    """The A2A card of ``served`` as an agent of the server at ``base_url``."""
    url = f"{base_url.rstrip('/')}{A2A_PREFIX}/{agent_path(served.name)}/"
    interfaces = [
        AgentInterface(
            url=url,
            protocol_binding=TransportProtocol.JSONRPC.value,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        ),
        AgentInterface(
            url=f"{url}rest",
            protocol_binding=TransportProtocol.HTTP_JSON.value,
            protocol_version=PROTOCOL_VERSION_CURRENT,
        ),
    ]
    skill = AgentSkill(
        id=agent_path(served.name),
        name=served.name,
        description=served.description,
        tags=["selectgraph", "graph"],
        input_modes=list(MODES),
        output_modes=list(MODES),
    )
    return AgentCard(
        name=served.name,
        description=served.description,
        supported_interfaces=interfaces,
        version=_version(),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=list(MODES),
        default_output_modes=list(MODES),
        skills=[skill],
    )


def a2a_part(graphs: Sequence[ServedGraph], *, base_url: str) -> ServedPart:
    """Each of ``graphs`` an A2A agent under ``/a2a/<name>/``, and the first at the root card.

    Args:
        graphs: The graphs, each an agent named as its ``ServedGraph``.
        base_url: The server's URL as clients reach it (``http://127.0.0.1:8410``):
            the cards name the agents' endpoints under it.

    Raises:
        ValueError: no graphs, a graph that is not a ServedGraph, two graphs at one
            path, or a ``base_url`` that is not an http(s) URL.
    """
    _check(graphs, base_url)
    handlers: list[GraphRequests] = []
    routes: list[BaseRoute] = []
    for served in graphs:
        card = agent_card(served, base_url=base_url)
        tasks = task_store(served)
        handler = GraphRequests(
            served,
            agent_executor=GraphExecutor(served),
            task_store=tasks,
            agent_card=card,
            request_context_builder=CheckedRequests(served.name, tasks),
        )
        handlers.append(handler)
        agent_routes: list[BaseRoute] = [
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url="/"),
            Mount("/rest", routes=create_rest_routes(handler)),
        ]
        routes.append(Mount(f"{A2A_PREFIX}/{agent_path(served.name)}", routes=agent_routes))
    routes[:0] = create_agent_card_routes(agent_card(graphs[0], base_url=base_url))

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        try:
            yield
        finally:
            # Stop the tasks still running, so shutdown leaves no run behind.
            for handler in handlers:
                await handler.aclose()

    return ServedPart(routes=routes, lifespan=running)


def task_store(served: ServedGraph) -> TaskStore:
    """Where the agent of ``served`` keeps its tasks: its threads, or memory without a store.

    A graph served without a store (an in-memory one) keeps its tasks in the SDK's
    in-memory store; with a store (SQLite, PostgreSQL, files) each task is kept in
    its context's thread, so it outlives the process as the conversation does.
    """
    store = served.store
    if isinstance(store, InMemoryCheckpointStore) or not isinstance(store, ThreadStore):
        return InMemoryTaskStore()
    return StoredTasks(store, agent_path(served.name))


def _check(graphs: Sequence[ServedGraph], base_url: str) -> None:
    if not isinstance(base_url, str) or not re.match(r"https?://[^/]", base_url):
        raise ValueError(
            f"base_url must be the server's http(s) URL (http://127.0.0.1:8410), got {base_url!r}"
        )
    if not graphs:
        raise ValueError("a2a_part needs at least one ServedGraph to serve")
    seen: dict[str, str] = {}
    for served in graphs:
        if not isinstance(served, ServedGraph):
            raise ValueError(f"graphs holds a {type(served).__name__}, not a ServedGraph")
        path = agent_path(served.name)
        if path in seen:
            raise ValueError(
                f"{seen[path]!r} and {served.name!r} would both be the A2A agent at "
                f"{A2A_PREFIX}/{path}/; give one another name (ServedGraph(..., name=...))"
            )
        seen[path] = served.name


def _version() -> str:
    try:
        return version("selectgraph")
    except PackageNotFoundError:  # run from a source tree
        return "0"
