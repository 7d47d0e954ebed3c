"""Stores written to seed 004's CheckpointStore protocol, used as real checkpoint stores.

Seed 004 describes a smaller store protocol than selectgraph's: ``save(graph_id,
state, step) -> checkpoint_id``, ``load(checkpoint_id) -> (state, step)``,
``list(graph_id)`` and ``delete(checkpoint_id)``. A store a user wrote to it can be
passed as ``checkpoint_store=`` anyway: :class:`SeedStoreAdapter` keeps the run in
memory, as :class:`InMemoryCheckpointStore` does, and writes every checkpoint
through to the user's store as a GraphState whose ``metadata`` carries the full
checkpoint record (JSON text) and whose ``data`` is the run's data at that step.
A run the adapter has not seen in this process is read back from the user's store
the first time it is asked for (its head, its list), so another process continues
it.

What the seed's protocol has no place for stays in this process: a fan-out's
pending writes, the event log, threads, the list of all runs.
"""

from __future__ import annotations

import builtins
import inspect
import weakref
from typing import Any, Final, Protocol

from selectgraph.core._errors import CheckpointDecodeError, CheckpointNotFound
from selectgraph.core._state import GraphState
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import decode_record
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.persistence._protocol import CheckpointStore, implements

__all__ = [
    "RECORD_KEY",
    "SeedCheckpointStore",
    "SeedStoreAdapter",
    "as_checkpoint_store",
    "is_seed_store",
]

RECORD_KEY: Final = "selectgraph.checkpoint"
"""The ``metadata`` key of a saved GraphState that holds the checkpoint's record."""
_SEED_SAVE: Final = ("graph_id", "state", "step")


class SeedCheckpointStore(Protocol):
    """Seed 004's CheckpointStore protocol (a store written to it can be passed as it is)."""

    def save(self, graph_id: str, state: GraphState, step: int) -> str:
        """Persist ``state`` and return a checkpoint id."""
        ...

    def load(self, checkpoint_id: str) -> tuple[GraphState, int]:
        """``(state, step)`` of a checkpoint."""
        ...

    def list(self, graph_id: str) -> Any:
        """The run's checkpoints (ids, or objects with ``checkpoint_id``), oldest first."""
        ...

    def delete(self, checkpoint_id: str) -> bool:
        """Delete a checkpoint; whether there was one."""
        ...


_adapters: weakref.WeakKeyDictionary[Any, SeedStoreAdapter] = weakref.WeakKeyDictionary()


def is_seed_store(value: object) -> bool:
    """Whether ``value`` has seed 004's four store methods (``save(graph_id, state, step)``...)."""
    if not all(callable(getattr(value, name, None)) for name in ("save", "load", "list", "delete")):
        return False
    try:
        parameters = builtins.list(inspect.signature(value.save).parameters)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
    return tuple(parameters[:3]) == _SEED_SAVE


def as_checkpoint_store(store: Any) -> Any:
    """``store`` as a CheckpointStore: itself, or (a seed 004 store) its adapter.

    One adapter per seed store object, so the runs it holds in memory carry over
    from one call to the next. Anything else comes back unchanged (and is refused
    where a store is required).
    """
    if store is None or implements(store, CheckpointStore) or not is_seed_store(store):
        return store
    try:
        adapter = _adapters.get(store)
    except TypeError:  # not weakly referenceable: one adapter per call
        return SeedStoreAdapter(store)
    if adapter is None:
        adapter = _adapters[store] = SeedStoreAdapter(store)
    return adapter


