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
refuses it if the run was cancelled meanwhile. The stream items the step
carries (:func:`carry_stream_item`: the run's waiting events and
checkpoints) are inserted in that same transaction. A recorded id goes through
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
from contextvars import ContextVar
from typing import Any, Final

import sqlalchemy as sa
from dbos._context import EnterDBOSStepCtx, get_local_dbos_context, snapshot_step_context
from dbos._dbos import _get_dbos_instance
from dbos._error import DBOSWorkflowCancelledError
from dbos._serialization import WorkflowSerializationFormat, serialize_exception, serialize_value
from dbos._sys_db import _dbos_streams_channel, db_retry

__all__ = ["CANCEL_CHECK_EVERY", "RunStep", "StepFrontier", "carry_stream_item"]

RunStep = Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]
"""``DBOS.run_step_async``'s shape: (options, step function) -> the step's output."""

CANCEL_CHECK_EVERY: Final = 0.2
"""Seconds between two cancellation reads while a run's nodes are quick."""

_CANCELLED: Final = "CANCELLED"

_carried: ContextVar[list[tuple[str, Any]] | None] = ContextVar(
    "selectgraph_dbos_carried_item", default=None
)
"""Inside a step run by :class:`StepFrontier`: stream items its record's transaction writes."""


def carry_stream_item(key: str, value: Any) -> bool:
    """Have the running step's record transaction write ``value`` to stream ``key``.

    False when the step is not one :class:`StepFrontier` records itself (a test's
    stand-in, a step DBOS runs): then the caller writes the item as before. The
    item is then written, with the step's record, after the step's body ran.
    """
    carried = _carried.get()
    if carried is None:
        return False
    carried.append((key, value))
    return True


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
    carried: list[tuple[str, Any]] = []
    with EnterDBOSStepCtx({"name": name, "operationType": "step"}, step_ctx):
        token = _carried.set(carried)
        try:
            output = await step()
        except DBOSWorkflowCancelledError:
            raise  # not an outcome: the step runs again on resume, as DBOS does
        except Exception as error:
            record["error"], record["serialization"] = serialize_exception(
                error, None, dbos._serializer
            )
            await asyncio.to_thread(_record, dbos, record, carried)
            raise
        finally:
            _carried.reset(token)
        record["output"], record["serialization"] = serialize_value(output, None, dbos._serializer)
        # In a thread, inside the step's context: DBOS finds the owner token there.
        await asyncio.to_thread(_record, dbos, record, carried)
    return output


def _record(dbos: Any, record: dict[str, Any], items: list[tuple[str, Any]]) -> None:
    """Insert the step's record and the stream items it carries, in one transaction."""
    sys_db = dbos._sys_db
    if not items:
        sys_db.record_operation_result(record)
        return
    ctx = get_local_dbos_context()
    assert ctx is not None
    workflow_id = record["workflow_uuid"]
    serialization = ctx.serialization_type or WorkflowSerializationFormat.DEFAULT
    statements = [
        sys_db._stream_insert_stmt(
            workflow_id,
            record["function_id"],
            key,
            *serialize_value(value, serialization, sys_db.serializer),
        )
        for key, value in items
    ]
    _record_with_items(sys_db, record, int(time.time() * 1000), statements)
    for key in dict(items):
        sys_db._signal_notification(_dbos_streams_channel, f"{workflow_id}::{key}")


@db_retry()
def _record_with_items(
    sys_db: Any, record: dict[str, Any], completed_at: int, statements: list[Any]
) -> None:
    # The stream rows first, then the ownership check and the record: the order DBOS's
    # own writes lock in, so they cannot deadlock with them.
    with sys_db._own_key(record["workflow_uuid"]), sys_db.engine.begin() as c:
        for statement in statements:
            c.execute(statement)
        sys_db._record_operation_result_txn(record, completed_at, c)


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
