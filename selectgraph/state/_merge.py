"""Merge: fold a node's output into GraphState via reducers, in two phases.

Phase one validates everything and prepares every change without touching
the state; a reducer that raises leaves the state exactly as it was before the
node ran, which is what ReducerError hands back. Phase two runs no user code
and commits. Each key costs what its update costs: nothing here walks the
whole state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from selectgraph.core._run_errors import ReducerError
from selectgraph.core._state import RESERVED_KEYS, GraphState
from selectgraph.state._fingerprint import StateFingerprint, fingerprint
from selectgraph.state._output import NodeOutput
from selectgraph.state._reducers import MISSING, Reducer, owned
from selectgraph.state._schema import StateSchema

__all__ = ["Merger"]

_NO_SCRATCH: Final[dict[str, Any]] = {}
"""Shared by mergers that have not merged a reducer field yet; never written to."""

_DELETE: Final = 0
_ASSIGN: Final = 1
_REDUCE: Final = 2


class Merger:
    """Merges node outputs into one run's state, keeping reducer indexes and fingerprints."""

    __slots__ = ("_reducers", "_schema", "_scratch", "fingerprints")

    def __init__(self, schema: StateSchema, fingerprints: StateFingerprint | None) -> None:
        self._schema = schema
        self._reducers = schema.reducers
        self.fingerprints = fingerprints
        """Kept up to date by every merge once set (loop and stall detection)."""
        self._scratch: dict[str, Any] = _NO_SCRATCH  # made on the first reducer merge

    def merge(self, state: GraphState, output: NodeOutput, node: str, step: int) -> None:
        """Apply ``output`` to ``state``.

        Raises:
            ReducerError: a reducer rejected the update (state unchanged).
            StateValidationError: the output writes keys the schema does not declare.
        """
        writes = output.writes
        update = output.update
        reducers = self._reducers
        data = state.data
        no_view_writes = writes is None or (not writes.assignments and not writes.deletions)
        if no_view_writes and (not reducers or reducers.keys().isdisjoint(update)):
            # Common case: plain last-write-wins keys.
            if self._schema.fields is not None:
                self._schema.check_keys(update, node=node, step=step)
            fp = self.fingerprints
            if fp is None:
                data.update(update)
            else:
                fp.assign(data, update)
            if writes is not None:
                self._merge_side_channels(state, output)
            return
        if writes is None:
            self._merge_update(state, update, node, step)
        elif (
            not update
            and not writes.deletions
            and (not reducers or reducers.keys().isdisjoint(writes.assignments))
        ):
            # A node that set keys through its view (the seed's ``state.data[k] = v``),
            # none of them a reducer field: the same as a plain update of those keys.
            assignments = writes.assignments
            if self._schema.fields is not None:
                self._schema.check_keys(assignments, node=node, step=step)
            fp = self.fingerprints
            if fp is None:
                data.update(assignments)
            else:
                fp.assign(data, assignments)
            self._merge_side_channels(state, output)
        else:
            self._merge_general(state, output, node, step)

    def _merge_update(
        self, state: GraphState, update: Mapping[str, Any], node: str, step: int
    ) -> None:
        """A returned partial update with some reducer keys (no view writes): the usual case."""
        data = state.data
        schema = self._schema
        reducers = self._reducers
        scratch = self._scratch
        if scratch is _NO_SCRATCH:
            scratch = self._scratch = {}
        fields = None if schema.allow_extra else schema.fields
        # Phase one: plan the reducer keys (the only ones that can fail).
        plans: list[tuple[str, Reducer, Any]] = []
        plain = False
        for key, value in update.items():
            if fields is not None and key not in fields and key not in RESERVED_KEYS:
                schema.check_keys((key,), node=node, step=step)  # raises, naming the field
            reducer = reducers.get(key)
            if reducer is None:
                plain = True
                continue
            try:
                plan = reducer.plan(data.get(key, MISSING), value, scratch.get(key))
            except Exception as exc:
                raise self._reducer_error(reducer, key, node, step, state, exc) from exc
            plans.append((key, reducer, plan))
        # Phase two: commit. Plain keys are never reducer keys, so they have no scratch.
        fp = self.fingerprints
        if fp is None:
            if plain:
                for key, value in update.items():
                    if key not in reducers:
                        data[key] = value
            for key, reducer, plan in plans:
                data[key], scratch[key] = reducer.apply(
                    data.get(key, MISSING), plan, scratch.get(key)
                )
            return
        if plain:
            fp.assign(data, update, skip=reducers)
        known = fp.keys
        for key, reducer, plan in plans:
            current = data.get(key, MISSING)
            old = known.get(key)
            if old is None:
                old = fp.initial(key, current is not MISSING)
            fp.set(key, old, reducer.fingerprint_after(old, current, plan))
            data[key], scratch[key] = reducer.apply(current, plan, scratch.get(key))

    @staticmethod
    def _reducer_error(
        reducer: Reducer, key: str, node: str, step: int, state: GraphState, exc: Exception
    ) -> ReducerError:
        return ReducerError(
            f"reducer {reducer.name} failed merging field {key!r} from node {node!r}: {exc}",
            field=key,
            reducer=reducer.name,
            node=node,
            step=step,
            state=state,
        )

    def _merge_general(self, state: GraphState, output: NodeOutput, node: str, step: int) -> None:
        writes = output.writes
        data = state.data
        schema = self._schema
        reducers = self._reducers
        fields = None if schema.allow_extra else schema.fields

        # Phase one: check and plan every change; nothing is mutated.
        ops: list[tuple[int, str, Any, Reducer | None]] = []
        pending: dict[str, Any] = {}
        if writes is not None:
            if fields is not None:
                schema.check_keys(writes.assignments, node=node, step=step)
            for key in writes.deletions:
                if key in data:
                    ops.append((_DELETE, key, None, None))
                pending[key] = MISSING
            for key, value in writes.assignments.items():
                if key in reducers:
                    value = owned(value)  # reducers may extend it in place later
                ops.append((_ASSIGN, key, value, None))
                pending[key] = value
        for key, value in output.update.items():
            if fields is not None and key not in fields and key not in RESERVED_KEYS:
                schema.check_keys((key,), node=node, step=step)  # raises, naming the field
            reducer = reducers.get(key)
            if reducer is None:
                ops.append((_ASSIGN, key, value, None))
                pending[key] = value
                continue
            current = pending[key] if key in pending else data.get(key, MISSING)
            try:
                plan = reducer.plan(current, value, self._scratch.get(key))
            except Exception as exc:
                raise self._reducer_error(reducer, key, node, step, state, exc) from exc
            ops.append((_REDUCE, key, plan, reducer))

        # Phase two: commit. No user code runs from here on.
        fp = self.fingerprints
        scratch = self._scratch
        if scratch is _NO_SCRATCH:
            scratch = self._scratch = {}
        if fp is None:
            for kind, key, value, reducer in ops:
                if kind == _REDUCE:
                    assert reducer is not None
                    data[key], scratch[key] = reducer.apply(
                        data.get(key, MISSING), value, scratch.get(key)
                    )
                elif kind == _ASSIGN:
                    data[key] = value
                    scratch.pop(key, None)
                else:
                    del data[key]
                    scratch.pop(key, None)
        else:
            known = fp.keys
            for kind, key, value, reducer in ops:
                old = known.get(key)
                if old is None:
                    old = fp.initial(key, key in data)
                if kind == _REDUCE:
                    assert reducer is not None
                    current = data.get(key, MISSING)
                    new = reducer.fingerprint_after(old, current, value)
                    data[key], scratch[key] = reducer.apply(current, value, scratch.get(key))
                elif kind == _ASSIGN:
                    data[key] = value
                    scratch.pop(key, None)
                    new = fingerprint(value)
                else:
                    del data[key]
                    scratch.pop(key, None)
                    new = fp.absent(key)
                fp.set(key, old, new)
        if writes is not None:
            self._merge_side_channels(state, output)

    @staticmethod
    def _merge_side_channels(state: GraphState, output: NodeOutput) -> None:
        writes = output.writes
        if writes is None:
            return
        if writes.messages:
            state.messages.extend(writes.messages)
        if writes.history:
            state.history.extend(writes.history)
        if writes.metadata:
            state.metadata.update(writes.metadata)
        for key in writes.metadata_deletions:
            state.metadata.pop(key, None)

    def clear(self, state: GraphState, keys: set[str]) -> None:
        """Reset ``keys`` to their schema default, or remove them (stale outputs on revisit)."""
        data = state.data
        fp = self.fingerprints
        for key in keys:
            if key not in data:
                continue
            old = fp.of(key, True) if fp is not None else 0
            if self._scratch is not _NO_SCRATCH:
                self._scratch.pop(key, None)
            has_default, value = self._schema.default_for(key)
            if has_default:
                data[key] = value
                if fp is not None:
                    fp.set(key, old, fingerprint(value))
            else:
                del data[key]
                if fp is not None:
                    fp.set(key, old, fp.absent(key))