class SeedStoreAdapter(InMemoryCheckpointStore):
    """A store written to seed 004's protocol, as a full CheckpointStore (see the module).

    Example:
        >>> class DictStore:  # seed 004's protocol
        ...     def __init__(self):
        ...         self.saved = {}
        ...     def save(self, graph_id, state, step):
        ...         key = f"{graph_id}/{len(self.saved)}"
        ...         self.saved[key] = (graph_id, state, step)
        ...         return key
        ...     def load(self, checkpoint_id):
        ...         _, state, step = self.saved[checkpoint_id]
        ...         return state, step
        ...     def list(self, graph_id):
        ...         return [k for k, v in self.saved.items() if v[0] == graph_id]
        ...     def delete(self, checkpoint_id):
        ...         return self.saved.pop(checkpoint_id, None) is not None
        >>> from selectgraph import END, AgentGraph
        >>> graph = AgentGraph("g")
        >>> _ = graph.add_node("a", lambda state: {"x": 1}, next_node=END)
        >>> store = DictStore()
        >>> result = graph.run({}, checkpoint_store=store)
        >>> [step for _, _, step in store.saved.values()]
        [0, 1, 1]
    """

    def __init__(self, seed: Any) -> None:
        super().__init__()
        self.seed = seed
        """The user's store."""
        self._theirs: dict[str, str] = {}  # our checkpoint id -> the seed store's id
        self._adopted: set[str] = set()

    def __repr__(self) -> str:
        return f"SeedStoreAdapter({self.seed!r})"

    # ---------------------------------------------------------------- writes
    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        self._adopt(checkpoint.run_id)
        super()._save(checkpoint, expected_version)
        ours = checkpoint.checkpoint_id
        if ours in self._theirs:
            return  # a retried save that had gone through
        try:
            self._theirs[ours] = self._write_through(checkpoint)
        except BaseException:
            super()._delete(ours)  # not kept here either: the run's head stays as it was
            self._runs[checkpoint.run_id].version = expected_version
            raise

    def _write_through(self, checkpoint: Checkpoint) -> str:
        ours = checkpoint.checkpoint_id
        encoded = self.load_state(ours)
        state = GraphState(
            data=dict(encoded.get("data") or {}),
            metadata={RECORD_KEY: self._records[ours].decode()},
        )
        return str(self.seed.save(checkpoint.run_id, state, checkpoint.step))

    def _delete(self, checkpoint_id: str) -> bool:
        owner = self._owner.get(checkpoint_id)
        if owner is None:
            return False
        before = {cid: self._records[cid] for cid in self._runs[owner[0]].ids.values()}
        deleted = super()._delete(checkpoint_id)
        theirs = self._theirs.pop(checkpoint_id, None)
        if theirs is not None:
            self.seed.delete(theirs)
        # A child recorded as a change to the deleted checkpoint was rewritten whole:
        # the seed store gets the new record in place of the old one.
        for cid, record in before.items():
            if cid != checkpoint_id and self._records.get(cid) != record:
                old = self._theirs.pop(cid, None)
                if old is not None:
                    self.seed.delete(old)
                self._theirs[cid] = self._write_through(self._load(cid))
        return deleted

    def _delete_run(self, run_id: str) -> int:
        self._adopt(run_id)
        run = self._runs.get(run_id)
        ids = builtins.list(run.ids.values()) if run is not None else []
        count = super()._delete_run(run_id)
        for cid in ids:
            theirs = self._theirs.pop(cid, None)
            if theirs is not None:
                self.seed.delete(theirs)
        return count

    # ----------------------------------------------------------------- reads
    def _head(self, run_id: str) -> Checkpoint | None:
        self._adopt(run_id)
        return super()._head(run_id)

    def _list(
        self, run_id: str, limit: int | None, before: str | None, after: str | None
    ) -> builtins.list[Checkpoint]:
        self._adopt(run_id)
        return super()._list(run_id, limit, before, after)

    def _load(self, checkpoint_id: str) -> Checkpoint:
        try:
            return super()._load(checkpoint_id)
        except CheckpointNotFound:
            raise CheckpointNotFound(
                checkpoint_id,
                where=(
                    f"{type(self.seed).__name__} as this process has read it (a seed-protocol "
                    "store is read run by run: ask for the run's head or list first)"
                ),
            ) from None

    def _adopt(self, run_id: str) -> None:
        """Read run ``run_id``'s checkpoints from the seed store, once per process."""
        if run_id in self._adopted:
            return
        self._adopted.add(run_id)
        where = f"{type(self.seed).__name__}, run {run_id!r}"
        for listed in self.seed.list(run_id):
            theirs = str(getattr(listed, "checkpoint_id", listed))
            if theirs in self._theirs.values():
                continue
            state, _ = self.seed.load(theirs)
            record = getattr(state, "metadata", {}).get(RECORD_KEY)
            if not isinstance(record, str):
                raise CheckpointDecodeError(
                    theirs,
                    f"metadata[{RECORD_KEY!r}]",
                    "missing: the checkpoint was not saved by selectgraph",
                    location=where,
                )
            checkpoint = decode_record(record.encode(), theirs, location=where)
            if checkpoint.checkpoint_id in self._records:
                continue
            run = self._runs.get(run_id)
            super()._save(checkpoint, run.version if run is not None else 0)
            self._theirs[checkpoint.checkpoint_id] = theirs
