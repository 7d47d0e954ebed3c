"""A node's DBOS step in one transaction once the run is past what it had recorded.

``DBOS.run_step_async`` makes two transactions per step: one that looks for
the step's record (a replay returns it) and checks the run was not
cancelled, then, after the step ran, one that checks the worker still owns
the run and inserts the record. On a worker's connection that is two commits
per node, and PostgreSQL's commit rate is what bounds the DBOS executor.

The look-up only finds something for steps a previous execution recorded.
:class:`StepFrontier` reads, once per execution of a run, which step ids
are recorded; a step whose id is not among them cannot have a record (an
execution that lost the run cannot write one: DBOS checks ownership under
a row lock in the same transaction as every record), so it runs at once and
only its record is written: one transaction, whose ownership check also
refuses it if the run was cancelled meanwhile. A recorded id goes through
``DBOS.run_step_async`` as before, so a replay meets its record and DBOS
still refuses a step whose name differs from the one recorded.

Cancellation is still checked before a node runs, but as a read of the
run's status (no transaction to commit) at most every ``CANCEL_CHECK_EVERY``
seconds: a run of quick nodes notices a cancel within that time, and a node
that started after it has its record refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

import sqlalchemy as sa
from dbos._context import EnterDBOSStepCtx, get_local_dbos_context, snapshot_step_context
from dbos._dbos import _get_dbos_instance
from dbos._error import DBOSWorkflowCancelledError
from dbos._serialization import serialize_exception, serialize_value
from dbos._sys_db import db_retry

__all__ = ["CANCEL_CHECK_EVERY", "RunStep", "StepFrontier"]

RunStep = Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""``DBOS.run_step_async``'s shape: (options, step function) -> the step's output."""

CANCEL_CHECK_EVERY: Final = 0.2
"""Seconds between two cancellation reads while a run's nodes are quick."""

_CANCELLED: Final = "CANCELLED"


class StepFrontier:
    """Runs one execution's node steps, each unrecorded one in a single transaction.

    One per execution of a run (the workflow function makes it): what it
    read of the run's records is true only until another execution takes
    the run over, and that one makes its own.
    """

    def __init__(self) -> None:
        self._recorded: frozenset[int] | None = None
        self._checked_at = -CANCEL_CHECK_EVERY

    async def run(self, name: str, step: Callable[[], Awaitable[Any]], run_step: RunStep) -> Any:
        """Step ``name``: its record if one exists, else ``step()`` run and recorded.

        ``run_step`` is ``DBOS.run_step_async`` (the caller's, so a test can stand in
        for DBOS): what runs a step outside a workflow, or one that has a record.
        """
        ctx = get_local_dbos_context()
        if ctx is None or not ctx.is_workflow():
            return await run_step({"name": name}, step)
        dbos = _get_dbos_instance()
        if self._recorded is None:
            self._recorded = await asyncio.to_thread(_recorded_ids, dbos, ctx.workflow_id)
        if ctx.function_id + 1 in self._recorded:  # the id the step draws next
            return await run_step({"name": name}, step)
        if time.monotonic() - self._checked_at >= CANCEL_CHECK_EVERY:
            await asyncio.to_thread(_raise_if_cancelled, dbos, ctx.workflow_id)
            self._checked_at = time.monotonic()
        step_ctx = snapshot_step_context(reserve_sleep_id=False)
        assert step_ctx is not None
        return await _run_and_record(dbos, step_ctx, name, step)


async def _run_and_record(
    dbos: Any, step_ctx: Any, name: str, step: Callable[[], Awaitable[Any]]
) -> Any:
    """Run ``step`` as DBOS step ``step_ctx`` and insert its record (what DBOS records)."""
    started = int(time.time() * 1000)
    record: dict[str, Any] = {
        "workflow_uuid": step_ctx.workflow_id,
        "function_id": step_ctx.function_id,
        "function_name": name,
        "output": None,
        "error": None,
        "serialization": None,
        "started_at_epoch_ms": started,
        "child_workflow_id": None,
    }
    with EnterDBOSStepCtx({"name": name, "operationType": "step"}, step_ctx):
        try:
            output = await step()
        except DBOSWorkflowCancelledError:
            raise  # not an outcome: the step runs again on resume, as DBOS does
        except Exception as error:
            record["error"], record["serialization"] = serialize_exception(
                error, None, dbos._serializer
            )
            await asyncio.to_thread(dbos._sys_db.record_operation_result, record)
            raise
        record["output"], record["serialization"] = serialize_value(output, None, dbos._serializer)
        # In a thread, inside the step's context: DBOS finds the owner token there.
        await asyncio.to_thread(dbos._sys_db.record_operation_result, record)
    return output


def _recorded_ids(dbos: Any, workflow_id: str) -> frozenset[int]:
    """The step ids recorded for ``workflow_id`` (one read, no transaction to commit)."""
    return _read_recorded_ids(dbos._sys_db, workflow_id)


@db_retry()
def _read_recorded_ids(sys_db: Any, workflow_id: str) -> frozenset[int]:
    # db_retry: a lost connection waits and reads again, as DBOS's own reads do.
    table = sys_db.tables.operation_outputs
    query = sa.select(table.c.function_id).where(*sys_db._wf(table, workflow_id))
    with sys_db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        return frozenset(int(row[0]) for row in c.execute(query))


def _raise_if_cancelled(dbos: Any, workflow_id: str) -> None:
    """Raise DBOS's own cancellation error if run ``workflow_id`` was cancelled."""
    if _read_status(dbos._sys_db, workflow_id) == _CANCELLED:
        raise DBOSWorkflowCancelledError(f"Workflow {workflow_id} is cancelled. Aborting step.")


@db_retry()
def _read_status(sys_db: Any, workflow_id: str) -> Any:
    table = sys_db.tables.workflow_status
    query = sa.select(table.c.status).where(*sys_db._wf(table, workflow_id))
    with sys_db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        return c.execute(query).scalar()
