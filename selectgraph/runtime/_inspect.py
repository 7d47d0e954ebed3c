"""Looking back at a stored run: its latest state, its history, and correcting its state.

Time travel: ``get_state``, ``get_history`` and ``update_state`` read (and, for the
last, write) a run's checkpoints without running it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from selectgraph.core._errors import ResumeError
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState, _decode_history_entry
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._delta import apply_delta_in_place, copy_encoded
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.runtime._durable import encode_next
from selectgraph.runtime._restore import (
    DurableOptions,
    decode_interrupts,
    load_head,
    load_state,
    store_head,
)
from selectgraph.runtime._run import blocking_sleep
from selectgraph.state._output import NodeOutput

if TYPE_CHECKING:
    import datetime as dt

    from selectgraph.runtime._program import GraphProgram

__all__ = ["StateSnapshot", "get_history", "get_state", "update_state"]


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """A run as one checkpoint saw it: what ``get_state`` and ``get_history`` return."""

    run_id: str
    """The run."""
    checkpoint_id: str
    """The checkpoint; pass it as ``checkpoint_id=`` to continue or fork from here."""
    step: int
    """Nodes the run had executed."""
    state: GraphState
    """The state at that point."""
    next: tuple[str, ...]
    """The nodes that run next, when known without routing: a node the run stopped
    before, or the target of a static edge or goto() after the last node. Empty when
    the run ended, or when a conditional edge decides (see ``after``)."""
    interrupts: tuple[Interrupt, ...]
    """Questions the run was waiting on."""
    after: str | None
    """The node the run continues by routing from (its output is in ``state``), if any."""
    metadata: dict[str, Any]
    """What triggered the checkpoint (``trigger``), visit counts, usage..."""
    created_at: dt.datetime
    """When it was taken."""
    parent_id: str | None
    """The checkpoint before it."""

    @property
    def values(self) -> dict[str, Any]:
        """``state.data``, under the name LangGraph users know."""
        return dict(self.state.data)


def _next_nodes(graph: GraphProgram, checkpoint: Checkpoint) -> tuple[tuple[str, ...], str | None]:
    """(nodes that run next as far as known without routing, the node routed from)."""
    if not checkpoint.next:
        return (), None
    entry = checkpoint.next[0]
    if isinstance(entry, str):
        return (entry,), None
    after = entry.get("after") if type(entry) is dict else None
    if not isinstance(after, str):
        return (), None
    goto = entry.get("goto")
    if isinstance(goto, str):
        return ((), after) if goto == "__end__" else ((goto,), after)
    routes = graph.routes.get(after)
    static = routes.static_success if routes is not None and entry.get("ok", True) else None
    if static is not None and isinstance(static.target, str):
        return (static.target,), after
    return (), after


def _snapshot(
    graph: GraphProgram,
    checkpoint: Checkpoint,
    encoded: dict[str, Any],
    serializer: StateSerializer,
    history: list[Any] | None = None,
) -> Any:
    pending, _ = decode_interrupts(checkpoint, serializer)
    next_, after = _next_nodes(graph, checkpoint)
    if history is None:
        state = GraphState.from_dict(encoded, serializer=serializer)
    else:  # its history already decoded (entries are shared, read-only, between snapshots)
        state = GraphState.from_dict({**encoded, "history": []}, serializer=serializer)
        state.history.extend(history)
    return StateSnapshot(
        run_id=checkpoint.run_id,
        checkpoint_id=checkpoint.checkpoint_id,
        step=checkpoint.step,
        state=state,
        next=next_,
        after=after,
        interrupts=tuple(pending.values()),
        metadata=dict(checkpoint.metadata),
        created_at=checkpoint.created_at,
        parent_id=checkpoint.parent_id,
    )


async def get_state(
    graph: GraphProgram,
    store: CheckpointStore,
    run_id: str,
    serializer: StateSerializer,
    blocking: bool,
) -> StateSnapshot:
    """The run's latest checkpoint as a StateSnapshot."""
    head = await store_head(store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    encoded = await load_state(store, head.checkpoint_id, blocking)
    snapshot: StateSnapshot = _snapshot(graph, head, encoded, serializer)
    return snapshot


async def get_history(
    graph: GraphProgram,
    store: CheckpointStore,
    run_id: str,
    serializer: StateSerializer,
    blocking: bool,
    limit: int | None,
) -> list[StateSnapshot]:
    """Every checkpoint of the run, newest first (the newest ``limit`` of them).

    States are rebuilt oldest first, applying each delta in place, and the
    history (which only grows) is decoded once per entry, not once per
    checkpoint, so listing a long run stays close to linear.
    """
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
    head = await store_head(store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    if limit == 0:
        return []
    if limit is None:
        checkpoints = store.list(run_id) if blocking else await store.alist(run_id)
    else:
        before = head.checkpoint_id
        older = (
            (
                store.list(run_id, limit=limit - 1, before=before)
                if blocking
                else await store.alist(run_id, limit=limit - 1, before=before)
            )
            if limit > 1
            else []
        )
        checkpoints = [*older, head]
    snapshots: list[StateSnapshot] = []
    working: dict[str, Any] | None = None
    history: list[Any] = []
    history_source: Any = None
    for checkpoint in checkpoints:
        if checkpoint.kind == "snapshot":
            working = copy_encoded(checkpoint.values)
        elif working is None:  # the first one listed is a delta: rebuild it from its chain
            working = await load_state(store, checkpoint.checkpoint_id, blocking)
        else:
            apply_delta_in_place(working, checkpoint.values, checkpoint.checkpoint_id)
        encoded_history = working.get("history", [])
        if encoded_history is not history_source or len(history) > len(encoded_history):
            history, history_source = [], encoded_history  # replaced: decode it afresh
        for i in range(len(history), len(encoded_history)):
            history.append(
                _decode_history_entry(encoded_history[i], f"history[{i}]", serializer.decode)
            )
        snapshots.append(_snapshot(graph, checkpoint, working, serializer, history))
    snapshots.reverse()
    return snapshots


async def update_state(
    graph: GraphProgram,
    run_id: str,
    values: Mapping[str, Any],
    options: DurableOptions,
    *,
    as_node: str | None,
    blocking: bool,
) -> str:
    """Merge ``values`` into the run's latest state (through the reducers); returns the new id."""
    store = options.store
    head = await store_head(store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    if as_node is not None and as_node not in graph.nodes:
        raise ValueError(
            f"as_node={as_node!r} is not a node of graph {graph.name!r}; "
            f"nodes: {', '.join(sorted(graph.nodes))}"
        )
    if not isinstance(values, Mapping):
        raise TypeError(f"values must be a mapping of data keys, got {type(values).__name__}")
    run = await load_head(
        graph, head, options, (), blocking_sleep if blocking else _no_sleep, blocking
    )
    writer = as_node or "update_state"
    output = NodeOutput(dict(values))
    run._merger.merge(run.state, output, writer, run.steps)
    if graph.schema.model is not None:
        # Checked now, not when the continued run exits: nothing invalid is saved.
        graph.schema.validate_exit(run.state.data, state=run.state)
    if run.written_keys is not None:
        run.written_keys.update(output.written_keys())
    durable = run.durable
    assert durable is not None
    if as_node is not None:
        next_ = encode_next("after", as_node)
        interrupts: dict[str, dict[str, Any]] = {}
        extra: dict[str, Any] = {"as_node": as_node}
    else:
        next_ = list(head.next)
        interrupts = dict(head.interrupts)
        memo = head.metadata.get("memo")
        extra = {"memo": memo} if memo else {}
    checkpoint = durable.make(run, "update", next_, interrupts=interrupts, extra=extra)
    if blocking:
        store.save(checkpoint, expected_version=checkpoint.version - 1)
    else:
        await store.asave(checkpoint, expected_version=checkpoint.version - 1)
    return checkpoint.checkpoint_id


async def _no_sleep(seconds: float) -> None:
    return None
