"""Join: merge the pending writes of a fan-out's branches into the parent state, once, in order.

Each branch ran on its own view of the parent and kept what it wrote as
pending writes (the outputs of its nodes). The join folds them into the
parent through the field reducers, branch by branch in declaration or index
order, so the result never depends on which branch finished first. Whole
branch states are never merged: a branch's write counts once, against the
parent, whatever the branch had read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from selectgraph.core._run_errors import MergeConflictError
from selectgraph.core._state import GraphState
from selectgraph.routing._parallel import MergeFn, MergePolicy
from selectgraph.state._merge import Merger
from selectgraph.state._output import NodeOutput
from selectgraph.state._reducers import MISSING, owned
from selectgraph.state._schema import StateSchema
from selectgraph.state._views import ViewWrites

__all__ = ["BranchWrites", "KeptFailure", "apply_merge_fn", "join_branches", "relative_to"]

_DELETED: Final = object()


@dataclass(slots=True)
class BranchWrites:
    """What one finished branch produced, kept until the join."""

    index: int
    """Position in merge order."""
    label: str
    """How errors and events name the branch (a member name, or ``node[i]`` for Scatter)."""
    outputs: list[tuple[str, NodeOutput]] = field(default_factory=list)
    """``(node, output)`` for every node the branch ran, in order."""
    history: list[Any] = field(default_factory=list)
    """Raw history entries of the branch's nodes, appended to the parent's at the join."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    """Failures the branch survived (SKIP, on_failure edges inside it)."""
    failed: bool = False
    """A branch that failed before the run paused (its error is ``errors[0]``): a resumed
    fan-out counts it as failed, as the join would have, and does not run it again."""


class KeptFailure(Exception):
    """The outcome of a branch that failed before its run paused, when the fan-out resumes."""

    def __init__(self, writes: BranchWrites) -> None:
        super().__init__(writes.errors[0].get("error", "failed") if writes.errors else "failed")
        self.record: dict[str, Any] = writes.errors[0] if writes.errors else {}
        """The failure as the join recorded it (node, branch, error, type)."""


def relative_to(
    output: NodeOutput, seen: Mapping[str, Any], incremental: Mapping[str, Any]
) -> None:
    """Turn in-place growth of a container the node read into an update of what it added.

    A branch written in the seed's style (``state.data["notes"].append(x)``,
    ``state.data["facts"][k] = v``) reports the whole grown value. Merged as a
    replacement, two such branches would drop each other's additions; merged
    through the field's reducer it would repeat the parent's. So, for keys in
    ``incremental`` (those with a reducer), a list that starts with what the node
    saw becomes an update carrying the new tail, and a dict that kept every key
    it had becomes an update carrying the new and changed items (for reducers
    that merge dicts).
    """
    writes = output.writes
    if writes is None or not writes.assignments:
        return
    moved: dict[str, Any] = {}
    look = getattr(seen, "peek", seen.get)  # a layer would copy a container on get()
    for key, value in writes.assignments.items():
        if key not in incremental or key in output.update:
            continue
        before = look(key, MISSING)
        if type(value) is list and type(before) is list and value[: len(before)] == before:
            moved[key] = value[len(before) :]
        elif (
            type(value) is dict
            and type(before) is dict
            and getattr(incremental[key], "merges_dicts", False)
            and before.keys() <= value.keys()
        ):
            moved[key] = {
                k: v for k, v in value.items() if k not in before or not _same(before[k], v)
            }
    if moved:
        for key in moved:
            del writes.assignments[key]
        output.update = {**output.update, **moved}


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # an object whose == does not give a truth value: call it changed
        return False


def join_branches(
    state: GraphState,
    merger: Merger,
    schema: StateSchema,
    branches: Sequence[BranchWrites],
    policy: MergePolicy,
    *,
    node: str,
    step: int,
) -> list[tuple[str, NodeOutput]]:
    """Merge every branch's writes into ``state``; on failure the state is left as it was.

    Returns the outputs merged, in order: what the join wrote, for a fan-out that
    itself runs in a branch and must pass its result on as its own writes.

    Raises:
        MergeConflictError: under MergePolicy.ERROR, two branches wrote one key.
        ReducerError: a reducer rejected a branch's update (state unchanged).
        StateValidationError: a branch wrote a key the schema does not declare.
    """
    gathered = _gather(branches, schema.reducers)
    outputs = _join_outputs(gathered, schema.reducers, policy, state.data, node)
    data = state.data
    # Each merge is all-or-nothing; across several, what an earlier one changed is kept
    # aside so that a failure leaves the state as it was.
    reduced = gathered.reduced
    saved = {key: _copy(data.get(key, MISSING)) for key in reduced} if len(outputs) > 1 else {}
    merged: list[tuple[str, NodeOutput]] = []
    try:
        for source, output in outputs:
            merger.merge(state, output, source, step)
            merged.append((source, output))
    except Exception:
        # Reducer updates merged before the failure were committed; put those fields back.
        for key, value in saved.items():
            if value is MISSING:
                data.pop(key, None)
            else:
                data[key] = value
        raise
    for branch in branches:
        if branch.history:
            state.history.raw.extend(branch.history)  # type: ignore[attr-defined]
        if branch.errors:
            state.errors.extend(branch.errors)
    return merged


@dataclass(slots=True)
class _Gathered:
    """The branches' writes sorted for the join, each list in merge order."""

    reduced: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    """Key -> (node, update) for keys with a reducer: merged key by key."""
    plain: dict[str, list[tuple[str, Any]]] = field(default_factory=dict)
    """Key -> (branch, value) for keys without: settled by the merge policy."""
    writes: ViewWrites = field(default_factory=ViewWrites)
    """Messages, history and metadata the branches added (``assignments`` unused)."""


