"""The checkpoint store protocol: what the runner (or another executor) needs from a store."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Protocol, Self, runtime_checkable

from selectgraph.persistence._checkpoint import Checkpoint

__all__ = ["CheckpointStore", "implements"]


@runtime_checkable
class CheckpointStore(Protocol):
    """Saves, loads and lists a run's checkpoints; one writer per run wins.

    Every method has an async form (``asave``...) and a sync twin (``save``...)
    that works from plain code and from inside a running event loop.

    The single-writer rule: a run has a head version (0 before its first
    checkpoint, one more after each save). :meth:`asave` is told the version
    its checkpoint was based on; if the head has moved on, it raises
    :class:`~selectgraph.CheckpointConflict` and writes nothing. Of two
    writers racing from the same version exactly one wins.
    """

    async def asave(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """Store ``checkpoint`` as the run's new head, if the head is at ``expected_version``.

        ``checkpoint.version`` must be ``expected_version + 1``. Saving a
        checkpoint that this run already holds at that version does nothing, so
        a save retried after its first attempt committed (a lost reply, an
        executor re-running a step) succeeds instead of conflicting.

        Raises:
            CheckpointConflict: the run's head version is not ``expected_version``.
            StateSerializationError: a value in the checkpoint is not JSON data.
            ValueError: the version does not follow ``expected_version``, or the
                checkpoint id is already stored.
        """
        ...

    async def aload(self, checkpoint_id: str) -> Checkpoint:
        """The stored checkpoint (a delta stays a delta; see :meth:`aload_state`).

        Raises:
            CheckpointNotFound: no checkpoint has this id.
            CheckpointDecodeError: the stored record is malformed.
        """
        ...

    async def aload_state(self, checkpoint_id: str) -> dict[str, Any]:
        """The full encoded state at a checkpoint, rebuilt from its snapshot and deltas.

        Raises:
            CheckpointNotFound: no checkpoint has this id.
            CheckpointDecodeError: a record in its chain is malformed or missing.
        """
        ...

    async def alist(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> builtins.list[Checkpoint]:
        """A run's checkpoints in creation order, oldest first.

        Args:
            run_id: The run.
            limit: At most this many, the ones nearest the cursor: the oldest
                without one or with ``after``, the newest with ``before`` only
                (so ``before=page[0].checkpoint_id`` pages back in time).
            before: Only checkpoints created before this one (exclusive).
            after: Only checkpoints created after this one (exclusive).

        Raises:
            CheckpointNotFound: a cursor is not a checkpoint of this run.
        """
        ...

    async def adelete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; returns whether it existed.

        A delta that followed it is rewritten against the deleted one's parent,
        so every remaining checkpoint still loads. The run's head version does
        not go back: a stale writer still conflicts.
        """
        ...

    async def adelete_run(self, run_id: str) -> int:
        """Delete every checkpoint of a run and its head; returns how many were deleted."""
        ...

    async def ahead(self, run_id: str) -> Checkpoint | None:
        """The run's latest checkpoint, or None when it has none."""
        ...

    async def aruns(self, *, limit: int | None = None) -> builtins.list[str]:
        """The ids of the runs that have checkpoints in this store, the most recently written first.

        A run's place is that of its head (its latest checkpoint): newest
        ``created_at`` first, runs whose heads were made at the same time in
        run id order. A run whose checkpoints were all deleted is not listed.

        Args:
            limit: At most this many (None: all).

        Raises:
            ValueError: ``limit`` is not an int >= 0 or None.
            CheckpointDecodeError: a stored record the order is read from is malformed.
        """
        ...

    async def aput_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: Sequence[Any]
    ) -> None:
        """Record the writes of a task that finished within the step after ``checkpoint_id``.

        They appear in that checkpoint's ``pending_writes[task_id]`` (replacing
        an earlier record for the same task), so a crash or an interrupt in one
        branch never re-runs its finished siblings.

        Raises:
            CheckpointNotFound: ``checkpoint_id`` is not a checkpoint of ``run_id``.
            CheckpointConflict: ``checkpoint_id`` is no longer the run's head (a
                stale worker); nothing is written.
        """
        ...

    async def aclose(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""
        ...

    def save(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """Sync twin of :meth:`asave`."""
        ...

    def load(self, checkpoint_id: str) -> Checkpoint:
        """Sync twin of :meth:`aload`."""
        ...

    def load_state(self, checkpoint_id: str) -> dict[str, Any]:
        """Sync twin of :meth:`aload_state`."""
        ...

    def list(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> builtins.list[Checkpoint]:
        """Sync twin of :meth:`alist`."""
        ...

    def delete(self, checkpoint_id: str) -> bool:
        """Sync twin of :meth:`adelete`."""
        ...

    def delete_run(self, run_id: str) -> int:
        """Sync twin of :meth:`adelete_run`."""
        ...

    def head(self, run_id: str) -> Checkpoint | None:
        """Sync twin of :meth:`ahead`."""
        ...

    def runs(self, *, limit: int | None = None) -> builtins.list[str]:
        """Sync twin of :meth:`aruns`."""
        ...

    def put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: Sequence[Any]
    ) -> None:
        """Sync twin of :meth:`aput_writes`."""
        ...

    def close(self) -> None:
        """Sync twin of :meth:`aclose`."""
        ...

    def __enter__(self) -> Self:
        """``with store:`` closes the store on the way out."""
        ...

    def __exit__(self, *exc_info: object) -> None: ...

    async def __aenter__(self) -> Self:
        """``async with store:`` closes the store on the way out."""
        ...

    async def __aexit__(self, *exc_info: object) -> None: ...


_CHECKED: dict[tuple[type[Any], type[Any]], bool] = {}


def implements(value: object, protocol: Any) -> bool:
    """``isinstance(value, protocol)`` for a runtime-checkable protocol, kept per class.

    Python 3.11 walks the protocol's members on every such check (about 50 µs for
    a store's); a run checks its store a few times, so the answer is kept by class.
    """
    key = (type(value), protocol)
    known = _CHECKED.get(key)
    if known is None:
        known = _CHECKED[key] = isinstance(value, protocol)
    return known
