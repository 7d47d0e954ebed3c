"""Making a run's successive checkpoints: a delta against the last one, or a snapshot.

Snapshots now and then keep a load bounded: :class:`CheckpointChain` takes
one once the deltas since the last one have cost as much,
:func:`make_checkpoint` every :data:`SNAPSHOT_EVERY` versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from selectgraph.persistence._checkpoint import Checkpoint, made_at, new_checkpoint_id
from selectgraph.persistence._delta import copy_encoded, diff_state
from selectgraph.persistence._json_data import json_size

__all__ = ["SNAPSHOT_EVERY", "CheckpointChain", "make_checkpoint"]

SNAPSHOT_EVERY: Final = 50
""":func:`make_checkpoint` snapshots at versions 1, 51, 101...: a load reads at most 50 records."""


def make_checkpoint(
    *,
    run_id: str,
    version: int,
    step: int,
    state: dict[str, Any],
    parent: Checkpoint | None = None,
    parent_state: Mapping[str, Any] | None = None,
    snapshot_every: int = SNAPSHOT_EVERY,
    checkpoint_id: str | None = None,
    **fields: Any,
) -> Checkpoint:
    """Build the next checkpoint of a run, as a delta against ``parent`` when that is allowed.

    It is a snapshot when there is no parent (or its state is not given), when
    the parent is in another run (a fork), or every ``snapshot_every``
    versions; otherwise a delta holding :func:`diff_state` of the two states.

    Args:
        run_id: The run.
        version: The run head's version plus one.
        step: The run's step count.
        state: The whole encoded state (``GraphState.to_dict(serializer=...)``).
        parent: The checkpoint this one follows.
        parent_state: The parent's whole encoded state.
        snapshot_every: Versions between snapshots.
        checkpoint_id: The id; a new time-ordered one when omitted.
        **fields: ``next``, ``pending_writes``, ``interrupts``, ``metadata``, ``created_at``.
    """
    if type(snapshot_every) is not int or snapshot_every < 1:
        raise ValueError(f"snapshot_every must be a positive int, got {snapshot_every!r}")
    if checkpoint_id is None:
        checkpoint_id = new_checkpoint_id()
        fields.setdefault("created_at", made_at(checkpoint_id))
    common: dict[str, Any] = {
        "run_id": run_id,
        "checkpoint_id": checkpoint_id,
        "version": version,
        "step": step,
        "parent_id": parent.checkpoint_id if parent is not None else None,
        **fields,
    }
    delta_ok = (
        parent is not None
        and parent_state is not None
        and parent.run_id == run_id
        and (version - 1) % snapshot_every != 0
    )
    if delta_ok:
        assert parent_state is not None  # for mypy: checked just above
        return Checkpoint(kind="delta", values=diff_state(parent_state, state), **common)
    return Checkpoint(kind="snapshot", values=state, **common)


class CheckpointChain:
    """Makes a run's successive checkpoints, taking a snapshot only when deltas have cost as much.

    :func:`make_checkpoint` snapshots every ``snapshot_every`` versions, however
    small the changes: with a 10 KB state and one small change a step, 20
    snapshots in 1,000 steps are most of the storage. A chain instead takes a
    snapshot once the deltas written since the last one add up to ``ratio``
    times that snapshot's size (and at least every ``max_deltas`` versions).
    Storage then stays within ``1 + 1/ratio`` times what actually changed, and
    a load reads at most ``1 + ratio`` states' worth of records.

    Example:
        >>> chain = CheckpointChain("run-1")
        >>> first = chain.next(step=0, state={"data": {"n": 0, "text": "x" * 100}})
        >>> second = chain.next(step=1, state={"data": {"n": 1, "text": "x" * 100}})
        >>> first.kind, second.kind, second.values, second.version
        ('snapshot', 'delta', {'set': [['/data/n', 1]]}, 2)

    Args:
        run_id: The run.
        parent: The run's head checkpoint to continue from (None for a new run).
        parent_state: Its whole encoded state; without it the next checkpoint is
            a snapshot.
        ratio: Delta bytes, relative to the last snapshot's, that trigger a snapshot.
        max_deltas: Deltas after which a snapshot is taken regardless.
    """

    __slots__ = (
        "_delta_bytes",
        "_deltas",
        "_parent",
        "_snapshot_bytes",
        "_state",
        "max_deltas",
        "ratio",
        "run_id",
    )

    def __init__(
        self,
        run_id: str,
        *,
        parent: Checkpoint | None = None,
        parent_state: dict[str, Any] | None = None,
        ratio: float = 1.0,
        max_deltas: int = 200,
    ) -> None:
        if not ratio > 0:
            raise ValueError(f"ratio must be positive, got {ratio!r}")
        if type(max_deltas) is not int or max_deltas < 0:
            raise ValueError(f"max_deltas must be an int >= 0, got {max_deltas!r}")
        self.run_id = run_id
        self.ratio = ratio
        self.max_deltas = max_deltas
        self._parent = parent
        self._state = parent_state
        # Unknown history after a restart: the next checkpoint is a snapshot.
        self._snapshot_bytes = 0
        self._delta_bytes = 0
        self._deltas = max_deltas

    @property
    def head(self) -> Checkpoint | None:
        """The last checkpoint made (or the parent given)."""
        return self._parent

    def next(
        self,
        *,
        step: int,
        state: dict[str, Any],
        delta: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Checkpoint:
        """The checkpoint after the last one made, holding ``state`` (whole, encoded).

        The caller saves it with ``expected_version=checkpoint.version - 1``; if
        that raises :class:`~selectgraph.CheckpointConflict`, make a new chain
        from the run's reloaded head.

        Args:
            step: The run's step count.
            state: The whole encoded state. With ``delta``, the caller may keep
                changing it afterwards (a snapshot takes a copy).
            delta: What changed since the last checkpoint, when the caller knows
                it (the runner tracks the keys a step wrote); saves diffing
                the whole state.
            **fields: ``next``, ``pending_writes``, ``interrupts``, ``metadata``.
        """
        parent = self._parent
        version = parent.version + 1 if parent is not None else 1
        checkpoint_id = new_checkpoint_id()
        common: dict[str, Any] = {
            "run_id": self.run_id,
            "checkpoint_id": checkpoint_id,
            "version": version,
            "step": step,
            "parent_id": parent.checkpoint_id if parent is not None else None,
            "created_at": made_at(checkpoint_id),
            **fields,
        }
        checkpoint: Checkpoint | None = None
        if parent is not None and self._state is not None and self._deltas < self.max_deltas:
            if delta is None:
                delta = diff_state(self._state, state)
            # An estimate is enough here (the store checks and encodes the values).
            size = json_size(delta)
            if self._delta_bytes + size < self.ratio * self._snapshot_bytes:
                checkpoint = Checkpoint(kind="delta", values=delta, **common)
                self._delta_bytes += size
                self._deltas += 1
        if checkpoint is None:
            if delta is not None:
                state = copy_encoded(state)
            checkpoint = Checkpoint(kind="snapshot", values=state, **common)
            # An estimate, as for a delta: the store checks the values when it encodes them.
            self._snapshot_bytes = json_size(state)
            self._delta_bytes = 0
            self._deltas = 0
        self._parent, self._state = checkpoint, state
        return checkpoint
