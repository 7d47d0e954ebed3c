"""Starting a run: the state it starts from, its recorder, and the Run itself."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from selectgraph.core._run_errors import StateValidationError
from selectgraph.core._state import GraphState
from selectgraph.observe._recorder import EventRecorder, Listener
from selectgraph.runtime._program import GraphProgram
from selectgraph.runtime._run import Run, Sleep, new_run_id
from selectgraph.state._reducers import owned

__all__ = ["prepare_state", "start_run"]


def prepare_state(graph: GraphProgram, value: Any) -> GraphState:
    """The engine-owned state a run starts from.

    Raises:
        StateValidationError: the input does not satisfy the state schema.
    """
    if type(value) is dict:
        state = GraphState(data=dict(value))
    elif value is None:
        state = GraphState()
    elif isinstance(value, str):
        state = GraphState.from_prompt(value)
    elif isinstance(value, GraphState):
        state = value.snapshot()
    elif isinstance(value, Mapping):
        state = GraphState(data=dict(value))
    else:
        raise TypeError(
            f"a run starts from a GraphState, a mapping of data, a prompt string or None; "
            f"got {type(value).__name__}"
        )
    if graph.schema.model is not None:
        try:
            state.data = graph.schema.initial_data(state.data)
        except StateValidationError as error:
            error.state = state
            raise
    # Reducers may extend their field in place; give them containers nobody else holds.
    data = state.data
    for key in graph.schema.reducers:
        if key in data:
            data[key] = owned(data[key])
    return state


def start_run(
    graph: GraphProgram,
    input: Any,
    *,
    run_id: str | None = None,
    namespace: tuple[str, ...] = (),
    listeners: Sequence[Listener] = (),
    parent: EventRecorder | None = None,
    sleep: Sleep = asyncio.sleep,
    track_writes: bool = False,
) -> Run:
    """A run of ``graph`` from ``input``, ready to :meth:`~Run.execute`.

    Raises:
        StateValidationError: the input does not satisfy the state schema.
    """
    run_id = run_id or new_run_id()
    if listeners:
        listeners = (*graph.listeners, *listeners)
    recorder = EventRecorder(
        run_id, graph.name, namespace, listeners or graph.listeners, parent=parent
    )
    run = Run(
        graph,
        prepare_state(graph, input),
        run_id=run_id,
        recorder=recorder,
        sleep=sleep,
        namespace=namespace,
        track_writes=track_writes,
    )
    if recorder.branch is not None:
        run.branch = recorder.branch  # a subgraph run inside a branch fans out under it
    return run
