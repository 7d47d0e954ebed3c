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

    Returns once the edit is applied; the fork goes on as a task.

    Raises:
        StudioError: 404 when the checkpoint is not one of the run's, 422 when the
            edit does not fit the graph's state.
    """
    graph, store = manager.graph, manager.store
    known = await asyncio.to_thread(store.list, run_id)
    origin = next((cp for cp in known if cp.checkpoint_id == checkpoint_id), None)
    if origin is None:
        raise StudioError(404, f"run {run_id!r} has no checkpoint {checkpoint_id!r}")
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
    except (StateValidationError, TypeError, ValueError) as error:
        run.status, run.error = "failed", f"the edit does not fit the graph: {error}"
        run.log.append({"event": "StudioRunFailed", "run_id": new_id, "error": run.error})
        run.log.close()
        raise StudioError(422, f"the edited state does not fit the graph: {error}") from None
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
