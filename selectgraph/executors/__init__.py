"""Executors: run a graph's tasks somewhere other than this process's step loop.

The in-process runner is the default and needs nothing here. An executor
takes the same compiled graph and drives its runs elsewhere through the
step loop's task seam (``selectgraph.runtime._tasks``): the loop hands it
each task (a node, a branch, a routing decision), and merging, routing and
events stay the loop's. ``DBOSExecutor`` makes every run a durable DBOS
workflow that any worker can continue (``pip install "selectgraph[dbos]"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selectgraph.executors.dbos import (
        AnswerConflictError,
        DatabaseUnavailableError,
        DBOSExecutor,
        RunCancelledError,
        RunFailedError,
        RunHandle,
        RunStatus,
        ThreadGraphMismatch,
        ThreadTurnLost,
        UnknownGraphError,
        UnknownRunError,
    )

__all__ = [
    "AnswerConflictError",
    "DBOSExecutor",
    "DatabaseUnavailableError",
    "RunCancelledError",
    "RunFailedError",
    "RunHandle",
    "RunStatus",
    "ThreadGraphMismatch",
    "ThreadTurnLost",
    "UnknownGraphError",
    "UnknownRunError",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: the dbos package is an optional extra.
    if name in __all__:
        from selectgraph.executors import dbos

        return getattr(dbos, name)
    raise AttributeError(f"module 'selectgraph.executors' has no attribute {name!r}")
