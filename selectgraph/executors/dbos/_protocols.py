"""What a run handle and a worker need of their executor, as protocols, so neither imports it.

The executor makes handles and starts workers; if those named the executor's
class in return, the three modules would import each other. They name these
protocols instead, which ``DBOSExecutor`` satisfies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from selectgraph.compile._compiled import CompiledGraph
from selectgraph.core._serialization import StateSerializer
from selectgraph.executors.dbos._answers import Claims

__all__ = ["HandleExecutor", "WorkerExecutor"]


class HandleExecutor(Protocol):
    """The executor as a :class:`~selectgraph.executors.dbos.RunHandle` reads through it."""

    @property
    def poll_interval(self) -> float:
        """Seconds between reads of a run's events."""
        ...

    @property
    def client(self) -> Any:
        """DBOS's client for the executor's database."""
        ...

    @property
    def claims(self) -> Claims:
        """The table of answers given to interrupts."""
        ...

    def graph(self, name: str) -> CompiledGraph:
        """The graph registered under ``name``."""
        ...

    def serializer_for(self, name: str) -> StateSerializer:
        """The serializer of graph ``name``."""
        ...

    def workflow_status(self, run_id: str, *, load_output: bool = False) -> Any:
        """DBOS's status record of run ``run_id``."""
        ...

    def resume(self, run_id: str, interrupt_id: str, value: Any) -> None:
        """Answer question ``interrupt_id`` of run ``run_id``."""
        ...

    async def aresume(self, run_id: str, interrupt_id: str, value: Any) -> None:
        """:meth:`resume`, awaited."""
        ...

    def cancel(self, run_id: str) -> None:
        """Cancel run ``run_id``."""
        ...

    async def acancel(self, run_id: str) -> None:
        """:meth:`cancel`, awaited."""
        ...


class WorkerExecutor(Protocol):
    """The executor's settings as a worker serves them."""

    @property
    def database_url(self) -> str:
        """The system database."""
        ...

    @property
    def queue(self) -> str:
        """The DBOS queue runs go through."""
        ...

    @property
    def graphs(self) -> Mapping[str, CompiledGraph]:
        """The graphs the worker runs, by name."""
        ...

    @property
    def worker_concurrency(self) -> int:
        """Runs one worker executes at once."""
        ...

    @property
    def executor_id(self) -> str:
        """This worker's id."""
        ...

    @property
    def app_name(self) -> str:
        """The DBOS application name."""
        ...

    @property
    def app_version(self) -> str:
        """The DBOS application version."""
        ...

    @property
    def poll_interval(self) -> float:
        """Seconds between polls of the queue."""
        ...

    @property
    def lease_ttl(self) -> float:
        """Seconds without a heartbeat after which a worker counts as dead."""
        ...

    @property
    def pool_size(self) -> int:
        """Database connections the worker's DBOS keeps."""
        ...

    @property
    def single_node(self) -> bool:
        """Whether the database is SQLite (one machine; no leases)."""
        ...