def _gather(branches: Sequence[BranchWrites], reducers: Mapping[str, Any]) -> _Gathered:
    """Sort every branch's outputs into reducer updates, plain writes and the rest."""
    gathered = _Gathered()
    rest = gathered.writes
    for branch in branches:
        final: dict[str, Any] = {}
        for source, output in branch.outputs:
            writes = output.writes
            if writes is not None:
                # Whole values set through the view first; a returned update wins
                # over them, as in a merge outside branches.
                for key in writes.deletions:
                    final[key] = _DELETED
                final.update(writes.assignments)
                rest.messages.extend(writes.messages)
                rest.history.extend(writes.history)
                rest.metadata.update(writes.metadata)
                rest.metadata_deletions.update(writes.metadata_deletions)
            update = output.update
            if reducers and not reducers.keys().isdisjoint(update):
                for key, value in update.items():
                    if key in reducers:
                        gathered.reduced.setdefault(key, []).append((source, value))
                    else:
                        final[key] = value
            else:
                final.update(update)
        for key, value in final.items():
            gathered.plain.setdefault(key, []).append((branch.label, value))
    return gathered


def _join_outputs(
    gathered: _Gathered,
    reducers: Mapping[str, Any],
    policy: MergePolicy,
    data: Mapping[str, Any],
    node: str,
) -> list[tuple[str, NodeOutput]]:
    """The merges a join makes, in order: batched list updates, one by one, then plain writes.

    Raises:
        MergeConflictError: under MergePolicy.ERROR, two branches wrote one key.
    """
    rest = gathered.writes
    for key, written in gathered.plain.items():
        value = _settle(key, written, policy, data.get(key, MISSING))
        if value is _DELETED:
            rest.deletions.add(key)
        else:
            rest.assignments[key] = value
    # Fields whose reducer only extends a list take all branches' updates in one merge.
    batched: dict[str, Any] = {}
    outputs: list[tuple[str, NodeOutput]] = []
    for key, updates in gathered.reduced.items():
        if reducers[key].concatenates and all(type(value) is list for _, value in updates):
            batched[key] = (
                updates[0][1] if len(updates) == 1 else [x for _, value in updates for x in value]
            )
        else:
            outputs.extend((source, NodeOutput({key: value})) for source, value in updates)
    if batched:
        outputs.insert(0, (node, NodeOutput(batched)))
    if not rest.is_empty():
        outputs.append((node, NodeOutput(writes=rest)))
    return outputs


def _copy(value: Any) -> Any:
    return owned(value) if type(value) in (list, dict, set) else value


def _settle(key: str, written: list[tuple[str, Any]], policy: MergePolicy, parent: Any) -> Any:
    """The value a key without a reducer ends with, given each branch's write in order."""
    if len(written) == 1:
        return written[0][1]
    if policy is MergePolicy.LAST_WINS:
        return written[-1][1]
    if policy is MergePolicy.FIRST_WINS:
        return written[0][1]
    if policy is MergePolicy.ERROR:
        labels = [label for label, _ in written]
        raise MergeConflictError(
            f"branches {', '.join(map(repr, labels))} all wrote data[{key!r}], which has no "
            "reducer, under MergePolicy.ERROR; declare a reducer for it or pick another "
            "merge_policy",
            key=key,
            branches=labels,
        )
    # APPEND: lists are concatenated, counting what the parent already held once.
    values = [value for _, value in written]
    if not all(type(value) is list for value in values):
        return values[-1]
    base: list[Any] = parent if type(parent) is list else []
    combined = list(base)
    for value in values:
        combined.extend(value[len(base) :] if value[: len(base)] == base else value)
    return combined


def apply_merge_fn(
    state: GraphState,
    merger: Merger,
    schema: StateSchema,
    branches: Sequence[BranchWrites],
    merge_fn: MergeFn,
    *,
    node: str,
    step: int,
) -> list[tuple[str, NodeOutput]]:
    """Merge through a user's ``merge_fn(branch_states) -> GraphState`` instead of the policy.

    Each branch state is the parent with that branch's writes merged in. The
    ``data`` keys the returned state changed and the messages it adds are merged
    into the parent; the branches' history and errors are kept by the engine
    whatever the function does with them.
    """
    branch_states = []
    for branch in branches:
        copy = state.snapshot()
        for key in schema.reducers:
            if key in copy.data:
                copy.data[key] = owned(copy.data[key])  # reducers extend in place
        local = Merger(schema, None)
        for source, output in branch.outputs:
            local.merge(copy, output, source, step)
        copy.history.raw.extend(branch.history)  # type: ignore[attr-defined]
        copy.errors.extend(branch.errors)
        branch_states.append(copy)
    combined = merge_fn(branch_states)
    if not isinstance(combined, GraphState):
        raise TypeError(
            f"merge_fn of {node!r} returned {type(combined).__name__}; it must return a GraphState"
        )
    data = state.data
    assignments = {
        key: value
        for key, value in combined.data.items()
        if key not in data or (data[key] is not value and data[key] != value)
    }
    known_messages = {id(message) for message in state.messages}
    writes = ViewWrites(
        assignments=assignments,
        messages=[m for m in combined.messages if id(m) not in known_messages],
    )
    output = NodeOutput(writes=writes)
    merger.merge(state, output, node, step)
    for branch in branches:
        state.history.raw.extend(branch.history)  # type: ignore[attr-defined]
        state.errors.extend(branch.errors)
    return [(node, output)]
