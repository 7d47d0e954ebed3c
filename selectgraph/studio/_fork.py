"""An edited fork: a run started from an earlier checkpoint, with the state edited first.

An edited fork is made in two moves the engine already offers: the fork is started
paused before its first node (``pause_before`` every node), the edits are merged into
it as a state update (``update_state``, through the reducers, checked against the
schema), and it goes on from there. A fork from a checkpoint where the run asked a
question stops at that question again, with the edited state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from selectgraph.core._errors import SelectGraphError
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import StateValidationError
from selectgraph.studio._runs import StudioError, StudioRun, new_run_id

if TYPE_CHECKING:
    from selectgraph.studio._runs import RunManager

__all__ = ["fork_edited"]


async def fork_edited(
    manager: RunManager, run_id: str, checkpoint_id: str, update: Mapping[str, Any]
) -> StudioRun:
    """Fork ``run_id`` at ``checkpoint_id`` with ``update`` merged into the state, and run it.

    Returns once the edit is applied; the fork goes on as a task. An edit that does
    not fit leaves nothing behind: it is checked before the fork is made, and a fork
    whose edit the engine still refuses is deleted from the store again.

    Raises:
        StudioError: 404 when the checkpoint is not one of the run's, 422 naming the
            field when the edit does not fit the graph's state, 409 when the fork
            cannot start from there (the graph changed since, say).
    """
    graph, store = manager.graph, manager.store
    known = await asyncio.to_thread(store.list, run_id)
    origin = next((cp for cp in known if cp.checkpoint_id == checkpoint_id), None)
    if origin is None:
        raise StudioError(404, f"run {run_id!r} has no checkpoint {checkpoint_id!r}")
    await asyncio.to_thread(_check_edit, manager, run_id, checkpoint_id, update)
    new_id = new_run_id()
    run = manager.new_run(new_id)
    run.forked_from = {"run_id": run_id, "checkpoint_id": checkpoint_id, "step": origin.step}
    try:
        first: GraphResult = await graph.arun(
            None,
            checkpoint_id=checkpoint_id,
            run_id=new_id,
            checkpoint_store=store,
            observers=[manager.listener(run)],
            pause_before=list(graph.compile().nodes),  # stop before any node runs
            event_log=manager.event_log,
        )
        await asyncio.to_thread(graph.update_state, new_id, dict(update), checkpoint_store=store)
    except (SelectGraphError, TypeError, ValueError) as error:
        await asyncio.to_thread(_discard, manager, new_id)
        if isinstance(error, StateValidationError | TypeError | ValueError):
            raise StudioError(422, f"the edited state does not fit the graph: {error}") from None
        raise StudioError(409, f"cannot fork run {run_id!r} there: {error}") from None
    if first.stop_reason == "paused":
        manager.launch(
            run,
            graph.arun(
                None,
                run_id=new_id,
                checkpoint_store=store,
                observers=[manager.listener(run)],
                event_log=manager.event_log,
            ),
        )
    else:  # it stopped at a question (or ended): it waits as it is, edited
        run.status, run.interrupts = await asyncio.to_thread(manager.stored_status, new_id)
    return run


def _check_edit(
    manager: RunManager, run_id: str, checkpoint_id: str, update: Mapping[str, Any]
) -> None:
    """Refuse an edit the state's schema refuses, before anything is made (blocking).

    The checkpoint's fields with the edit over them are checked as a run's input is:
    a field the schema lacks, or a value of the wrong type, is named. (Reducers are
    the engine's to apply; what this check cannot see, the fork's update refuses.)

    Raises:
        StudioError: 422 naming the field.
    """
    compiled = manager.graph.compile()
    model = compiled.schema.model
    if model is None:
        return  # a dict state takes any field
    data = manager.checkpoint(run_id, checkpoint_id)["state"]
    fields = set(model.model_fields)
    kept = {key: value for key, value in data.items() if key in fields}
    try:
        compiled.prepare_state({**kept, **update})
    except (StateValidationError, TypeError, ValueError) as error:
        raise StudioError(422, f"the edited state does not fit the graph: {error}") from None


def _discard(manager: RunManager, run_id: str) -> None:
    """Forget a fork that could not be made: no run of it stays, paused or failed."""
    manager.runs.pop(run_id, None)
    manager.store.delete_run(run_id)
