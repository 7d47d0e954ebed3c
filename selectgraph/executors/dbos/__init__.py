"""The DBOS executor: runs as DBOS workflows, tasks as steps, on PostgreSQL (or SQLite).

Needs the ``dbos`` extra: ``pip install "selectgraph[dbos]"``.
"""

from __future__ import annotations

try:
    import dbos as _dbos  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed in CI
    raise ImportError(
        'the DBOS executor needs the dbos package: pip install "selectgraph[dbos]"'
    ) from exc

from selectgraph.executors.dbos._answers import AnswerConflictError
from selectgraph.executors.dbos._database import DatabaseUnavailableError
from selectgraph.executors.dbos._executor import DBOSExecutor, UnknownRunError
from selectgraph.executors.dbos._handle import (
    RunCancelledError,
    RunFailedError,
    RunHandle,
    RunStatus,
)
from selectgraph.executors.dbos._threads import ThreadGraphMismatch
from selectgraph.executors.dbos._turns import ThreadTurnLost
from selectgraph.executors.dbos._workflow import UnknownGraphError

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
