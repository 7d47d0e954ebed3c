"""Which run a fork came from, and the forks made from a run, as the store records them.

A fork's first checkpoint records the checkpoint it came from (``forked_from`` in its
metadata), whichever process made it: :func:`lineage` reads that both ways.
"""

from __future__ import annotations

from typing import Any, Final

from selectgraph.core._errors import SelectGraphError
from selectgraph.persistence._protocol import CheckpointStore

__all__ = ["MAX_SCANNED", "lineage", "parent_of"]

MAX_SCANNED: Final = 500
"""Runs read to find a run's forks (the newest first)."""
_LOOKUP_ERRORS: Final = (SelectGraphError, KeyError, ValueError, LookupError)


def parent_of(store: CheckpointStore, run_id: str) -> dict[str, Any] | None:
    """The run and checkpoint ``run_id`` was forked from, or None for a run that was not."""
    first = store.list(run_id, limit=1)
    if not first:
        return None
    checkpoint_id = first[0].metadata.get("forked_from")
    if not isinstance(checkpoint_id, str):
        return None
    try:
        origin = store.load(checkpoint_id)
    except _LOOKUP_ERRORS:  # the parent was deleted since: its id is all there is
        return {"run_id": None, "checkpoint_id": checkpoint_id, "step": None}
    return {"run_id": origin.run_id, "checkpoint_id": checkpoint_id, "step": origin.step}


def lineage(store: CheckpointStore, run_id: str) -> dict[str, Any]:
    """``{"forked_from": parent or None, "forks": [...]}`` for ``run_id`` (blocking).

    Forks are found among the store's newest :data:`MAX_SCANNED` runs.
    """
    own = {cp.checkpoint_id: cp.step for cp in store.list(run_id)}
    forks = []
    for other in store.runs(limit=MAX_SCANNED):
        if other == run_id:
            continue
        parent = parent_of(store, other)
        if parent is not None and parent["checkpoint_id"] in own:
            forks.append({"run_id": other, **{k: parent[k] for k in ("checkpoint_id", "step")}})
    return {"forked_from": parent_of(store, run_id), "forks": forks}
